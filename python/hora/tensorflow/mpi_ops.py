"""Hora's collectives on TensorFlow tensors, with Horovod's names and gradients.

Every operation works in eager mode and inside ``tf.function``: eagerly it
hands NumPy arrays of the tensors to :mod:`hora.numpy` (the core takes them
through DLPack); in a graph it is a ``tf.py_function`` around the same call,
which runs when the graph runs (not inside XLA: ``jit_compile=True`` is not
supported). Names and matching across ranks are those of ``hora.numpy``, so a
named TensorFlow allreduce meets the same name from a torch, NumPy or JAX rank.

Costs: an input's values are copied once to reach the core (TensorFlow's
``numpy()`` returns a copy) and the result once into a new tensor.

Gradients, as Horovod's TensorFlow ops define them: allreduce's is the
allreduce of the gradient with the same op and scale factors; allgather's
is the Average allreduce of the gradient, this rank's rows of it;
broadcast's is the Average allreduce on the root and zeros elsewhere;
alltoall's is the alltoall back with the received splits; reducescatter's
is the allgather of the gradient (times the set's size for Sum, times the
scale factors).

In a TF1 graph (``tf.compat.v1`` sessions) collectives are ordered and
named as :mod:`hora.tensorflow.graph_calls` says.
"""

import numpy as np
import tensorflow as tf

import hora.numpy as hnp
from hora.common import basics
from hora.common.basics import (  # noqa: F401
    Adasum,
    Average,
    Max,
    Min,
    Product,
    Sum,
    ccl_built,
    cross_rank,
    cross_size,
    cuda_built,
    ddl_built,
    gloo_built,
    gloo_enabled,
    init,
    is_homogeneous,
    is_initialized,
    local_rank,
    local_size,
    mpi_built,
    mpi_enabled,
    mpi_threads_supported,
    nccl_built,
    rank,
    rocm_built,
    shutdown,
    size,
    start_timeline,
    stop_timeline,
)
from hora.common.process_sets import (  # noqa: F401
    ProcessSet,
    add_process_set,
    global_process_set,
    process_set_ranks,
    remove_process_set,
)
from hora.tensorflow.compression import Compression
from hora.tensorflow.graph_calls import call as _call
from hora.tensorflow.graph_calls import graph_name as _graph_name
from hora.tensorflow.graph_calls import in_xla as _in_xla
from hora.tensorflow.graph_calls import plain as _plain
from hora.tensorflow.graph_calls import tf1_graph as _tf1_graph
from hora.tensorflow.graph_calls import with_gradient as _with_gradient


def _set_size(process_set):
    return len(process_set_ranks(process_set))


def _set_rank(process_set):
    return process_set_ranks(process_set).index(rank())


def _value_now(fn):
    """``fn()`` (an int) as an int32 scalar tensor: eagerly at once; in a
    graph each time it runs (a py_function, ordered with no collective), so
    that a function traced before an elastic reset reads the new world's
    value; under XLA, which runs no py_function, the value at tracing."""
    if tf.executing_eagerly() or _in_xla():
        return tf.constant(fn(), tf.int32)
    return _call(lambda arrays: [np.int32(fn())], [tf.constant(0)], [tf.int32],
                 [tf.TensorShape([])], chain=False)[0]


def set_size_now(process_set):
    """``process_set``'s size: an int eagerly; in a graph an int32 scalar
    tensor read each time the graph runs (see ``_value_now``)."""
    if tf.executing_eagerly():
        return _set_size(process_set)
    return _value_now(lambda: _set_size(process_set))


def _sparse_allreduce(slices, op, name, process_set):
    """An IndexedSlices gradient: every rank's values and indices gathered (Horovod's
    way; Average divides the values by the set's size)."""
    values = allgather(slices.values, None if name is None else name + ".values",
                       process_set=process_set)
    indices = allgather(slices.indices, None if name is None else name + ".indices",
                        process_set=process_set)
    if op == Average:
        values = values / tf.cast(set_size_now(process_set), values.dtype)
    elif op != Sum:
        raise ValueError("allreduce of IndexedSlices takes Sum or Average, not %s"
                         % basics.op_name(op))
    return tf.IndexedSlices(values, indices, dense_shape=slices.dense_shape)


