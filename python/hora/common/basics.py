"""The process-wide default Session and the functions that ask it about the job.

Contract:

* ``init()`` creates the one default ``hora._core.Session`` of this process.
  The rank layout comes from the launcher's environment (horarun, mpirun,
  srun, torchrun); a process started by no launcher is a job of one rank.
  It blocks until every rank has connected. Calling ``init()`` again while
  initialized does nothing; after ``shutdown()`` it creates a new Session.
* Every operation made before ``init()`` (or after ``shutdown()``) raises
  :class:`~hora.common.exceptions.NotInitializedError`.
* ``shutdown()`` stops the engine (unfinished collectives fail with
  ``AbortedError``); it is also run at interpreter exit.
* A process forked after ``init()`` shares its parent's Session but none of
  its threads: its ``rank()``, ``size()`` and other queries work, its
  collectives raise ``InvalidArgumentError`` saying so, and its
  ``shutdown()`` (or its exit) leaves the parent's Session alone.
* An exception that ends the process is told to horarun before the Session
  closes, so that horarun names this rank as the one that failed first.

Framework modules (``hora.torch``, ``hora.numpy``) re-export these functions.
"""

import atexit
import os
import sys
import threading
import traceback
import warnings
import weakref

from hora import _core
from hora.common.exceptions import (AbortedError, HoraError,  # noqa: F401
                                    InvalidArgumentError, NotInitializedError,
                                    UnavailableError, UnimplementedError)

# Reduction op codes, as _core numbers them (not Horovod's numbers: use names).
Sum = _core.Sum
Average = _core.Average
Min = _core.Min
Max = _core.Max
Product = _core.Product
Adasum = _core.Adasum

_OP_NAMES = {Sum: "Sum", Average: "Average", Min: "Min", Max: "Max", Product: "Product",
             Adasum: "Adasum"}

_lock = threading.RLock()
_session = None
_settings = None  # init()'s settings, for an elastic reset's init()
_added_sets = []  # weak references to the ProcessSets this Session added
_atexit_registered = False
_init_pid = None  # the process that made _session (a fork's child is not it)
_previous_excepthook = None
# The last Hora error raised inside a framework's callback (a TensorFlow
# graph's py_function, a JAX io_callback), which the framework re-raises as
# an error of its own: elastic training's loop looks it up (run_fn).
_callback_error = None
# Called with True as init() starts a Session and False once it started or
# failed (hora.ray tells its driver which workers wait in init()).
starting_listeners = []
# process_sets.add_process_set, for init(process_sets=...): set by that
# module (above this one) as it is imported.
_process_set_adder = None


def init(comm=None, process_sets=None, settings=None):
    """Initializes Hora for this process (idempotent while initialized).

    Arguments (Horovod's first two, in Horovod's order):
        comm: Horovod's MPI communicator or list of ranks. Only ``None`` (every
            rank of the job) is supported.
        process_sets: Horovod's process sets: a list of ``ProcessSet`` (or rank
            lists) to register now, on every rank alike, or ``"dynamic"``
            (accepted; sets can always be added later with ``add_process_set``).
        settings: optional dict of ``HORA_*`` settings (name -> value); they are
            layered over the environment (these win). Values are converted to str.
    """
    global _session, _atexit_registered, _init_pid, _previous_excepthook, _settings
    if comm is not None:
        raise UnimplementedError("hora.init(comm=...) is not supported; hora always "
                                 "uses every rank of the job (launch fewer ranks instead)")
    if isinstance(process_sets, str) and process_sets.lower() != "dynamic":  # (Horovod's: any case)
        raise ValueError("init(process_sets=%r): expected a list of process sets or 'dynamic'"
                         % (process_sets,))
    with _lock:
        if _session is not None:
            return
        conf = None if settings is None else {str(k): str(v) for k, v in settings.items()}
        _tell_starting(True)
        try:
            _session = _core.Session(conf)
        finally:
            _tell_starting(False)
        _settings = conf
        _init_pid = os.getpid()
        if os.environ.get("HORA_WORKER_ID"):
            _export_elastic_layout(_session)
        if not _atexit_registered:
            atexit.register(shutdown)
            _atexit_registered = True
        if _previous_excepthook is None:
            _previous_excepthook = sys.excepthook
            sys.excepthook = _report_uncaught
    if process_sets is not None and not isinstance(process_sets, str):
        # (process_sets.py, which uses this module, set the adder when it
        # was imported: every framework module imports it.)
        for ps in process_sets:
            _process_set_adder(ps)


def _tell_starting(starting):
    for listener in list(starting_listeners):
        try:
            listener(starting)
        except Exception:  # (a listener's failure is not init()'s)
            pass


