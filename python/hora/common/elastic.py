"""Elastic training's framework-agnostic part: Horovod's ``State``,
``ObjectState`` and the loop behind ``@hvd.elastic.run`` (``run_fn``).

A *state* is what training must not lose: ``commit()`` saves it (in
memory, on every rank), ``restore()`` rolls back to the last commit, and
``sync()`` gives every rank rank 0's committed copy. ``run_fn(func, reset)``
runs ``func(state, ...)``; when a collective fails across the job
(``HorovodInternalError``) every rank restores its last commit, resets
(``reset()``: Hora is shut down and initialized again), syncs from the new
rank 0 and calls ``func`` again; when the hosts changed
(``HostsUpdatedInterrupt``) it resets without restoring, and syncs only
where some rank asks for it (a worker that joined the new world). A Hora
error that a framework re-raised as its own (from a ``tf.function`` or a
jitted JAX step) is handled as the Hora error it carries.

The state, the loop and the host-update check work as Horovod's. The
reset's ``init()`` gets its new world from ``horarun``'s elastic mode
(``--min-np``/``--max-np``: docs/guide/elastic.md). Under a fixed launch it
waits for every rank of the launch (``HORA_START_TIMEOUT_S``) and fails
naming who is missing, and the job ends with that error. Under horarun's
``--host-discovery-script``, rank 0's ``check_host_updates()`` reads the
launcher's counts of host updates (``Session.elastic_host_updates``);
``notify_hosts_updated`` takes updates from elsewhere.
"""

import enum
import functools
import os
import queue
import sys
import threading

from hora.common import basics
from hora.common.exceptions import (
    HoraError,
    HoraTimeoutError,
    HorovodInternalError,
    HostsUpdatedInterrupt,
    InternalError,
    MismatchError,
    NotInitializedError,
    UnavailableError,
)

# Errors a reset would only repeat: ranks that called a collective
# differently (a bug in the script), Hora used after shutdown(), a bug in
# Hora.
_NOT_RETRIED = (MismatchError, NotInitializedError, InternalError)
# How many worlds a reset tries to join before it gives up.
_RESET_ATTEMPTS = 5


class HostUpdateResult(enum.IntFlag):
    """What changed in the job's hosts (Horovod's values)."""

    no_update = 0
    removed = 1
    added = 2
    mixed = removed | added


class State:
    """Training state that survives a reset (Horovod's ``State``).

    ``bcast_object(obj)`` returns rank 0's ``obj`` on every rank;
    ``get_rank()`` is this rank. Subclasses define ``save``, ``restore`` and
    ``sync``; ``reset`` (called after every reset) does nothing by default.
    """

    def __init__(self, bcast_object, get_rank):
        self._bcast_object = bcast_object
        self._rank = get_rank
        self._host_messages = queue.Queue()
        self._last_updated_timestamp = 0
        self._reset_callbacks = []

    def register_reset_callbacks(self, callbacks):
        """Adds ``callbacks`` (a list of functions of no argument), called in
        order after each reset, e.g. to rescale the learning rate by the new
        ``size()``."""
        self._reset_callbacks.extend(callbacks)

    def on_reset(self):
        self._host_messages = queue.Queue()
        self.reset()
        for callback in self._reset_callbacks:
            callback()

    def on_hosts_updated(self, timestamp, update_res):
        """Queues a change of hosts (from the elastic launcher) for the next
        ``check_host_updates()``."""
        self._host_messages.put((timestamp, update_res))

    def commit(self):
        """Saves the state, then raises ``HostsUpdatedInterrupt`` if hosts
        were added or removed since the last check (on every rank alike)."""
        self.save()
        self.check_host_updates()

    def check_host_updates(self):
        """Raises ``HostsUpdatedInterrupt`` on every rank when rank 0 has seen
        a change of hosts newer than the last one handled. A collective: every
        rank calls it at the same point (``commit()`` does)."""
        if self._rank() == 0:
            _poll_launcher(self)
        prev = self._last_updated_timestamp
        last = prev
        update = HostUpdateResult.no_update
        while not self._host_messages.empty():
            timestamp, result = self._host_messages.get()
            if timestamp > last:
                last = timestamp
                update |= result
        # Rank 0's view decides, so that every rank raises or none does.
        prev, last, update = self._bcast_object((prev, last, int(update)))
        self._last_updated_timestamp = last
        if last > prev:
            raise HostsUpdatedInterrupt(update == HostUpdateResult.removed)

    def save(self):
        raise NotImplementedError("%s.save" % type(self).__name__)

    def restore(self):
        raise NotImplementedError("%s.restore" % type(self).__name__)

    def sync(self):
        raise NotImplementedError("%s.sync" % type(self).__name__)

    def reset(self):
        pass


class ObjectState(State):
    """Plain Python values as state (Horovod's ``ObjectState``): each keyword
    argument becomes an attribute. ``save()`` keeps the attributes' current
    values (references: an object changed in place is changed in the saved
    copy too); ``restore()`` assigns them back; ``sync()`` gives every rank
    rank 0's saved values."""

    def __init__(self, bcast_object, get_rank, **kwargs):
        self._saved_state = dict(kwargs)
        self._set_attrs()
        super().__init__(bcast_object=bcast_object, get_rank=get_rank)

    def save(self):
        self._saved_state = {name: getattr(self, name) for name in self._saved_state}

    def restore(self):
        self._set_attrs()

    def sync(self):
        if self._saved_state:
            self._saved_state = self._bcast_object(self._saved_state)
            self._set_attrs()

    def _set_attrs(self):
        for name, value in self._saved_state.items():
            setattr(self, name, value)


