"""Elastic training for Keras 3, with Horovod's names (``hvd.elastic`` of
``horovod.tensorflow.keras`` and ``horovod.keras``), on any Keras backend.

::

    state = hvd.elastic.KerasState(model, batch=0, epoch=0)

    @hvd.elastic.run
    def train(state):
        state.model.fit(x, y, epochs=epochs - state.epoch, callbacks=[
            hvd.elastic.UpdateEpochStateCallback(state),
            hvd.elastic.UpdateBatchStateCallback(state),
            hvd.elastic.CommitStateCallback(state)])

    train(state)

* ``KerasState(model, optimizer=None, **extra)``: the model's variables and
  its optimizer's (the model's own when none is given), kept as NumPy
  copies at each ``commit()``, assigned back by ``restore()`` and from
  rank 0 by ``sync()``; other keyword arguments are plain values
  (``ObjectState``). An optimizer not built yet is built for the model's
  trainable variables, so that a rollback to the first commit also rolls
  its slots and step count back.
* ``CommitStateCallback(state, batches_per_commit=1)``: ``state.commit()``
  every that many batches and at each epoch's end.
* ``UpdateBatchStateCallback(state)``: ``state.batch``, the index of the
  last batch done in the epoch (0 again at its end), as Horovod's. Keras 3
  fixes an epoch's steps when ``fit`` begins, so an epoch that a reset
  interrupted runs in full again (Horovod shortened it through
  ``params['steps']``, which Keras 3 no longer reads).
* ``UpdateEpochStateCallback(state)``: ``state.epoch``, the epochs done
  across resets (pass ``epochs=total - state.epoch`` to ``fit``).
* ``run``: Horovod's ``@hvd.elastic.run`` (``hora.common.elastic.run_fn``).
  A Hora error that TensorFlow or JAX re-raised from a compiled step as one
  of their own (``tf.errors.UnknownError``, an XLA runtime error) is handled
  as the Hora error it was: a lost worker's rolls back and resets, a
  ``MismatchError`` is raised.

The world is re-formed by horarun's elastic mode (docs/guide/elastic.md).
"""

import keras
import numpy as np

import hora.numpy as hnp
from hora.common import basics
from hora.common.elastic import ObjectState, State, run  # noqa: F401
from hora.common.exceptions import (  # noqa: F401
    HoraInternalError,
    HorovodInternalError,
    HostsUpdatedInterrupt,
)




def _copies(variables):
    return [np.array(keras.ops.convert_to_numpy(v.value), copy=True) for v in variables]


def _assign(variables, values, what):
    variables = list(variables)
    if not values:
        return  # (saved before it was built: the sync that follows a restore agrees it)
    if len(variables) != len(values):
        raise ValueError("elastic state: %s has %d variables, but %d were saved (was a layer "
                         "added or removed after the commit?)" % (what, len(variables),
                                                                   len(values)))
    for v, value in zip(variables, values):
        v.assign(value)


class KerasState(ObjectState):
    """A Keras model and its optimizer, with plain values, as one elastic
    state (Horovod's ``KerasState``; see the module doc)."""

    def __init__(self, model, optimizer=None, **kwargs):
        self.model = model
        self.optimizer = optimizer if optimizer is not None else getattr(model, "optimizer", None)
        self._saved_model = []
        self._saved_optimizer = []
        super().__init__(bcast_object=hnp.broadcast_object, get_rank=basics.rank, **kwargs)
        self._save_variables()

    def _optimizer_variables(self):
        opt = self.optimizer
        if opt is None:
            return []
        if not getattr(opt, "built", True) and self.model.built:
            opt.build(self.model.trainable_variables)
        return list(opt.variables) if getattr(opt, "built", True) else []

    def _attach(self):
        # On the JAX backend, fit() keeps the values apart from the variables
        # between a batch's end and the epoch's: a callback (CommitStateCallback)
        # puts them back first, and the next batch then reads the variables.
        sync = getattr(self.model, "jax_state_sync", None)
        if sync is not None:
            sync()

    def _save_variables(self):
        self._attach()
        self._saved_model = _copies(self.model.variables)
        self._saved_optimizer = _copies(self._optimizer_variables())

    def save(self):
        self._save_variables()
        super().save()

    def restore(self):
        self._attach()
        _assign(self.model.variables, self._saved_model, "the model")
        _assign(self._optimizer_variables(), self._saved_optimizer, "the optimizer")
        super().restore()

    def sync(self):
        self._attach()
        variables = list(self.model.variables) + self._optimizer_variables()
        for i, v in enumerate(variables):
            value = keras.ops.convert_to_numpy(v.value)
            v.assign(hnp.broadcast(value, 0, "elastic.keras_state.%d" % i))
        self._save_variables()
        super().sync()


class CommitStateCallback(keras.callbacks.Callback):
    """``state.commit()`` every ``batches_per_commit`` batches and at the end
    of each epoch (Horovod's)."""

    def __init__(self, state, batches_per_commit=1):
        super().__init__()
        if int(batches_per_commit) < 1:
            raise ValueError("CommitStateCallback(batches_per_commit=%r): expected 1 or more"
                             % (batches_per_commit,))
        self.state = state
        self.batches_per_commit = int(batches_per_commit)
        self.batches_remaining = self.batches_per_commit

    def on_train_begin(self, logs=None):
        # (Every rank counts from the same point after a reset.)
        self.batches_remaining = self.batches_per_commit

    def on_train_batch_end(self, batch, logs=None):
        self.batches_remaining -= 1
        if self.batches_remaining == 0:
            self.state.commit()
            self.batches_remaining = self.batches_per_commit

    def on_epoch_end(self, epoch, logs=None):
        self.state.commit()


class UpdateBatchStateCallback(keras.callbacks.Callback):
    """``state.batch``: the index of the last batch done in this epoch, 0 at
    the epoch's end (Horovod's; see the module doc for Keras 3)."""

    def __init__(self, state):
        super().__init__()
        self.state = state

    def on_train_batch_end(self, batch, logs=None):
        self.state.batch = batch

    def on_epoch_end(self, epoch, logs=None):
        self.state.batch = 0


class UpdateEpochStateCallback(keras.callbacks.Callback):
    """``state.epoch``: the epochs done, counted across resets (Keras counts
    each ``fit`` from 0)."""

    def __init__(self, state):
        super().__init__()
        self.state = state
        self.initial_epoch = state.epoch

    def on_train_begin(self, logs=None):
        self.initial_epoch = self.state.epoch

    def on_epoch_end(self, epoch, logs=None):
        # (Plus one: an epoch done is not done again after a reset.)
        self.state.epoch = self.initial_epoch + epoch + 1


__all__ = ["run", "State", "ObjectState", "KerasState", "CommitStateCallback",
           "UpdateBatchStateCallback", "UpdateEpochStateCallback", "HostsUpdatedInterrupt",
           "HorovodInternalError", "HoraInternalError"]
