"""The synchronous, differentiable collectives (Horovod's ``hvd.allreduce`` etc.).

Each is a ``torch.autograd.Function``: when the input requires grad, the
result carries a backward that runs a collective, so every rank must run the
backward too (as every rank runs the forward). Backward rules (Horovod's):

* allreduce (and grouped_allreduce): the gradient is allreduced with the same
  op and scale factors. For Sum and Average this is the exact gradient of the
  sum of all ranks' losses; for Min, Max and Product it is Horovod's
  convention, not a true derivative.
* allgather (and grouped_allgather): the gradient is allreduced with Average
  (Horovod >= 0.21), and each rank takes the rows of its own input.
* broadcast: the gradient is allreduced with Average; root receives it, the
  other ranks a zero gradient.
* alltoall: the gradient travels back with the received splits.
* reducescatter (and grouped_reducescatter): the gradient is allgathered and
  multiplied by the forward's prescale and postscale factors, and by the
  process set's size for Sum. These are Horovod's numbers: size() times the
  exact gradient of the sum of all ranks' losses, for Sum and Average alike.

A tensor that needs no grad has no backward to record: a contiguous host
tensor of the global process set or a registered one, named in ASCII or not
at all, goes to the core in one call that waits there (allreduce,
allgather, broadcast, alltoall, reducescatter), with the same result as the
Function's.
"""

import torch
from torch.autograd import Function

from hora.common import basics
from hora.common.process_sets import global_process_set, process_set_id
from hora.torch import collective_ops as co
from hora.torch import traced
from hora.torch import reduce_ops as ro
from hora.torch import tensor_util as tu
from hora.torch.compression import Compression
from hora.torch.handles import synchronize


class _Allreduce(Function):
    @staticmethod
    def forward(ctx, tensor, name, op, prescale, postscale, ps):
        ctx.args = (op, prescale, postscale, ps)
        return synchronize(ro.allreduce_async(tensor, None, name, op, prescale, postscale, ps))

    @staticmethod
    def backward(ctx, grad):
        op, pre, post, ps = ctx.args
        return (allreduce(grad, op=op, prescale_factor=pre, postscale_factor=post,
                          process_set=ps), None, None, None, None, None)


def allreduce(tensor, average=None, name=None, compression=Compression.none, op=None,
              prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set):
    """Reduces ``tensor`` across ranks (Average by default) and returns a new tensor.

    ``compression`` (e.g. ``Compression.fp16``) changes the dtype on the wire
    only. See :mod:`hora.torch.reduce_ops` for the common contract.
    """
    if traced.compiling():  # (torch.compile records an operator)
        return traced.allreduce(tensor, basics.check_op(op, average), name, compression,
                              prescale_factor, postscale_factor, process_set)
    direct = None if compression is not Compression.none else ro.direct_op(
        tensor, average, name, op, process_set)
    if direct is not None:  # (one call into the core; its output from Hora's pool)
        cap = ro.direct_capsule(tensor)
        out = None if cap is None else basics.session().allreduce_new(
            name or "", cap, direct[0], float(prescale_factor), float(postscale_factor),
            direct[1])
        if out is not None:
            return tu.from_dlpack(out)
    op = basics.check_op(op, average)
    process_set_id(process_set)
    compressed, cctx = compression.compress(tensor)
    out = _Allreduce.apply(compressed, name, op, prescale_factor, postscale_factor, process_set)
    return compression.decompress(out, cctx)


class _GroupedAllreduce(Function):
    @staticmethod
    def forward(ctx, name, op, prescale, postscale, ps, *tensors):
        ctx.args = (op, prescale, postscale, ps)
        return tuple(synchronize(ro.grouped_allreduce_async(list(tensors), None, name, op,
                                                            prescale, postscale, ps)))

    @staticmethod
    def backward(ctx, *grads):
        op, pre, post, ps = ctx.args
        return (None, None, None, None, None) + tuple(
            grouped_allreduce(list(grads), op=op, prescale_factor=pre, postscale_factor=post,
                              process_set=ps))


