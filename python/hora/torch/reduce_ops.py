"""Allreduce and reducescatter on torch tensors: the asynchronous and in-place forms.

The differentiable synchronous forms (``allreduce``, ``grouped_allreduce``,
``reducescatter``, ``grouped_reducescatter``) are in
:mod:`hora.torch.autograd_ops`.

Common contract (Horovod's):

* ``op`` is ``Average`` (the default when None), ``Sum``, ``Min``, ``Max``,
  ``Product`` or ``Adasum`` (allreduce only; floating dtypes; a process set
  whose size is a power of two, else NotImplementedError, as Horovod's CPU
  Adasum); ``average=`` is Horovod's deprecated boolean.
* ``prescale_factor`` multiplies each input before the reduction,
  ``postscale_factor`` the result (after the division of Average).
  Integer Average is the exact sum divided by the set's size, rounded toward
  zero, then scaled (Horovod's multiplies the sum by ``postscale / n`` in
  float64, which can come out one short).
* ``name``: collectives are matched across ranks by name; ``None`` generates
  one, the same on every rank for its N-th unnamed call of that kind (the
  grouped kinds share one count; ``join`` starts the counts again). Every
  rank must submit the same names with the same dtype, shape, op and scale
  factors; a disagreement fails that collective on every rank with a
  MismatchError naming each rank's values.
* ``process_set``: the ranks that take part (a ``ProcessSet`` from
  ``add_process_set``; the global set by default). Ranks outside it must not
  call the collective.
* The out-of-place forms never modify the input; the in-place forms (``_``
  suffix) need contiguous tensors and write the result into them.
"""

import torch
from torch.utils.dlpack import to_dlpack

from hora.common import basics
from hora.common.exceptions import InvalidArgumentError, UnimplementedError
from hora.common.process_sets import ProcessSet, global_process_set, process_set_id
from hora.torch import collective_ops as co
from hora.torch import traced
from hora.torch import tensor_util as tu
from hora.torch.compression import Compression
from hora.torch.handles import Done, Handle, synchronize


def _check_adasum(op, process_set, kind, name):
    """Horovod's submission-time check: Adasum needs a power-of-two set size."""
    if op != basics.Adasum:
        return
    n = (process_set or global_process_set).size()
    if n & (n - 1):
        raise UnimplementedError("%s: Adasum needs a power-of-two number of ranks; this process "
                                 "set has %d" % (tu.describe(kind, name), n))


def _reduction(tensors, op, average, prescale, postscale, kind, name, ps):
    """The checked reduction of ``tensors``: (op on the wire, prescale, postscale)."""
    op = basics.check_op(op, average)
    _check_adasum(op, ps, kind, name)
    return (tu.wire_op({t.dtype for t in tensors}, op, prescale, postscale, kind, name),
            float(prescale), float(postscale))


def _allreduce(inputs, outputs, name, reduction, grouped, sid):
    """Submits one allreduce (or one group) of checked tensors and
    ``reduction`` (``_reduction``); returns a Handle whose result is the
    output tensor (or the list of them)."""
    s = basics.session()
    wire, prescale, postscale = reduction
    if grouped:
        if not inputs:
            return Handle([], lambda: [])
        # In place (the same list): one capsule per tensor, and None for outputs.
        out_caps = None if outputs is inputs else [tu.capsule(t) for t in outputs]
        hs = s.grouped_allreduce_async(name, [tu.capsule(t) for t in inputs], out_caps, wire,
                                       prescale, postscale, sid)
        return Handle(hs, lambda: list(outputs), keep=(inputs, outputs))
    # The same tensor in and out: one capsule, and the core reduces in place.
    out_cap = None if outputs[0] is inputs[0] else tu.capsule(outputs[0])
    h = s.allreduce_async(name, tu.capsule(inputs[0]), out_cap, wire, prescale, postscale, sid)
    return Handle([h], lambda: outputs[0], keep=(inputs, outputs))


def allreduce_async(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                    postscale_factor=1.0, process_set=global_process_set):
    """Starts reducing ``tensor`` across ranks into a new tensor; returns a Handle.

    ``synchronize(handle)`` returns the reduced tensor (same shape and dtype).
    """
    if traced.compiling():  # (an operator of the graph; as eagerly, no gradient)
        return Done(traced.allreduce(tensor.detach(), basics.check_op(op, average), name,
                                     Compression.none, prescale_factor, postscale_factor,
                                     process_set), name)
    sid = process_set_id(process_set)
    name = tu.check_name(name)
    try:
        tensor = tu.check_tensor(tensor, "allreduce", name)
        reduction = _reduction([tensor], op, average, prescale_factor, postscale_factor,
                               "allreduce", name, process_set)
    except Exception as e:
        raise co.refusing("allreduce", name, sid, e)
    if not tensor.is_cuda:
        return _allreduce_into_new(tensor, name, reduction, sid)
    output = torch.empty_like(tensor, memory_format=torch.contiguous_format)
    return _allreduce([tensor], [output], name, reduction, False, sid)


