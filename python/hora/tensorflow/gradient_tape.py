"""Averaging TensorFlow gradients across ranks: ``allreduce_gradients``,
``DistributedGradientTape``, ``PartialDistributedGradientTape``,
``broadcast_variables`` and ``BroadcastGlobalVariablesHook``
(``DistributedOptimizer``: optimizer.py).

The gradients of one ``gradient()`` call are reduced as one group per
``num_groups`` share (one fused allreduce by default), or in the groups of
Horovod's ``groups=`` lists of variables (each list one group, every other
gradient a group of its own); ``None`` gradients stay ``None``;
``tf.IndexedSlices`` are gathered unless ``sparse_as_dense``.
``gradient_predivide_factor`` f: gradients are multiplied by 1/f before the
sum and by f/size after it (Horovod's split of the average). The gradients
of local variables (``register_local_source``, ``local_layers``) are not
reduced; with ``scale_local_gradients`` (the default) they are divided by the
process set's size, as Horovod's.
"""

import tensorflow as tf

from hora.common import basics, gradient_groups
from hora.common.process_sets import global_process_set
from hora.tensorflow import mpi_ops
from hora.tensorflow.compression import Compression
from hora.tensorflow.graph_calls import graph_name, tf1_graph

# Hora's functions are graph-safe as written: autograph (tf.function's rewrite
# of Python control flow) is kept out of them.
_plain = tf.autograph.experimental.do_not_convert


def _scales(op, predivide):
    """The op and scale factors of ``gradient_predivide_factor`` (Horovod's:
    each gradient divided by it before the sum, the sum multiplied by it over
    the set's size). Average's division is the engine's, by the set's size as
    the step runs: a step traced before an elastic reset stays right."""
    if predivide == 1.0:
        return op, 1.0, 1.0
    if op != basics.Average:
        raise ValueError("gradient_predivide_factor needs op=Average, got %s" % basics.op_name(op))
    return basics.Average, 1.0 / predivide, predivide


def _divided(g, n):
    """A local gradient divided by ``n`` (an int, or an int32 tensor in a graph;
    IndexedSlices: its values)."""
    if isinstance(n, int) and n == 1:
        return g
    if isinstance(g, tf.IndexedSlices):
        return tf.IndexedSlices(g.values / tf.cast(n, g.values.dtype), g.indices, g.dense_shape)
    return g / tf.cast(n, g.dtype)


@_plain
def allreduce_gradients(grads, op=basics.Average, compression=Compression.none,
                        sparse_as_dense=False, gradient_predivide_factor=1.0, num_groups=0,
                        groups=None, process_set=global_process_set, name="gradients",
                        variables=None, local=None):
    """The list ``grads`` reduced across ranks (``None`` entries stay ``None``). On a
    rank outside ``process_set`` they are returned as they are (Horovod's rule).
    ``variables``: each gradient's variable, which ``groups=`` lists and
    ``local`` (a ``gradient_groups.LocalVariables``: gradients left unreduced)
    need."""
    if process_set is not None and not process_set.included():
        return list(grads)
    more, lists = gradient_groups.check_groups(groups, "allreduce_gradients")
    variables = [None] * len(grads) if variables is None else list(variables)
    if lists is not None and any(v is None for v in variables):
        raise ValueError("allreduce_gradients: groups= lists of variables need variables=, "
                         "the variable of each gradient")
    sparse_op = op
    op, pre, post = _scales(op, gradient_predivide_factor)
    out = list(grads)
    dense, values = [], {}
    local_ids = local.ids() if local is not None else set()
    n = None  # (the set's size as the step runs, read once: local gradients only)
    for i, (g, v) in enumerate(zip(grads, variables)):
        if g is None:
            continue
        if v is not None and id(v) in local_ids:
            if local.scale:
                n = mpi_ops.set_size_now(process_set) if n is None else n
                out[i] = _divided(g, n)
            continue
        if isinstance(g, tf.IndexedSlices):
            if not sparse_as_dense:
                out[i] = mpi_ops.allreduce(g, op=sparse_op, name="%s.sparse.%d" % (name, i),
                                           process_set=process_set)
                continue
            g = tf.convert_to_tensor(g)
        dense.append((i, v))
        values[i] = g
    for members in gradient_groups.split(dense, num_groups or more, lists):
        reduced = mpi_ops.grouped_allreduce([values[i] for i in members], op=op,
                                            compression=compression, prescale_factor=pre,
                                            postscale_factor=post,
                                            name=gradient_groups.group_name(name, members),
                                            process_set=process_set)
        for i, r in zip(members, reduced):
            out[i] = r
    return out


class _DistributedGradientTape(tf.GradientTape):
    @_plain
    def gradient(self, target, sources, output_gradients=None, **kwargs):
        # (This body is copied into a subclass of the user's tape's class.)
        grads = super(type(self), self).gradient(target, sources, output_gradients, **kwargs)
        flat = tf.nest.flatten(grads)
        reduced = allreduce_gradients(flat, variables=tf.nest.flatten(sources),
                                      local=self._hora_local, **self._hora_args)
        return tf.nest.pack_sequence_as(grads, reduced)

    def register_local_source(self, source):
        """``source``'s gradient stays on this rank: not reduced (divided by the
        process set's size where the tape scales local gradients)."""
        self._hora_local.add(source)


