"""Elastic training with Keras 3's model.fit (hora.keras's hvd.elastic), run
by tests/mp/elastic_kill_test.sh as elastic_train.py is: the worker of rank
--kill-rank in the first world kills itself at step --kill-at, and the
others roll back to the last commit, re-form and finish.

Each epoch is one step: a batch fixed by (rank, world size), gradients
averaged by hora's DistributedOptimizer inside the compiled step (with
gradient_predivide_factor 2), SGD; the bias is a local variable
(register_local_var), its gradient this rank's own divided by the world's
size, so each rank's bias is its own until a reset syncs rank 0's. A step
traced before the world shrank must divide by the new size.
KerasState keeps the model, the optimizer, the epoch (UpdateEpochState-
Callback), and the list of committed steps and their world sizes; every
step must have been committed once, and the final weights must equal a
replay of those steps computed here with NumPy. The last line is
"elastic ok: worker W rank R of N, sizes [...], resets [...]".
"""

import argparse
import os
import signal
import sys

import keras
import numpy as np

import hora.keras as hvd

LR = 0.1


def batch(rank, size):
    g = np.random.default_rng(1000 * rank + size)
    return (g.standard_normal((6, 4)).astype("float32"),
            g.standard_normal((6, 1)).astype("float32"))


def weights_0():
    g = np.random.default_rng(7)
    return [g.standard_normal((4, 1)).astype("float32") * 0.5, np.zeros(1, "float32")]


def replay(sizes, rank):
    """SGD on the mean squared error: the weights' gradients averaged over the
    ranks, each rank's bias by its own gradient over the size; a change of
    size (a reset) gives every rank rank 0's bias. Rank ``rank``'s weights."""
    w, b0 = [x.astype("float64") for x in weights_0()]
    b = [b0] * max(sizes)
    for k, size in enumerate(sizes):
        if k and size != sizes[k - 1]:
            b = [b[0]] * max(sizes)
        gw = np.zeros_like(w)
        new_b = list(b)
        for r in range(size):
            x, y = [a.astype("float64") for a in batch(r, size)]
            err = x @ w + b[r] - y
            gw += 2 * x.T @ err / len(x) / size
            new_b[r] = b[r] - LR * 2 * err.mean(axis=0) / size
        w, b = w - LR * gw, new_b
    return [w, b[rank]]


class Record(keras.callbacks.Callback):
    """Adds the step to the state's committed steps (before the commit at the
    epoch's end), and kills this worker at --kill-at where asked."""

    def __init__(self, state, args, first_rank, resets):
        super().__init__()
        self.state, self.args, self.first_rank, self.resets = state, args, first_rank, resets

    def on_train_batch_begin(self, batch, logs=None):
        a = self.args
        worker = os.environ.get("HORA_WORKER_ID", "")
        first_launch = not worker or int(worker.rsplit("/", 1)[1]) < 3
        if (self.state.epoch == a.kill_at and self.first_rank == a.kill_rank and not self.resets
                and first_launch):
            sys.stdout.flush()
            os.kill(os.getpid(), signal.SIGKILL)

    def on_epoch_end(self, epoch, logs=None):
        self.state.committed = self.state.committed + (self.state.epoch,)
        self.state.sizes = self.state.sizes + (hvd.size(),)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--kill-at", type=int, default=-1)
    parser.add_argument("--kill-rank", type=int, default=2)
    parser.add_argument("--kill-how", default="KILL")  # (elastic_kill_test.sh gives it)
    parser.add_argument("--steps", type=int, default=12)
    args = parser.parse_args()
    hvd.init()
    first_rank = hvd.rank()
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.set_weights(weights_0())
    opt = hvd.DistributedOptimizer(keras.optimizers.SGD(LR), gradient_predivide_factor=2.0)
    opt.register_local_var(model.layers[0].bias)
    model.compile(optimizer=opt, loss="mse")
    state = hvd.elastic.KerasState(model, epoch=0, batch=0, committed=(), sizes=())
    resets = []
    state.register_reset_callbacks([lambda: resets.append(hvd.size())])

    @hvd.elastic.run
    def train(state):
        x, y = batch(hvd.rank(), hvd.size())
        state.model.fit(x, y, batch_size=6, epochs=args.steps - state.epoch, shuffle=False,
                        verbose=0, callbacks=[
                            Record(state, args, first_rank, resets),
                            hvd.elastic.UpdateEpochStateCallback(state),
                            hvd.elastic.UpdateBatchStateCallback(state),
                            hvd.elastic.CommitStateCallback(state, batches_per_commit=100)])

    train(state)
    assert state.committed == tuple(range(args.steps)), state.committed
    assert state.epoch == args.steps and state.batch == 0, (state.epoch, state.batch)
    for got, want in zip(model.get_weights(), replay(state.sizes, hvd.rank())):
        assert np.allclose(got, want, rtol=1e-4, atol=1e-5), (got, want)
    print("elastic ok: worker %s rank %d of %d, sizes %s, resets %s"
          % (os.environ.get("HORA_WORKER_ID"), hvd.rank(), hvd.size(), list(state.sizes), resets),
          flush=True)


if __name__ == "__main__":
    main()
