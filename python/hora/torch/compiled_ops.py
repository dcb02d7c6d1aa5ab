"""hora.torch's collectives as PyTorch operators, for torch.compile.

While torch.compile traces a function (``torch.compiler.is_compiling()``),
``allreduce``, ``allreduce_``, ``grouped_allreduce``, ``grouped_allreduce_``,
``allgather``, ``grouped_allgather``, ``broadcast``, ``broadcast_``,
``alltoall``, ``reducescatter`` and ``grouped_reducescatter`` record an
operator of the "hora" library (``torch.ops.hora.allreduce`` and the others)
in the graph instead of calling the core from Python, which Dynamo cannot
trace (a graph break, and an error under ``fullgraph=True``). The ``*_async``
forms record the same operators and return a :class:`hora.torch.Done`
handle: the collective runs where the graph reaches it, and ``poll`` and
``synchronize`` give its result (no gradient, as eagerly). Each operator
runs the eager function when the graph runs, so its numbers, names and errors
are the eager call's. They are ordered effects: never dropped as dead code
where a rank does not use a result (the others would wait for it), never
moved past one another. Its fake form gives the output's shape (contiguous,
as eagerly): an allgather's, alltoall's and reducescatter's first dimension
is known only when it runs (a dynamic size in the graph). Its backward is
the eager function's rule (:mod:`hora.torch.autograd_ops`), itself made of
these operators. alltoall and the grouped allgather and reducescatter are
not effects themselves (Inductor mistakes an effectful operator with two
outputs of sizes known only as it runs): ``hora::keep``, an effect, gives
each its place among the others (a ticket it takes) and holds its outputs in
the graph (see :mod:`hora.torch.traced`).
``SyncBatchNorm`` records them too (its allgather, whose gradient is the Sum
allreduce, and its check that some rank has a batch, as the graph runs).

Eagerly nothing changes (the check costs about 0.1 us a call). It needs
``torch.library.custom_op`` (torch 2.4 and later); with an older torch
``AVAILABLE`` is False and torch.compile breaks the graph at a collective,
as it does at ``barrier``, ``join`` and the object collectives, which are
not operators.
"""

from typing import List, Optional, Tuple

import torch

from hora.common import basics
from hora.common.process_sets import ProcessSet, global_process_set
from hora.torch import autograd_ops as ao
from hora.torch import collective_ops as co
from hora.torch import reduce_ops as ro
from hora.torch.handles import synchronize
from hora.torch.traced import AVAILABLE


def _set(sid):
    """The process set of id ``sid`` (the operators take ids; -1: a set that
    was not registered when the function was traced)."""
    if sid == 0:
        return global_process_set
    sets = basics.session().process_sets()
    if sid not in sets:
        raise ValueError("the process set given is not registered (never added, or removed): "
                         "call add_process_set(...) on every rank first")
    ps = ProcessSet(sets[sid])
    ps.process_set_id = sid
    return ps


def _new(out, tensor):
    """``out``, contiguous (as the fake forms say: an input's strides are not
    the output's), and a copy where it shares ``tensor``'s memory (an
    operator's output may not alias its input)."""
    if out.numel() and out.untyped_storage().data_ptr() == tensor.untyped_storage().data_ptr():
        return out.clone(memory_format=torch.contiguous_format)
    return out.contiguous()


def _like(tensor):
    """A fake output of ``tensor``'s shape and dtype, contiguous."""
    return tensor.new_empty(tensor.shape)


def _dynamic_rows(tensor):
    """``tensor``'s shape with dimension 0 known only when the graph runs (a
    scalar's gathered rows too)."""
    return (torch.library.get_ctx().new_dynamic_size(),) + tuple(tensor.shape[1:])


