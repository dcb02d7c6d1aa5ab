"""Elastic training for TensorFlow 2, with Horovod's names
(``horovod.tensorflow.elastic``).

* ``run``: ``@hvd.elastic.run`` (``hora.common.elastic.run_fn``); a Hora
  error that a ``tf.function`` re-raised as ``tf.errors.UnknownError`` is
  handled as the Hora error it was (a lost worker's rolls back and resets).
* ``TensorFlowKerasState(model, optimizer=None, backend=None, **extra)``:
  a Keras model and its optimizer (``hora.keras.elastic.KerasState``;
  ``backend`` is accepted and unused, as Keras 3 has one).
* ``TensorFlowState(variables=None, session=None, **extra)``: a list of
  ``tf.Variable``, kept as copies at each ``commit()``, assigned back by
  ``restore()`` and from rank 0 by ``sync()``; in a ``tf.compat.v1`` graph
  read and assigned through ``session`` (the default session where none is
  given), the graph's global variables where ``variables`` is None.
* ``State``, ``ObjectState`` (``hora.common.elastic``).
"""

import tensorflow as tf

import hora.numpy as hnp
from hora.common import basics
from hora.common.elastic import ObjectState, State  # noqa: F401
from hora.common.exceptions import (  # noqa: F401
    HoraInternalError,
    HorovodInternalError,
    HostsUpdatedInterrupt,
)
from hora.keras.elastic import KerasState, run  # noqa: F401


class TensorFlowKerasState(KerasState):
    """Horovod's ``TensorFlowKerasState``: ``KerasState`` under its
    TensorFlow name (``backend`` is unused)."""

    def __init__(self, model, optimizer=None, backend=None, **kwargs):
        super().__init__(model, optimizer=optimizer, **kwargs)


class TensorFlowState(ObjectState):
    """TensorFlow variables and plain values as one elastic state (Horovod's
    ``TensorFlowState``). Eagerly, ``variables`` (a list of ``tf.Variable``)
    are read and assigned directly (``session`` is not used). In a
    ``tf.compat.v1`` graph they are read and assigned through ``session`` (by
    default the default session when each is done), and ``variables`` default
    to the graph's global variables, as Horovod's. There the state adds no op
    to the graph (it may be made inside a ``MonitoredTrainingSession``, whose
    graph is finalized: it assigns through each variable's initializer, its
    initial value fed) and reads the variables first at ``sync()`` or
    ``commit()`` (the elastic ``run`` syncs first), once a session has
    initialized them. Each read and assignment is a ``session.run``: a
    ``MonitoredSession`` runs its hooks for it."""

    def __init__(self, variables=None, session=None, **kwargs):
        self._graph_mode = not tf.executing_eagerly()
        if variables is None and self._graph_mode:
            variables = tf.compat.v1.global_variables()
        if variables is None:
            raise ValueError("TensorFlowState(variables=None): give the tf.Variable objects "
                             "to keep (a TensorFlow 2 program has no global collection)")
        self.variables = list(variables)
        self.session = session
        self._saved_variables = None  # (none read yet: restore() leaves the variables)
        super().__init__(bcast_object=hnp.broadcast_object, get_rank=basics.rank, **kwargs)
        if not self._graph_mode:
            self._save_variables()

    def _session(self):
        session = self.session or tf.compat.v1.get_default_session()
        if session is None:
            raise ValueError("TensorFlowState: the variables of a tf.compat.v1 graph are read "
                             "through a session: pass session=, or use the state inside "
                             "`with session.as_default():`")
        return session

    def _values(self):
        if not self._graph_mode:
            return [tf.identity(v).numpy() for v in self.variables]
        return list(self._session().run(self.variables)) if self.variables else []

    def _assign_values(self, values):
        if not self._graph_mode:
            for v, value in zip(self.variables, values):
                v.assign(value)
        elif self.variables:
            # Each variable's initializer with the value fed for its initial
            # value: an assignment that adds no op to the graph (a
            # MonitoredSession's is finalized).
            inits = [v.initializer for v in self.variables]
            self._session().run(inits, feed_dict={i.inputs[1]: value
                                                  for i, value in zip(inits, values)})

    def _save_variables(self):
        self._saved_variables = self._values()

    def save(self):
        self._save_variables()
        super().save()

    def restore(self):
        if self._saved_variables is not None:
            self._assign_values(self._saved_variables)
        super().restore()

    def sync(self):
        self._assign_values([hnp.broadcast(value, 0, "elastic.tensorflow_state.%d" % i)
                             for i, value in enumerate(self._values())])
        self._save_variables()
        super().sync()


__all__ = ["run", "State", "ObjectState", "TensorFlowKerasState", "TensorFlowState",
           "HostsUpdatedInterrupt", "HorovodInternalError", "HoraInternalError"]
