"""Hora's collectives on NumPy arrays: ``import hora.numpy as hvd``.

This is also the framework-neutral layer under ``hora.tensorflow``,
``hora.jax`` and ``hora.keras``: they hand NumPy arrays of theirs here.

Blocking, out-of-place forms (the input is never modified; results are new,
writeable arrays): ``allreduce, grouped_allreduce, allgather,
grouped_allgather, broadcast, alltoall, reducescatter,
grouped_reducescatter``, plus ``init, shutdown, rank, size...``, ``barrier``,
``join``, ``broadcast_object`` and ``allgather_object``. Every collective
but ``join`` takes ``process_set=`` (``hora.common.process_sets``). Names, ops and
matching across ranks follow :mod:`hora.torch.reduce_ops`: an operation
matches the same name on the other ranks, whatever framework they call it
from. Supported dtypes: uint8, int8, int16, int32, int64, float16, float32,
float64, bool, and bfloat16 as ``ml_dtypes`` defines it (JAX's and
TensorFlow's NumPy arrays of bfloat16: reduced in float32 arithmetic,
rounded to bfloat16 as ``hora.torch``'s). Bool arrays take allgather,
broadcast, alltoall, and allreduce with Sum, Min, Max or Product (Sum and
Max a logical or, Min and Product a logical and) and no scale factors; not
the default Average, and not reducescatter.

Costs: an input that is not a C-contiguous, writeable array is copied once
(NumPy exports only writeable arrays through DLPack); a single array's
allreduce, allgather, alltoall or reducescatter is one call into the core,
which waits there; outputs are never copied (allreduce, allgather,
alltoall and reducescatter return arrays over the memory Hora allocated, which comes from a pool of memory already faulted
in and goes back to it when the array is freed: HORA_OUTPUT_POOL_BYTES).
"""

import pickle

import numpy as np

from hora.common import *  # noqa: F401,F403  (the job, ops, process sets, errors)
from hora import _core
from hora.common import basics
from hora.common.basics import Average, Max, Min, Sum, rank
from hora.common.exceptions import InvalidArgumentError
from hora.common.process_sets import global_process_set, process_set_id, process_set_ranks

_SUPPORTED = tuple(np.dtype(d) for d in (
    np.uint8, np.int8, np.int16, np.int32, np.int64, np.float16, np.float32, np.float64, np.bool_))


def _is_bfloat16(dtype):
    """ml_dtypes' bfloat16 (JAX's and TensorFlow's arrays of it), known by its
    name, so that hora.numpy needs no ml_dtypes of its own."""
    return dtype.name == "bfloat16" and dtype.itemsize == 2 and dtype.kind == "V"


# Outputs of this size or more come from Hora's pool (OutputPool::kMinPooledBytes).
_POOLED_BYTES = 64 << 10


def _session():
    # (The TensorFlow, JAX and Keras modules call through here: the error
    # names the init() of whichever module is in use.)
    return basics.session()


def call_name(name):
    """The name a call of this module hands the core ("" for None: the core
    then makes one, the same on every rank)."""
    return "" if name is None else basics.utf8_name(str(name))


def _what(op, name):
    return "%s '%s'" % (op, name) if name else "%s (unnamed)" % op


def _prepare(array, op, name):
    """A contiguous, writeable array of a supported dtype, as the core will see it."""
    a = np.asarray(array)
    if a.dtype not in _SUPPORTED and not _is_bfloat16(a.dtype):
        raise InvalidArgumentError("%s: dtype %s is not supported (supported: %s, bfloat16)"
                                   % (_what(op, name), a.dtype,
                                      ", ".join(str(d) for d in _SUPPORTED)))
    if not a.flags.c_contiguous or not a.flags.writeable:
        a = a.copy(order="C")  # NumPy exports only writeable arrays through DLPack
    return a


def _capsule(a):
    """``a``'s DLPack capsule for the core: bool travels as uint8, bfloat16
    (which NumPy cannot export) as its bits, re-described by the core."""
    if a.dtype == np.bool_:
        return a.view(np.uint8).__dlpack__()
    if _is_bfloat16(a.dtype):
        return _core.as_bfloat16(a.view(np.uint16).__dlpack__())
    return a.__dlpack__()


def _output(handle, dtype):
    """The output the core allocated, without a copy: a writeable array over
    its memory (NumPy's from_dlpack would give a read-only one); the array's
    base keeps the memory alive."""
    return _over(handle.output_buffer(), dtype)


def _over(buf, dtype):
    """A writeable array of ``dtype`` over ``buf``, a core's OutputBuffer."""
    wire = np.uint8 if dtype == np.bool_ else dtype
    if buf.nbytes == 0:
        out = np.empty(buf.shape, dtype=wire)
    else:
        out = np.frombuffer(buf, dtype=wire).reshape(buf.shape)
    return out.view(np.bool_) if dtype == np.bool_ else out