def _allreduce_into_new(tensor, name, reduction, sid):
    """An allreduce of a host tensor into a new output that the core takes from its pool of
    memory already faulted in (HORA_OUTPUT_POOL_BYTES), and gets back when the output is
    freed: a large output would otherwise fault every page on each call."""
    s = basics.session()
    h = s.allreduce_async(name, tu.capsule(tensor), True, *reduction, sid)
    dtype = tensor.dtype
    return Handle([h], lambda: tu.from_capsule(h.output(), dtype), keep=(tensor,))


def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                     postscale_factor=1.0, process_set=global_process_set):
    """Starts reducing ``tensor`` in place; ``synchronize(handle)`` returns ``tensor``."""
    if traced.compiling():
        return Done(allreduce_(tensor, average, name, op, prescale_factor, postscale_factor,
                               process_set), name)
    direct = direct_op(tensor, average, name, op, process_set)
    if (direct is not None and tensor.layout is torch.strided and tensor.dtype in tu.WIRE_DTYPES
            and tensor.is_cpu and tensor.is_contiguous()):
        # The common call (DistributedOptimizer's, a gradient a call): fewer
        # checks in Python, as the one-call forms; the core checks the rest.
        cap = direct_capsule(tensor)
        if cap is not None:
            h = basics.session().allreduce_async(name or "", cap, None, direct[0],
                                                 float(prescale_factor), float(postscale_factor),
                                                 direct[1])
            return Handle([h], None, keep=tensor, host=True)
    sid = process_set_id(process_set)
    name = tu.check_name(name)
    try:
        tensor = tu.check_tensor(tensor, "allreduce", name, inplace=True)
        reduction = _reduction([tensor], op, average, prescale_factor, postscale_factor,
                               "allreduce", name, process_set)
    except Exception as e:
        raise co.refusing("allreduce", name, sid, e)
    return _allreduce([tensor], [tensor], name, reduction, False, sid)


# The common call of allreduce_ and allreduce: Horovod's ops but Adasum.
_DIRECT_OPS = frozenset((basics.Sum, basics.Average, basics.Min, basics.Max, basics.Product))


def one_call_set(process_set):
    """The core's id of ``process_set`` where a one-call form may take it: 0
    for the global set, a registered set's id; else None (the general path
    then says what is wrong: a set never added, or removed)."""
    if process_set is global_process_set or process_set is None:
        return 0
    if type(process_set) is ProcessSet:
        return process_set.process_set_id
    return None


def direct_op(tensor, average, name, op, process_set):
    """``(op code, set id)`` for an allreduce that may go to the core in one
    call (``Session.allreduce_inplace``/``allreduce_new``, which wait there):
    a plain torch tensor that needs no grad, of the global set or a
    registered one, an ASCII name or none, no ``average=``; else None. The
    core takes it if it is a contiguous host tensor of a dtype but bool
    (cheaper checked there, on its DLPack capsule: ``direct_capsule``), and
    fails it as the general path would on a rank outside its set;
    otherwise, as here, the call takes the general path (a handle), whose
    checks say what is wrong. For a small tensor the Python is most of the
    call's time."""
    if (average is None and type(tensor) is torch.Tensor
            and (op is None or (type(op) is int and op in _DIRECT_OPS))
            and (name is None or (type(name) is str and name.isascii()))
            and not tensor.requires_grad):
        sid = 0 if process_set is global_process_set else one_call_set(process_set)
        if sid is not None:
            return (basics.Average if op is None else op), sid
    return None