@_plain
def DistributedGradientTape(gradtape, device_dense="", device_sparse="",
                            compression=Compression.none, sparse_as_dense=False,
                            op=basics.Average, gradient_predivide_factor=1.0, num_groups=0,
                            groups=None, process_set=global_process_set,
                            scale_local_gradients=True):
    """A tape whose ``gradient()`` returns the gradients averaged (``op``) across ranks.

    Wrap the tape after recording: ``tape = hvd.DistributedGradientTape(tape)``.
    ``num_groups`` (or ``groups=`` an int, as Horovod's) splits the gradients
    into that many fused groups; ``groups=`` a list of lists of variables
    makes each list's gradients one group (every other gradient a group of
    its own). ``tape.register_local_source(v)`` leaves ``v``'s gradient
    unreduced (divided by the process set's size with
    ``scale_local_gradients``).
    """
    del device_dense, device_sparse
    more, _ = gradient_groups.check_groups(groups, "DistributedGradientTape")
    if more:
        num_groups, groups = more, None  # (Horovod's: an int is num_groups)
    cls = type(gradtape.__class__.__name__, (gradtape.__class__,),
               dict(_DistributedGradientTape.__dict__))
    tape = cls.__new__(cls)
    tape.__dict__.update(gradtape.__dict__)
    tape._hora_args = dict(op=basics.check_op(op), compression=compression,
                           sparse_as_dense=sparse_as_dense,
                           gradient_predivide_factor=gradient_predivide_factor,
                           num_groups=num_groups, groups=groups, process_set=process_set)
    tape._hora_local = gradient_groups.LocalVariables(scale_local_gradients)
    return tape


@_plain
def PartialDistributedGradientTape(gradtape, device_dense="", device_sparse="",
                                   compression=Compression.none, sparse_as_dense=False,
                                   op=basics.Average, gradient_predivide_factor=1.0,
                                   num_groups=0, groups=None, process_set=global_process_set,
                                   local_layers=None, scale_local_gradients=True):
    """``DistributedGradientTape`` whose gradients of the trainable variables of
    ``local_layers`` (a Keras layer or a collection of them) stay on this
    rank (Horovod's): not reduced, divided by the process set's size with
    ``scale_local_gradients``."""
    layers = gradient_groups.local_layers_checked(local_layers, "PartialDistributedGradientTape")
    tape = DistributedGradientTape(gradtape, device_dense, device_sparse, compression,
                                   sparse_as_dense, op, gradient_predivide_factor, num_groups,
                                   groups, process_set, scale_local_gradients)
    for layer in layers:
        tape._hora_local.add_layer(layer)
    return tape


@_plain
def broadcast_variables(variables, root_rank, process_set=global_process_set, inplace=True):
    """Assigns root's value to every variable (one broadcast each, named by
    position). In a TF1 graph it returns the op that does it (run it with the
    session), as Horovod's; else the variables."""
    del inplace
    variables = list(variables)
    if tf1_graph() is not None:
        # (A name new to the graph: two such ops may run at once.)
        return mpi_ops.broadcast_in_one_op(variables, root_rank,
                                           graph_name(None, "broadcast_variables"), process_set)
    for i, v in enumerate(variables):
        v.assign(mpi_ops.broadcast(v, root_rank, name="broadcast_variables.%d" % i,
                                   process_set=process_set))
    return variables


def broadcast_global_variables(root_rank, process_set=global_process_set):
    """Horovod's TF1 form: an op that assigns root's value to every global
    variable of the graph (``tf.compat.v1.global_variables()``, one
    broadcast each, named by position, all in one op). Eagerly there are no
    global variables: ``broadcast_variables(model.variables, root_rank)``
    instead (RuntimeError, as Horovod's)."""
    if tf.executing_eagerly():
        raise RuntimeError("broadcast_global_variables is for tf.compat.v1 graphs; eagerly, "
                           "use hvd.broadcast_variables(model.variables, root_rank)")
    return mpi_ops.broadcast_in_one_op(tf.compat.v1.global_variables(), root_rank,
                                       graph_name(None, "broadcast_global"), process_set)


class BroadcastGlobalVariablesHook(tf.compat.v1.train.SessionRunHook):
    """A ``tf.compat.v1`` session hook that broadcasts the global variables from
    ``root_rank`` once the session is created (Horovod's hook)."""

    def __init__(self, root_rank, device="", process_set=global_process_set):
        super().__init__()
        del device
        self.root_rank = root_rank
        self.process_set = process_set
        self._assigns = None

    def begin(self):
        self._assigns = broadcast_global_variables(self.root_rank, self.process_set)

    def after_create_session(self, session, coord):
        del coord
        if self._assigns:
            session.run(self._assigns)