def _wire_op(a, op, prescale, postscale, what):
    """bool travels as uint8: logical OR (Sum, Max) as Max, AND (Min, Product) as Min."""
    if a.dtype != np.bool_:
        return op
    if op not in (Sum, Min, Max, basics.Product):
        raise InvalidArgumentError("%s: bool arrays accept Sum, Min, Max and Product, not %s"
                                   % (what, basics.op_name(op)))
    if prescale != 1.0 or postscale != 1.0:
        raise InvalidArgumentError("%s: bool arrays take no scale factors" % what)
    return Max if op in (Sum, Max) else Min


def _refusing(collective, name, sid, error, count=0):
    """``error``, raised by this rank's checks of a call, after handing the
    call to the core as refused (basics.refuse): it fails on every rank,
    naming this one's error, instead of leaving the others waiting. A
    grouped call (``collective`` "grouped_..."), of ``count`` arrays."""
    basics.refuse(collective, name, sid, error, count)
    return error


def _list(arrays, what):
    if not isinstance(arrays, (list, tuple)):
        raise TypeError("%s: expected a list of arrays, got %s" % (what, type(arrays).__name__))
    return list(arrays)


# Ops a single allreduce takes in one call into the core (_one_call).
_ONE_CALL_OPS = frozenset((Sum, Average, Min, Max, basics.Product))


def _one_call(done, dtype):
    """A one-call form's result (``Session.allreduce_new(..., buffer=True)`` and
    the like, which wait in the core: no handle for Python to make and wait
    on, most of a small call's time) as an array of ``dtype``; None where
    the core declined the array (it then takes the general path)."""
    return None if done is None else _over(done, dtype)


def allreduce(array, op=None, name=None, prescale_factor=1.0, postscale_factor=1.0,
              process_set=global_process_set):
    """Reduces ``array`` across ranks (Average by default); returns a new array."""
    sid = process_set_id(process_set)
    name = call_name(name)
    try:
        op = basics.check_op(op)
        a = _prepare(array, "allreduce", name)
        wire_op = _wire_op(a, op, prescale_factor, postscale_factor, _what("allreduce", name))
    except Exception as e:
        raise _refusing("allreduce", name, sid, e)
    if op in _ONE_CALL_OPS:
        out = _one_call(_session().allreduce_new(
            name, _capsule(a), wire_op, float(prescale_factor),
            float(postscale_factor), sid, True), a.dtype)
        if out is not None:
            return out
    return _allreduce_list([a], op, name, prescale_factor, postscale_factor, process_set,
                           False)[0]


def grouped_allreduce(arrays, op=None, name=None, prescale_factor=1.0, postscale_factor=1.0,
                      process_set=global_process_set):
    """Reduces a list of arrays as one group (released together, fused); returns
    the list of results. Members are named "<name>.<i>" (a group of one
    too, as hora.torch's)."""
    return _allreduce_list(arrays, op, name, prescale_factor, postscale_factor, process_set,
                           True)


def _allreduce_list(arrays, op, name, prescale_factor, postscale_factor, process_set, grouped):
    """The allreduce of ``arrays``: one group (``grouped``), or one array alone."""
    sid = process_set_id(process_set)
    name = call_name(name)
    arrays = _list(arrays, "grouped_allreduce")
    what = _what("grouped allreduce" if grouped else "allreduce", name)
    try:
        op = basics.check_op(op)
        ins = [_prepare(a, "allreduce", name) for a in arrays]
        wire_ops = {_wire_op(a, op, prescale_factor, postscale_factor, what) for a in ins}
        if len(wire_ops) > 1:
            raise InvalidArgumentError("%s: bool arrays can be grouped with other dtypes only "
                                       "for Min or Max" % what)
    except Exception as e:
        raise _refusing("grouped_allreduce" if grouped else "allreduce", name, sid, e,
                        len(arrays))
    if not ins:
        return []
    # output=True: each output is memory from Hora's pool, faulted in already when a freed
    # output of about its size left it there (HORA_OUTPUT_POOL_BYTES).
    if not grouped:
        hs = [_session().allreduce_async(name, _capsule(ins[0]), True, wire_ops.pop(),
                                         float(prescale_factor), float(postscale_factor), sid)]
    else:
        hs = _session().grouped_allreduce_async(
            name, [_capsule(a) for a in ins], True, wire_ops.pop(),
            float(prescale_factor), float(postscale_factor), sid)
    for h in hs:
        h.wait()
    return [_output(h, a.dtype) for h, a in zip(hs, ins)]