def report_failure(exc_type, exc):
    """Tells horarun that an exception ends this rank (its last line), so that
    horarun names this rank as the job's first failure rather than a peer
    that failed because this one went. Best effort; a no-op when not
    initialized (or in a forked child)."""
    s = _session
    if s is not None and os.getpid() == _init_pid:
        # (A connection lost, a peer's Session shut down: this rank fails
        # because another went; horarun names that one, not this.)
        caused_by_peer = isinstance(exc, (UnavailableError, AbortedError))
        try:
            s.report_failure(_last_line(exc_type, exc), caused_by_peer)
        except Exception:  # (the exception itself matters more)
            pass


def _last_line(exc_type, exc):
    """The exception's last line as Python prints it ("hora.MismatchError:
    ..."), without the notes added to it (JAX's "For simplicity, JAX has
    removed its internal frames ..." would stand in for the error)."""
    te = traceback.TracebackException(exc_type, exc, None)
    if getattr(te, "__notes__", None):
        te.__notes__ = None
    return list(te.format_exception_only())[-1].strip()


def _report_uncaught(exc_type, exc, tb):
    """sys.excepthook while initialized: an exception that ends this rank is
    reported (report_failure), the previous hook prints it, and Hora shuts
    down here, so that the other ranks fail at once naming this one even
    where a thread that is not a daemon keeps the process alive (Python
    waits for such threads before atexit would shut Hora down)."""
    interactive = hasattr(sys, "ps1") or sys.flags.interactive
    if not interactive:  # (at a prompt an error ends nothing)
        report_failure(exc_type, exc)
    try:
        _previous_excepthook(exc_type, exc, tb)
    finally:
        if os.getpid() == _init_pid and not interactive:
            shutdown()


def _export_elastic_layout(s):
    """An elastic worker's rank changes with each world: its HORA_* and
    HOROVOD_* rank variables are rewritten after each init(), as Horovod's
    elastic mode does (scripts read HOROVOD_LOCAL_RANK to pick a device)."""
    values = {"RANK": s.rank, "SIZE": s.size, "LOCAL_RANK": s.local_rank,
              "LOCAL_SIZE": s.local_size, "CROSS_RANK": s.cross_rank,
              "CROSS_SIZE": s.cross_size}
    for name, value in values.items():
        os.environ["HORA_" + name] = str(value)
        os.environ["HOROVOD_" + name] = str(value)


def shutdown():
    """Stops Hora in this process. Safe to call when not initialized. The
    process sets added in this Session are unregistered (a later ``init()``
    starts without them; add them again there)."""
    global _session
    with _lock:
        s, _session = _session, None
        added, _added_sets[:] = list(_added_sets), []
    if s is not None:
        s.shutdown()
    for ref in added:
        ps = ref()
        if ps is not None and ps.ranks is not None:
            ps.process_set_id = None


def note_added_set(process_set):
    """Remembers a ProcessSet added in this Session (unregistered by shutdown())."""
    with _lock:
        _added_sets.append(weakref.ref(process_set))


def note_callback_error(error):
    """Remembers ``error``, a Hora error that a framework's callback raised
    (TensorFlow and JAX re-raise it as an error of their own type)."""
    global _callback_error
    _callback_error = error


def take_callback_error():
    """The Hora error noted last by ``note_callback_error`` (None: none since
    the last take), forgotten here."""
    global _callback_error
    error, _callback_error = _callback_error, None
    return error


def settings():
    """The settings the last ``init()`` was given (None: none)."""
    return None if _settings is None else dict(_settings)


def utf8_name(name):
    """A collective's name (a str) as the core takes it: UTF-8. A str that has
    no UTF-8 form (a lone surrogate, from a bad decode) raises
    InvalidArgumentError saying where."""
    if not name.isascii():
        try:
            name.encode("utf-8")
        except UnicodeEncodeError as e:
            raise InvalidArgumentError(
                "the name %s is not valid UTF-8: %s at index %d (%r)"
                % (ascii(name[:64]), e.reason, e.start, name[e.start])) from None
    return name


def is_initialized():
    """True between ``init()`` and ``shutdown()``."""
    return _session is not None


def session(hint=None):
    """The default Session; raises NotInitializedError before ``init()`` and
    after ``shutdown()`` (``hint``: the init() to name, where the caller
    knows the framework)."""
    s = _session
    if s is None:
        raise NotInitializedError(
            "hora has not been initialized, or was shut down; call %s first"
            % (hint or "init() (hvd.init() of the hora module in use)"))
    return s