@_plain
def allreduce(tensor, average=None, device_dense="", device_sparse="",
              compression=Compression.none, op=None, prescale_factor=1.0,
              postscale_factor=1.0, name=None, process_set=global_process_set,
              ignore_name_scope=False):
    """Reduces ``tensor`` across ranks (Average by default); returns a new tensor.
    ``tf.IndexedSlices`` are gathered instead (values and indices)."""
    del device_dense, device_sparse, ignore_name_scope
    op = basics.check_op(op, average)
    if isinstance(tensor, tf.IndexedSlices):
        return _sparse_allreduce(tensor, op, name, process_set)
    return _allreduce_list([tensor], op, compression, prescale_factor, postscale_factor, name,
                           process_set, False)[0]


@_plain
def grouped_allreduce(tensors, average=None, device_dense="", device_sparse="",
                      compression=Compression.none, op=None, prescale_factor=1.0,
                      postscale_factor=1.0, name=None, process_set=global_process_set):
    """Reduces a list of tensors as one group (released together, fused); returns
    the list of results (members named "<name>.<i>", a group of one too)."""
    del device_dense, device_sparse
    if not isinstance(tensors, (list, tuple)):
        raise TypeError("grouped_allreduce: expected a list of tensors, got %s"
                        % type(tensors).__name__)
    return _allreduce_list(tensors, basics.check_op(op, average), compression, prescale_factor,
                           postscale_factor, name, process_set, True)


def _allreduce_list(tensors, op, compression, prescale_factor, postscale_factor, name,
                    process_set, grouped):
    """The allreduce of ``tensors``: one group (``grouped``), or one tensor alone."""
    if not tensors:
        return []
    name = _graph_name(name, "grouped_allreduce" if grouped else "allreduce")
    pairs = [compression.compress(tf.convert_to_tensor(t)) for t in tensors]

    def on_arrays(arrays):
        if grouped:
            return hnp.grouped_allreduce(arrays, op, name, prescale_factor, postscale_factor,
                                         process_set)
        return [hnp.allreduce(arrays[0], op, name, prescale_factor, postscale_factor,
                              process_set)]

    def reduce(*xs):
        ys = _call(on_arrays, xs, [x.dtype for x in xs], [x.shape for x in xs])

        def grad(*dys):
            # (A lone call's gradient is a lone call, as torch's and JAX's are.)
            return _allreduce_list(list(dys), op, Compression.none, prescale_factor,
                                   postscale_factor, None, process_set, grouped)

        return ys, grad

    outs = _with_gradient(reduce, *[c for c, _ in pairs])
    return [compression.decompress(o, ctx) for o, (_, ctx) in zip(outs, pairs)]


@_plain
def allgather(tensor, name=None, ignore_name_scope=False, process_set=global_process_set):
    """Concatenates every rank's tensor along dimension 0, in rank order (dimension 0
    may differ between ranks)."""
    del ignore_name_scope
    return _allgather_list([tensor], name, process_set, False)[0]


@_plain
def grouped_allgather(tensors, name=None, process_set=global_process_set):
    """Allgathers a list of tensors as one group; returns the list of results
    (members named as grouped_allreduce's)."""
    return _allgather_list(tensors, name, process_set, True)


def _allgather_shape(x):
    """The static shape of ``x``'s allgather: dimension 0 unknown (the ranks'
    rows add up), the rest ``x``'s; a scalar is gathered as a vector; an
    unknown rank stays unknown."""
    if x.shape.rank is None:
        return tf.TensorShape(None)
    return tf.TensorShape([None]).concatenate(x.shape[1:] if x.shape.rank else [])


