"""``SyncBatchNormalization``: Keras batch normalization whose training
statistics are every rank's batch together (Horovod's
``hvd.SyncBatchNormalization``), on any Keras backend.

In training, each rank's per-channel sum, sum of squares and row count are
summed across ranks with the backend's differentiable allreduce
(:mod:`hora.tensorflow`, :mod:`hora.jax` or :mod:`hora.torch`, unnamed, so
calls line up by order as Horovod's do), and the mean and variance are those
of the ranks' rows together: ranks weigh by their rows, as
``hora.torch.SyncBatchNorm`` (Horovod's TensorFlow layer weighs each rank
alike; the two agree where batches are equal). Gradients flow through the
statistics to every rank's inputs. Inference uses the moving statistics and
communicates nothing. With one rank it is ``BatchNormalization``. Saved
models load it by its registered name (``hora>SyncBatchNormalization``).
"""

import keras

from hora.common import basics


def _sum_across_ranks(x):
    """``x`` summed over every rank, differentiably, by the backend's module."""
    backend = keras.backend.backend()
    if backend == "tensorflow":
        from hora.tensorflow.mpi_ops import allreduce
    elif backend == "jax":
        from hora.jax import allreduce
    elif backend == "torch":
        from hora.torch import allreduce
    else:
        raise NotImplementedError("SyncBatchNormalization: Keras backend %r is not one Hora "
                                  "reduces on (tensorflow, jax, torch)" % backend)
    return allreduce(x, op=basics.Sum)


@keras.saving.register_keras_serializable(package="hora")
class SyncBatchNormalization(keras.layers.BatchNormalization):
    """``keras.layers.BatchNormalization`` with statistics synchronized across
    every rank in training (module doc). Takes BatchNormalization's
    arguments; ``fused`` (Horovod's, for TensorFlow's fused kernel) must be
    False, and ``synchronized`` (Keras's, for ``tf.distribute``) False."""

    def __init__(self, fused=False, synchronized=False, **kwargs):
        if fused in (True, None):
            raise ValueError("SyncBatchNormalization: fused=%r is not supported (statistics "
                             "across ranks need the unfused computation); pass fused=False"
                             % (fused,))
        if synchronized:
            raise ValueError("SyncBatchNormalization: synchronized=True is Keras's tf.distribute "
                             "synchronization; this layer synchronizes through Hora already")
        super().__init__(**kwargs)

    def _moments(self, inputs, mask):
        mean, variance = super()._moments(inputs, mask)
        if basics.size() == 1:
            return mean, variance
        ops = keras.ops
        if mask is None:
            shape = ops.shape(inputs)
            count = ops.cast(1, mean.dtype)
            for a in self._reduction_axes:
                count = count * ops.cast(shape[a], mean.dtype)
            count = ops.ones_like(mean) * count
        else:  # (as Keras's masked moments weigh rows)
            weights = ops.broadcast_to(ops.expand_dims(ops.cast(mask, mean.dtype), -1),
                                       ops.shape(inputs))
            count = ops.reshape(ops.sum(weights, self._reduction_axes), ops.shape(mean))
        # A rank with no rows adds nothing (its own moments are NaN).
        present = count > 0
        mean = ops.where(present, mean, 0)
        variance = ops.where(present, variance, 0)
        total = _sum_across_ranks(ops.stack([count * mean,
                                             count * (variance + ops.square(mean)), count]))
        rows = ops.maximum(total[2], 1)
        group_mean = total[0] / rows
        return group_mean, ops.maximum(total[1] / rows - ops.square(group_mean), 0)