def allgather(array, name=None, process_set=global_process_set):
    """Concatenates every rank's array along axis 0, in rank order (axis 0 may differ)."""
    sid = process_set_id(process_set)
    name = call_name(name)
    try:
        a = _prepare(array, "allgather", name)
    except Exception as e:
        raise _refusing("allgather", name, sid, e)
    a = a.reshape(1) if a.ndim == 0 else a
    out = _one_call(_session().allgather_new(name, _capsule(a), sid, True), a.dtype)
    return out if out is not None else _allgather_list([a], name, process_set, False)[0]


def grouped_allgather(arrays, name=None, process_set=global_process_set):
    """Allgathers a list of arrays as one group; returns the list of results
    (members named as grouped_allreduce's)."""
    return _allgather_list(arrays, name, process_set, True)


def _allgather_list(arrays, name, process_set, grouped):
    """The allgather of ``arrays``: one group (``grouped``), or one array alone."""
    sid = process_set_id(process_set)
    name = call_name(name)
    arrays = _list(arrays, "grouped_allgather")
    try:
        ins = [_prepare(a, "allgather", name) for a in arrays]
    except Exception as e:
        raise _refusing("grouped_allgather" if grouped else "allgather", name, sid, e,
                        len(arrays))
    ins = [a.reshape(1) if a.ndim == 0 else a for a in ins]
    if not ins:
        return []
    if not grouped:
        hs = [_session().allgather_async(name, _capsule(ins[0]), sid)]
    else:
        hs = _session().grouped_allgather_async(name, [_capsule(a) for a in ins], sid)
    for h in hs:
        h.wait()
    return [_output(h, a.dtype) for h, a in zip(hs, ins)]


def _root(root_rank, what, process_set):
    ranks = process_set_ranks(process_set)
    try:
        root = int(root_rank)
    except (TypeError, ValueError):
        root = None
    if root not in ranks:
        raise InvalidArgumentError("%s: root_rank %r is not a rank of %s" % (
            what, root_rank, "this job (size %d)" % len(ranks) if process_set is None
            or process_set.ranks is None else repr(process_set)))
    return root


def broadcast(array, root_rank, name=None, process_set=global_process_set):
    """Returns root's ``array`` on every rank (a new array)."""
    sid = process_set_id(process_set)
    name = call_name(name)
    try:
        root = _root(root_rank, _what("broadcast", name), process_set)
        src = np.asarray(array)
        out = _prepare(src, "broadcast", name)
    except Exception as e:
        raise _refusing("broadcast", name, sid, e)
    if out.nbytes >= _POOLED_BYTES:
        # A large output from Hora's pool (memory already faulted in, when a freed output
        # of about its size left it there); only the root's needs its data.
        pooled = _over(_session().new_output(_capsule(out), True), out.dtype)
        if rank() == root:
            pooled[...] = out
        out = pooled
    elif out is src:  # (not copied by _prepare: copy, the input is not modified)
        out = out.copy()
    h = _session().broadcast_async(name, _capsule(out), root, sid)
    h.wait()
    return out


def alltoall(array, splits=None, name=None, process_set=global_process_set):
    """Sends ``splits[p]`` rows to each rank p (even split when None).

    Returns the rows received, in rank order; with ``splits`` given, returns
    ``(array, received_splits)`` like ``hora.torch.alltoall``.
    """
    sid = process_set_id(process_set)
    name = call_name(name)
    try:
        a = _prepare(array, "alltoall", name)
        if a.ndim == 0:
            raise InvalidArgumentError("%s: alltoall needs at least one dimension"
                                       % _what("alltoall", name))
        sp = None if splits is None else [int(s) for s in np.asarray(splits).reshape(-1)]
    except Exception as e:
        raise _refusing("alltoall", name, sid, e)
    done = _session().alltoall_new(name, _capsule(a), sp, sid, True)
    if done is not None:
        out = _over(done[0], a.dtype)
        return out if splits is None else (out, np.asarray(done[1], dtype=np.int32))
    h = _session().alltoall_async(name, _capsule(a), sp, sid)
    h.wait()
    out = _output(h, a.dtype)
    if splits is None:
        return out
    return out, np.asarray(h.received_splits(), dtype=np.int32)


def _with_rows(a, name):
    """``a``, refused where it has no axis 0 to scatter (as hora.torch's)."""
    if a.ndim == 0:
        raise InvalidArgumentError("%s: reducescatter needs at least one dimension (got a "
                                   "scalar)" % _what("reducescatter", name))
    return a