def grouped_allreduce(tensors, average=None, name=None, compression=Compression.none, op=None,
                      prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set):
    """Reduces a list of tensors as one group; returns the list of results."""
    op = basics.check_op(op, average)
    if not traced.compiling():  # (compiled, the operator refuses a set as it runs)
        process_set_id(process_set)
    if isinstance(tensors, torch.Tensor) or not isinstance(tensors, (list, tuple)):
        raise TypeError("grouped_allreduce: expected a list of tensors")
    if not tensors:
        return []
    if traced.compiling():
        return traced.grouped_allreduce(list(tensors), op, name, compression, prescale_factor,
                                      postscale_factor, process_set)
    pairs = [compression.compress(t) for t in tensors]
    outs = _GroupedAllreduce.apply(name, op, prescale_factor, postscale_factor, process_set,
                                   *[c for c, _ in pairs])
    return [compression.decompress(o, c) for o, (_, c) in zip(outs, pairs)]


class _Allgather(Function):
    @staticmethod
    def forward(ctx, tensor, name, grad_op, rows_per_rank, ps):
        ctx.scalar = tensor.dim() == 0
        ctx.rows = 1 if ctx.scalar else tensor.shape[0]
        ctx.grad_op, ctx.rows_per_rank, ctx.ps = grad_op, rows_per_rank, ps
        return synchronize(co.allgather_async(tensor, name, ps))

    @staticmethod
    def backward(ctx, grad):
        ps = ctx.ps
        reduced = allreduce(grad, op=ctx.grad_op, process_set=ps)
        r = (ps or global_process_set).rank()
        if ctx.rows_per_rank is not None:
            offset = r * ctx.rows_per_rank
        else:  # every rank's row count, as Horovod does it
            rows = synchronize(co.allgather_async(torch.tensor([ctx.rows], dtype=torch.int64),
                                                  None, ps))
            offset = int(rows[:r].sum())
        g = reduced.narrow(0, offset, ctx.rows)
        return (g.reshape(()) if ctx.scalar else g), None, None, None, None


def _one_call(tensor, name, process_set):
    """``(capsule, set id)`` of ``tensor`` for a collective's one-call form
    (``Session.allgather_new`` and the like, which wait in the core and
    return the output): a plain torch tensor that needs no grad, of the
    global set or a registered one, an ASCII name or none; else ``(None,
    None)``, and the call takes the autograd path. The core takes the
    capsule if it holds a contiguous host tensor of a dtype but bool (with a
    dimension where the collective needs one); otherwise the general path's
    checks say what is wrong. For a small tensor the Python is most of the
    call's time."""
    if (type(tensor) is torch.Tensor and not tensor.requires_grad
            and (name is None or (type(name) is str and name.isascii()))):
        sid = 0 if process_set is global_process_set else ro.one_call_set(process_set)
        if sid is not None:
            return ro.direct_capsule(tensor), sid
    return None, None


def allgather(tensor, name=None, process_set=global_process_set):
    """Concatenates every rank's ``tensor`` along dimension 0, in rank order (a new tensor).

    Dimension 0 may differ between ranks; the other dimensions and the dtype must agree.
    """
    if traced.compiling():
        return traced.allgather(tensor, name, process_set)
    cap, sid = _one_call(tensor, name, process_set)
    if cap is not None:
        out = basics.session().allgather_new(name or "", cap, sid)
        if out is not None:
            return tu.from_dlpack(out)
    process_set_id(process_set)
    return _Allgather.apply(tensor, name, basics.Average, None, process_set)


def allgather_sum_grad(tensor, rows_per_rank=None):
    """Internal (SyncBatchNorm): an allgather whose backward sums the gradients
    (the exact gradient of the sum of all ranks' losses). ``rows_per_rank``:
    every rank's dimension 0 when known to be equal (saves a collective)."""
    if traced.compiling():
        return traced.allgather(tensor, None, None, basics.Sum, rows_per_rank or 0)
    return _Allgather.apply(tensor, None, basics.Sum, rows_per_rank, None)


