"""Hora's collectives on NumPy arrays: ``import hora.numpy as hvd``.

Blocking, out-of-place forms (the input is never modified; results are new,
writeable arrays): ``allreduce, allgather, broadcast, alltoall,
reducescatter``, plus ``init, shutdown, rank, size...`` and ``barrier``.
Names, ops and matching across ranks follow :mod:`hora.torch.reduce_ops`.
Supported dtypes: uint8, int8, int16, int32, int64, float16, float32,
float64 and bool (NumPy has no bfloat16).
"""

import numpy as np

from hora.common import basics
from hora.common.basics import (  # noqa: F401
    Average,
    Max,
    Min,
    Product,
    Sum,
    cross_rank,
    cross_size,
    init,
    is_initialized,
    local_rank,
    local_size,
    rank,
    shutdown,
    size,
)
from hora.common.exceptions import *  # noqa: F401,F403
from hora.common.exceptions import InvalidArgumentError

_SUPPORTED = tuple(np.dtype(d) for d in (
    np.uint8, np.int8, np.int16, np.int32, np.int64, np.float16, np.float32, np.float64, np.bool_))


def _session():
    return basics.session("hora.numpy.init()")


def _name(name):
    return "" if name is None else str(name)


def _prepare(array, op, name):
    """A contiguous, writeable array of a supported dtype, as the core will see it."""
    a = np.asarray(array)
    if a.dtype not in _SUPPORTED:
        raise InvalidArgumentError("%s '%s': dtype %s is not supported" % (op, name, a.dtype))
    if not a.flags.c_contiguous or not a.flags.writeable:
        a = a.copy(order="C")  # NumPy exports only writeable arrays through DLPack
    return a


def _wire(a):
    return a.view(np.uint8) if a.dtype == np.bool_ else a


def _output(handle, dtype):
    """The output the core allocated, without a copy: a writeable array over
    its memory (NumPy's from_dlpack would give a read-only one); the array's
    base keeps the memory alive."""
    buf = handle.output_buffer()
    wire = np.uint8 if dtype == np.bool_ else dtype
    if buf.nbytes == 0:
        out = np.empty(buf.shape, dtype=wire)
    else:
        out = np.frombuffer(buf, dtype=wire).reshape(buf.shape)
    return out.view(np.bool_) if dtype == np.bool_ else out


def allreduce(array, op=None, name=None, prescale_factor=1.0, postscale_factor=1.0):
    """Reduces ``array`` across ranks (Average by default); returns a new array."""
    op, name = basics.check_op(op), _name(name)
    a = _prepare(array, "allreduce", name)
    if a.dtype == np.bool_:
        if op == Average or prescale_factor != 1.0 or postscale_factor != 1.0:
            raise InvalidArgumentError("allreduce '%s': bool arrays accept Sum, Min, Max and "
                                       "Product without scale factors" % name)
        op = Max if op in (Sum, Max) else Min
    out = np.empty_like(a)
    h = _session().allreduce_async(name, _wire(a).__dlpack__(), _wire(out).__dlpack__(), op,
                                   float(prescale_factor), float(postscale_factor))
    h.wait()
    return out


def allgather(array, name=None):
    """Concatenates every rank's array along axis 0, in rank order (axis 0 may differ)."""
    name = _name(name)
    a = _prepare(array, "allgather", name)
    if a.ndim == 0:
        a = a.reshape(1)
    h = _session().allgather_async(name, _wire(a).__dlpack__())
    h.wait()
    return _output(h, a.dtype)


def broadcast(array, root_rank, name=None):
    """Returns root's ``array`` on every rank (a new array)."""
    name = _name(name)
    out = _prepare(array, "broadcast", name).copy()
    h = _session().broadcast_async(name, _wire(out).__dlpack__(), int(root_rank))
    h.wait()
    return out


def alltoall(array, splits=None, name=None):
    """Sends ``splits[p]`` rows to each rank p (even split when None).

    Returns the rows received, in rank order; with ``splits`` given, returns
    ``(array, received_splits)`` like ``hora.torch.alltoall``.
    """
    name = _name(name)
    a = _prepare(array, "alltoall", name)
    sp = None if splits is None else [int(s) for s in splits]
    h = _session().alltoall_async(name, _wire(a).__dlpack__(), sp)
    h.wait()
    out = _output(h, a.dtype)
    if splits is None:
        return out
    return out, np.asarray(h.received_splits(), dtype=np.int32)


def reducescatter(array, op=None, name=None, prescale_factor=1.0, postscale_factor=1.0):
    """Reduces across ranks and returns this rank's slice of axis 0 (``dim0 // size``
    rows, the first ``dim0 % size`` ranks one more)."""
    op, name = basics.check_op(op), _name(name)
    a = _prepare(array, "reducescatter", name)
    if a.dtype == np.bool_:
        raise InvalidArgumentError("reducescatter '%s': bool arrays are not supported" % name)
    h = _session().reducescatter_async(name, a.__dlpack__(), op, float(prescale_factor),
                                       float(postscale_factor))
    h.wait()
    return _output(h, a.dtype)


def barrier():
    """Returns when every rank has called barrier()."""
    _session().barrier()
