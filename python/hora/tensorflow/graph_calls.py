"""How hora.tensorflow's collectives run: eagerly at once, in a graph as a
``tf.py_function`` around the same :mod:`hora.numpy` call.

A TF1 graph (``tf.compat.v1`` sessions) runs independent ops in any order,
which may differ between ranks, and each collective holds one of the
session's threads while it waits for the other ranks: ranks waiting in
different collectives with every thread taken would wait for good. So
there each collective built outside ``tf.cond``/``tf.while_loop`` runs
after the one built before it (fetching it runs those too), and an unnamed
collective takes a name new to the graph ("hora_allreduce_3", the same on
every rank that built the same graph), so that one inside a ``tf.cond`` or
``tf.while_loop`` body, which the chain cannot reach, meets its peers by
name. Eagerly and in a ``tf.function``, whose ops run in program order,
unnamed collectives are numbered as ``hora.numpy``'s.
"""

import numpy as np
import tensorflow as tf

from hora.common import basics

# Hora's functions are graph-safe as written: autograph (tf.function's rewrite
# of Python control flow) is kept out of them.
plain = tf.autograph.experimental.do_not_convert

try:  # (TensorFlow's own fast paths ask the same; not a public API)
    from tensorflow.python.eager.record import could_possibly_record as _tape_active
except ImportError:  # pragma: no cover - another TensorFlow: always the gradient's path
    def _tape_active():
        return True

try:  # (not a public API: whether XLA compiles the graph being built)
    from tensorflow.python.ops.control_flow_util import GraphOrParentsInXlaContext as _in_xla
except ImportError:  # pragma: no cover - another TensorFlow: XLA's own error then
    def _in_xla(graph):
        return False

try:  # (not a public API: what graph a collective is built in)
    from tensorflow.python.framework.func_graph import FuncGraph as _FuncGraph
    from tensorflow.python.ops.control_flow_v2_func_graphs import (
        ControlFlowFuncGraph as _ControlFlowGraph)
except ImportError:  # pragma: no cover - another TensorFlow
    _FuncGraph = _ControlFlowGraph = None


def in_xla():
    """Whether the graph being built is compiled by XLA (False eagerly)."""
    return not tf.executing_eagerly() and _in_xla(tf.compat.v1.get_default_graph())


def tf1_graph():
    """The TF1 graph being built, also from a ``tf.cond`` or ``tf.while_loop``
    body in it (their own graphs name ops apart); None eagerly and in a
    ``tf.function``."""
    if tf.executing_eagerly():
        return None
    g = tf.compat.v1.get_default_graph()
    if _FuncGraph is None:
        return None if tf.inside_function() else g
    while isinstance(g, _ControlFlowGraph):
        g = g.outer_graph
    return None if isinstance(g, _FuncGraph) else g


def graph_name(name, kind):
    """``name``; in a TF1 graph, for None, a name new to the graph
    ("hora_allreduce_3"): ranks that built the same graph make the same
    names, whatever order the session runs the collectives in (see the
    module doc)."""
    if name is not None:
        return name
    g = tf1_graph()
    return None if g is None else g.unique_name("hora_" + kind, mark_as_used=True)


def with_gradient(f, *xs):
    """``tf.custom_gradient(f)(*xs)``; eagerly with no gradient tape or forward
    accumulator active (nothing could record it), ``f``'s value alone: the
    decorator costs over 0.1 ms a call."""
    if not tf.executing_eagerly() or _tape_active():
        return tf.custom_gradient(f)(*xs)
    return f(*xs)[0]


def _noting_errors(fn, arrays):
    """``fn(arrays)``; a Hora error it raises is noted first (TensorFlow
    re-raises it from the graph as ``tf.errors.UnknownError``, which elastic
    training's loop maps back: ``basics.take_callback_error``)."""
    try:
        return fn(arrays)
    except basics.HoraError as e:
        basics.note_callback_error(e)
        raise


def call(fn, tensors, touts, shapes, chain=True):
    """``fn`` (a list of NumPy arrays -> a list of NumPy arrays) on ``tensors``:
    at once when eager, as a py_function when building a graph (in a TF1
    graph, after the collective built before it unless ``chain`` is False)."""
    if tf.executing_eagerly():  # (NumPy arrays among them go as they are)
        arrays = [t if isinstance(t, np.ndarray) else tf.convert_to_tensor(t).numpy()
                  for t in tensors]
        return [tf.convert_to_tensor(o, dtype=d) for o, d in zip(fn(arrays), touts)]
    graph = tf.compat.v1.get_default_graph()
    if _in_xla(graph):
        raise basics.InvalidArgumentError(
            "hora.tensorflow's collectives cannot be compiled by XLA (tf.function("
            "jit_compile=True), or Keras's jit_compile, which the TensorFlow backend turns on "
            "where a GPU is): pass jit_compile=False (model.compile(..., jit_compile=False))")
    tensors = [tf.convert_to_tensor(t) for t in tensors]
    # In a tf.function, stateful ops run in program order. In a TF1 graph
    # each collective outside control flow waits for the one built before
    # it (see the module doc; a control-flow body's cannot: another frame).
    chained = chain and tf1_graph() is graph and graph._get_control_flow_context() is None
    last = getattr(graph, "_hora_last_collective", None) if chained else None
    with tf.control_dependencies([last] if last is not None else []):
        outs = tf.py_function(lambda *ts: _noting_errors(fn, [t.numpy() for t in ts]), tensors,
                              Tout=list(touts))
    if chained:
        graph._hora_last_collective = outs[0].op
    for o, s in zip(outs, shapes):
        o.set_shape(s)
    return outs
