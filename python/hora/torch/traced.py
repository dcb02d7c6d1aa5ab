"""What hora.torch's synchronous collectives do while torch.compile traces
them: record Hora's operators (:mod:`hora.torch.compiled_ops` defines them)
instead of calling the core from Python, which Dynamo cannot trace.

``compiling()`` is the public functions' check (about 0.1 us eagerly); the
functions here take the arguments those functions already checked.
"""

import torch

from hora.common import basics
from hora.common.process_sets import ProcessSet, process_set_id

def _available():
    """torch.library.custom_op, and a way to mark an operator's effect as
    ordered (else a collective whose result one rank does not use would be
    dropped there as dead code, and the others would wait for it)."""
    if not (hasattr(getattr(torch, "library", None), "custom_op")
            and hasattr(getattr(torch, "compiler", None), "is_compiling")):
        return False
    try:
        from torch._library.custom_ops import CustomOpDef
        from torch._library.effects import EffectType
    except ImportError:
        return False
    return hasattr(CustomOpDef, "register_effect") and hasattr(EffectType, "ORDERED")


AVAILABLE = _available()


if AVAILABLE:
    # Whether torch.compile is tracing the caller: torch's own function
    # (which Dynamo reads as True), not a wrapper: a call less, eagerly.
    compiling = torch.compiler.is_compiling
else:
    def compiling():
        """False: torch older than 2.4 has no operators for Dynamo to record."""
        return False


def _sid(process_set):
    """``process_set``'s id, as ``process_set_id`` gives it, but -1 for a set
    that is not registered: the operator refuses it as it runs (an error
    raised while Dynamo traces would reach the user as Dynamo's)."""
    if process_set is None:
        return 0
    if not isinstance(process_set, ProcessSet):
        return process_set_id(process_set)  # (TypeError, as eagerly)
    if process_set.process_set_id is not None:
        return process_set.process_set_id
    return 0 if process_set.ranks == list(range(basics.size())) else -1


def allreduce(tensor, op, name, compression, prescale, postscale, process_set):
    compressed, cctx = compression.compress(tensor)
    out = torch.ops.hora.allreduce(compressed, name, op, float(prescale), float(postscale),
                                   _sid(process_set))
    return compression.decompress(out, cctx)


def allreduce_(tensor, op, name, prescale, postscale, process_set):
    torch.ops.hora.allreduce_(tensor, name, op, float(prescale), float(postscale),
                              _sid(process_set))
    return tensor


def grouped_allreduce(tensors, op, name, compression, prescale, postscale, process_set):
    pairs = [compression.compress(t) for t in tensors]
    outs = torch.ops.hora.grouped_allreduce([c for c, _ in pairs], name, op, float(prescale),
                                            float(postscale), _sid(process_set))
    return [compression.decompress(o, c) for o, (_, c) in zip(outs, pairs)]


def grouped_allreduce_(tensors, op, name, prescale, postscale, process_set):
    torch.ops.hora.grouped_allreduce_(list(tensors), name, op, float(prescale), float(postscale),
                                      _sid(process_set))
    return list(tensors)


def allgather(tensor, name, process_set, grad_op=None, rows_per_rank=0):
    """(``grad_op``: the gradient's allreduce, Average unless given;
    ``rows_per_rank``: every rank's dimension 0 where known equal, else 0.)"""
    return torch.ops.hora.allgather(tensor, name, _sid(process_set),
                                    basics.Average if grad_op is None else grad_op,
                                    rows_per_rank)


def grouped_allgather(tensors, name, process_set):
    outs = torch.ops.hora.grouped_allgather(list(tensors), name, _sid(process_set),
                                            _ticket(tensors[0]))
    _keep(outs)
    return tuple(outs)


# An operator whose outputs' sizes are known only as it runs (alltoall, the
# grouped allgather and reducescatter) is not an effect itself (see
# compiled_ops); these give it its place among the effects, on every rank
# alike (Inductor orders the rest by data only, and ranks whose shapes
# differ compile different graphs): it takes a ticket, the output of an
# effect before it, and its outputs are kept by an effect after it.

def _ticket(tensor):
    return torch.ops.hora.keep(tensor.detach())


def _keep(outs):
    for out in outs:
        torch.ops.hora.keep(out.detach())


def nonempty_batch(total):
    """SyncBatchNorm's every-rank sample count, checked as the graph runs."""
    return torch.ops.hora.nonempty_batch(total)


def broadcast(tensor, root_rank, name, process_set):
    return torch.ops.hora.broadcast(tensor, int(root_rank), name, _sid(process_set))


def broadcast_(tensor, root_rank, name, process_set):
    torch.ops.hora.broadcast_(tensor, int(root_rank), name, _sid(process_set))
    return tensor


def alltoall(tensor, splits, name, process_set, pair=False):
    """The rows received, and with ``splits`` given (or ``pair``: the
    asynchronous form's result) the received splits too."""
    given = splits is not None
    if given and not isinstance(splits, torch.Tensor):
        splits = torch.tensor(list(splits), dtype=torch.int32)
    out, received = torch.ops.hora.alltoall(tensor, splits, name, _sid(process_set),
                                            _ticket(tensor))
    _keep((out,))
    return (out, received) if given or pair else out


def reducescatter(tensor, op, name, compression, prescale, postscale, process_set):
    compressed, cctx = compression.compress(tensor)
    out = torch.ops.hora.reducescatter(compressed, name, op, float(prescale), float(postscale),
                                       _sid(process_set))
    return compression.decompress(out, cctx)


def grouped_reducescatter(tensors, op, name, compression, prescale, postscale, process_set):
    pairs = [compression.compress(t) for t in tensors]
    outs = torch.ops.hora.grouped_reducescatter([c for c, _ in pairs], name, op, float(prescale),
                                                float(postscale), _sid(process_set),
                                                _ticket(pairs[0][0]))
    _keep(outs)
    return [compression.decompress(o, c) for o, (_, c) in zip(outs, pairs)]
