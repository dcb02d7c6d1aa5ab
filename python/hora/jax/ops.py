"""The collectives on JAX arrays and pytrees, eager and inside ``jax.jit``
(see :mod:`hora.jax` for the contract and the costs)."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import io_callback

import hora.numpy as hnp
from hora.common import basics, elastic
from hora.common.process_sets import global_process_set, process_set_ranks

# A jitted function keeps its trace, whose shapes (an allgather's rows, a
# reducescatter's slice) and sizes were the world's when it was traced: an
# elastic reset drops every trace, so that steps are traced again in the
# new world.
elastic.after_reset(jax.clear_caches)


def _array(x):
    """``x`` as a JAX array: itself when it is one (``jnp.asarray`` of an array
    still costs microseconds), else converted."""
    return x if isinstance(x, jax.Array) else jnp.asarray(x)


def _traced(leaves):
    return any(isinstance(x, jax.core.Tracer) for x in leaves)


def _host(fn, leaves, out_specs, what=None):
    """``fn`` (NumPy arrays -> NumPy arrays) on ``leaves``: at once when they are
    concrete, as an ordered io_callback when traced (``out_specs``: the
    results' ShapeDtypeStructs, static; ``what``: the collective, for the
    error where a result does not come in that shape)."""
    if not _traced(leaves):
        # A jitted step's callbacks may still be running: wait for them, so that
        # this call comes after theirs on every rank (unnamed calls are numbered).
        jax.effects_barrier()
        return [jnp.asarray(o) for o in fn([np.asarray(x) for x in leaves])]

    def callback(*xs):
        try:
            return checked(fn([np.asarray(x) for x in xs]))
        except basics.HoraError as e:  # (JAX re-raises it as its own: elastic maps it back)
            basics.note_callback_error(e)
            raise

    def checked(results):
        outs = []
        for o, s in zip(results, out_specs):
            o = np.asarray(o, dtype=s.dtype)
            if o.shape != tuple(s.shape):
                raise basics.InvalidArgumentError(
                    "rank %d: %s inside jax.jit: the result came with shape %s, but jit fixed "
                    "it at %s from this rank's input; inside jit every rank must give as many "
                    "rows (call it outside jit where they differ)"
                    % (basics.rank(), what or "a collective", o.shape, tuple(s.shape)))
            outs.append(o)
        return tuple(outs)

    return list(io_callback(callback, tuple(out_specs), *leaves, ordered=True))


def _what(op, name):
    return "%s %s" % (op, "'%s'" % name if name else "(unnamed)")


def _spec(x, shape=None):
    return jax.ShapeDtypeStruct(x.shape if shape is None else shape, x.dtype)


def _reduce(leaves, op, name, prescale, postscale, process_set, grouped=True):
    """The allreduce of ``leaves``: one group (``grouped``), or one array alone."""
    def on_arrays(arrays):
        if grouped:
            return hnp.grouped_allreduce(arrays, op, name, prescale, postscale, process_set)
        return [hnp.allreduce(arrays[0], op, name, prescale, postscale, process_set)]

    return _host(on_arrays, leaves, [_spec(x) for x in leaves])


@functools.partial(jax.custom_vjp, nondiff_argnums=(1, 2, 3, 4, 5, 6))
def _grouped(leaves, op, name, prescale, postscale, process_set, grouped):
    return _reduce(leaves, op, name, prescale, postscale, process_set, grouped)


def _grouped_fwd(leaves, op, name, prescale, postscale, process_set, grouped):
    return _reduce(leaves, op, name, prescale, postscale, process_set, grouped), None


def _grouped_bwd(op, name, prescale, postscale, process_set, grouped, _res, cotangents):
    del name
    cotangents = list(cotangents)
    # An integer or bool input's cotangent is JAX's float0 (no values): it
    # stays as it is, and only the others are reduced (alike on every rank:
    # the same program gives the same dtypes).
    real = [i for i, c in enumerate(cotangents) if c.dtype != jax.dtypes.float0]
    if real:
        reduced = _grouped([cotangents[i] for i in real], op, None, prescale, postscale,
                           process_set, grouped)
        for i, c in zip(real, reduced):
            cotangents[i] = c
    return (cotangents,)


_grouped.defvjp(_grouped_fwd, _grouped_bwd)


def grouped_allreduce(tree, op=None, name=None, prescale_factor=1.0, postscale_factor=1.0,
                      process_set=global_process_set):
    """Reduces every leaf of ``tree`` (a list, dict or any pytree of arrays) across
    ranks as one fused group (Average by default); returns the same structure.
    Members are named "<name>.<i>" in the order of the tree's leaves."""
    return _allreduce_tree(tree, op, name, prescale_factor, postscale_factor, process_set, True)