class _GroupedAllgather(Function):
    @staticmethod
    def forward(ctx, name, ps, *tensors):
        ctx.scalar = [t.dim() == 0 for t in tensors]
        ctx.rows = [1 if t.dim() == 0 else t.shape[0] for t in tensors]
        ctx.ps = ps
        return tuple(synchronize(co.grouped_allgather_async(list(tensors), name, ps)))

    @staticmethod
    def backward(ctx, *grads):
        ps = ctx.ps
        reduced = synchronize(ro.grouped_allreduce_async(list(grads), op=basics.Average,
                                                         process_set=ps))
        # Every rank's row counts, one row of them per rank (as Horovod does it).
        counts = synchronize(co.allgather_async(torch.tensor([ctx.rows], dtype=torch.int64),
                                                None, ps))
        r = (ps or global_process_set).rank()
        out = []
        for i, g in enumerate(reduced):
            offset = int(counts[:r, i].sum())
            gi = g.narrow(0, offset, ctx.rows[i])
            out.append(gi.reshape(()) if ctx.scalar[i] else gi)
        return (None, None) + tuple(out)


def grouped_allgather(tensors, name=None, process_set=global_process_set):
    """Allgathers a list of tensors as one group; returns the tuple of results
    (differentiable, like ``allgather``)."""
    if not traced.compiling():  # (compiled, the operator refuses a set as it runs)
        process_set_id(process_set)
    tensors = tu.check_list(tensors, "grouped_allgather")
    if not tensors:
        return ()
    if traced.compiling():
        return traced.grouped_allgather(tensors, name, process_set)
    return _GroupedAllgather.apply(name, process_set, *tensors)


class _Broadcast(Function):
    @staticmethod
    def forward(ctx, tensor, root_rank, name, ps):
        ctx.root_rank, ctx.ps = root_rank, ps
        return synchronize(co.broadcast_async(tensor, root_rank, name, ps))

    @staticmethod
    def backward(ctx, grad):
        reduced = allreduce(grad, op=basics.Average, process_set=ctx.ps)
        if basics.rank() != ctx.root_rank:
            reduced = torch.zeros_like(reduced)
        return reduced, None, None, None


def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    """Returns root's ``tensor`` on every rank (a new tensor; ``tensor`` is not modified)."""
    if traced.compiling():
        return traced.broadcast(tensor, root_rank, name, process_set)
    cap, sid = _one_call(tensor, name, process_set)
    root = None if cap is None else co.valid_root(root_rank, process_set)
    if root is not None:  # (else the general path refuses it, on every rank)
        out = basics.session().broadcast_new(name or "", cap, root, sid)
        if out is not None:
            return tu.from_dlpack(out)
    process_set_id(process_set)
    return _Broadcast.apply(tensor, root_rank, name, process_set)


class _Alltoall(Function):
    @staticmethod
    def forward(ctx, tensor, splits, name, ps):
        out, received = synchronize(co.alltoall_async(tensor, splits, name, ps))
        ctx.received, ctx.ps = received, ps
        if splits is None:
            return out
        ctx.mark_non_differentiable(received)
        return out, received

    @staticmethod
    def backward(ctx, grad, *unused):
        g, _ = synchronize(co.alltoall_async(grad, splits=ctx.received, process_set=ctx.ps))
        return g, None, None, None


def alltoall(tensor, splits=None, name=None, process_set=global_process_set):
    """Sends ``splits[p]`` rows of ``tensor`` to each rank p; returns the rows received.

    Like Horovod: with ``splits=None`` (an even split) it returns the received
    tensor; with ``splits`` given it returns ``(tensor, received_splits)``,
    ``received_splits`` an int32 tensor of the rows received from each rank.
    """
    if traced.compiling():
        return traced.alltoall(tensor, splits, name, process_set)
    cap, sid = _one_call(tensor, name, process_set)
    if cap is not None:
        try:
            sp = co.splits_list(splits, tu.describe("alltoall", name))
        except Exception as e:
            raise co.refusing("alltoall", name or "", sid, e)
        done = basics.session().alltoall_new(name or "", cap, sp, sid)
        if done is not None:
            out = tu.from_dlpack(done[0])
            if splits is None:
                return out
            return out, torch.tensor(done[1], dtype=torch.int32)
    process_set_id(process_set)
    return _Alltoall.apply(tensor, splits, name, process_set)


