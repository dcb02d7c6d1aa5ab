"""Hora's exception types.

They are created by the extension module (``hora._core``), which raises them
from collectives, ``Handle.wait()`` and ``Session()``:

* ``HoraError`` (a ``RuntimeError``): the base of every Hora error.
* ``InvalidArgumentError`` (also a ``ValueError``): unusable arguments
  (dtype, device, layout, sizes).
* ``MismatchError``: ranks disagree about a collective's parameters; raised on
  every rank, naming the tensor and each rank's values. Other collectives go on.
* ``HoraTimeoutError`` (also a ``TimeoutError``): a bounded wait expired.
* ``AbortedError``: cancelled (shutdown, or a failure elsewhere in the job).
* ``UnavailableError``: a peer was lost; the message names it.
* ``InternalError``: a bug in Hora.
* ``UnimplementedError`` (also a ``NotImplementedError``): not supported by
  this build.

Horovod's names, for code written against Horovod:

* ``HorovodInternalError`` (a ``RuntimeError``): a collective failed across
  the job. ``MismatchError``, ``HoraTimeoutError``, ``AbortedError``,
  ``UnavailableError`` and ``InternalError`` are subclasses of it, so
  ``except HorovodInternalError`` catches what it catches in Horovod; errors in
  a call's own arguments are ``ValueError`` (``InvalidArgumentError``), as in
  Horovod.
* ``HoraInternalError`` is the same class, under Hora's name.
* ``HostsUpdatedInterrupt`` (a ``RuntimeError``): elastic training's signal
  that the set of hosts changed; ``skip_sync`` says whether the state must be
  synchronized again.

This module adds ``NotInitializedError``, raised by any operation made before
``init()`` (or after ``shutdown()``): a ``ValueError`` (what Horovod's
``rank()`` raises then) and a ``HorovodInternalError`` (what Horovod's
collectives raise then).
"""

from hora import _core

HoraError = _core.HoraError
InvalidArgumentError = _core.InvalidArgumentError
MismatchError = _core.MismatchError
HoraTimeoutError = _core.HoraTimeoutError
AbortedError = _core.AbortedError
UnavailableError = _core.UnavailableError
InternalError = _core.InternalError
UnimplementedError = _core.UnimplementedError
HorovodInternalError = _core.HorovodInternalError
# Hora's name for it: what elastic training (``hvd.elastic.run``) catches to
# roll back and reset; a script need not catch it itself.
HoraInternalError = HorovodInternalError


class NotInitializedError(HoraError, HorovodInternalError, ValueError):
    """An operation was called before ``init()`` (or after ``shutdown()``)."""

    __module__ = "hora"


class HostsUpdatedInterrupt(RuntimeError):
    """Elastic training: the hosts of the job changed; ``skip_sync`` is True
    when the state need not be synchronized again (hosts were only removed:
    the survivors hold the same state)."""

    def __init__(self, skip_sync):
        super().__init__(skip_sync)
        self.skip_sync = skip_sync


__all__ = [
    "HoraError",
    "InvalidArgumentError",
    "MismatchError",
    "HoraTimeoutError",
    "AbortedError",
    "UnavailableError",
    "InternalError",
    "UnimplementedError",
    "NotInitializedError",
    "HorovodInternalError",
    "HoraInternalError",
    "HostsUpdatedInterrupt",
]