def _allgather_list(tensors, name, process_set, grouped):
    """The allgather of ``tensors``: one group (``grouped``), or one tensor alone."""
    if not tensors:
        return []
    name = _graph_name(name, "grouped_allgather" if grouped else "allgather")
    tensors = [tf.convert_to_tensor(t) for t in tensors]

    def on_arrays(arrays):
        if grouped:
            return hnp.grouped_allgather(arrays, name, process_set)
        return [hnp.allgather(arrays[0], name, process_set)]

    def gather(*xs):
        ys = _call(on_arrays, xs, [x.dtype for x in xs], [_allgather_shape(x) for x in xs])

        def grad(*dys):
            # (A lone call's gradient takes lone calls, as torch's does: the
            # allreduce, then every rank's rows as int64.)
            summed = _allreduce_list(list(dys), Average, Compression.none, 1.0, 1.0, None,
                                     process_set, grouped)
            rows = tf.stack([tf.shape(tf.reshape(x, [-1]) if x.shape.rank == 0 else x)[0]
                             for x in xs])
            sent = tf.cast(rows, tf.int64) if not grouped else tf.reshape(rows, [1, -1])
            # (Sizes and ranks as the graph runs: a function traced before an
            # elastic reset runs in the new world.)
            every = tf.reshape(allgather(sent, process_set=process_set), [-1, len(xs)])
            mine = _set_rank(process_set) if tf.executing_eagerly() else \
                _value_now(lambda: _set_rank(process_set))
            offsets = tf.cast(tf.reduce_sum(every[:mine], axis=0), rows.dtype)
            out = []
            for i, (g, x) in enumerate(zip(summed, xs)):
                mine = g[offsets[i]:offsets[i] + rows[i]]
                out.append(tf.reshape(mine, []) if x.shape.rank == 0 else mine)
            return out

        return ys, grad

    return _with_gradient(gather, *tensors)


@_plain
def broadcast(tensor, root_rank, name=None, ignore_name_scope=False,
              process_set=global_process_set):
    """Returns root's ``tensor`` on every rank (a new tensor)."""
    del ignore_name_scope
    name = _graph_name(name, "broadcast")

    def bcast(x):
        y = _call(lambda arrays: [hnp.broadcast(arrays[0], root_rank, name, process_set)],
                  [x], [x.dtype], [x.shape])[0]

        def grad(dy):
            reduced = allreduce(dy, op=Average, process_set=process_set)
            return reduced if rank() == root_rank else tf.zeros_like(reduced)

        return y, grad

    return _with_gradient(bcast, tf.convert_to_tensor(tensor))


def broadcast_in_one_op(variables, root_rank, name, process_set=global_process_set):
    """A TF1 graph's op that assigns root's value to each of ``variables``,
    broadcasts "<name>.<i>" one after another inside it, and waits for no
    other collective: one op a variable would each take a session thread
    while it waits (the session's few threads taken, ranks waiting in
    different broadcasts would wait for good), and a chain would make the op
    run every collective built before it (a model's train step)."""
    variables = list(variables)
    if not variables:
        return tf.no_op()

    def send(arrays):
        return [hnp.broadcast(a, root_rank, "%s.%d" % (name, i), process_set)
                for i, a in enumerate(arrays)]

    values = _call(send, [tf.convert_to_tensor(v) for v in variables],
                   [v.dtype.base_dtype for v in variables], [v.shape for v in variables],
                   chain=False)
    return tf.group(*[v.assign(x) for v, x in zip(variables, values)])


@_plain
def broadcast_(variables, root_rank, name=None, process_set=global_process_set):
    """Assigns root's values to each variable of ``variables`` in place. In a
    TF1 graph it returns the op that does it (``broadcast_in_one_op``, run
    it with the session), as Horovod's; else the variables."""
    if _tf1_graph() is not None:  # (a name new to the graph: two such ops may run at once)
        return broadcast_in_one_op(variables, root_rank, _graph_name(name, "broadcast_"),
                                   process_set)
    for i, v in enumerate(variables):
        v.assign(broadcast(v, root_rank, None if name is None else "%s.%d" % (name, i),
                           process_set=process_set))
    return variables


