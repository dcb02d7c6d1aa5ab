"""Checking torch tensors and handing them to ``hora._core`` as DLPack capsules.

Contract of what the core accepts from this module:

* dense (strided) CPU or CUDA tensors, contiguous, of dtype uint8, int8,
  int16, int32, int64, float16, bfloat16, float32, float64, or bool (passed as
  a uint8 view of the same memory, so in-place results are valid bools);
* a tensor that requires grad is passed detached (same memory);
* a CUDA tensor is handed over as itself: the core asks for its capsule with
  its own stream (DLPack's stream argument), and torch makes that stream wait
  for the work queued on its current stream; the host does not wait. Results
  are on the device when the handle is done.

Anything else is refused here with a message naming the operation and the
tensor: tensors of other devices, sparse tensors, unsupported dtypes, and
non-contiguous tensors for in-place operations (out-of-place operations take a
contiguous copy instead, like Horovod).
"""

import torch
from torch.utils.dlpack import from_dlpack, to_dlpack

from hora.common import basics
from hora.common.exceptions import InvalidArgumentError, UnimplementedError

SUPPORTED_DTYPES = (
    torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
    torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.bool,
)
_SUPPORTED = frozenset(SUPPORTED_DTYPES)
# What travels as itself (bool goes as uint8).
WIRE_DTYPES = _SUPPORTED - {torch.bool}


def describe(op, name):
    """"allreduce 'w'" or "allreduce (unnamed)", for error messages."""
    return "%s '%s'" % (op, name) if name else "%s (unnamed)" % op


def check_name(name):
    """None -> "" (the core then generates the same name on every rank)."""
    if name is None:
        return ""
    if not isinstance(name, str):
        raise TypeError("name must be a str or None, got %s" % type(name).__name__)
    return basics.utf8_name(name)


def check_tensor(tensor, op, name, inplace=False):
    """Returns the tensor to hand to the core for ``op`` (see the module contract).

    For out-of-place operations a non-contiguous tensor is copied; for
    in-place ones it is an InvalidArgumentError.
    """
    # (The common case first, cheaply: a dense CPU or CUDA tensor of a
    # supported dtype, contiguous. A call costs a few microseconds in all.)
    if (isinstance(tensor, torch.Tensor) and tensor.layout is torch.strided
            and tensor.dtype in _SUPPORTED and (tensor.is_cpu or tensor.is_cuda)
            and tensor.is_contiguous()):
        return tensor
    what = describe(op, name)
    if not isinstance(tensor, torch.Tensor):
        raise TypeError("%s: expected a torch.Tensor, got %s" % (what, type(tensor).__name__))
    if tensor.device.type not in ("cpu", "cuda"):
        raise UnimplementedError("%s: hora takes CPU and CUDA tensors, not tensors on %s"
                                 % (what, tensor.device))
    if tensor.layout != torch.strided:
        raise InvalidArgumentError("%s: %s tensors are not supported; use .to_dense() (or, "
                                   "for a sparse COO tensor, sparse_allreduce_async)"
                                   % (what, tensor.layout))
    if tensor.dtype not in SUPPORTED_DTYPES:
        raise InvalidArgumentError(
            "%s: dtype %s is not supported (supported: %s)"
            % (what, tensor.dtype, ", ".join(str(d).replace("torch.", "") for d in SUPPORTED_DTYPES)))
    if inplace:
        raise InvalidArgumentError(
            "%s: in-place operations need a contiguous tensor (shape %s, strides %s); "
            "use t = t.contiguous() first, or the out-of-place form"
            % (what, tuple(tensor.shape), tensor.stride()))
    return tensor.contiguous()


def capsule(tensor):
    """What the core takes for ``tensor`` (bool as uint8): a DLPack capsule over its memory,
    consumed once; for a CUDA tensor the tensor itself, whose ``__dlpack__`` the core calls
    with its own stream, so that the tensor's pending work on torch's current stream comes
    first (on the GPU, without a host wait).
    """
    t = tensor.detach() if tensor.requires_grad else tensor
    if t.dtype == torch.bool:
        t = t.view(torch.uint8)
    return t if t.is_cuda else to_dlpack(t)


def from_capsule(cap, dtype):
    """The torch tensor over an output capsule of the core (zero copy)."""
    out = from_dlpack(cap)
    if dtype == torch.bool:
        out = out.view(torch.bool)
    return out


def wire_op(dtypes, op, prescale, postscale, kind, name):
    """The op to run on the wire for tensors of ``dtypes``.

    bool travels as uint8 0/1, so logical OR (Sum, Max) becomes Max and
    logical AND (Min, Product) becomes Min; Average and scale factors are
    refused for bool, as the core does.
    """
    if torch.bool not in dtypes:
        return op
    what = describe(kind, name)
    if any(d != torch.bool for d in dtypes) and op not in (basics.Min, basics.Max):
        raise InvalidArgumentError("%s: bool tensors can be grouped with other dtypes only for "
                                   "Min or Max" % what)
    if op == basics.Average or prescale != 1.0 or postscale != 1.0:
        raise InvalidArgumentError("%s: bool tensors accept Sum, Min, Max and Product "
                                   "without scale factors (got %s, prescale %s, postscale %s)"
                                   % (what, basics.op_name(op), prescale, postscale))
    return basics.Max if op in (basics.Sum, basics.Max) else basics.Min


def check_list(tensors, what):
    """``tensors`` as a list; TypeError for a tensor or a non-sequence."""
    if isinstance(tensors, torch.Tensor) or not isinstance(tensors, (list, tuple)):
        raise TypeError("%s: expected a list of tensors, got %s" % (what, type(tensors).__name__))
    return list(tensors)


def sparse_coo(indices, values, size):
    """A sparse COO tensor, unchecked (saying so keeps torch 2 from warning at
    every call that its checks are off; torch 1.13 has no such argument)."""
    try:
        return torch.sparse_coo_tensor(indices, values, size, check_invariants=False)
    except TypeError:
        return torch.sparse_coo_tensor(indices, values, size)