def _poll_launcher(state):
    """Queues on ``state`` what horarun's host discovery reported since the
    last look (elastic workers only): its counts of updates that added and
    removed hosts, whose sum serves as the timestamp."""
    if not os.environ.get("HORA_WORKER_ID"):
        return
    added, removed, added_known, removed_known = basics.session().elastic_host_updates()
    # (What this world was formed after needs no reset.)
    seen_added, seen_removed = getattr(state, "_launcher_seen", (0, 0))
    seen_added, seen_removed = max(seen_added, added_known), max(seen_removed, removed_known)
    state._launcher_seen = (seen_added, seen_removed)
    if (added, removed) == (seen_added, seen_removed):
        return
    state._launcher_seen = (added, removed)
    result = HostUpdateResult.no_update
    if added > seen_added:
        result |= HostUpdateResult.added
    if removed > seen_removed:
        result |= HostUpdateResult.removed
    state.on_hosts_updated(added + removed, result)


# The states to tell of host changes (those inside a run_fn loop).
_listeners_lock = threading.Lock()
_listeners = []


def notify_hosts_updated(timestamp, update_res):
    """Tells every state in a ``run`` loop that the hosts changed at
    ``timestamp`` (an increasing number) by ``update_res``
    (``HostUpdateResult``). The elastic launcher's messages arrive here."""
    with _listeners_lock:
        listeners = list(_listeners)
    for state in listeners:
        state.on_hosts_updated(timestamp, update_res)


def _say_why_reset(error):
    """One line on stderr for each failure the loop recovers from, so that a
    failure that comes back after every reset (a tensor always late past
    HORA_TIMEOUT_S) shows in the log instead of looping unseen."""
    try:
        who = "rank %d" % basics.rank()
    except Exception:  # (no Session any more)
        who = "a worker"
    sys.stderr.write("[hora %s] WARNING: elastic: %s: %s; restoring the last commit and "
                     "re-forming the world\n" % (who, type(error).__name__, error))
    sys.stderr.flush()


def _anyone_syncs(mine):
    """Whether any rank of the world syncs now (a collective: every rank
    asks). The survivors of a removal skip the sync, but a worker that
    joined the same world (started on a slot while they reset) must have
    it: then all sync, or the others' first collective would meet its
    sync."""
    import numpy as np

    import hora.numpy as hnp

    flag = np.array([1 if mine else 0], dtype=np.int32)
    return bool(hnp.allreduce(flag, op=basics.Max, name="elastic.sync_wanted")[0])


def run_fn(func, reset):
    """The loop of ``@hvd.elastic.run`` around ``func(state, ...)``, with
    ``reset()`` re-forming the world (shutdown, then init).

    A failure while the state is synced is handled as one in ``func``; a
    reset whose new world loses a worker before it is connected
    (``UnavailableError``, ``HoraTimeoutError``) is tried again. Not
    retried: ``MismatchError`` (ranks called a collective differently: a
    bug in the script, which a reset would only repeat), ``NotInitializedError``
    (Hora used after ``shutdown()``), ``InternalError`` (a bug in Hora), the
    launcher's end of the job (an ``AbortedError`` from the reset's
    ``init()``), and any error that is not Hora's."""

    def reset_until_formed():
        for attempt in range(_RESET_ATTEMPTS):
            try:
                reset()
                return
            except (UnavailableError, HoraTimeoutError):
                # (A member of that world was lost before it connected: the
                # next world is formed without it. The launcher gone: the
                # last attempt's error goes to the script.)
                if attempt + 1 == _RESET_ATTEMPTS:
                    raise

    def attempt(state, skip_sync, args, kwargs):
        # A Hora error that a framework re-raised as its own (a TensorFlow
        # graph's, a jitted JAX step's) is handled as the Hora error it was.
        basics.take_callback_error()
        try:
            if _anyone_syncs(not skip_sync):
                state.sync()
            return func(state, *args, **kwargs)
        except (HoraError, HostsUpdatedInterrupt):
            raise
        except Exception as e:
            hora_error = basics.take_callback_error()
            if hora_error is None or str(hora_error) not in str(e):
                raise
            raise hora_error from e

    @functools.wraps(func)
    def wrapper(state, *args, **kwargs):
        with _listeners_lock:
            _listeners.append(state)
        try:
            skip_sync = False
            while True:
                try:
                    return attempt(state, skip_sync, args, kwargs)
                except _NOT_RETRIED:
                    raise
                except HorovodInternalError as e:
                    _say_why_reset(e)
                    state.restore()
                    skip_sync = False
                except HostsUpdatedInterrupt as e:
                    skip_sync = e.skip_sync
                reset_until_formed()
                state.on_reset()
        finally:
            with _listeners_lock:
                _listeners.remove(state)

    return wrapper


# Functions called after each reset of the world (``after_reset``).
_after_reset = []


def after_reset(fn):
    """Has ``reset_world`` call ``fn()`` (no arguments) once the new world is
    formed, before the state is synced: hora.jax drops JAX's traces there,
    whose shapes and sizes were the old world's."""
    if fn not in _after_reset:
        _after_reset.append(fn)


def reset_world():
    """The reset of ``@hvd.elastic.run``: shutdown, then init with the
    settings init() was given (process sets are not carried over: their
    ranks were the old world's), then the ``after_reset`` functions."""
    settings = basics.settings()
    basics.shutdown()
    basics.init(settings=settings)
    for fn in list(_after_reset):
        fn()


def run(func):
    """Horovod's ``@hvd.elastic.run``: ``func(state, *args, **kwargs)``
    restarted from the last commit after a failure of the job's collectives,
    and in the next world after hosts changed (see ``run_fn``)."""
    return run_fn(func, reset_world)


__all__ = ["State", "ObjectState", "HostUpdateResult", "run_fn", "run", "reset_world",
           "notify_hosts_updated"]
