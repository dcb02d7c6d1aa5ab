"""Allgather, broadcast, alltoall, barrier and join on torch tensors:
the asynchronous and in-place forms.

The differentiable synchronous forms (``allgather``, ``grouped_allgather``,
``broadcast``, ``alltoall``) are in :mod:`hora.torch.autograd_ops`. Names and process sets
follow the contract of :mod:`hora.torch.reduce_ops`.

* allgather: concatenates every rank's tensor along dimension 0, in rank
  order. Dimension 0 may differ between ranks; dtype and the other dimensions
  must agree. A 0-dim tensor is gathered as a 1-element vector (where
  Horovod's fails).
* broadcast: every rank receives root's tensor (same dtype and shape everywhere).
* alltoall: rank r sends ``splits[p]`` rows (dimension 0) to each rank p and
  receives, in rank order, the rows every rank sent it. ``splits`` must add up
  to dimension 0 exactly (Horovod's takes a sum below it). ``splits=None``
  splits dimension 0 evenly (it must then divide by size()).
"""

import operator

import torch

from hora.common import basics
from hora.common.exceptions import InvalidArgumentError
from hora.common.process_sets import global_process_set, process_set_id
from hora.torch import traced
from hora.torch import tensor_util as tu
from hora.torch.handles import Done, Handle, synchronize


def _allgather_prepare(tensor, name, kind):
    tensor = tu.check_tensor(tensor, kind, name)
    return tensor.reshape(1) if tensor.dim() == 0 else tensor


def allgather_async(tensor, name=None, process_set=global_process_set):
    """Starts an allgather; ``synchronize(handle)`` returns the concatenation (a new tensor)."""
    if traced.compiling():  # (an operator of the graph; as eagerly, no gradient)
        return Done(traced.allgather(tensor.detach(), name, process_set), name)
    sid = process_set_id(process_set)
    name = tu.check_name(name)
    try:
        tensor = _allgather_prepare(tensor, name, "allgather")
    except Exception as e:
        raise refusing("allgather", name, sid, e)
    h = basics.session().allgather_async(name, tu.capsule(tensor), sid)
    return Handle([h], lambda: tu.from_capsule(h.output(), tensor.dtype), keep=(tensor,))


def grouped_allgather_async(tensors, name=None, process_set=global_process_set):
    """Allgathers a list of tensors as one group; ``synchronize`` returns the tuple."""
    if traced.compiling():
        tensors = tu.check_list(tensors, "grouped_allgather")
        return Done(traced.grouped_allgather([t.detach() for t in tensors], name, process_set)
                    if tensors else (), name)
    sid = process_set_id(process_set)
    name = tu.check_name(name)
    tensors = tu.check_list(tensors, "grouped_allgather")
    try:
        tensors = [_allgather_prepare(t, name, "grouped allgather") for t in tensors]
    except Exception as e:
        raise refusing("grouped_allgather", name, sid, e, len(tensors))
    if not tensors:
        return Handle([], lambda: ())
    hs = basics.session().grouped_allgather_async(name, [tu.capsule(t) for t in tensors], sid)
    return Handle(hs, lambda: tuple(tu.from_capsule(h.output(), t.dtype)
                                 for h, t in zip(hs, tensors)),
                  keep=tensors)


def refusing(collective, name, sid, error, group_size=0):
    """``error``, raised by this rank's checks of a call, after handing the
    call to the core as refused: it fails on every rank, naming this one's
    error, instead of leaving the others waiting (basics.refuse)."""
    basics.refuse(collective, name, sid, error, group_size)
    return error


def check_root(root_rank, what, process_set):
    try:
        root = operator.index(root_rank)
    except TypeError:
        root = None
    if process_set is None or process_set.ranks is None:
        size = basics.size()
        if root is None or not 0 <= root < size:
            raise InvalidArgumentError("%s: root_rank %r is not a rank of this job (size %d)"
                                       % (what, root_rank, size))
    elif root not in process_set.ranks:
        raise InvalidArgumentError("%s: root_rank %r is not in %r" % (what, root_rank, process_set))
    return root


def valid_root(root_rank, process_set):
    """``root_rank`` as an int where it is a rank of ``process_set``, else None."""
    try:
        return check_root(root_rank, "broadcast", process_set)
    except InvalidArgumentError:
        return None


# Outputs of this size or more come from Hora's pool (OutputPool::kMinPooledBytes).
_POOLED_BYTES = 64 << 10