def reducescatter(array, op=None, name=None, prescale_factor=1.0, postscale_factor=1.0,
                  process_set=global_process_set):
    """Reduces across ranks and returns this rank's slice of axis 0 (``dim0 // size``
    rows, the first ``dim0 % size`` ranks one more)."""
    sid = process_set_id(process_set)
    name = call_name(name)
    try:
        op = basics.check_op(op)
        a = _with_rows(_prepare(array, "reducescatter", name), name)
        if a.dtype == np.bool_:
            raise InvalidArgumentError("%s: bool arrays are not supported"
                                       % _what("reducescatter", name))
    except Exception as e:
        raise _refusing("reducescatter", name, sid, e)
    if op in _ONE_CALL_OPS:
        out = _one_call(_session().reducescatter_new(
            name, _capsule(a), op, float(prescale_factor), float(postscale_factor), sid, True),
            a.dtype)
        if out is not None:
            return out
    return _reducescatter_list([a], op, name, prescale_factor, postscale_factor, process_set,
                               False)[0]


def grouped_reducescatter(arrays, op=None, name=None, prescale_factor=1.0,
                          postscale_factor=1.0, process_set=global_process_set):
    """Reduce-scatters a list of arrays as one group; returns the list of slices
    (members named as grouped_allreduce's)."""
    return _reducescatter_list(arrays, op, name, prescale_factor, postscale_factor, process_set,
                               True)


def _reducescatter_list(arrays, op, name, prescale_factor, postscale_factor, process_set,
                        grouped):
    """The reducescatter of ``arrays``: one group (``grouped``), or one array alone."""
    sid = process_set_id(process_set)
    name = call_name(name)
    arrays = _list(arrays, "grouped_reducescatter")
    try:
        op = basics.check_op(op)
        ins = [_with_rows(_prepare(a, "reducescatter", name), name) for a in arrays]
        if any(a.dtype == np.bool_ for a in ins):
            raise InvalidArgumentError("%s: bool arrays are not supported"
                                       % _what("reducescatter", name))
    except Exception as e:
        raise _refusing("grouped_reducescatter" if grouped else "reducescatter", name, sid, e,
                        len(arrays))
    if not ins:
        return []
    if not grouped:
        hs = [_session().reducescatter_async(name, _capsule(ins[0]), op,
                                             float(prescale_factor), float(postscale_factor),
                                             sid)]
    else:
        hs = _session().grouped_reducescatter_async(name, [_capsule(a) for a in ins], op,
                                                    float(prescale_factor),
                                                    float(postscale_factor), sid)
    for h in hs:
        h.wait()
    return [_output(h, a.dtype) for h, a in zip(hs, ins)]


def barrier(process_set=global_process_set):
    """Returns when every rank (of ``process_set``) has called barrier()."""
    _session().barrier(process_set_id(process_set))


def join():
    """This rank is out of data (see ``hora.torch.join``); returns the last rank to join."""
    return _session().join()


def broadcast_object(obj, root_rank=0, name=None, process_set=global_process_set):
    """Returns root's ``obj`` on every rank (pickled; from this job's
    authenticated ranks only)."""
    name = "broadcast_object" if name is None else str(name)
    is_root = rank() == root_rank
    payload, error = None, None
    if is_root:
        try:
            payload = np.frombuffer(pickle.dumps(obj), dtype=np.uint8)
        except Exception as e:  # (the others learn it from the size: -1)
            error = e
    n = broadcast(np.array([payload.size if payload is not None else -1], dtype=np.int64),
                  root_rank, name + ".size", process_set)
    if error is not None:
        raise error
    if int(n[0]) < 0:
        raise InvalidArgumentError(_unpicklable("broadcast_object", name, [root_rank]))
    data = broadcast(payload if is_root else np.empty(int(n[0]), dtype=np.uint8), root_rank,
                     name + ".data", process_set)
    return obj if is_root else pickle.loads(data.tobytes())


def _unpicklable(what, name, ranks):
    """The error of the ranks whose object pickled, where some did not."""
    return ("%s '%s': rank(s) %s could not pickle their object (the error is raised there); "
            "nothing was sent" % (what, name, ", ".join(str(r) for r in ranks)))


def allgather_object(obj, name=None, process_set=global_process_set):
    """Returns the list of every rank's ``obj`` in rank order (pickled). Unnamed,
    its collectives are named "allgather_object" (not by ``type(obj)``,
    which differs where ranks pass objects of different types)."""
    name = "allgather_object" if name is None else str(name)
    payload, error = None, None
    try:
        payload = np.frombuffer(pickle.dumps(obj), dtype=np.uint8)
    except Exception as e:  # (the others learn it from the size: -1)
        error = e
    sizes = allgather(np.array([payload.size if payload is not None else -1], dtype=np.int64),
                      name + ".size", process_set)
    if error is not None:
        raise error
    failed = [r for r, n in zip(process_set_ranks(process_set), sizes.tolist()) if n < 0]
    if failed:
        raise InvalidArgumentError(_unpicklable("allgather_object", name, failed))
    data = allgather(payload, name + ".data", process_set)
    out, offset = [], 0
    for n in sizes.tolist():
        out.append(pickle.loads(data[offset:offset + n].tobytes()))
        offset += n
    return out
