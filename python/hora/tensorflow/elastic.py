"""Elastic training for TensorFlow 2, with Horovod's names
(``horovod.tensorflow.elastic``).

* ``run``: ``@hvd.elastic.run`` (``hora.common.elastic.run_fn``); a Hora
  error that a ``tf.function`` re-raised as ``tf.errors.UnknownError`` is
  handled as the Hora error it was (a lost worker's rolls back and resets).
* ``TensorFlowKerasState(model, optimizer=None, backend=None, **extra)``:
  a Keras model and its optimizer (``hora.keras.elastic.KerasState``;
  ``backend`` is accepted and unused, as Keras 3 has one).
* ``TensorFlowState(variables, **extra)``: a list of ``tf.Variable``, kept
  as copies at each ``commit()``, assigned back by ``restore()`` and from
  rank 0 by ``sync()``. A ``tf.compat.v1`` session's variables
  (``session=``) are not supported yet.
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
    """TensorFlow variables and plain values as one elastic state
    (Horovod's ``TensorFlowState``, eager TensorFlow 2)."""

    def __init__(self, variables=None, session=None, **kwargs):
        if session is not None:
            raise NotImplementedError(
                "TensorFlowState(session=...): a tf.compat.v1 session's variables are not "
                "supported yet; give the variables of an eager program")
        if variables is None:
            raise ValueError("TensorFlowState(variables=None): give the tf.Variable objects "
                             "to keep (a TensorFlow 2 program has no global collection)")
        self.variables = list(variables)
        self._saved_variables = []
        super().__init__(bcast_object=hnp.broadcast_object, get_rank=basics.rank, **kwargs)
        self._save_variables()

    def _save_variables(self):
        self._saved_variables = [tf.identity(v).numpy() for v in self.variables]

    def save(self):
        self._save_variables()
        super().save()

    def restore(self):
        for v, value in zip(self.variables, self._saved_variables):
            v.assign(value)
        super().restore()

    def sync(self):
        for i, v in enumerate(self.variables):
            v.assign(hnp.broadcast(v.numpy(), 0, "elastic.tensorflow_state.%d" % i))
        self._save_variables()
        super().sync()


__all__ = ["run", "State", "ObjectState", "TensorFlowKerasState", "TensorFlowState",
           "HostsUpdatedInterrupt", "HorovodInternalError", "HoraInternalError"]
