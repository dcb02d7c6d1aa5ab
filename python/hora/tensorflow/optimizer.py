"""``hora.tensorflow.DistributedOptimizer``: a ``tf.compat.v1`` optimizer whose
``compute_gradients`` reduces across ranks (gradient_tape.py's
``allreduce_gradients``); a Keras optimizer is handed to
``hora.keras.DistributedOptimizer``. (Apart from gradient_tape.py, which
``hora.keras`` uses: no import cycle.)"""

from hora.common import basics, gradient_groups
from hora.common.process_sets import global_process_set
from hora.tensorflow.compression import Compression
from hora.tensorflow.gradient_tape import _plain, allreduce_gradients


@_plain
def DistributedOptimizer(optimizer, name=None, use_locking=False, device_dense="",
                         device_sparse="", compression=Compression.none, sparse_as_dense=False,
                         backward_passes_per_step=1, op=basics.Average,
                         gradient_predivide_factor=1.0, average_aggregated_gradients=False,
                         num_groups=0, groups=None, process_set=global_process_set,
                         scale_local_gradients=True):
    """Wraps an optimizer so that its gradients are averaged across ranks.

    A Keras optimizer (Keras 3) is handed to ``hora.keras.DistributedOptimizer``
    (which refuses ``backward_passes_per_step`` other than 1); a
    ``tf.compat.v1.train.Optimizer`` gets a ``compute_gradients`` that reduces
    (``backward_passes_per_step`` other than 1 refused with ``ValueError``;
    ``groups=`` a number of groups or lists of variables, as Horovod's;
    ``register_local_var(v)`` leaves ``v``'s gradient unreduced)."""
    del name, use_locking, device_dense, device_sparse, average_aggregated_gradients
    import keras

    if isinstance(optimizer, keras.optimizers.Optimizer):
        from hora.keras import DistributedOptimizer as keras_distributed

        return keras_distributed(optimizer, compression=compression, groups=groups,
                                 sparse_as_dense=sparse_as_dense,
                                 backward_passes_per_step=backward_passes_per_step, op=op,
                                 gradient_predivide_factor=gradient_predivide_factor,
                                 num_groups=num_groups, process_set=process_set,
                                 scale_local_gradients=scale_local_gradients)
    if backward_passes_per_step != 1:
        raise ValueError("DistributedOptimizer(backward_passes_per_step=%d): a tf.compat.v1 "
                         "optimizer's gradients are reduced every step here (Horovod "
                         "accumulates them locally): sum them yourself over the steps, or use a "
                         "Keras optimizer with gradient_accumulation_steps=%d"
                         % (backward_passes_per_step, backward_passes_per_step))
    more, _ = gradient_groups.check_groups(groups, "DistributedOptimizer")
    if more:
        num_groups, groups = more, None  # (Horovod's: an int is num_groups)
    local = gradient_groups.LocalVariables(scale_local_gradients)
    args = dict(op=basics.check_op(op), compression=compression, sparse_as_dense=sparse_as_dense,
                gradient_predivide_factor=gradient_predivide_factor, num_groups=num_groups,
                groups=groups, process_set=process_set, local=local)
    base = optimizer.__class__

    def compute_gradients(self, *a, **kw):
        pairs = base.compute_gradients(self, *a, **kw)
        reduced = allreduce_gradients([g for g, _ in pairs], variables=[v for _, v in pairs],
                                      **args)
        return list(zip(reduced, [v for _, v in pairs]))

    def register_local_var(self, var):
        """``var``'s gradient stays on this rank (not reduced)."""
        local.add(var)

    cls = type(base.__name__, (base,), {"compute_gradients": compute_gradients,
                                        "register_local_var": register_local_var})
    opt = cls.__new__(cls)
    opt.__dict__.update(optimizer.__dict__)
    return opt
