"""``DistributedOptimizer`` for Keras 3 optimizers, on any Keras backend.

The wrapped optimizer's ``apply`` (which ``apply_gradients``, ``model.fit``'s
train step and the JAX backend's ``stateless_apply`` all go through) first
reduces the gradients across ranks with the backend's own Hora module, so
it runs inside the compiled train step as well: as one fused group by
default, in ``groups=`` groups where given, and not the local variables'.
"""

import keras
import numpy as np

import hora.numpy as hnp
from hora.common import basics, gradient_groups
from hora.common.process_sets import global_process_set, process_set_ranks


class Compression:
    """Horovod's ``hvd.Compression`` names; ``fp16`` casts floating gradients
    (but float16's) to float16 for the wire, on every backend, and back."""

    none = "none"
    fp16 = "fp16"


# The floating dtypes fp16 compression casts (Horovod's: every floating one).
_CAST_TO_FP16 = ("float32", "float64", "bfloat16")


def _wire_fp16(compression):
    """Whether ``compression`` is fp16 (this module's name, or a framework
    module's compressor class); ValueError for what is neither it nor none."""
    name = compression if isinstance(compression, str) else getattr(compression, "__name__", "")
    if name in (Compression.fp16, "FP16Compressor"):
        return True
    if name in (Compression.none, "NoneCompressor"):
        return False
    raise ValueError("DistributedOptimizer: compression must be hvd.Compression.none or "
                     "hvd.Compression.fp16, got %r" % (compression,))


def _size_now(backend, process_set, grads):
    """The set's size as the step runs: inside a compiled JAX step a value
    read each time it runs (JAX reuses a trace made before an elastic
    reset), else an int."""
    if backend == "jax":
        from hora.jax.ops import set_size_now

        return set_size_now(process_set, [g for g in grads if g is not None])
    return len(process_set_ranks(process_set))


def _divided(g, n):
    if isinstance(n, int):
        return g / n if n > 1 else g
    return g / keras.ops.cast(n, g.dtype)


def _reduce(grads, variables, op, predivide, process_set, compression, sparse_as_dense,
            num_groups, lists, local):
    """``grads`` (a list; None entries stay None; ``variables`` theirs) reduced with
    the backend's module, in the groups of ``num_groups`` or ``lists``
    (gradient_groups.split), but for those of ``local``'s variables; on a rank
    outside ``process_set``, as they are (Horovod's rule)."""
    if process_set is not None and not process_set.included():
        return grads
    backend = keras.backend.backend()
    fp16 = _wire_fp16(compression)
    if backend == "tensorflow":
        from hora.tensorflow.compression import Compression as TFCompression
        from hora.tensorflow.gradient_tape import allreduce_gradients

        wire = TFCompression.fp16 if fp16 else TFCompression.none
        return allreduce_gradients(grads, op=op, compression=wire,
                                   sparse_as_dense=sparse_as_dense,
                                   gradient_predivide_factor=predivide, num_groups=num_groups,
                                   groups=lists, process_set=process_set,
                                   name="keras.gradients", variables=variables, local=local)
    pre = post = 1.0
    if predivide != 1.0:
        # (Average's division by the set's size is the engine's, as the step
        # runs: no size fixed when the step was traced.)
        pre, post = 1.0 / predivide, predivide
    out = list(grads)
    entries = []
    local_ids = local.ids()
    n = None  # (the set's size as the step runs, read once: local gradients only)
    for i, (g, v) in enumerate(zip(grads, variables)):
        if g is None:
            continue
        if v is not None and id(v) in local_ids:
            if local.scale:
                n = _size_now(backend, process_set, grads) if n is None else n
                out[i] = _divided(g, n)
        else:
            entries.append((i, v))
    if backend == "jax":
        from hora.jax import grouped_allreduce
    elif backend == "torch":
        from hora.torch import grouped_allreduce
    else:
        def grouped_allreduce(ins, **kw):
            return hnp.grouped_allreduce([np.asarray(g) for g in ins], **kw)
    for members in gradient_groups.split(entries, 1 if lists is None else 0, lists):
        name = "keras.gradients" if lists is None else \
            gradient_groups.group_name("keras.gradients.g", members)
        ins = [grads[i] for i in members]
        dtypes = [keras.backend.standardize_dtype(g.dtype) for g in ins]
        if fp16:  # (the wire's dtype; each comes back in its own)
            ins = [keras.ops.cast(g, "float16") if d in _CAST_TO_FP16 else g
                   for g, d in zip(ins, dtypes)]
        reduced = grouped_allreduce(ins, op=op, name=name, prescale_factor=pre,
                                    postscale_factor=post, process_set=process_set)
        for i, r, d in zip(members, reduced, dtypes):
            out[i] = keras.ops.cast(r, d) if fp16 and d in _CAST_TO_FP16 else r
    return out


