"""Horovod's Keras callbacks for Keras 3, on every backend (values go through NumPy).

* ``BroadcastGlobalVariablesCallback(root_rank)``: root's model and optimizer
  variables on every rank, when training begins and again after the first
  batch (the optimizer builds its variables lazily);
* ``MetricAverageCallback()``: at each epoch's end, every metric in ``logs``
  is replaced by its average over the ranks (before callbacks after it, such
  as checkpoints and early stopping, read it);
* ``LearningRateWarmupCallback(initial_lr, warmup_epochs=5, ...)``: the rate
  rises from about ``initial_lr / size`` to ``initial_lr`` over the first
  epochs, batch by batch, reaching it at the warmup's last batch (Goyal et
  al.'s gradual warmup, as Horovod's);
* ``LearningRateScheduleCallback(initial_lr, multiplier, start_epoch=0,
  end_epoch=None, staircase=True, ...)``: ``initial_lr * multiplier(epoch)``
  (or ``* multiplier`` when it is a number) between the two epochs, per epoch
  (staircase) or per batch;
* ``BestModelCheckpoint(monitor='val_loss', ...)``: Keras's
  ``ModelCheckpoint`` with ``save_best_only=True`` (Horovod's: its file path
  is given later, ``.filepath``, or here as ``filepath=``). Every rank that
  has it saves: give it to rank 0 alone, as any checkpoint.

With ``momentum_correction`` (the default, as Horovod's), where the rate
changes from ``old`` to ``new`` the optimizer's momentum buffers (SGD's,
RMSprop's, which hold rate-scaled steps) are scaled by ``new / old`` (Goyal
et al.'s correction). Horovod scales the momentum for that one batch
instead, which Keras 3 cannot take (it compiles the momentum into its step);
the update is the same (for SGD without Nesterov).
"""

import keras
import numpy as np

import hora.numpy as hnp
from hora.common import basics
from hora.common.process_sets import global_process_set, process_set_ranks
from hora.keras.optimizer import broadcast_global_variables


class BroadcastGlobalVariablesCallback(keras.callbacks.Callback):
    """Root's model and optimizer variables on every rank, when training begins and
    after the first batch."""

    def __init__(self, root_rank, device="", process_set=global_process_set):
        super().__init__()
        del device
        self.root_rank = root_rank
        self.process_set = process_set
        self.broadcast_done = False

    def on_train_begin(self, logs=None):
        if self.model.built:
            broadcast_global_variables(self.model, self.root_rank, self.process_set)

    def on_train_batch_end(self, batch, logs=None):
        if not self.broadcast_done:
            broadcast_global_variables(self.model, self.root_rank, self.process_set)
            self.broadcast_done = True


class MetricAverageCallback(keras.callbacks.Callback):
    """At each epoch's end, every metric in ``logs`` becomes its average over the
    ranks. Ranks that logged different metrics (validation on one rank only)
    all get an ``InvalidArgumentError`` listing each rank's."""

    def __init__(self, device="", process_set=global_process_set):
        super().__init__()
        del device
        self.process_set = process_set

    def on_epoch_end(self, epoch, logs=None):
        names = sorted(logs or {})
        every = hnp.allgather_object(names, "MetricAverageCallback.%d.names" % epoch,
                                     process_set=self.process_set)
        if any(e != names for e in every):
            ranks = process_set_ranks(self.process_set)
            raise basics.InvalidArgumentError(
                "MetricAverageCallback at the end of epoch %d: the ranks logged different "
                "metrics, which cannot be averaged: %s"
                % (epoch, "; ".join("rank %d: %s" % (q, ", ".join(e) or "none")
                                    for q, e in zip(ranks, every))))
        if not names:
            return
        values = np.array([float(logs[k]) for k in names], dtype=np.float64)
        averaged = hnp.allreduce(values, basics.Average, "MetricAverageCallback.%d" % epoch,
                                 process_set=self.process_set)
        for k, v in zip(names, averaged):
            logs[k] = float(v)


def _scale_momentum(model, ratio):
    """Multiplies the momentum buffers of ``model``'s optimizer (SGD's
    ``momentums``, RMSprop's ``_momentums``; none: nothing) by ``ratio``."""
    inner = getattr(model.optimizer, "inner_optimizer", model.optimizer)  # (LossScaleOptimizer)
    if not float(getattr(inner, "momentum", 0) or 0):
        return
    buffers = getattr(inner, "momentums", None) or getattr(inner, "_momentums", None)
    if not buffers:
        return  # (not built yet: nothing to scale)
    # (JAX: fit may hold the step's state apart from the variables, and lets
    # a callback put it back first; it takes the variables again after.)
    sync = getattr(model, "jax_state_sync", None)
    if sync is not None:
        sync()
    for v in buffers:
        v.assign(v.value * keras.ops.cast(ratio, v.dtype))