def direct_capsule(tensor):
    """``tensor``'s DLPack capsule for the one-call path, or None where torch
    makes none (bool before torch 2, sparse, quantized...): the general path
    then says what is wrong, if anything."""
    try:
        return to_dlpack(tensor)
    except Exception:  # noqa: BLE001 (any refusal: the general path's checks explain it)
        return None


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
               postscale_factor=1.0, process_set=global_process_set):
    """Reduces ``tensor`` in place across ranks and returns it."""
    if traced.compiling():  # (torch.compile records an operator)
        return traced.allreduce_(tensor, basics.check_op(op, average), name, prescale_factor,
                               postscale_factor, process_set)
    direct = direct_op(tensor, average, name, op, process_set)
    if direct is not None:
        cap = direct_capsule(tensor)
        if cap is not None and basics.session().allreduce_inplace(
                name or "", cap, direct[0], float(prescale_factor), float(postscale_factor),
                direct[1]):
            return tensor
    return synchronize(allreduce_async_(tensor, average, name, op, prescale_factor,
                                        postscale_factor, process_set))


def grouped_allreduce_async(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                            postscale_factor=1.0, process_set=global_process_set):
    """Starts reducing a list of tensors as one group (they run together, only when
    every member is ready on every rank). ``synchronize`` returns the list of results."""
    if traced.compiling():
        tensors = [t.detach() for t in tu.check_list(tensors, "grouped_allreduce")]
        return Done(tensors and traced.grouped_allreduce(
            tensors, basics.check_op(op, average), name, Compression.none, prescale_factor,
            postscale_factor, process_set), name)
    sid = process_set_id(process_set)
    name = tu.check_name(name)
    tensors = tu.check_list(tensors, "grouped_allreduce")
    try:
        tensors = [tu.check_tensor(t, "grouped allreduce", name) for t in tensors]
        reduction = _reduction(tensors, op, average, prescale_factor, postscale_factor,
                               "grouped allreduce", name, process_set)
    except Exception as e:
        raise co.refusing("grouped_allreduce", name, sid, e, len(tensors))
    if tensors and not any(t.is_cuda for t in tensors):
        return _grouped_allreduce_into_new(tensors, name, reduction, sid)
    outputs = [torch.empty_like(t, memory_format=torch.contiguous_format) for t in tensors]
    return _allreduce(tensors, outputs, name, reduction, True, sid)


def _grouped_allreduce_into_new(tensors, name, reduction, sid):
    """``_allreduce_into_new`` for a group of host tensors."""
    s = basics.session()
    hs = s.grouped_allreduce_async(name, [tu.capsule(t) for t in tensors], True, *reduction, sid)
    dtypes = [t.dtype for t in tensors]
    return Handle(hs, lambda: [tu.from_capsule(h.output(), d) for h, d in zip(hs, dtypes)],
                  keep=(tensors,))


def grouped_allreduce_async_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                             postscale_factor=1.0, process_set=global_process_set):
    """In-place ``grouped_allreduce_async``; ``synchronize`` returns ``tensors``."""
    if traced.compiling():
        return Done(grouped_allreduce_(tensors, average, name, op, prescale_factor,
                                       postscale_factor, process_set), name)
    sid = process_set_id(process_set)
    name = tu.check_name(name)
    tensors = tu.check_list(tensors, "grouped_allreduce_")
    try:
        tensors = [tu.check_tensor(t, "grouped allreduce", name, inplace=True) for t in tensors]
        reduction = _reduction(tensors, op, average, prescale_factor, postscale_factor,
                               "grouped allreduce", name, process_set)
    except Exception as e:
        raise co.refusing("grouped_allreduce", name, sid, e, len(tensors))
    return _allreduce(tensors, tensors, name, reduction, True, sid)


def grouped_allreduce_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                       postscale_factor=1.0, process_set=global_process_set):
    """Reduces a list of tensors in place, as one group; returns the list."""
    if traced.compiling():  # (torch.compile records an operator)
        tensors = tu.check_list(tensors, "grouped_allreduce_")
        return tensors and traced.grouped_allreduce_(tensors, basics.check_op(op, average), name,
                                                     prescale_factor, postscale_factor,
                                                     process_set)
    return synchronize(grouped_allreduce_async_(tensors, average, name, op, prescale_factor,
                                                postscale_factor, process_set))


def _check_reducescatter(tensors, name, op, prescale, postscale, grouped):
    """The checked tensors and (op, prescale, postscale) of a reducescatter."""
    kind = "grouped reducescatter" if grouped else "reducescatter"
    tensors = [tu.check_tensor(t, kind, name) for t in tensors]
    if any(t.dtype == torch.bool for t in tensors):
        raise InvalidArgumentError("%s: bool tensors are not supported by reducescatter"
                                   % tu.describe(kind, name))
    for t in tensors:
        if t.dim() == 0:
            raise InvalidArgumentError("%s: reducescatter needs at least one dimension "
                                       "(got a scalar)" % tu.describe(kind, name))
    return tensors, (basics.check_op(op), float(prescale), float(postscale))