def _agreed_finite(finite, process_set):
    """``finite`` (this rank's: are its gradients finite?) made the same on
    every rank of ``process_set``: true only where every rank's is."""
    x = keras.ops.reshape(keras.ops.cast(finite, "float32"), (1,))
    kw = dict(op=basics.Min, name="keras.loss_scale.finite", process_set=process_set)
    backend = keras.backend.backend()
    if backend == "tensorflow":
        from hora.tensorflow.mpi_ops import allreduce
    elif backend == "jax":
        from hora.jax import allreduce
    elif backend == "torch":
        from hora.torch import allreduce
    else:
        return bool(hnp.allreduce(np.asarray(x), **kw)[0] > 0.5)
    return allreduce(x, **kw)[0] > 0.5


def _agree_on_loss_scale_steps():
    """Keras's LossScaleOptimizer (compile() wraps the optimizer in one under
    the mixed_float16 policy) skips a step where this rank's scaled
    gradients overflow, before its inner optimizer, where Hora reduces them,
    is called: a rank that skipped would leave the others waiting in their
    reduction. Around a Hora-distributed inner optimizer, the ranks agree:
    the step is taken where every rank's gradients are finite, else skipped
    everywhere (Horovod reduced before the check: the same outcome)."""
    lso = keras.optimizers.LossScaleOptimizer
    if getattr(lso, "_hora_agrees", False):
        return
    own = lso.check_finite

    def check_finite(self, grads):
        finite = own(self, grads)
        inner = getattr(self, "inner_optimizer", None)
        process_set = getattr(inner, "_hora_process_set", None)
        if not getattr(inner, "_hora_distributed", False) or (
                process_set is not None and not process_set.included()):
            return finite
        return _agreed_finite(finite, process_set)

    def register_local_var(self, var):
        """(``model.optimizer`` under mixed_float16: the Hora-distributed
        optimizer it wraps registers ``var``.)"""
        inner = getattr(self, "inner_optimizer", None)
        if not getattr(inner, "_hora_distributed", False):
            raise AttributeError("register_local_var: this LossScaleOptimizer wraps no "
                                 "hora.keras DistributedOptimizer")
        inner.register_local_var(var)

    lso.check_finite = check_finite
    lso.register_local_var = register_local_var
    lso._hora_agrees = True


def DistributedOptimizer(optimizer, name=None, device_dense="", device_sparse="",
                         compression=Compression.none, sparse_as_dense=False,
                         backward_passes_per_step=1, op=basics.Average,
                         gradient_predivide_factor=1.0, average_aggregated_gradients=False,
                         num_groups=0, groups=None, process_set=global_process_set,
                         scale_local_gradients=True):
    """``optimizer`` (a Keras 3 optimizer) whose gradients are reduced across ranks
    (``op``, Average by default) before each update. ``groups=`` a number of
    groups (or ``num_groups``) splits the gradients into that many fused groups
    on the TensorFlow backend; ``groups=`` lists of variables make each list's
    gradients one group (every other gradient a group of its own), as
    Horovod's. ``optimizer.register_local_var(v)`` leaves ``v``'s gradient
    unreduced (divided by the process set's size with
    ``scale_local_gradients``). ``backward_passes_per_step`` other than 1 is
    refused (give the Keras optimizer ``gradient_accumulation_steps``
    instead): ``ValueError``."""
    del name, device_dense, device_sparse, average_aggregated_gradients
    if not isinstance(optimizer, keras.optimizers.Optimizer):
        raise TypeError("hora.keras.DistributedOptimizer: expected a keras.optimizers.Optimizer, "
                        "got %s" % type(optimizer).__name__)
    if backward_passes_per_step != 1:
        raise ValueError("backward_passes_per_step=%d: give the Keras optimizer "
                         "gradient_accumulation_steps=%d instead (each step's gradients are "
                         "then averaged across ranks before they are accumulated)"
                         % (backward_passes_per_step, backward_passes_per_step))
    more, lists = gradient_groups.check_groups(groups, "hora.keras.DistributedOptimizer")
    num_groups = more or num_groups  # (Horovod's: an int is num_groups)
    op = basics.check_op(op)
    _wire_fp16(compression)  # (refused here, not at the first step)
    if gradient_predivide_factor != 1.0 and op != basics.Average:
        raise ValueError("gradient_predivide_factor needs op=Average")
    if getattr(optimizer, "_hora_distributed", False):
        raise ValueError("hora.keras.DistributedOptimizer: %s is distributed already"
                         % type(optimizer).__name__)
    local = gradient_groups.LocalVariables(scale_local_gradients)
    args = (op, gradient_predivide_factor, process_set, compression, sparse_as_dense,
            num_groups, lists, local)
    base = optimizer.__class__

    def apply(self, grads, trainable_variables=None):
        grads = list(grads)
        variables = trainable_variables if trainable_variables is not None else \
            getattr(self, "_trainable_variables", None)
        variables = list(variables) if variables is not None else [None] * len(grads)
        return base.apply(self, _reduce(grads, variables, *args), trainable_variables)

    def register_local_var(self, var):
        """``var``'s gradient stays on this rank (not reduced; Horovod's)."""
        local.add(var)

    # (Saved as the class it wraps: keras.models.load_model gives that back,
    # and hora.keras.load_model distributes it again.)
    _agree_on_loss_scale_steps()
    cls = type(base.__name__, (base,), {"apply": apply, "register_local_var": register_local_var,
                                        "_hora_local": local, "_hora_distributed": True,
                                        "_hora_process_set": process_set,
                                        "__module__": base.__module__,
                                        "__qualname__": base.__qualname__,
                                        "__reduce__": _not_copied, "__reduce_ex__": _not_copied,
                                        "__deepcopy__": _not_copied})
    _register_as(cls, base)
    optimizer.__class__ = cls
    return optimizer


