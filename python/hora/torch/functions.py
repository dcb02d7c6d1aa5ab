"""Helpers over the collectives: model and optimizer state, Python objects.

* ``broadcast_parameters(params, root_rank)``: root's values into every
  rank's tensors, in place (a ``state_dict()``, ``named_parameters()`` or a
  list of tensors or (name, tensor) pairs).
* ``broadcast_optimizer_state(optimizer, root_rank)``: every rank's
  optimizer gets root's ``state_dict()`` (state and hyper-parameters).
* ``broadcast_object(obj, root_rank)`` / ``allgather_object(obj)``: any
  picklable object, sent as a uint8 tensor after its size.

Objects are unpickled only from peers of this job (the core authenticates
every connection with the job secret).
"""

import io
import pickle

import torch

from hora.common import basics
from hora.common.process_sets import global_process_set, process_set_id
from hora.torch import collective_ops as co
from hora.torch.handles import synchronize


def broadcast_parameters(params, root_rank, process_set=global_process_set):
    """Broadcasts root's parameters (or buffers) into every rank's tensors, in place.

    ``params``: a dict (``model.state_dict()``), or a sequence of tensors or of
    (name, tensor) pairs (``model.named_parameters()``). Names, when given,
    name the collectives ("broadcast.<name>"); every rank must pass the same
    structure. ``None`` values are skipped.
    """
    process_set_id(process_set)
    if isinstance(params, dict):
        items = sorted(params.items(), key=lambda kv: str(kv[0]))
    else:
        try:
            items = [p if isinstance(p, tuple) else (None, p) for p in params]
        except TypeError:
            raise ValueError("invalid params of type: %s" % type(params).__name__) from None
    handles = []
    for name, p in items:
        if p is None:
            continue
        if not isinstance(p, torch.Tensor):
            raise ValueError("broadcast_parameters: %r is a %s, not a tensor"
                             % (name, type(p).__name__))
        target = p.detach()
        tmp = target if target.is_contiguous() else target.contiguous()
        h = co.broadcast_async_(tmp, root_rank, None if name is None else "broadcast.%s" % name,
                                process_set)
        handles.append((h, target, tmp))
    for h, target, tmp in handles:
        synchronize(h)
        if tmp is not target:
            target.copy_(tmp)


def broadcast_optimizer_state(optimizer, root_rank, process_set=global_process_set):
    """Makes every rank's ``optimizer`` state equal to root's (``state_dict`` and
    hyper-parameters such as ``lr``). Every rank's optimizer must have the same
    parameter groups (same parameter counts, in the same order)."""
    process_set_id(process_set)
    state = optimizer.state_dict() if basics.rank() == root_rank else None
    state = broadcast_object(state, root_rank, name="broadcast_optimizer_state",
                             process_set=process_set)
    if basics.rank() != root_rank:
        optimizer.load_state_dict(state)


def _dumps(obj):
    buf = io.BytesIO()
    torch.save(obj, buf, pickle_protocol=pickle.HIGHEST_PROTOCOL)
    return torch.frombuffer(bytearray(buf.getvalue()), dtype=torch.uint8)


def _loads(t):
    return torch.load(io.BytesIO(t.numpy().tobytes()), map_location="cpu")


def broadcast_object(obj, root_rank=0, name=None, process_set=global_process_set):
    """Returns root's ``obj`` on every rank (pickled; tensors inside stay tensors).

    Two collectives, named "<name>.size" and "<name>.data" when ``name`` is given.
    """
    process_set_id(process_set)
    is_root = basics.rank() == root_rank
    payload = _dumps(obj) if is_root else None
    size = torch.tensor([payload.numel() if is_root else 0], dtype=torch.int64)
    co.broadcast_(size, root_rank, None if name is None else name + ".size", process_set)
    if not is_root:
        payload = torch.empty(int(size.item()), dtype=torch.uint8)
    co.broadcast_(payload, root_rank, None if name is None else name + ".data", process_set)
    return obj if is_root else _loads(payload)


def allgather_object(obj, name=None, process_set=global_process_set):
    """Returns the list of every rank's ``obj``, in rank order (pickled)."""
    process_set_id(process_set)
    payload = _dumps(obj)
    sizes = synchronize(co.allgather_async(torch.tensor([payload.numel()], dtype=torch.int64),
                                           None if name is None else name + ".size", process_set))
    data = synchronize(co.allgather_async(payload, None if name is None else name + ".data",
                                          process_set))
    out, offset = [], 0
    for n in sizes.tolist():
        out.append(_loads(data[offset:offset + n]))
        offset += n
    return out