def refuse(collective, name, process_set_id, error, group_size=0):
    """Hands the core a collective this rank's own checks refused with
    ``error`` (which the caller raises next), so that the call fails on every
    rank, the others with a MismatchError quoting ``error`` and naming this
    rank, instead of leaving them waiting for it (a dtype, shape or root can
    differ on one rank only). ``collective``: the kind the call would have
    submitted ("allreduce", "grouped_allreduce" with ``group_size``
    members...); ``name``: its name ("" for a generated one). Nothing is
    submitted where no Session runs (the caller's error says why)."""
    s = _session
    if s is None or (collective.startswith("grouped_") and group_size == 0):
        return  # (an empty group reaches the core on no rank)
    try:
        s.refuse(collective, name, str(error), group_size, process_set_id)
    except Exception:  # noqa: BLE001 (the caller's own error is the one to raise)
        pass


def rank():
    """This process's rank in the job, in [0, size())."""
    return session().rank


def size():
    """The number of ranks in the job."""
    return session().size


def local_rank():
    """This rank's index among the ranks on its host."""
    return session().local_rank


def local_size():
    """The number of ranks on this rank's host."""
    return session().local_size


def cross_rank():
    """The index of this rank's host among the hosts that have a rank with this
    rank's local rank, in rank order (gathered from every rank at ``init()``)."""
    return session().cross_rank


def cross_size():
    """The number of hosts that have a rank with this rank's local rank (every
    host, where each runs as many ranks)."""
    return session().cross_size


def is_homogeneous():
    """True when every host runs the same number of ranks (every rank's
    ``local_size()``, gathered at ``init()``, is the same)."""
    return session().is_homogeneous


def start_timeline(file_path, mark_cycles=False):
    """Starts a Chrome-trace timeline (``{rank}`` in the path: one file per rank).
    ``mark_cycles=True`` (Horovod's cycle marks) is not done: a warning says so."""
    if mark_cycles:
        warnings.warn("start_timeline(mark_cycles=True): Hora's timeline has no cycle marks; "
                      "the timeline starts without them", stacklevel=2)
    session().start_timeline(str(file_path))


def stop_timeline():
    """Stops the timeline started by ``start_timeline``."""
    session().stop_timeline()


def engine_counters():
    """This rank's engine counters (cycles, cache hits, fused batches...)."""
    return session().engine_counters()


def check_op(op, average=None):
    """Resolves Horovod's ``op``/``average`` pair into a _core op code.

    ``op=None`` means Average (Horovod's default); ``average`` is Horovod's
    deprecated boolean.
    """
    if average is not None:
        if op is not None:
            raise ValueError("op and average cannot both be given (average is deprecated; use op)")
        op = Average if average else Sum
    if op is None:
        op = Average
    if op not in _OP_NAMES:
        raise ValueError("unknown reduction op %r (use hvd.Sum, hvd.Average, hvd.Min, hvd.Max, "
                         "hvd.Product, hvd.Adasum)" % (op,))
    return op


def op_name(op):
    """'Sum', 'Average', ... for an op code."""
    return _OP_NAMES.get(op, str(op))


# Horovod's build queries: what this build of Hora has.
def _setting(name):
    """The running Session's value of HORA_<name> (None before init)."""
    s = _session
    if s is None:
        return None
    for line in s.describe_config().splitlines():
        if line.startswith(name + "="):
            return line[len(name) + 1:].split("  #", 1)[0]
    return None


def mpi_threads_supported():
    """Whether MPI provided MPI_THREAD_MULTIPLE (Hora asks MPI for it).

    Raises ValueError when this job does not use MPI (as Horovod does)."""
    if not mpi_enabled():
        raise ValueError("Hora's MPI is not enabled in this job: it runs over MPI under an MPI "
                         "launcher (mpirun) without horarun, or with HORA_TRANSPORT=mpi or "
                         "HORA_BACKEND=mpi")
    return bool(_session.mpi_threads_supported)


def mpi_enabled():
    """True while this job's Session initialised or uses MPI: its transport or backend, or
    the rendezvous of a job that mpirun started."""
    s = _session
    return s is not None and bool(s.mpi_enabled)


def mpi_built():
    """True when this build has an MPI plugin (one per MPI found at build time)."""
    import glob
    import os
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return bool(glob.glob(os.path.join(here, "libhora-mpi-*.so")))


def gloo_enabled():
    return False


def gloo_built():
    return False


def nccl_built():
    """NCCL's version code (Horovod's int: 22809 for 2.28.9) of the nccl.h this build has
    its NCCL backend from, or 0 when it has none. The library itself (libnccl.so.2) is
    loaded when a job first uses NCCL."""
    return int(_core.nccl_built())


def ddl_built():
    return False


def ccl_built():
    return False


def cuda_built():
    """True when this build of Hora has CUDA (its GPU kernels and device), whether or not
    this machine has a GPU."""
    return bool(_core.cuda_built())


def rocm_built():
    return False