def PartialDistributedOptimizer(optimizer, name=None, device_dense="", device_sparse="",
                                compression=Compression.none, sparse_as_dense=False,
                                backward_passes_per_step=1, op=basics.Average,
                                gradient_predivide_factor=1.0,
                                average_aggregated_gradients=False, groups=None,
                                process_set=global_process_set, local_layers=None,
                                scale_local_gradients=True):
    """``DistributedOptimizer`` but for the trainable variables of
    ``local_layers`` (a Keras layer or a collection of them), whose gradients
    stay on this rank (Horovod's): not reduced, divided by the process set's
    size with ``scale_local_gradients``."""
    layers = gradient_groups.local_layers_checked(local_layers, "PartialDistributedOptimizer")
    opt = DistributedOptimizer(optimizer, name, device_dense, device_sparse, compression,
                               sparse_as_dense, backward_passes_per_step, op,
                               gradient_predivide_factor, average_aggregated_gradients,
                               groups=groups, process_set=process_set,
                               scale_local_gradients=scale_local_gradients)
    for layer in layers:
        opt._hora_local.add_layer(layer)
    return opt


def _not_copied(self, *unused):
    """A copy would be the plain optimizer (Keras copies through its
    config): refused, saying what to do instead."""
    raise TypeError("a hora.keras DistributedOptimizer is not copied or pickled (the copy "
                    "would reduce nothing): save the model (model.save) and load it with "
                    "hora.keras.load_model, or wrap a copy of the plain optimizer")


def _register_as(cls, base):
    """Keras names ``cls`` as it names ``base`` where that is registered
    (``keras.saving.register_keras_serializable``: "package>Name"), so that
    a saved model finds the class again."""
    name = keras.saving.get_registered_name(base)
    if name != base.__name__:
        try:
            from keras.src.saving.object_registration import GLOBAL_CUSTOM_NAMES
        except ImportError:  # pragma: no cover - another Keras: Keras's own name then
            return
        GLOBAL_CUSTOM_NAMES[cls] = name


def load_model(filepath, custom_optimizers=None, custom_objects=None,
               compression=Compression.none):
    """``keras.models.load_model(filepath)`` whose optimizer, if it has one, is
    made a ``DistributedOptimizer`` (Horovod's ``hvd.load_model``): a model
    saved with one is saved with the optimizer it wraps. ``custom_optimizers``:
    optimizer classes of the user's own, found by their names."""
    objects = dict(custom_objects or {})
    for cls in custom_optimizers or []:
        objects.setdefault(cls.__name__, cls)
    model = keras.models.load_model(filepath, custom_objects=objects or None)
    if isinstance(getattr(model, "optimizer", None), keras.optimizers.Optimizer) and \
            not getattr(model.optimizer, "_hora_distributed", False):
        DistributedOptimizer(model.optimizer, compression=compression)
    return model


def broadcast_global_variables(model, root_rank=0, process_set=global_process_set):
    """Assigns root's values to ``model``'s variables and, where built, its optimizer's."""
    variables = list(model.variables)
    opt = getattr(model, "optimizer", None)
    if opt is not None and getattr(opt, "built", False):
        variables += list(opt.variables)
    for i, v in enumerate(variables):
        value = keras.ops.convert_to_numpy(v.value)
        v.assign(hnp.broadcast(value, root_rank, "broadcast_global_variables.%d" % i,
                               process_set))
