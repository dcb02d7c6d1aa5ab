"""Hora for PyTorch, with Horovod's API: ``import hora.torch as hvd``.

A Horovod user changes one import line::

    import hora.torch as hvd
    hvd.init()
    opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)

and launches with ``horarun -np 4 python train.py`` (or mpirun, srun, torchrun).

Where things are:

* job: ``init, shutdown, is_initialized, rank, size, local_rank, local_size,
  cross_rank, cross_size`` (:mod:`hora.common.basics`);
* ops: ``Average, Sum, Min, Max, Product, Adasum`` (Adasum: allreduce of
  floating tensors over a power-of-two number of ranks, and
  ``DistributedOptimizer(op=Adasum)``);
* collectives, async and in-place (:mod:`.reduce_ops`, :mod:`.collective_ops`),
  differentiable synchronous forms (:mod:`.autograd_ops`), ``poll`` and
  ``synchronize`` (:mod:`.handles`);
* ``broadcast_parameters, broadcast_optimizer_state, broadcast_object,
  allgather_object`` (:mod:`.functions`);
* ``DistributedOptimizer`` (:mod:`.optimizer`), ``Compression``,
  ``SyncBatchNorm``, ``ProcessSet`` (``add_process_set``, ``remove_process_set``;
  every collective takes ``process_set=``);
* Horovod's module paths: ``hora.torch.mpi_ops``, ``hora.torch.elastic``
  (``run``, ``TorchState``, ``ElasticSampler``; with horarun ``--min-np``),
  ``hora.common.exceptions`` (``HorovodInternalError``,
  ``HostsUpdatedInterrupt``).

Differences from Horovod, by design or not yet done:

* CUDA tensors go through NCCL, the device windows or pinned host memory
  (docs/guide/gpu.md); Hora's stream waits for torch's current stream on the GPU
  (DLPack's stream argument). This has run on one H200, not yet on a machine
  with a GPU per rank; CI tests it on Hora's host device;
* handles are objects, not ints (``poll``/``synchronize`` take them the same way);
* ``alltoall`` returns the tensor, or ``(tensor, received_splits)`` when
  ``splits`` is given, as current Horovod does;
* joined ranks count as identity values for Min, Max and Product (Horovod:
  zeros); Average divides by size() in both;
* ``broadcast_object`` and ``allgather_object`` without a name are named
  "broadcast_object" and "allgather_object" (Horovod: ``type(obj).__name__``,
  which differs on ranks that pass None).
"""

# The job, the ops and the collectives: Horovod's horovod.torch.mpi_ops
# names, kept in one list there.
from hora.torch.mpi_ops import *  # noqa: F401,F403
from hora.common.basics import engine_counters  # noqa: F401
from hora.common.exceptions import *  # noqa: F401,F403
from hora.torch.compression import Compression  # noqa: F401
from hora.torch.functions import (  # noqa: F401
    allgather_object,
    broadcast_object,
    broadcast_optimizer_state,
    broadcast_parameters,
)
from hora.torch.handles import Done, Handle  # noqa: F401
from hora.torch.optimizer import DistributedOptimizer  # noqa: F401
from hora.torch.sync_batch_norm import SyncBatchNorm  # noqa: F401
from hora.torch import elastic, mpi_ops  # noqa: F401,E402  (Horovod's module paths)
from hora.torch import compiled_ops as _compiled_ops  # noqa: E402

_compiled_ops.define()  # (the operators torch.compile records: hora.torch.compiled_ops)
