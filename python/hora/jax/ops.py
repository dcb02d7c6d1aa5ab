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
from hora.jax.compression import Compression
from hora.jax.host import array as _array
from hora.jax.host import differentiable, no_values, run, spec, traced, tracing, what

# A jitted function keeps its trace, whose shapes (an allgather's rows, a
# reducescatter's slice) and sizes were the world's when it was traced: an
# elastic reset drops every trace, so that steps are traced again in the
# new world.
elastic.after_reset(jax.clear_caches)


def _reduce(leaves, op, name, prescale, postscale, process_set, grouped=True):
    """The allreduce of ``leaves``: one group (``grouped``), or one array alone."""
    def on_arrays(arrays):
        if grouped:
            return hnp.grouped_allreduce(arrays, op, name, prescale, postscale, process_set)
        return [hnp.allreduce(arrays[0], op, name, prescale, postscale, process_set)]

    return run(on_arrays, leaves, [spec(x) for x in leaves])


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
                      process_set=global_process_set, compression=Compression.none):
    """Reduces every leaf of ``tree`` (a list, dict or any pytree of arrays) across
    ranks as one fused group (Average by default); returns the same structure.
    Members are named "<name>.<i>" in the order of the tree's leaves (float0
    leaves, unsent, not counted).
    ``compression`` (``hvd.Compression.fp16``, ``.bf16``) casts floating
    leaves for the wire and back. ``float0`` leaves (an integer input's
    gradient) have no values: they come back as they are, unsent."""
    return _allreduce_tree(tree, op, name, prescale_factor, postscale_factor, process_set, True,
                           compression)


def _allreduce_tree(tree, op, name, prescale_factor, postscale_factor, process_set, grouped,
                    compression):
    op = basics.check_op(op)
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    # float0 leaves (an integer parameter's gradient under allow_int) have no
    # values: they come back as they are (every rank has the same dtypes).
    real = [i for i, x in enumerate(leaves) if not no_values(x)]
    if not real:
        return tree
    pairs = [compression.compress(_array(leaves[i])) for i in real]
    sent = [x for x, _ in pairs]
    args = (op, name, float(prescale_factor), float(postscale_factor), process_set, grouped)
    # Concrete arrays cannot be differentiated: skip custom_vjp's machinery (it costs
    # hundreds of microseconds a call).
    out = _grouped(sent, *args) if traced(sent) else _reduce(sent, *args)
    for i, x, (_, ctx) in zip(real, out, pairs):
        leaves[i] = compression.decompress(x, ctx)
    return jax.tree_util.tree_unflatten(treedef, leaves)


def allreduce(x, op=None, name=None, prescale_factor=1.0, postscale_factor=1.0,
              process_set=global_process_set, compression=Compression.none):
    """Reduces ``x`` (an array, or what ``jnp.asarray`` takes) across ranks
    (Average by default); returns a new array. For a pytree of arrays:
    ``grouped_allreduce``. ``compression`` as ``grouped_allreduce``'s."""
    return _allreduce_tree([_one_array(x, "allreduce")], op, name, prescale_factor,
                           postscale_factor, process_set, False, compression)[0]


def _one_array(x, collective):
    """``x`` as one array; a TypeError naming the collective for a pytree of
    several arrays (a dict), before any rank sends anything."""
    if isinstance(x, (jax.Array, np.ndarray)):
        return x
    try:
        return jnp.asarray(x)
    except (TypeError, ValueError) as e:
        raise TypeError("hora.jax.%s takes one array (or what jnp.asarray takes), got %s "
                        "(%s); for a pytree of arrays use grouped_%s"
                        % (collective, type(x).__name__, e, collective)) from None


def _set_size(process_set):
    return len(process_set_ranks(process_set))


def _set_rank(process_set):
    """This rank's index in ``process_set`` (0 outside it: hora.numpy then
    says so on every rank as the collective runs)."""
    ranks = process_set_ranks(process_set)
    return ranks.index(basics.rank()) if basics.rank() in ranks else 0


def set_size_now(process_set, like):
    """``process_set``'s size: an int where ``like`` (a pytree) is concrete;
    where it is traced (inside ``jax.jit``), an int32 scalar read by a
    callback each time the step runs, so that a step traced before an
    elastic reset divides by the new world's size (JAX reuses a trace for
    the same function, whatever the world)."""
    if not traced(jax.tree_util.tree_leaves(like)) and not tracing():
        return _set_size(process_set)
    return io_callback(lambda: np.int32(_set_size(process_set)),
                       jax.ShapeDtypeStruct((), np.int32), ordered=True)


def _gathered_shape(x, n):
    return (x.shape[0] * n,) + x.shape[1:]


def _average(gs, process_set):
    """The Average allreduce of the cotangents ``gs``, one group (itself
    differentiable)."""
    return _allreduce_tree(list(gs), basics.Average, None, 1.0, 1.0, process_set, True,
                           Compression.none)


def allgather(x, name=None, process_set=global_process_set):
    """Every rank's ``x`` concatenated along axis 0 in rank order. Eagerly the row
    counts may differ; inside jit every rank must have ``x``'s shape. Its
    gradient: the Average allreduce of the cotangent, this rank's rows."""
    return _allgather([x], name, process_set, True)[0]


def grouped_allgather(xs, name=None, process_set=global_process_set):
    """``allgather`` of a list of arrays as one group; returns the list."""
    return _allgather(_list(xs, "grouped_allgather"), name, process_set, False)


