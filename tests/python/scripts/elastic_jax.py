"""Elastic training of a JAX loop (hora.jax's hvd.elastic), run by
tests/mp/elastic_kill_test.sh as elastic_train.py is: the worker of rank
--kill-rank in the first world kills itself at step --kill-at, and the
others roll back to the last commit, re-form and finish.

Each step is one jitted update: the gradient of a batch fixed by (step,
rank, world size), averaged by hora.jax's DistributedOptimizer around
optax's SGD. JaxState keeps the parameters, the optax state, the step and
the committed steps with their world sizes; every step must have been
committed once and the final parameters must equal a replay of those
steps computed here with NumPy (a step traced in the old world must not
be reused in the new one). The last line is "elastic ok: worker W rank R
of N, sizes [...], resets [...]".
"""

import argparse
import os
import signal
import sys

import jax
import jax.numpy as jnp
import numpy as np
import optax

import hora.jax as hvd

LR = 0.1


def batch(step, rank, size):
    g = np.random.default_rng(step * 1000 + rank * 10 + size)
    return g.standard_normal((6, 4)), g.standard_normal(6)


def params_0():
    return {"w": np.linspace(-0.5, 0.5, 4), "b": np.float64(0.25)}


def replay(sizes):
    p = {k: np.array(v, dtype=np.float64) for k, v in params_0().items()}
    for step, size in enumerate(sizes):
        gw, gb = np.zeros(4), 0.0
        for r in range(size):
            x, y = batch(step, r, size)
            err = x @ p["w"] + p["b"] - y
            gw += 2 * x.T @ err / len(x) / size
            gb += 2 * err.mean() / size
        p = {"w": p["w"] - LR * gw, "b": p["b"] - LR * gb}
    return p


def loss(p, x, y):
    return jnp.mean((x @ p["w"] + p["b"] - y) ** 2)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--kill-at", type=int, default=-1)
    parser.add_argument("--kill-rank", type=int, default=2)
    parser.add_argument("--kill-how", default="KILL")
    parser.add_argument("--steps", type=int, default=12)
    args = parser.parse_args()
    jax.config.update("jax_enable_x64", True)
    hvd.init()
    first_rank = hvd.rank()
    worker = os.environ.get("HORA_WORKER_ID", "")
    first_launch = not worker or int(worker.rsplit("/", 1)[1]) < hvd.size()
    tx = hvd.DistributedOptimizer(optax.sgd(LR))
    params = jax.tree_util.tree_map(jnp.asarray, params_0())
    state = hvd.elastic.JaxState(params=params, opt_state=tx.init(params), step=0,
                                 committed=(), sizes=())
    resets = []
    state.register_reset_callbacks([lambda: resets.append(hvd.size())])

    @jax.jit
    def update(p, s, x, y):
        updates, s = tx.update(jax.grad(loss)(p, x, y), s, p)
        return optax.apply_updates(p, updates), s

    @hvd.elastic.run
    def train(state):
        while state.step < args.steps:
            step = state.step
            if step == args.kill_at and first_rank == args.kill_rank and not resets \
                    and first_launch:
                sys.stdout.flush()
                os.kill(os.getpid(), getattr(signal, "SIG" + args.kill_how))
            x, y = batch(step, hvd.rank(), hvd.size())
            state.params, state.opt_state = update(state.params, state.opt_state, x, y)
            state.committed = state.committed + (step,)
            state.sizes = state.sizes + (hvd.size(),)
            state.step = step + 1
            state.commit()

    train(state)
    assert state.committed == tuple(range(args.steps)), state.committed
    want = replay(state.sizes)
    for k in want:
        assert np.allclose(np.asarray(state.params[k]), want[k], rtol=1e-10, atol=1e-12), \
            (k, state.params[k], want[k])
    print("elastic ok: worker %s rank %d of %d, sizes %s, resets %s"
          % (os.environ.get("HORA_WORKER_ID"), hvd.rank(), hvd.size(), list(state.sizes), resets),
          flush=True)


if __name__ == "__main__":
    main()