def broadcast_async_(tensor, root_rank, name=None, process_set=global_process_set):
    """Starts broadcasting root's ``tensor`` into ``tensor`` on every rank (in place);
    ``synchronize(handle)`` returns ``tensor``."""
    if traced.compiling():
        return Done(broadcast_(tensor, root_rank, name, process_set), name)
    sid = process_set_id(process_set)
    name = tu.check_name(name)
    try:
        tensor = tu.check_tensor(tensor, "broadcast", name, inplace=True)
        root = check_root(root_rank, tu.describe("broadcast", name), process_set)
    except Exception as e:
        raise refusing("broadcast", name, sid, e)
    h = basics.session().broadcast_async(name, tu.capsule(tensor), root, sid)
    return Handle([h], lambda: tensor, keep=(tensor,))


def broadcast_async(tensor, root_rank, name=None, process_set=global_process_set):
    """Starts a broadcast into a new tensor (``tensor`` is not modified)."""
    if traced.compiling():
        return Done(traced.broadcast(tensor.detach(), root_rank, name, process_set), name)
    sid = process_set_id(process_set)
    name = tu.check_name(name)
    try:
        src = tu.check_tensor(tensor, "broadcast", name)  # (contiguous)
        root = check_root(root_rank, tu.describe("broadcast", name), process_set)
    except Exception as e:
        raise refusing("broadcast", name, sid, e)
    if src.device.type == "cpu" and src.numel() * src.element_size() >= _POOLED_BYTES:
        # A large host output from Hora's pool (memory already faulted in, when a freed
        # output of about its size left it there); only the root's needs its data.
        output = tu.from_capsule(basics.session().new_output(tu.capsule(src.detach())),
                                 tensor.dtype)
        if basics.rank() == root:
            output.copy_(tensor.detach())
    else:
        output = tensor.detach().clone(memory_format=torch.contiguous_format)
    return broadcast_async_(output, root_rank, name, process_set)


def broadcast_(tensor, root_rank, name=None, process_set=global_process_set):
    """Broadcasts root's ``tensor`` in place on every rank; returns ``tensor``."""
    if traced.compiling():  # (torch.compile records an operator)
        return traced.broadcast_(tensor, root_rank, name, process_set)
    return synchronize(broadcast_async_(tensor, root_rank, name, process_set))


def splits_list(splits, what):
    """``splits`` as a list of ints. Their count (one per rank) and signs
    are the core's to check: splits computed from a rank's data may be wrong
    on one rank only, and the core then fails the call on every rank, naming
    that rank's (a check here would fail it alone, and the others would wait
    for it)."""
    if splits is None:
        return None
    if isinstance(splits, torch.Tensor):
        splits = splits.tolist()
    try:
        return [int(s) for s in splits]
    except (TypeError, ValueError):
        raise TypeError("%s: splits must be a sequence of ints or an int tensor" % what) from None


def alltoall_async(tensor, splits=None, name=None, process_set=global_process_set):
    """Starts an alltoall. ``synchronize(handle)`` returns ``(output, received_splits)``:
    the rows received from every rank in rank order, and an int32 tensor of how
    many came from each rank (Horovod's form)."""
    if traced.compiling():
        return Done(traced.alltoall(tensor.detach(), splits, name, process_set, pair=True), name)
    sid = process_set_id(process_set)
    name = tu.check_name(name)
    what = tu.describe("alltoall", name)
    try:
        tensor = tu.check_tensor(tensor, "alltoall", name)
        if tensor.dim() == 0:
            raise InvalidArgumentError("%s: alltoall needs at least one dimension" % what)
        sp = splits_list(splits, what)
    except Exception as e:
        raise refusing("alltoall", name, sid, e)
    h = basics.session().alltoall_async(name, tu.capsule(tensor), sp, sid)

    def finish():
        recv = torch.tensor(h.received_splits(), dtype=torch.int32)
        return tu.from_capsule(h.output(), tensor.dtype), recv

    return Handle([h], finish, keep=(tensor,))


def barrier(process_set=global_process_set):
    """Returns when every rank (of ``process_set``) has called barrier()."""
    basics.session().barrier(process_set_id(process_set))


def join(device=-1):
    """Horovod's join: this rank is out of data.

    Until every rank has joined, this rank takes part in the other ranks'
    allreduces with identity values: 0 for Sum and Average (Average still
    divides by every rank of the job, as Horovod's), 1 for Product, +-inf or
    the dtype's limits for Min and Max (Horovod uses zeros there too, which
    makes the Min of positive values 0; Hora's Min, Max and Product are over
    the ranks with data). Other collectives submitted meanwhile fail with an
    error naming the joined ranks. Returns the last rank to join.
    ``device`` is accepted for Horovod's signature and not needed: a joined
    rank takes part in the allreduces of GPU tensors as in those of CPU ones.
    """
    del device
    return basics.session().join()
