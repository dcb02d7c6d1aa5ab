"""Data-parallel JAX + optax training on scikit-learn's digits with Hora:

    horarun -np 2 python examples/jax_digits.py --check

The data ships with scikit-learn (no download). The train/test split is fixed
(seeded); each rank trains on its own shard of the training set (rows
rank::size, cut to the same length on every rank) and evaluates its own
shard of the test set; the accuracy is combined with allreduce. Rank 0's
initial parameters go to every rank (``broadcast_parameters``); the jitted
step averages the gradients across ranks (``hora.jax.DistributedOptimizer``
around optax's SGD). With --check the script exits with status 1 when the
final test accuracy is below 0.95.

``run(args)`` is importable (examples/ray_digits.py runs it in Ray workers).
"""

import argparse
import sys

import jax
import jax.numpy as jnp
import numpy as np
import optax
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

import hora.jax as hvd


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--epochs", type=int, default=15)
    p.add_argument("--batch-size", type=int, default=32, help="per rank")
    p.add_argument("--lr", type=float, default=0.05, help="for one rank; scaled by size()")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--check", action="store_true", help="exit 1 if final accuracy < 0.95")
    p.add_argument("--quiet", action="store_true")
    return p.parse_args(argv)


def init_params(key):
    k1, k2 = jax.random.split(key)
    return {"w1": jax.random.normal(k1, (64, 128)) * (2.0 / 64) ** 0.5, "b1": jnp.zeros(128),
            "w2": jax.random.normal(k2, (128, 10)) * (1.0 / 128) ** 0.5, "b2": jnp.zeros(10)}


def logits(p, x):
    return jax.nn.relu(x @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]


def loss_fn(p, x, y):
    return optax.softmax_cross_entropy_with_integer_labels(logits(p, x), y).mean()


def run(args):
    """Trains and returns the final test accuracy (the same on every rank)."""
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    digits = load_digits()
    x = digits.data.astype(np.float32) / 16.0
    x_tr, x_te, y_tr, y_te = train_test_split(x, digits.target, test_size=0.25,
                                              random_state=args.seed, stratify=digits.target)
    n = len(y_tr) // size  # the same number of rows (and steps) on every rank
    x_tr, y_tr = x_tr[rank::size][:n], y_tr[rank::size][:n]
    x_te, y_te = x_te[rank::size], y_te[rank::size]

    params = hvd.broadcast_parameters(init_params(jax.random.PRNGKey(args.seed + rank)), 0)
    steps = -(-n // args.batch_size)
    schedule = optax.piecewise_constant_schedule(
        args.lr * size, {steps * (args.epochs // 2): 0.3, steps * (3 * args.epochs // 4): 0.3})
    tx = hvd.DistributedOptimizer(optax.sgd(schedule, momentum=0.9))
    state = tx.init(params)

    @jax.jit
    def step(p, s, xb, yb):
        loss, grads = jax.value_and_grad(loss_fn)(p, xb, yb)
        updates, s = tx.update(grads, s, p)
        return optax.apply_updates(p, updates), s, loss

    rng = np.random.default_rng(args.seed * 1000 + rank)
    acc = 0.0
    for epoch in range(args.epochs):
        perm = rng.permutation(n)
        losses = []
        for k in range(steps):
            idx = perm[k * args.batch_size:(k + 1) * args.batch_size]
            params, state, loss = step(params, state, x_tr[idx], y_tr[idx])
            losses.append(float(loss))
        pred = np.argmax(np.asarray(logits(params, x_te)), axis=1)
        counts = hvd.allreduce(jnp.array([(pred == y_te).sum(), len(y_te)], jnp.float32),
                               op=hvd.Sum, name="digits.accuracy")
        acc = float(counts[0] / counts[1])
        if rank == 0 and not args.quiet:
            print("epoch %2d  loss %.4f  test accuracy %.4f" % (epoch + 1, np.mean(losses), acc),
                  flush=True)
    return acc


def main(argv=None):
    args = parse_args(argv)
    acc = run(args)
    ok = acc >= 0.95
    if hvd.rank() == 0:
        print("final test accuracy %.4f%s" % (acc, "" if ok or not args.check else " < 0.95"))
    hvd.shutdown()
    return 1 if args.check and not ok else 0


if __name__ == "__main__":
    sys.exit(main())