def _reducescatter_grad_scale(op, prescale, postscale, ps):
    """Horovod's factor for a reducescatter's gradient (see the module doc)."""
    scale = (ps or global_process_set).size() if op == basics.Sum else 1.0
    return scale * prescale * postscale


class _Reducescatter(Function):
    @staticmethod
    def forward(ctx, tensor, name, op, prescale, postscale, ps):
        ctx.scale = _reducescatter_grad_scale(op, prescale, postscale, ps)
        ctx.ps = ps
        return synchronize(ro.reducescatter_async(tensor, name, op, ps, prescale, postscale))

    @staticmethod
    def backward(ctx, grad):
        g = synchronize(co.allgather_async(grad, None, ctx.ps))
        return (g * ctx.scale if ctx.scale != 1.0 else g), None, None, None, None, None


def reducescatter(tensor, name=None, compression=Compression.none, op=None,
                  process_set=global_process_set, prescale_factor=1.0, postscale_factor=1.0):
    """Reduces ``tensor`` across ranks (Average by default) and returns this rank's
    slice of dimension 0: ``dim0 // size`` rows, the first ``dim0 % size`` ranks
    one more."""
    op = basics.check_op(op)
    if traced.compiling():
        return traced.reducescatter(tensor, op, name, compression, prescale_factor,
                                  postscale_factor, process_set)
    cap, sid = (None, None) if compression is not Compression.none else _one_call(
        tensor, name, process_set)
    if cap is not None:
        out = basics.session().reducescatter_new(name or "", cap, op, float(prescale_factor),
                                                 float(postscale_factor), sid)
        if out is not None:
            return tu.from_dlpack(out)
    process_set_id(process_set)
    compressed, cctx = compression.compress(tensor)
    out = _Reducescatter.apply(compressed, name, op, prescale_factor, postscale_factor,
                               process_set)
    return compression.decompress(out, cctx)


class _GroupedReducescatter(Function):
    @staticmethod
    def forward(ctx, name, op, prescale, postscale, ps, *tensors):
        ctx.scale = _reducescatter_grad_scale(op, prescale, postscale, ps)
        ctx.ps = ps
        return tuple(synchronize(ro.grouped_reducescatter_async(list(tensors), name, op, ps,
                                                                prescale, postscale)))

    @staticmethod
    def backward(ctx, *grads):
        gs = synchronize(co.grouped_allgather_async(list(grads), None, ctx.ps))
        if ctx.scale != 1.0:
            gs = [g * ctx.scale for g in gs]
        return (None, None, None, None, None) + tuple(gs)


def grouped_reducescatter(tensors, name=None, compression=Compression.none, op=None,
                          process_set=global_process_set, prescale_factor=1.0,
                          postscale_factor=1.0):
    """``reducescatter`` of a list of tensors as one group; returns the list of slices
    (differentiable, like ``reducescatter``)."""
    op = basics.check_op(op)
    if not traced.compiling():  # (compiled, the operator refuses a set as it runs)
        process_set_id(process_set)
    tensors = tu.check_list(tensors, "grouped_reducescatter")
    if not tensors:
        return []
    if traced.compiling():
        return traced.grouped_reducescatter(tensors, op, name, compression, prescale_factor,
                                            postscale_factor, process_set)
    pairs = [compression.compress(t) for t in tensors]
    outs = _GroupedReducescatter.apply(name, op, prescale_factor, postscale_factor, process_set,
                                       *[c for c, _ in pairs])
    return [compression.decompress(o, c) for o, (_, c) in zip(outs, pairs)]