def _allreduce_tree(tree, op, name, prescale_factor, postscale_factor, process_set, grouped):
    op = basics.check_op(op)
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    if not leaves:
        return tree
    leaves = [_array(x) for x in leaves]
    args = (op, name, float(prescale_factor), float(postscale_factor), process_set, grouped)
    # Concrete arrays cannot be differentiated: skip custom_vjp's machinery (it costs
    # hundreds of microseconds a call).
    out = _grouped(leaves, *args) if _traced(leaves) else _reduce(leaves, *args)
    return jax.tree_util.tree_unflatten(treedef, out)


def allreduce(x, op=None, name=None, prescale_factor=1.0, postscale_factor=1.0,
              process_set=global_process_set):
    """Reduces ``x`` across ranks (Average by default); returns a new array."""
    return _allreduce_tree([x], op, name, prescale_factor, postscale_factor, process_set,
                           False)[0]


def _set_size(process_set):
    return len(process_set_ranks(process_set))


def set_size_now(process_set, like):
    """``process_set``'s size: an int where ``like`` (a pytree) is concrete;
    where it is traced (inside ``jax.jit``), an int32 scalar read by a
    callback each time the step runs, so that a step traced before an
    elastic reset divides by the new world's size (JAX reuses a trace for
    the same function, whatever the world)."""
    if not _traced(jax.tree_util.tree_leaves(like)):
        return _set_size(process_set)
    return io_callback(lambda: np.int32(_set_size(process_set)),
                       jax.ShapeDtypeStruct((), np.int32), ordered=True)


def allgather(x, name=None, process_set=global_process_set):
    """Every rank's ``x`` concatenated along axis 0 in rank order. Eagerly the row
    counts may differ; inside jit every rank must have ``x``'s shape."""
    x = _array(x)
    x1 = x.reshape(1) if x.ndim == 0 else x
    shape = (x1.shape[0] * _set_size(process_set),) + x1.shape[1:]
    return _host(lambda a: [hnp.allgather(a[0], name, process_set)], [x1],
                 [_spec(x1, shape)], _what("allgather", name))[0]


def broadcast(x, root_rank, name=None, process_set=global_process_set):
    """Root's ``x`` on every rank (a new array)."""
    x = _array(x)
    return _host(lambda a: [hnp.broadcast(a[0], root_rank, name, process_set)], [x],
                 [_spec(x)])[0]


def alltoall(x, splits=None, name=None, process_set=global_process_set):
    """Sends ``splits[p]`` rows to each rank p; returns the rows received (and, with
    ``splits`` given, the received splits). Inside jit: even splits only."""
    x = _array(x)
    if splits is None:
        return _host(lambda a: [hnp.alltoall(a[0], None, name, process_set)], [x],
                     [_spec(x)], _what("alltoall", name))[0]
    if _traced([x]):
        raise basics.UnimplementedError(
            "hora.jax.alltoall with splits inside jax.jit: the output's shape would depend "
            "on the other ranks; call it outside jit, or with splits=None")
    out, recv = hnp.alltoall(np.asarray(x), np.asarray(splits), name, process_set)
    return jnp.asarray(out), jnp.asarray(recv)


def reducescatter(x, op=None, name=None, prescale_factor=1.0, postscale_factor=1.0,
                  process_set=global_process_set):
    """Reduces across ranks; returns this rank's slice of axis 0 (``dim0 // size``
    rows, the first ``dim0 % size`` ranks one more)."""
    op = basics.check_op(op)
    x = _array(x)
    n = _set_size(process_set)
    ranks = process_set_ranks(process_set)
    # (On a rank outside the set, hora.numpy says so.)
    me = ranks.index(basics.rank()) if basics.rank() in ranks else 0
    # A scalar has no rows: hora.numpy refuses it on every rank (inside jit
    # when the step runs, as the others' calls do), and its shape here is
    # never used.
    shape = (x.shape[0] // n + (me < x.shape[0] % n),) + x.shape[1:] if x.ndim else (0,)
    return _host(lambda a: [hnp.reducescatter(a[0], op, name, prescale_factor, postscale_factor,
                                              process_set)],
                 [x], [_spec(x, shape)], _what("reducescatter", name))[0]


def barrier(process_set=global_process_set):
    """Returns when every rank (of ``process_set``) has called barrier()."""
    hnp.barrier(process_set)


def join():
    """This rank is out of data (see ``hora.torch.join``); returns the last rank to join."""
    return hnp.join()