class _LearningRateCallback(keras.callbacks.Callback):
    """Sets the optimizer's rate to ``initial_lr * self.factor(epoch)`` (epoch
    fractional within the epoch when ``staircase`` is False)."""

    def __init__(self, initial_lr, start_epoch, end_epoch, staircase, steps_per_epoch, verbose,
                 momentum_correction=True):
        super().__init__()
        self.momentum_correction = momentum_correction
        self.initial_lr = float(initial_lr)
        self.start_epoch = start_epoch
        self.end_epoch = end_epoch
        self.staircase = staircase
        self.steps_per_epoch = steps_per_epoch
        self.verbose = verbose
        self.current_epoch = 0
        self.steps = None  # an epoch's batches, once known (per-batch rates)

    def factor(self, epoch):
        raise NotImplementedError

    def _active(self, epoch):
        return epoch >= self.start_epoch and (self.end_epoch is None or epoch < self.end_epoch)

    def _set(self, epoch):
        lr = self.initial_lr * self.factor(epoch)
        optimizer = self.model.optimizer
        if self.momentum_correction:
            old = float(keras.ops.convert_to_numpy(optimizer.learning_rate))
            if old > 0 and lr != old:
                _scale_momentum(self.model, lr / old)
        optimizer.learning_rate = lr
        return lr

    def on_epoch_begin(self, epoch, logs=None):
        self.current_epoch = epoch
        if self._active(epoch) and self.staircase:
            lr = self._set(epoch)
            if self.verbose and basics.rank() == 0:
                print("Epoch %d: learning rate %g" % (epoch + 1, lr))

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None:  # (Horovod's: history.history["lr"])
            logs["lr"] = float(keras.ops.convert_to_numpy(self.model.optimizer.learning_rate))

    def on_train_batch_begin(self, batch, logs=None):
        if self.staircase or not self._active(self.current_epoch):
            return
        steps = self.steps_per_epoch or (self.params or {}).get("steps")
        if not steps:
            raise ValueError("%s: steps_per_epoch is needed (Keras did not say how many "
                             "steps an epoch has)" % type(self).__name__)
        self.steps = steps
        self._set(self.current_epoch + float(batch) / steps)


class LearningRateScheduleCallback(_LearningRateCallback):
    """``initial_lr * multiplier(epoch)``, or for a number ``initial_lr *
    multiplier ** (epoch - start_epoch)`` (exponential decay, as Horovod's),
    from ``start_epoch`` to before ``end_epoch``; per epoch when
    ``staircase``, else per batch (``steps_per_epoch`` from Keras unless
    given). Each epoch's rate goes to its logs as ``lr``."""

    def __init__(self, initial_lr, multiplier, start_epoch=0, end_epoch=None, staircase=True,
                 momentum_correction=True, steps_per_epoch=None, verbose=0):
        super().__init__(initial_lr, start_epoch, end_epoch, staircase, steps_per_epoch,
                         verbose, momentum_correction)
        self.multiplier = multiplier

    def factor(self, epoch):
        if callable(self.multiplier):
            return self.multiplier(epoch)
        return float(self.multiplier) ** (epoch - self.start_epoch)


class LearningRateWarmupCallback(_LearningRateCallback):
    """The rate rises batch by batch to ``initial_lr`` over ``warmup_epochs``
    epochs: ``initial_lr * (e * (size - 1) / warmup_epochs + 1) / size``, where
    ``e`` is the epoch, fractional, at the batch's end (as Horovod's: the first
    batch takes a little more than ``initial_lr / size``, the warmup's last
    batch ``initial_lr``, which stays after it)."""

    def __init__(self, initial_lr, warmup_epochs=5, momentum_correction=True,
                 steps_per_epoch=None, verbose=0):
        super().__init__(initial_lr, 0, warmup_epochs, False, steps_per_epoch, verbose,
                         momentum_correction)
        self.warmup_epochs = warmup_epochs

    def factor(self, epoch):
        n = basics.size()
        epoch += 1.0 / self.steps  # (at the batch's end: whole epochs at each epoch's end)
        return (epoch * (n - 1) / self.warmup_epochs + 1) / n

    def on_epoch_end(self, epoch, logs=None):
        super().on_epoch_end(epoch, logs)
        if epoch == self.warmup_epochs - 1 and self.verbose and basics.rank() == 0:
            # (On a line of its own after Keras's progress bar, as Horovod's: the
            # optimizer's rate.)
            rate = float(np.asarray(keras.ops.convert_to_numpy(
                self.model.optimizer.learning_rate)))
            print("\nEpoch %d: finished gradual learning rate warmup to %g."
                  % (epoch + 1, rate))


class BestModelCheckpoint(keras.callbacks.ModelCheckpoint):
    """Keras's ``ModelCheckpoint`` saving only the best model (``save_best_only``),
    Horovod's signature. Horovod's leaves the file path to be set later (its
    Spark estimator sets ``.filepath``); here ``filepath=`` may also give it.
    Without one, ``fit`` is refused before the first epoch. Keras 3 wants a
    path ending in ``.keras`` (``.weights.h5`` with ``save_weights_only``)."""

    def __init__(self, monitor="val_loss", verbose=0, save_weights_only=False, mode="auto",
                 save_freq="epoch", filepath=None):
        # (Keras 3's checks the path's suffix as it is made: a stand-in, then none.)
        stand_in = "best.weights.h5" if save_weights_only else "best.keras"
        super().__init__(filepath=stand_in if filepath is None else filepath, monitor=monitor,
                         verbose=verbose, save_best_only=True,
                         save_weights_only=save_weights_only, mode=mode, save_freq=save_freq)
        if filepath is None:
            self.filepath = None

    def on_train_begin(self, logs=None):
        if self.filepath is None:
            raise ValueError(
                "BestModelCheckpoint: no file path; set .filepath (or give filepath=) before "
                "fit(), a path ending in %s" % ("'.weights.h5' (save_weights_only)"
                                                if self.save_weights_only else "'.keras'"))
        begin = getattr(super(), "on_train_begin", None)
        if begin is not None:
            begin(logs)
