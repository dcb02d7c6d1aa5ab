"""Hora: data-parallel distributed training (the job Horovod does).

Use it through a framework module, exactly like Horovod::

    import hora.torch as hvd
    hvd.init()
    ...

The C++ core is the extension module ``hora._core``; this package is a thin
Python layer over it:

* ``hora.common``  -- the process-wide default Session (init/shutdown/rank...),
  reduction op codes, process sets and the exception types.
* ``hora.torch``   -- Horovod's ``horovod.torch`` API for PyTorch tensors.
* ``hora.tensorflow``, ``hora.keras`` -- Horovod's TensorFlow 2 and Keras APIs
  (Keras 3, on its TensorFlow, JAX and torch backends).
* ``hora.jax``     -- the collectives on JAX arrays and pytrees, an optax wrapper.
* ``hora.numpy``   -- the collectives on NumPy arrays (the layer under the above).
* ``hora.ray``     -- ``RayExecutor``: workers as Ray actors.

Every error Hora raises is a :class:`HoraError` (a ``RuntimeError``); the
subclasses below say what went wrong, and the message names the rank, the
operation, the tensor and the values involved. Horovod's
``HorovodInternalError`` and ``HostsUpdatedInterrupt`` exist under the same
names (see :mod:`hora.common.exceptions`).
"""

__version__ = "0.1.0"

from hora.common.exceptions import (  # noqa: F401  (re-exports)
    AbortedError,
    HoraError,
    HoraTimeoutError,
    HorovodInternalError,
    HostsUpdatedInterrupt,
    InternalError,
    InvalidArgumentError,
    MismatchError,
    NotInitializedError,
    UnavailableError,
    UnimplementedError,
)


def run(func, *args, **kwargs):
    """Horovod's ``horovod.run``: ``func`` on every rank of a job horarun starts
    from this process; the results in rank order (see :mod:`hora.run_func`).
    (Once ``hora.run``, the module of ``python -m hora.run``, is imported, it
    takes this name, and is callable the same way.)"""
    from hora.run_func import run as start

    return start(func, *args, **kwargs)


def cuda_built():
    """True when this build of Hora has CUDA (its GPU kernels and device), whether or not
    this machine has a GPU (as ``hora.torch.cuda_built()``)."""
    from hora.common.basics import cuda_built as built

    return built()


def nccl_built():
    """NCCL's version code of this build's NCCL backend, or 0 (as ``hora.torch.nccl_built()``)."""
    from hora.common.basics import nccl_built as built

    return built()


__all__ = [
    "__version__",
    "cuda_built",
    "nccl_built",
    "run",
    "AbortedError",
    "HoraError",
    "HoraTimeoutError",
    "HorovodInternalError",
    "HostsUpdatedInterrupt",
    "InternalError",
    "InvalidArgumentError",
    "MismatchError",
    "NotInitializedError",
    "UnavailableError",
    "UnimplementedError",
]
