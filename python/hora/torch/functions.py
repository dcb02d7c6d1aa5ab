"""Helpers over the collectives: model and optimizer state, Python objects.

* ``broadcast_parameters(params, root_rank)``: root's values into every
  rank's tensors, in place (a ``state_dict()``, ``named_parameters()`` or a
  list of tensors or (name, tensor) pairs).
* ``broadcast_optimizer_state(optimizer, root_rank, model=None)``: every
  rank's optimizer gets root's ``state_dict()`` (state and hyper-parameters;
  an optimizer with no state, plain SGD on torch 2, is left as it is).
* ``broadcast_object(obj, root_rank)`` / ``allgather_object(obj)``: any
  object ``torch.save`` pickles, through cloudpickle where it is installed
  (as Horovod's, which requires it: lambdas and local functions go too),
  sent as a uint8 tensor after its size.

Objects are unpickled only from peers of this job (the core authenticates
every connection with the job secret).
"""

import ctypes
import io
import pickle

import torch

try:
    import cloudpickle as _cloudpickle
except ImportError:  # (optional: without it, what plain pickle takes)
    _cloudpickle = None

from hora.common import basics
from hora.common.exceptions import InvalidArgumentError
from hora.common.process_sets import global_process_set, process_set_id
from hora.common.process_sets import process_set_ranks as _ranks_of
from hora.torch import collective_ops as co
from hora.torch import tensor_util as tu
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
    # Every entry is looked at before any is sent: one that is no tensor
    # leaves nothing in flight (a retry met its own broadcasts).
    items = [(name, p) for name, p in items if p is not None]
    for name, p in items:
        if not isinstance(p, torch.Tensor):
            raise ValueError("broadcast_parameters: %r is a %s, not a tensor"
                             % (name, type(p).__name__))
    handles = []
    try:
        for name, p in items:
            target = p.detach()
            tmp = target if target.is_contiguous() else target.contiguous()
            h = co.broadcast_async_(tmp, root_rank,
                                    None if name is None else "broadcast.%s" % name, process_set)
            handles.append((h, target, tmp))
    except Exception:  # (those sent finish first: nothing is left in flight)
        for h, _, _ in handles:
            try:
                synchronize(h)
            except Exception:
                pass
        raise
    for h, target, tmp in handles:
        synchronize(h)
        if tmp is not target:
            target.copy_(tmp)


def _sparse_params(model):
    """The parameters of ``model``'s sparse embeddings (their gradients are sparse)."""
    if model is None:
        return set()
    out = set()
    for m in model.modules():
        if isinstance(m, (torch.nn.Embedding, torch.nn.EmbeddingBag)) and m.sparse:
            out.update(m.parameters())
    return out


def _initialize_state(optimizer, model, keep):
    """Horovod's set-up of an empty optimizer state: zero gradients (sparse where
    the optimizer or the model makes them sparse) and one local step, so that
    every parameter has its state entries before the broadcast. With ``keep``,
    returns the parameters as they were before that step (copies on the CPU),
    to be put back (see broadcast_optimizer_state)."""
    kept = [(p, p.detach().to("cpu", copy=True))
            for g in optimizer.param_groups for p in g["params"]] if keep else None
    sparse = _sparse_params(model)
    all_sparse = isinstance(optimizer, torch.optim.SparseAdam)
    for group in optimizer.param_groups:
        for p in group["params"]:
            if not p.requires_grad:
                continue
            if all_sparse or p in sparse:
                # Row 0 of zeros, in an embedding gradient's layout (sparse over
                # dimension 0): an empty one trips torch's SparseAdam. On the
                # parameter's device: torch refuses a gradient on another.
                rows = min(1, p.shape[0])
                p.grad = tu.sparse_coo(
                    torch.zeros((1, rows), dtype=torch.int64, device=p.device),
                    torch.zeros((rows,) + tuple(p.shape[1:]), dtype=p.dtype, device=p.device),
                    p.shape)
            else:
                p.grad = torch.zeros_like(p)
    # A DistributedOptimizer's own step would allreduce: take the wrapped one's.
    step = getattr(optimizer, "_local_step", optimizer.step)
    step()
    return kept


