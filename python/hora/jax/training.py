"""Training with JAX and optax: ``broadcast_parameters``,
``broadcast_optimizer_state`` and ``DistributedOptimizer`` (see
:mod:`hora.jax`)."""

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

import hora.numpy as hnp
from hora.common import basics
from hora.common.process_sets import global_process_set
from hora.jax.compression import Compression
from hora.jax.host import no_values, zeros
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


def broadcast_optimizer_state(opt_state, root_rank=0, process_set=global_process_set):
    """Root's optax state on every rank (Horovod's name): an optax state is a
    pytree, so this is ``broadcast_parameters(opt_state, ...)``."""
    return broadcast_parameters(opt_state, root_rank, process_set)


class AccumulationState(NamedTuple):
    """``DistributedOptimizer``'s state with ``backward_passes_per_step`` k > 1:
    the wrapped transformation's state, this rank's gradients summed since the
    last reduction, and how many passes that sum holds."""

    inner: Any
    grads: Any
    passes: Any


def DistributedOptimizer(tx, op=basics.Average, gradient_predivide_factor=1.0,
                         process_set=global_process_set, compression=Compression.none,
                         backward_passes_per_step=1, average_aggregated_gradients=False):
    """An optax ``GradientTransformation`` that first reduces the gradients across
    ranks (one fused group per step; Average by default), then applies ``tx``.

    ``gradient_predivide_factor`` f: gradients are multiplied by 1/f before the sum
    and by f/size after it (Horovod's split of the average; the size as each step
    runs). ``compression`` (``hvd.Compression.fp16``, ``.bf16``): floating
    gradients travel in that type and are cast back before ``tx``.

    ``backward_passes_per_step`` k (Horovod's name): the gradients of k calls
    to ``update`` are summed on each rank (divided by k with
    ``average_aggregated_gradients``, as Horovod's TensorFlow optimizer;
    integer gradients truncated, as an integer Average is) and
    reduced once, at the k-th, which applies ``tx``; the calls before it
    return zero updates and leave ``tx``'s state as it was. The state is then
    an ``AccumulationState`` (``.inner`` is ``tx``'s). (``optax.MultiSteps``
    around this optimizer averages the k gradients, as
    ``average_aggregated_gradients=True`` does, but calls the inner update,
    so the allreduce, at every step.)"""
    import optax

    op = basics.check_op(op)
    k = int(backward_passes_per_step)
    if k < 1:
        raise ValueError("DistributedOptimizer: backward_passes_per_step must be at least 1, "
                         "got %r" % (backward_passes_per_step,))
    pre, post = 1.0, 1.0
    if gradient_predivide_factor != 1.0:
        if op != basics.Average:
            raise ValueError("gradient_predivide_factor needs op=Average")
        # (Average's division by the set's size is the engine's, at each step:
        # none fixed here, nor when a jitted step was traced.)
        pre, post = 1.0 / gradient_predivide_factor, gradient_predivide_factor

    def reduce(grads):
        if process_set is None or process_set.included():  # (outside the set: this rank's own, as Horovod)
            grads = grouped_allreduce(grads, op=op, name="DistributedOptimizer.gradients",
                                      prescale_factor=pre, postscale_factor=post,
                                      process_set=process_set, compression=compression)
        return grads

    def update(grads, state, params=None, **extra_args):
        return tx.update(reduce(grads), state, params, **extra_args)

    if k == 1:
        return optax.GradientTransformationExtraArgs(tx.init, update)

    def init_accumulating(params):
        return AccumulationState(tx.init(params), jax.tree_util.tree_map(jnp.zeros_like, params),
                                 jnp.zeros((), jnp.int32))

    def update_accumulating(grads, state, params=None, **extra_args):
        tree_map = jax.tree_util.tree_map
        # (The sum keeps the accumulator's dtypes, the parameters', as
        # optax.MultiSteps's does; what is sent has the gradients'.)
        # (float0 gradients, of integer parameters under allow_int, have no
        # values: nothing is summed, and they are passed on as they came.)
        summed = tree_map(lambda a, g: a if no_values(g) else (a + g).astype(a.dtype),
                          state.grads, grads)
        passes = state.passes + 1
        sent = tree_map(lambda a, g: g if no_values(g) else a.astype(g.dtype), summed, grads)
        if average_aggregated_gradients:
            sent = tree_map(lambda a: a if no_values(a) else (a / k).astype(a.dtype), sent)

        def send(sent, inner):
            updates, new = update(sent, inner, params, **extra_args)
            # (The state keeps its dtypes whichever branch runs.)
            new = tree_map(lambda n, o: jnp.asarray(n).astype(jnp.result_type(o)), new, inner)
            return updates, AccumulationState(new, tree_map(jnp.zeros_like, summed),
                                              jnp.zeros((), jnp.int32))

        def hold(sent, inner, shapes=None):
            # (eagerly: the updates are zeros like the gradients)
            like = sent if shapes is None else shapes
            return (tree_map(lambda a: zeros(a.shape, a.dtype), like),
                    AccumulationState(inner, summed, passes))

        if not isinstance(passes, jax.core.Tracer):
            # Eagerly the branch is known: taken in Python (a lax.cond would
            # be traced and compiled again at every call).
            return (send if int(passes) >= k else hold)(sent, state.inner)
        shapes = jax.eval_shape(lambda: tx.update(sent, state.inner, params, **extra_args)[0])
        # (Only the taken branch runs: the allreduce at every k-th pass, on
        # every rank alike.)
        return jax.lax.cond(passes >= k, send, lambda g, i: hold(g, i, shapes), sent,
                            state.inner)

    return optax.GradientTransformationExtraArgs(init_accumulating, update_accumulating)
