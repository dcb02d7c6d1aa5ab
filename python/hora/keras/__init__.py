"""Hora for Keras 3, with Horovod's Keras API: ``import hora.keras as hvd``.

::

    hvd.init()
    opt = hvd.DistributedOptimizer(keras.optimizers.SGD(0.01 * hvd.size()))
    model.compile(optimizer=opt, loss=...)
    model.fit(x, y, callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0),
                               hvd.callbacks.MetricAverageCallback()])

Beyond Horovod, everything here works on each of Keras 3's backends:
TensorFlow (gradients reduced by :mod:`hora.tensorflow`, inside the
compiled ``tf.function`` too), JAX (by :mod:`hora.jax`, inside the jitted
step) and PyTorch (by :mod:`hora.torch`). The callbacks read and assign
variables through NumPy, so they are the same on every backend.

* ``DistributedOptimizer``, ``PartialDistributedOptimizer`` (:mod:`.optimizer`);
* ``callbacks``: ``BroadcastGlobalVariablesCallback``,
  ``MetricAverageCallback``, ``LearningRateWarmupCallback``,
  ``LearningRateScheduleCallback``, ``BestModelCheckpoint`` (:mod:`.callbacks`);
* ``broadcast_global_variables``, ``broadcast_object``, ``allgather_object``,
  ``load_model`` (a saved model's optimizer made distributed again), the
  job (``init, rank, size``...) and the ops (``Average, Sum``...);
* Horovod's collectives on values: ``allreduce, allgather, broadcast,
  reducescatter, barrier, join`` (:mod:`.collectives`);
* ``SyncBatchNormalization``, batch statistics across ranks
  (:mod:`.sync_batch_norm`; also ``hora.tensorflow.SyncBatchNormalization``).

``import hora.tensorflow.keras as hvd`` (Horovod's
``horovod.tensorflow.keras``) has this module's names (the same objects).

* ``elastic``: Horovod's ``hvd.elastic`` (``run``, ``KerasState``,
  ``CommitStateCallback``, ``UpdateBatchStateCallback``,
  ``UpdateEpochStateCallback``: :mod:`.elastic`).
"""

from hora.common import *  # noqa: F401,F403  (the job, ops, process sets, errors)
from hora.common import __all__ as _common
from hora.common.basics import (  # noqa: F401
    ccl_built,
    cuda_built,
    ddl_built,
    gloo_built,
    gloo_enabled,
    is_homogeneous,
    mpi_built,
    mpi_enabled,
    mpi_threads_supported,
    nccl_built,
    rocm_built,
    start_timeline,
    stop_timeline,
)
from hora.keras import callbacks, elastic  # noqa: F401
from hora.keras.collectives import (  # noqa: F401
    allgather,
    allreduce,
    barrier,
    broadcast,
    join,
    reducescatter,
)
from hora.keras.optimizer import (  # noqa: F401
    Compression,
    DistributedOptimizer,
    PartialDistributedOptimizer,
    broadcast_global_variables,
    load_model,
)
from hora.keras.sync_batch_norm import SyncBatchNormalization  # noqa: F401
from hora.numpy import allgather_object, broadcast_object  # noqa: F401

# (What `from hora.keras import *` gives, hora.tensorflow.keras's: not the
# submodules but callbacks.)
__all__ = sorted(set(_common) | {
    "ccl_built", "cuda_built", "ddl_built", "gloo_built", "gloo_enabled", "is_homogeneous",
    "mpi_built", "mpi_enabled", "mpi_threads_supported", "nccl_built", "rocm_built",
    "start_timeline", "stop_timeline", "callbacks", "allgather", "allreduce", "barrier",
    "broadcast", "join", "reducescatter", "Compression", "DistributedOptimizer",
    "PartialDistributedOptimizer", "broadcast_global_variables", "load_model",
    "allgather_object", "broadcast_object", "elastic", "SyncBatchNormalization"})
