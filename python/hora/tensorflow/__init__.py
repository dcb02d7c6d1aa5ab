"""Hora for TensorFlow 2, with Horovod's API: ``import hora.tensorflow as hvd``.

::

    hvd.init()
    with tf.GradientTape() as tape:
        loss = ...
    tape = hvd.DistributedGradientTape(tape)
    grads = tape.gradient(loss, model.trainable_variables)
    opt.apply_gradients(zip(grads, model.trainable_variables))
    if first_step:
        hvd.broadcast_variables(model.variables, root_rank=0)

* job: ``init, shutdown, rank, size, local_rank, ...`` and the ops ``Average,
  Sum, Min, Max, Product, Adasum`` (:mod:`hora.common.basics`);
* collectives with Horovod's gradients, eager and inside ``tf.function``
  (:mod:`.mpi_ops`): ``allreduce, grouped_allreduce, allgather,
  grouped_allgather, broadcast, alltoall, reducescatter,
  grouped_reducescatter, barrier, join``; process sets;
* ``DistributedGradientTape, PartialDistributedGradientTape,
  DistributedOptimizer, broadcast_variables, BroadcastGlobalVariablesHook,
  broadcast_global_variables``
  (:mod:`.gradient_tape`); Keras: :mod:`hora.keras`, also as
  ``hora.tensorflow.keras``;
* ``broadcast_object, allgather_object`` (pickled, as ``hora.numpy``'s),
  ``broadcast_object_fn`` (Horovod's TF1 form: a function that broadcasts);
  ``size_op, rank_op, local_rank_op, local_size_op,
  process_set_included_op``; ``start_timeline, stop_timeline``.

* ``elastic``: Horovod's ``hvd.elastic`` (``run``, ``TensorFlowKerasState``,
  ``TensorFlowState``: :mod:`.elastic`).
* ``SyncBatchNormalization``: a Keras layer whose batch statistics are every
  rank's (:mod:`hora.keras.sync_batch_norm`).

Every dtype ``hora.numpy`` takes, bfloat16 included. Not yet: GPU tensors
(they are copied to the host), XLA
(``jit_compile=True``).
"""

from hora.common.exceptions import *  # noqa: F401,F403
from hora.numpy import allgather_object, broadcast_object  # noqa: F401
from hora.tensorflow.compression import Compression  # noqa: F401
from hora.tensorflow.gradient_tape import (  # noqa: F401
    BroadcastGlobalVariablesHook,
    DistributedGradientTape,
    PartialDistributedGradientTape,
    allreduce_gradients,
    broadcast_global_variables,
    broadcast_variables,
)
from hora.tensorflow.mpi_ops import *  # noqa: F401,F403
from hora.tensorflow.optimizer import DistributedOptimizer  # noqa: F401
from hora.tensorflow.mpi_ops import (  # noqa: F401
    allgather,
    allreduce,
    alltoall,
    barrier,
    broadcast,
    broadcast_,
    broadcast_object_fn,
    grouped_allgather,
    grouped_allreduce,
    grouped_reducescatter,
    join,
    local_rank_op,
    local_size_op,
    process_set_included_op,
    rank_op,
    reducescatter,
    size_op,
)


def __getattr__(name):
    # ``hvd.elastic`` (Horovod's ``horovod.tensorflow.elastic``) and
    # ``hvd.SyncBatchNormalization``, imported at their first use: they bring
    # Keras in.
    import importlib

    if name == "elastic":
        return importlib.import_module("hora.tensorflow.elastic")
    if name == "SyncBatchNormalization":  # (Keras's layer, from hora.keras)
        return importlib.import_module("hora.keras.sync_batch_norm").SyncBatchNormalization
    raise AttributeError("module 'hora.tensorflow' has no attribute %r" % (name,))
