"""``SyncBatchNormalization``: Keras batch normalization whose training
statistics are every rank's batch together (Horovod's
``hvd.SyncBatchNormalization``), on any Keras backend.

In training, the mean and variance are those of every rank's rows together,
from two sums across ranks with the backend's differentiable allreduce
(:mod:`hora.tensorflow`, :mod:`hora.jax` or :mod:`hora.torch`, unnamed, so
calls line up by order as Horovod's do): of the rows and their count, then
of the rows' squared distances from that mean (not E[x^2] - E[x]^2, which
cancels in float32 where the mean is large against the spread). Ranks weigh
by their rows, as ``hora.torch.SyncBatchNorm`` (Horovod's TensorFlow layer
weighs each rank alike; the two agree where batches are equal). Gradients flow through the
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
        # (XLA cannot compile hora.tensorflow's collectives: Keras's
        # jit_compile="auto" leaves a model with this layer uncompiled.)
        if keras.backend.backend() == "tensorflow":
            self.supports_jit = False

    def _moments(self, inputs, mask):
        if basics.size() == 1:
            return super()._moments(inputs, mask)
        ops = keras.ops
        axes = self._reduction_axes
        if mask is None:
            kept = None
            shape = ops.shape(inputs)
            count = ops.cast(1, inputs.dtype)
            for a in axes:
                count = count * ops.cast(shape[a], inputs.dtype)
            total = ops.sum(inputs, axes, keepdims=True)
            count = ops.ones_like(total) * count
        else:  # (the rows Keras's masked moments count: a mask is read as bool)
            kept = ops.broadcast_to(ops.expand_dims(ops.cast(mask, "bool"), -1),
                                    ops.shape(inputs))
            total = ops.sum(ops.where(kept, inputs, 0), axes, keepdims=True)
            count = ops.sum(ops.cast(kept, inputs.dtype), axes, keepdims=True)
        # Two passes over every rank's rows: their mean, then their spread
        # about it (a rank with no rows adds nothing to either).
        first = _sum_across_ranks(ops.stack([total, count]))
        rows = ops.maximum(first[1], 1)
        mean = first[0] / rows
        squares = ops.square(inputs - mean)
        if kept is not None:
            squares = ops.where(kept, squares, 0)
        variance = _sum_across_ranks(ops.sum(squares, axes, keepdims=True)) / rows
        shape = ops.shape(self.moving_mean)
        return ops.reshape(mean, shape), ops.reshape(variance, shape)
