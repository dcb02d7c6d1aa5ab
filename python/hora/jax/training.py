"""Training with JAX and optax: ``broadcast_parameters`` and
``DistributedOptimizer`` (see :mod:`hora.jax`)."""

import jax
import jax.numpy as jnp
import numpy as np

import hora.numpy as hnp
from hora.common import basics
from hora.common.process_sets import global_process_set
from hora.jax.ops import grouped_allreduce


def broadcast_parameters(params, root_rank=0, process_set=global_process_set):
    """Root's ``params`` (any pytree of arrays: parameters, an optax state) on
    every rank: one broadcast per leaf, named by its path in the tree. Returns
    a new pytree (call it eagerly) whose leaves have the types they had: a
    Python number stays one (a learning rate in the tree), a NumPy array one."""
    paths, treedef = jax.tree_util.tree_flatten_with_path(params)
    traced = [jax.tree_util.keystr(path) for path, leaf in paths
              if isinstance(leaf, jax.core.Tracer)]
    if traced:
        # (Every rank runs the same function: every rank is told.)
        raise basics.InvalidArgumentError(
            "broadcast_parameters: %s is traced (inside jax.jit, grad or vmap): it sends "
            "concrete arrays; call it outside the traced function, once before training"
            % ("params" + traced[0] if traced[0] else "params"))
    out = []
    for path, leaf in paths:
        name = "broadcast_parameters" + jax.tree_util.keystr(path)
        got = hnp.broadcast(np.asarray(leaf), root_rank, name, process_set)
        if isinstance(leaf, (bool, int, float, complex)):
            out.append(type(leaf)(got.item()))
        elif isinstance(leaf, np.ndarray):
            out.append(got)
        else:
            out.append(jnp.asarray(got))
    return jax.tree_util.tree_unflatten(treedef, out)


def DistributedOptimizer(tx, op=basics.Average, gradient_predivide_factor=1.0,
                         process_set=global_process_set):
    """An optax ``GradientTransformation`` that first reduces the gradients across
    ranks (one fused group per step; Average by default), then applies ``tx``.

    ``gradient_predivide_factor`` f: gradients are multiplied by 1/f before the sum
    and by f/size after it (Horovod's split of the average; the size as each step
    runs)."""
    import optax

    op = basics.check_op(op)
    pre, post = 1.0, 1.0
    if gradient_predivide_factor != 1.0:
        if op != basics.Average:
            raise ValueError("gradient_predivide_factor needs op=Average")
        # (Average's division by the set's size is the engine's, at each step:
        # none fixed here, nor when a jitted step was traced.)
        pre, post = 1.0 / gradient_predivide_factor, gradient_predivide_factor

    def update(grads, state, params=None, **extra_args):
        if process_set is None or process_set.included():  # (outside the set: this rank's own, as Horovod)
            grads = grouped_allreduce(grads, op=op, name="DistributedOptimizer.gradients",
                                      prescale_factor=pre, postscale_factor=post,
                                      process_set=process_set)
        return tx.update(grads, state, params, **extra_args)

    return optax.GradientTransformationExtraArgs(tx.init, update)