def _reducescatter(tensors, name, reduction, grouped, sid):
    s = basics.session()
    op, prescale, postscale = reduction
    caps = [tu.capsule(t) for t in tensors]
    dtypes = [t.dtype for t in tensors]
    if grouped:
        if not tensors:
            return Handle([], lambda: [])
        hs = s.grouped_reducescatter_async(name, caps, op, prescale, postscale, sid)
        return Handle(hs, lambda: [tu.from_capsule(h.output(), d) for h, d in zip(hs, dtypes)],
                      keep=tensors)
    h = s.reducescatter_async(name, caps[0], op, prescale, postscale, sid)
    return Handle([h], lambda: tu.from_capsule(h.output(), dtypes[0]), keep=tensors)


def reducescatter_async(tensor, name=None, op=None, process_set=global_process_set,
                        prescale_factor=1.0, postscale_factor=1.0):
    """Starts reducing ``tensor`` across ranks and scattering dimension 0.

    Rank r receives its slice of the reduced tensor along dimension 0:
    ``dim0 // size`` rows, the first ``dim0 % size`` ranks one row more.
    ``synchronize(handle)`` returns that slice (a new tensor).
    """
    if traced.compiling():
        return Done(traced.reducescatter(tensor.detach(), basics.check_op(op), name,
                                         Compression.none, prescale_factor, postscale_factor,
                                         process_set), name)
    sid = process_set_id(process_set)
    name = tu.check_name(name)
    try:
        tensors, reduction = _check_reducescatter([tensor], name, op, prescale_factor,
                                                  postscale_factor, False)
    except Exception as e:
        raise co.refusing("reducescatter", name, sid, e)
    return _reducescatter(tensors, name, reduction, False, sid)


def grouped_reducescatter_async(tensors, name=None, op=None, process_set=global_process_set,
                                prescale_factor=1.0, postscale_factor=1.0):
    """``reducescatter_async`` of a list of tensors as one group; returns the list of slices."""
    if traced.compiling():
        tensors = [t.detach() for t in tu.check_list(tensors, "grouped_reducescatter")]
        return Done(tensors and traced.grouped_reducescatter(
            tensors, basics.check_op(op), name, Compression.none, prescale_factor,
            postscale_factor, process_set), name)
    sid = process_set_id(process_set)
    name = tu.check_name(name)
    tensors = tu.check_list(tensors, "grouped_reducescatter")
    try:
        tensors, reduction = _check_reducescatter(tensors, name, op, prescale_factor,
                                                  postscale_factor, True)
    except Exception as e:
        raise co.refusing("grouped_reducescatter", name, sid, e, len(tensors))
    return _reducescatter(tensors, name, reduction, True, sid)


def sparse_allreduce_async(tensor, name, op, process_set=global_process_set):
    """Horovod's reduction of a sparse (COO) tensor: every rank's indices and
    values are allgathered (collectives "<name>.indices" and "<name>.values";
    unnamed where ``name`` is None),
    which sums them once coalesced; Average then divides the values by the
    process set's size. ``tensor`` is coalesced before it is sent. Only Sum and
    Average are taken (others raise InvalidArgumentError; Horovod's would
    concatenate). Returns a callable (Horovod's form): call it, or pass it to
    ``synchronize``, to get the result, an uncoalesced sparse tensor of
    ``tensor``'s size."""

    op = basics.check_op(op)
    if op not in (basics.Average, basics.Sum):
        raise InvalidArgumentError("sparse allreduce %r: op must be Average or Sum, got %s"
                                   % (name, basics.op_name(op)))
    if not isinstance(tensor, torch.Tensor) or not tensor.is_sparse:
        raise InvalidArgumentError("sparse allreduce %r: expected a sparse COO tensor, got %s"
                                   % (name, type(tensor).__name__ if not isinstance(tensor, torch.Tensor)
                                      else tensor.layout))
    size = (process_set or global_process_set).size()
    t = tensor.coalesce()  # fewer rows on the wire; the same sum
    base = None if name is None else basics.utf8_name(str(name))
    hi = co.allgather_async(t.indices().t().contiguous(),
                            None if base is None else base + ".indices", process_set)
    hv = co.allgather_async(t.values().contiguous(),
                            None if base is None else base + ".values", process_set)

    def result():
        values = synchronize(hv)
        indices = synchronize(hi)
        if op == basics.Average:
            values = values / size
        return tu.sparse_coo(indices.t(), values, tensor.size())

    return result