def broadcast_optimizer_state(optimizer, root_rank, model=None, process_set=global_process_set):
    """Makes every rank's ``optimizer`` state equal to root's (``state_dict``:
    per-parameter state and hyper-parameters such as ``lr``). Every rank's
    optimizer must have the same parameter groups (same parameter counts, in
    the same order).

    As in Horovod, an optimizer with no state yet (before its first step) is
    first given one: every gradient is set to zero and one local step taken
    (so zero-gradient effects, such as weight decay, apply). Where root's
    optimizer had a state of its own (a run resumed from root's checkpoint),
    a rank that took that set-up step gets its parameters back as they were
    before it (Horovod's left them moved by it, apart from root's).
    An optimizer that has no state even then (plain SGD) is left as it is,
    its hyper-parameters included (Horovod's returns there too). ``model``:
    the model, whose sparse embeddings get sparse zero gradients for that
    step. ``torch.optim.LBFGS`` is refused (its state cannot be
    broadcast)."""
    process_set_id(process_set)
    if isinstance(optimizer, torch.optim.LBFGS):
        raise ValueError("broadcast_optimizer_state: torch.optim.LBFGS is not supported "
                         "(its state holds closures' history, not per-parameter tensors)")
    root = basics.rank() == root_rank
    set_up = not optimizer.state_dict()["state"]
    kept = _initialize_state(optimizer, model, keep=not root) if set_up else None
    if set_up and not optimizer.state_dict()["state"]:
        return  # (a stateless optimizer, plain SGD: nothing to send, as Horovod's)
    payload = (optimizer.state_dict(), set_up) if root else None
    state, root_set_up = broadcast_object(payload, root_rank, name="broadcast_optimizer_state",
                                          process_set=process_set)
    if kept is not None and not root_set_up:
        with torch.no_grad():
            for p, before in kept:
                p.copy_(before)
    if not root:
        # load_state_dict makes new param_group dicts: root's options go into
        # the ones this optimizer had, which others hold (a scheduler made on
        # the optimizer it wraps), as Horovod's writes them in place.
        groups = list(optimizer.param_groups)
        optimizer.load_state_dict(state)
        for old, new in zip(groups, optimizer.param_groups):
            old.update(new)
        optimizer.param_groups = groups


def _dumps(obj):
    # cloudpickle where installed (Horovod's, which requires it): lambdas and
    # local functions go too; plain pickle reads what it writes.
    buf = io.BytesIO()
    torch.save(obj, buf, pickle_module=_cloudpickle or pickle,
               pickle_protocol=pickle.HIGHEST_PROTOCOL)
    return torch.frombuffer(bytearray(buf.getvalue()), dtype=torch.uint8)


def _loads(t):
    # (Bytes through ctypes, not t.numpy(): torch from PyPI comes without NumPy.)
    # weights_only=False: torch 2.6 made True the default, which refuses any
    # object but tensors; what is unpickled here comes from the job's own,
    # authenticated ranks.
    data = ctypes.string_at(t.data_ptr(), t.numel()) if t.numel() else b""
    return torch.load(io.BytesIO(data), map_location="cpu", weights_only=False)


def broadcast_object(obj, root_rank=0, name=None, process_set=global_process_set):
    """Returns root's ``obj`` on every rank (pickled; tensors inside stay tensors,
    and come back on the CPU on the other ranks: a GPU of root's is not theirs).

    Two collectives, "<name>.size" and "<name>.data"; without ``name`` they are
    named "broadcast_object" (not from a per-rank counter, which a call that
    failed on one rank would put out of step; nor, as Horovod's, from
    ``type(obj)``, which differs where non-root ranks pass None).
    """
    process_set_id(process_set)
    if name is None:
        name = "broadcast_object"
    is_root = basics.rank() == root_rank
    payload, error = None, None
    if is_root:
        try:
            payload = _dumps(obj)
        except Exception as e:  # (the others learn it from the size: -1)
            error = e
    size = torch.tensor([payload.numel() if payload is not None else -1], dtype=torch.int64)
    co.broadcast_(size, root_rank, name + ".size", process_set)
    if error is not None:
        raise error
    n = int(size.item())
    if n < 0:
        raise InvalidArgumentError(_unpicklable("broadcast_object", name, [root_rank]))
    if not is_root:
        payload = torch.empty(n, dtype=torch.uint8)
    co.broadcast_(payload, root_rank, name + ".data", process_set)
    return obj if is_root else _loads(payload)


def _unpicklable(what, name, ranks):
    """The error of the ranks whose object pickled, where some did not."""
    return ("%s '%s': rank(s) %s could not pickle their object (the error is raised there); "
            "nothing was sent" % (what, name, ", ".join(str(r) for r in ranks)))


def allgather_object(obj, name=None, process_set=global_process_set):
    """Returns the list of every rank's ``obj``, in rank order (pickled).

    Two collectives, "<name>.size" and "<name>.data"; without ``name`` they
    are named "allgather_object" (Horovod names them by ``type(obj)``, which
    differs where ranks pass objects of different types, say None on some:
    their calls would never meet).
    """
    process_set_id(process_set)
    if name is None:
        name = "allgather_object"
    payload, error = None, None
    try:
        payload = _dumps(obj)
    except Exception as e:  # (the others learn it from the size: -1)
        error = e
    size = torch.tensor([payload.numel() if payload is not None else -1], dtype=torch.int64)
    sizes = synchronize(co.allgather_async(size, name + ".size", process_set))
    if error is not None:
        raise error
    failed = [r for r, n in zip(_ranks_of(process_set), sizes.tolist()) if n < 0]
    if failed:
        raise InvalidArgumentError(_unpicklable("allgather_object", name, failed))
    data = synchronize(co.allgather_async(payload, name + ".data", process_set))
    out, offset = [], 0
    for n in sizes.tolist():
        out.append(_loads(data[offset:offset + n]))
        offset += n
    return out