def define():
    """Defines the operators (eager bodies, fake forms, backward rules), once:
    hora.torch's ``__init__`` calls it after its modules are loaded."""
    if not AVAILABLE or hasattr(torch.ops.hora, "allreduce"):
        return
    from torch.library import custom_op

    ops = torch.ops.hora

    @custom_op("hora::allreduce", mutates_args=())
    def allreduce_op(tensor: torch.Tensor, name: Optional[str], op: int, prescale: float,
                     postscale: float, process_set: int) -> torch.Tensor:
        return _new(ao.allreduce(tensor.detach(), name=name, op=op, prescale_factor=prescale,
                                 postscale_factor=postscale, process_set=_set(process_set)),
                    tensor)

    allreduce_op.register_fake(lambda tensor, *rest: _like(tensor))

    def allreduce_setup(ctx, inputs, output):
        ctx.args = inputs[2:]

    def allreduce_backward(ctx, grad):
        return (ops.allreduce(grad, None, *ctx.args),) + (None,) * 5

    allreduce_op.register_autograd(allreduce_backward, setup_context=allreduce_setup)

    @custom_op("hora::allreduce_", mutates_args=("tensor",))
    def allreduce_inplace_op(tensor: torch.Tensor, name: Optional[str], op: int,
                             prescale: float, postscale: float, process_set: int) -> None:
        ro.allreduce_(tensor, name=name, op=op, prescale_factor=prescale,
                      postscale_factor=postscale, process_set=_set(process_set))

    allreduce_inplace_op.register_fake(lambda *args: None)

    @custom_op("hora::grouped_allreduce", mutates_args=())
    def grouped_allreduce_op(tensors: List[torch.Tensor], name: Optional[str], op: int,
                             prescale: float, postscale: float,
                             process_set: int) -> List[torch.Tensor]:
        outs = ao.grouped_allreduce([t.detach() for t in tensors], name=name, op=op,
                                    prescale_factor=prescale, postscale_factor=postscale,
                                    process_set=_set(process_set))
        return [_new(o, t) for o, t in zip(outs, tensors)]

    grouped_allreduce_op.register_fake(
        lambda tensors, *rest: [_like(t) for t in tensors])

    def grouped_backward(ctx, grads):
        return (ops.grouped_allreduce(list(grads), None, *ctx.args),) + (None,) * 5

    grouped_allreduce_op.register_autograd(grouped_backward, setup_context=allreduce_setup)

    @custom_op("hora::grouped_allreduce_", mutates_args=("tensors",))
    def grouped_allreduce_inplace_op(tensors: List[torch.Tensor], name: Optional[str], op: int,
                                     prescale: float, postscale: float,
                                     process_set: int) -> None:
        ro.grouped_allreduce_(tensors, name=name, op=op, prescale_factor=prescale,
                              postscale_factor=postscale, process_set=_set(process_set))

    grouped_allreduce_inplace_op.register_fake(lambda *args: None)

    @custom_op("hora::allgather", mutates_args=())
    def allgather_op(tensor: torch.Tensor, name: Optional[str], process_set: int, grad_op: int,
                     rows_per_rank: int) -> torch.Tensor:
        return ao.allgather(tensor.detach(), name=name, process_set=_set(process_set))

    allgather_op.register_fake(lambda tensor, *rest: tensor.new_empty(_dynamic_rows(tensor)))

    @custom_op("hora::allgather_backward", mutates_args=())
    def allgather_backward_op(grad: torch.Tensor, rows: int, scalar: bool, process_set: int,
                              grad_op: int, rows_per_rank: int) -> torch.Tensor:
        # (allgather's rule: the allreduce (Average; Sum for SyncBatchNorm's),
        # this rank's rows of it.)
        ps = _set(process_set)
        reduced = ao.allreduce(grad.detach(), op=grad_op, process_set=ps)
        if rows_per_rank:
            offset = ps.rank() * rows_per_rank
        else:
            every = ao.allgather(torch.tensor([rows], dtype=torch.int64), process_set=ps)
            offset = int(every[:ps.rank()].sum())
        mine = reduced.narrow(0, offset, rows).clone()
        return mine.reshape(()) if scalar else mine

    @allgather_backward_op.register_fake
    def _(grad, rows, scalar, *rest):
        return grad.new_empty(() if scalar else (rows,) + tuple(grad.shape[1:]))

    def allgather_setup(ctx, inputs, output):
        tensor, _, ctx.process_set, ctx.grad_op, ctx.rows_per_rank = inputs
        ctx.scalar = tensor.dim() == 0
        ctx.rows = 1 if ctx.scalar else tensor.shape[0]

    allgather_op.register_autograd(
        lambda ctx, grad: (ops.allgather_backward(grad, ctx.rows, ctx.scalar, ctx.process_set,
                                                  ctx.grad_op, ctx.rows_per_rank),
                           None, None, None, None),
        setup_context=allgather_setup)

    @custom_op("hora::grouped_allgather", mutates_args=())
    def grouped_allgather_op(tensors: List[torch.Tensor], name: Optional[str], process_set: int,
                             after: torch.Tensor) -> List[torch.Tensor]:
        return list(ao.grouped_allgather([t.detach() for t in tensors], name=name,
                                         process_set=_set(process_set)))

    grouped_allgather_op.register_fake(
        lambda tensors, *rest: [t.new_empty(_dynamic_rows(t)) for t in tensors])

    @custom_op("hora::grouped_allgather_backward", mutates_args=())
    def grouped_allgather_backward_op(grads: List[torch.Tensor], rows: List[int],
                                      scalars: List[bool],
                                      process_set: int) -> List[torch.Tensor]:
        # (grouped allgather's rule: the grouped Average allreduce, this
        # rank's rows of each, at the offsets every rank's rows give.)
        ps = _set(process_set)
        reduced = ao.grouped_allreduce([g.detach() for g in grads], op=basics.Average,
                                       process_set=ps)
        every = ao.allgather(torch.tensor([rows], dtype=torch.int64), process_set=ps)
        out = []
        for i, g in enumerate(reduced):
            mine = g.narrow(0, int(every[:ps.rank(), i].sum()), rows[i]).clone()
            out.append(mine.reshape(()) if scalars[i] else mine)
        return out

    @grouped_allgather_backward_op.register_fake
    def _(grads, rows, scalars, process_set):
        return [g.new_empty(() if scalar else (n,) + tuple(g.shape[1:]))
                for g, n, scalar in zip(grads, rows, scalars)]

    def grouped_allgather_setup(ctx, inputs, output):
        tensors, _, ctx.process_set, _ = inputs
        ctx.scalars = [t.dim() == 0 for t in tensors]
        ctx.rows = [1 if t.dim() == 0 else t.shape[0] for t in tensors]

    grouped_allgather_op.register_autograd(
        lambda ctx, grads: (ops.grouped_allgather_backward(list(grads), ctx.rows, ctx.scalars,
                                                           ctx.process_set),
                            None, None, None),
        setup_context=grouped_allgather_setup)

    @custom_op("hora::nonempty_batch", mutates_args=())
    def nonempty_batch_op(total: torch.Tensor) -> torch.Tensor:
        # (SyncBatchNorm's check, as the graph runs: the count is data.)
        if float(total) == 0:
            raise ValueError("SyncBatchNorm: every rank's batch is empty")
        return total.clone()

    nonempty_batch_op.register_fake(lambda total: _like(total))
    nonempty_batch_op.register_autograd(lambda ctx, grad: grad)

    @custom_op("hora::broadcast", mutates_args=())
    def broadcast_op(tensor: torch.Tensor, root_rank: int, name: Optional[str],
                     process_set: int) -> torch.Tensor:
        return _new(ao.broadcast(tensor.detach(), root_rank, name=name,
                                 process_set=_set(process_set)), tensor)

    broadcast_op.register_fake(lambda tensor, *rest: _like(tensor))

    @custom_op("hora::broadcast_backward", mutates_args=())
    def broadcast_backward_op(grad: torch.Tensor, root_rank: int,
                              process_set: int) -> torch.Tensor:
        # (broadcast's rule: the Average allreduce on the root, zeros elsewhere.)
        reduced = ao.allreduce(grad.detach(), op=basics.Average, process_set=_set(process_set))
        return _new(reduced, grad) if basics.rank() == root_rank else grad.new_zeros(grad.shape)

    broadcast_backward_op.register_fake(lambda grad, *rest: _like(grad))

    def broadcast_setup(ctx, inputs, output):
        _, ctx.root_rank, _, ctx.process_set = inputs

    broadcast_op.register_autograd(
        lambda ctx, grad: (ops.broadcast_backward(grad, ctx.root_rank, ctx.process_set),
                           None, None, None),
        setup_context=broadcast_setup)

    @custom_op("hora::broadcast_", mutates_args=("tensor",))
    def broadcast_inplace_op(tensor: torch.Tensor, root_rank: int, name: Optional[str],
                             process_set: int) -> None:
        co.broadcast_(tensor, root_rank, name=name, process_set=_set(process_set))

    broadcast_inplace_op.register_fake(lambda *args: None)

    # (Inductor mistakes an effectful operator's first output, of a size
    # known only as it runs, where it has a second: alltoall is not an
    # effect itself; it takes a ticket from hora::keep before it, and
    # hora::keep after it holds its rows in the graph: traced._ticket.)
    @custom_op("hora::alltoall", mutates_args=())
    def alltoall_op(tensor: torch.Tensor, splits: Optional[torch.Tensor], name: Optional[str],
                    process_set: int, after: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        out, received = _alltoall_now(tensor.detach(), splits, name, process_set)
        return _new(out, tensor), received

    @alltoall_op.register_fake
    def _(tensor, splits, name, process_set, after):
        ctx = torch.library.get_ctx()
        return (tensor.new_empty(_dynamic_rows(tensor)),
                torch.empty((ctx.new_dynamic_size(),), dtype=torch.int32))

    @custom_op("hora::keep", mutates_args=())
    def keep_op(tensor: torch.Tensor) -> torch.Tensor:
        # (Nothing to do: an effect, whose input is kept in the graph and
        # whose output is a ticket: see traced._ticket.)
        return tensor.new_empty(0)

    keep_op.register_fake(lambda tensor: tensor.new_empty(0))

    @custom_op("hora::alltoall_backward", mutates_args=())
    def alltoall_backward_op(grad: torch.Tensor, received: torch.Tensor, rows: int,
                             process_set: int) -> torch.Tensor:
        # (alltoall's rule: the gradient travels back with the received splits.)
        return _new(_alltoall_now(grad.detach(), received, None, process_set)[0], grad)

    @alltoall_backward_op.register_fake
    def _(grad, received, rows, process_set):
        return grad.new_empty((rows,) + tuple(grad.shape[1:]))

    def alltoall_setup(ctx, inputs, output):
        ctx.rows, ctx.process_set = _rows(inputs[0]), inputs[3]
        ctx.save_for_backward(output[1])
        ctx.mark_non_differentiable(output[1])

    def alltoall_backward(ctx, grad, _unused):
        (received,) = ctx.saved_tensors
        return (ops.alltoall_backward(grad, received, ctx.rows, ctx.process_set),
                None, None, None, None)

    alltoall_op.register_autograd(alltoall_backward, setup_context=alltoall_setup)

    @custom_op("hora::reducescatter", mutates_args=())
    def reducescatter_op(tensor: torch.Tensor, name: Optional[str], op: int, prescale: float,
                         postscale: float, process_set: int) -> torch.Tensor:
        return ao.reducescatter(tensor.detach(), name=name, op=op, prescale_factor=prescale,
                                postscale_factor=postscale, process_set=_set(process_set))

    reducescatter_op.register_fake(
        lambda tensor, *rest: tensor.new_empty(_dynamic_rows(tensor)))

    @custom_op("hora::reducescatter_backward", mutates_args=())
    def reducescatter_backward_op(grad: torch.Tensor, rows: int, op: int, prescale: float,
                                  postscale: float, process_set: int) -> torch.Tensor:
        # (reducescatter's rule: the allgather, times the scale factors and,
        # for Sum, the set's size.)
        ps = _set(process_set)
        scale = ao._reducescatter_grad_scale(op, prescale, postscale, ps)
        g = ao.allgather(grad.detach(), process_set=ps)
        return g * scale if scale != 1.0 else g

    @reducescatter_backward_op.register_fake
    def _(grad, rows, *rest):
        return grad.new_empty((rows,) + tuple(grad.shape[1:]))

    def reducescatter_setup(ctx, inputs, output):
        ctx.args = (_rows(inputs[0]),) + tuple(inputs[2:])

    reducescatter_op.register_autograd(
        lambda ctx, grad: (ops.reducescatter_backward(grad, *ctx.args),) + (None,) * 5,
        setup_context=reducescatter_setup)

    @custom_op("hora::grouped_reducescatter", mutates_args=())
    def grouped_reducescatter_op(tensors: List[torch.Tensor], name: Optional[str], op: int,
                                 prescale: float, postscale: float, process_set: int,
                                 after: torch.Tensor) -> List[torch.Tensor]:
        return ao.grouped_reducescatter([t.detach() for t in tensors], name=name, op=op,
                                        prescale_factor=prescale, postscale_factor=postscale,
                                        process_set=_set(process_set))

    grouped_reducescatter_op.register_fake(
        lambda tensors, *rest: [t.new_empty(_dynamic_rows(t)) for t in tensors])

    @custom_op("hora::grouped_reducescatter_backward", mutates_args=())
    def grouped_reducescatter_backward_op(grads: List[torch.Tensor], rows: List[int], op: int,
                                          prescale: float, postscale: float,
                                          process_set: int) -> List[torch.Tensor]:
        # (grouped reducescatter's rule: the grouped allgather, times the
        # scale factors and, for Sum, the set's size.)
        ps = _set(process_set)
        scale = ao._reducescatter_grad_scale(op, prescale, postscale, ps)
        gs = ao.grouped_allgather([g.detach() for g in grads], process_set=ps)
        return [g * scale if scale != 1.0 else g for g in gs]

    @grouped_reducescatter_backward_op.register_fake
    def _(grads, rows, *rest):
        return [g.new_empty((n,) + tuple(g.shape[1:])) for g, n in zip(grads, rows)]

    def grouped_reducescatter_setup(ctx, inputs, output):
        ctx.args = ([_rows(t) for t in inputs[0]],) + tuple(inputs[2:6])

    grouped_reducescatter_op.register_autograd(
        lambda ctx, grads: ((ops.grouped_reducescatter_backward(list(grads), *ctx.args),)
                            + (None,) * 6),
        setup_context=grouped_reducescatter_setup)

    # Collectives are effects, in program order: never dropped where a rank
    # does not use the result (the others would wait for it), nor moved
    # past one another.
    from torch._library.effects import EffectType
    # (The grouped allgather and reducescatter, of sizes known only as they
    # run, are placed as alltoall is, by hora::keep.)
    for op in (allreduce_op, allreduce_inplace_op, grouped_allreduce_op,
               grouped_allreduce_inplace_op, allgather_op, allgather_backward_op,
               grouped_allgather_backward_op, broadcast_op, broadcast_backward_op,
               broadcast_inplace_op, keep_op, alltoall_backward_op, reducescatter_op,
               reducescatter_backward_op, grouped_reducescatter_backward_op):
        op.register_effect(EffectType.ORDERED)


def _rows(tensor):
    """``tensor``'s dimension 0 (0 for a scalar, which the eager call refuses)."""
    return tensor.shape[0] if tensor.dim() else 0


def _alltoall_now(tensor, splits, name, process_set):
    """The eager alltoall's output and received splits (int32), with or
    without ``splits``."""
    out, received = synchronize(co.alltoall_async(tensor, splits, name, _set(process_set)))
    return out, received.to(torch.int32)