@_plain
def alltoall(tensor, splits=None, name=None, ignore_name_scope=False,
             process_set=global_process_set):
    """Sends ``splits[p]`` rows of ``tensor`` to each rank p; returns the rows received
    in rank order, and with ``splits`` given ``(received, received_splits)``
    (Horovod's form; an even split when ``splits`` is None)."""
    del ignore_name_scope
    name = _graph_name(name, "alltoall")
    tensor = tf.convert_to_tensor(tensor)
    even = splits is None
    eager = tf.executing_eagerly()
    if even and tensor.shape.rank == 0:
        # (No rows to split: hora.numpy refuses it, on every rank.)
        splits = np.zeros([_set_size(process_set)], np.int32)
    elif even and eager and tensor.shape.rank:
        # (An eager tensor's shape is known: TF ops building the splits
        # took 0.2 ms, half the call.)
        n = _set_size(process_set)
        splits = np.full([n], tensor.shape[0] // n, np.int32)
    elif even:
        # In a graph, an even split of the set as the graph runs (a function
        # traced before an elastic reset splits for the new world): made
        # inside the call, from an empty placeholder.
        splits = np.zeros([0], np.int32)
    if not isinstance(splits, np.ndarray):
        splits = tf.cast(tf.convert_to_tensor(splits), tf.int32)
    # (The received splits' length is the set's size: known when eager.)
    recv_shape = tf.TensorShape([_set_size(process_set) if eager else None])

    def on_arrays(arrays):
        x, s = arrays
        if even:
            n = _set_size(process_set)
            s = np.full([n], x.shape[0] // n if x.ndim else 0, np.int32)
        return list(hnp.alltoall(x, s, name, process_set))

    def a2a(x):
        shape = tf.TensorShape([None]).concatenate(x.shape[1:])
        y, recv = _call(on_arrays, [x, splits], [x.dtype, tf.int32], [shape, recv_shape])

        def grad(dy, _unused=None):
            back, _ = alltoall(dy, splits=recv, process_set=process_set)
            return back

        return (y, recv), grad

    out, received = _with_gradient(a2a, tensor)
    return out if even else (out, received)


@_plain
def reducescatter(tensor, op=Average, name=None, compression=Compression.none,
                  prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set,
                  ignore_name_scope=False):
    """Reduces ``tensor`` across ranks and returns this rank's slice of dimension 0
    (``dim0 // size`` rows, the first ``dim0 % size`` ranks one more)."""
    del ignore_name_scope
    return _reducescatter_list([tensor], basics.check_op(op), name, compression,
                               prescale_factor, postscale_factor, process_set, False)[0]


@_plain
def grouped_reducescatter(tensors, op=Average, name=None, compression=Compression.none,
                          prescale_factor=1.0, postscale_factor=1.0,
                          process_set=global_process_set):
    """Reduce-scatters a list of tensors as one group; returns the list of slices
    (members named as grouped_allreduce's)."""
    return _reducescatter_list(tensors, basics.check_op(op), name, compression,
                               prescale_factor, postscale_factor, process_set, True)


def _reducescatter_list(tensors, op, name, compression, prescale_factor, postscale_factor,
                        process_set, grouped):
    """The reducescatter of ``tensors``: one group (``grouped``), or one tensor alone."""
    if not tensors:
        return []
    name = _graph_name(name, "grouped_reducescatter" if grouped else "reducescatter")
    pairs = [compression.compress(tf.convert_to_tensor(t)) for t in tensors]

    def on_arrays(arrays):
        if grouped:
            return hnp.grouped_reducescatter(arrays, op, name, prescale_factor,
                                             postscale_factor, process_set)
        return [hnp.reducescatter(arrays[0], op, name, prescale_factor, postscale_factor,
                                  process_set)]

    def scatter(*xs):
        shapes = [tf.TensorShape([None]).concatenate(x.shape[1:]) if x.shape.rank
                  else tf.TensorShape(None) for x in xs]
        ys = _call(on_arrays, xs, [x.dtype for x in xs], shapes)

        def grad(*dys):
            # Horovod's: Sum's gradient is size() times the allgather of the
            # gradient, Average's the allgather itself; the scale factors apply.
            scale = prescale_factor * postscale_factor
            gs = _allgather_list(list(dys), None, process_set, grouped)
            if op == Sum:  # (the set's size as the graph runs)
                n = set_size_now(process_set)
                gs = [g * tf.cast(n, g.dtype) for g in gs]
            return [g * tf.cast(scale, g.dtype) if scale != 1.0 else g for g in gs]

        return ys, grad

    outs = _with_gradient(scatter, *[c for c, _ in pairs])
    return [compression.decompress(o, ctx) for o, (_, ctx) in zip(outs, pairs)]


def _scalar_op(fn):
    """``fn()`` (an int) at once when eager; in a graph, a py_function that runs it
    each time the graph runs, as an int32 scalar tensor. In a TF1 graph it is
    out of the collectives' chain: run on its own (the end of an epoch), it
    runs no collective built before it (the train step's, with their
    feeds), and none built after it runs it."""
    if tf.executing_eagerly():
        return fn()
    return _call(lambda arrays: [np.int32(fn())], [tf.constant(0)], [tf.int32],
                 [tf.TensorShape([])], chain=False)[0]


@_plain
def barrier(process_set=global_process_set):
    """Returns when every rank (of ``process_set``) has called barrier() (in a
    tf.function, each time it runs)."""
    if tf.executing_eagerly():
        return hnp.barrier(process_set)
    return _scalar_op(lambda: hnp.barrier(process_set) or 0)


@_plain
def join():
    """This rank is out of data (see ``hora.torch.join``); returns the last rank to
    join (in a tf.function, as an int32 tensor, each time it runs)."""
    return _scalar_op(lambda: hnp.join())


@_plain
def size_op(process_set_id=0, name=None):
    """The job's (or a process set's) size as a scalar int32 tensor (Horovod's op):
    in a graph, the size when the graph runs (after an elastic reset, the new
    world's), not when it was built."""
    del name
    _known_set(process_set_id, "size_op")
    return _value_now(lambda: len(basics.session().process_sets()[process_set_id])
                      if process_set_id else size())


@_plain
def rank_op(name=None):
    """This rank as a scalar int32 tensor (Horovod's op; in a graph, as it runs)."""
    del name
    return _value_now(lambda: rank())


@_plain
def local_rank_op(name=None):
    """This rank's index on its host as a scalar int32 tensor (Horovod's op; in
    a graph, as it runs)."""
    del name
    return _value_now(lambda: local_rank())


@_plain
def local_size_op(name=None):
    """The number of ranks on this host as a scalar int32 tensor (Horovod's op;
    in a graph, as it runs)."""
    del name
    return _value_now(lambda: local_size())


def _known_set(process_set_id, what):
    if process_set_id not in basics.session().process_sets():
        raise basics.InvalidArgumentError("%s: there is no process set %r (never added, or "
                                          "removed)" % (what, process_set_id))


@_plain
def process_set_included_op(process_set_id=0, name=None):
    """1 where this rank is in process set ``process_set_id``, else 0, as a
    scalar int32 tensor (Horovod's op; in a graph, as it runs); an unknown
    set is an InvalidArgumentError naming it. A ProcessSet object is taken
    as its id."""
    del name
    if isinstance(process_set_id, ProcessSet):
        if process_set_id.process_set_id is None:
            raise basics.InvalidArgumentError(
                "process_set_included_op: %r was never added (hvd.add_process_set, or "
                "hvd.init(process_sets=...)), or was removed" % (process_set_id,))
        process_set_id = process_set_id.process_set_id
    _known_set(process_set_id, "process_set_included_op")

    def included():
        sets = basics.session().process_sets()
        if process_set_id not in sets:
            raise basics.InvalidArgumentError("process_set_included_op: there is no process "
                                              "set %r (removed since the graph was built)"
                                              % (process_set_id,))
        return int(process_set_id == 0 or rank() in sets[process_set_id])

    return _value_now(included)


def broadcast_object_fn(root_rank=0, session=None, name=None, process_set=global_process_set):
    """Horovod's TF1 form: a function ``f(obj)`` that returns root's ``obj`` on
    every rank (pickled, as ``broadcast_object``), its collectives named
    ``name`` (default "broadcast_object_fn"). It runs outside any graph, so
    ``session`` is taken and not needed, and it works eagerly too."""
    del session
    name = "broadcast_object_fn" if name is None else str(name)

    def broadcast_obj(obj):
        return hnp.broadcast_object(obj, root_rank, name, process_set)

    return broadcast_obj