def _allgather(xs, name, process_set, single):
    # (A scalar is gathered as one row each, as hora.numpy gathers it.)
    rows = [x.reshape(1) if x.ndim == 0 else x for x in (_array(x) for x in xs)]
    if not rows:
        return []
    n = _set_size(process_set)
    collective = what("allgather" if single else "grouped allgather", name)

    def forward(leaves):
        if single:
            def fn(a):
                return [hnp.allgather(a[0], name, process_set)]
        else:
            def fn(a):
                return hnp.grouped_allgather(a, name, process_set)
        return run(fn, leaves, [spec(x, _gathered_shape(x, n)) for x in leaves], collective)

    def backward(real, gs):
        # This rank's rows start after the earlier ranks' (their counts may
        # differ eagerly: every rank's are gathered, as hora.torch does).
        mine = np.array([[rows[i].shape[0] for i in real]], dtype=np.int32)
        every = run(lambda a: [hnp.allgather(a[0], None, process_set)], [mine],
                    [jax.ShapeDtypeStruct((n, len(real)), np.int32)],
                    what("allgather's gradient row counts", name))[0]
        starts = jnp.sum(every[:_set_rank(process_set)], axis=0)
        return [jax.lax.dynamic_slice_in_dim(g, starts[j], rows[i].shape[0], 0)
                for j, (i, g) in enumerate(zip(real, _average(gs, process_set)))]

    return differentiable(forward, backward, rows)


def _list(xs, collective):
    if isinstance(xs, (jax.Array, np.ndarray)) or not isinstance(xs, (list, tuple)):
        raise TypeError("hora.jax.%s: expected a list of arrays, got %s"
                        % (collective, type(xs).__name__))
    return list(xs)


def broadcast(x, root_rank, name=None, process_set=global_process_set):
    """Root's ``x`` on every rank (a new array). Its gradient: the Average
    allreduce of the cotangent on the root, zeros elsewhere."""
    x = _array(x)

    def forward(leaves):
        return run(lambda a: [hnp.broadcast(a[0], root_rank, name, process_set)], leaves,
                   [spec(leaves[0])])

    def backward(real, gs):
        reduced = _average(gs, process_set)[0]
        return [reduced if basics.rank() == root_rank else jnp.zeros_like(gs[0])]

    return differentiable(forward, backward, [x])[0]


def alltoall(x, splits=None, name=None, process_set=global_process_set):
    """Sends ``splits[p]`` rows to each rank p; returns the rows received (and, with
    ``splits`` given, the received splits). Inside jit: even splits only. Its
    gradient (even splits): the alltoall of the cotangent."""
    x = _array(x)
    if splits is None:
        def forward(leaves):
            return run(lambda a: [hnp.alltoall(a[0], None, name, process_set)], leaves,
                       [spec(leaves[0])], what("alltoall", name))

        return differentiable(forward, lambda real, gs: forward(gs), [x])[0]
    if traced([x]) or tracing():
        raise basics.UnimplementedError(
            "hora.jax.alltoall with splits inside jax.jit or under a JAX transformation "
            "(grad, vmap): the output's shape would depend on the other ranks; call it "
            "eagerly on concrete arrays, or with splits=None")
    out, recv = hnp.alltoall(np.asarray(x), np.asarray(splits), name, process_set)
    return jnp.asarray(out), jnp.asarray(recv)


def reducescatter(x, op=None, name=None, prescale_factor=1.0, postscale_factor=1.0,
                  process_set=global_process_set):
    """Reduces across ranks; returns this rank's slice of axis 0 (``dim0 // size``
    rows, the first ``dim0 % size`` ranks one more). Its gradient: the
    allgather of the cotangent, times the scale factors (and the set's size
    for Sum)."""
    return _reducescatter([x], op, name, prescale_factor, postscale_factor, process_set,
                          True)[0]


def grouped_reducescatter(xs, op=None, name=None, prescale_factor=1.0, postscale_factor=1.0,
                          process_set=global_process_set):
    """``reducescatter`` of a list of arrays as one group; returns the list."""
    return _reducescatter(_list(xs, "grouped_reducescatter"), op, name, prescale_factor,
                          postscale_factor, process_set, False)


def _reducescatter(xs, op, name, prescale, postscale, process_set, single):
    op = basics.check_op(op)
    xs = [_array(x) for x in xs]
    if not xs:
        return []
    n, me = _set_size(process_set), _set_rank(process_set)
    # A scalar has no rows: hora.numpy refuses it on every rank (inside jit
    # when the step runs, as the others' calls do), and its shape here is
    # never used.
    shapes = [(x.shape[0] // n + (me < x.shape[0] % n),) + x.shape[1:] if x.ndim else (0,)
              for x in xs]
    collective = what("reducescatter" if single else "grouped reducescatter", name)

    def forward(leaves):
        if single:
            def fn(a):
                return [hnp.reducescatter(a[0], op, name, prescale, postscale, process_set)]
        else:
            def fn(a):
                return hnp.grouped_reducescatter(a, op, name, prescale, postscale,
                                                 process_set)
        return run(fn, leaves, [spec(x, shape) for x, shape in zip(leaves, shapes)],
                   collective)

    def backward(real, gs):
        scale = (n if op == basics.Sum else 1.0) * prescale * postscale
        gathered = run(lambda a: hnp.grouped_allgather(a, None, process_set), gs,
                       [spec(g, xs[i].shape) for i, g in zip(real, gs)],
                       what("reducescatter's gradient allgather", name))
        return [g * scale if scale != 1.0 else g for g in gathered]

    return differentiable(forward, backward, xs)


def barrier(process_set=global_process_set):
    """Returns when every rank (of ``process_set``) has called barrier()."""
    hnp.barrier(process_set)


def join():
    """This rank is out of data (see ``hora.torch.join``); returns the last rank to join."""
    return hnp.join()
