"""Synthetic training throughput of JAX + optax with Hora:

    horarun -np 2 python examples/jax_synthetic_benchmark.py --layers 4 --width 2048

Trains an MLP on random 32x32x3 images (no data loading; plain JAX, no model
library) with a jitted step whose gradients ``hora.jax.DistributedOptimizer``
averages across workers (one fused allreduce per step, from inside jit), and
prints images/s per worker and in total, with a 95% confidence interval (1.96
standard deviations of the per-iteration rates).
"""

import argparse
import timeit

import jax
import jax.numpy as jnp
import numpy as np
import optax

import hora.jax as hvd


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--width", type=int, default=2048)
    p.add_argument("--batch-size", type=int, default=32, help="per worker")
    p.add_argument("--num-warmup-batches", type=int, default=3)
    p.add_argument("--num-batches-per-iter", type=int, default=5)
    p.add_argument("--num-iters", type=int, default=5)
    args = p.parse_args()
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    dims = [32 * 32 * 3] + [args.width] * args.layers + [1000]
    keys = jax.random.split(jax.random.PRNGKey(0), len(dims) - 1)
    params = [{"w": jax.random.normal(k, (a, b)) * (2.0 / a) ** 0.5, "b": jnp.zeros(b)}
              for k, a, b in zip(keys, dims[:-1], dims[1:])]
    params = hvd.broadcast_parameters(params, 0)

    def loss_fn(ps, x, y):
        for layer in ps[:-1]:
            x = jax.nn.relu(x @ layer["w"] + layer["b"])
        out = x @ ps[-1]["w"] + ps[-1]["b"]
        return optax.softmax_cross_entropy_with_integer_labels(out, y).mean()

    tx = hvd.DistributedOptimizer(optax.sgd(0.01))
    state = tx.init(params)

    @jax.jit
    def step(ps, s, x, y):
        grads = jax.grad(loss_fn)(ps, x, y)
        updates, s = tx.update(grads, s, ps)
        return optax.apply_updates(ps, updates), s

    rng = np.random.default_rng(rank)
    x = jnp.asarray(rng.standard_normal((args.batch_size, dims[0]), dtype=np.float32))
    y = jnp.asarray(rng.integers(0, 1000, args.batch_size))
    holder = [params, state]

    def benchmark_step():
        for _ in range(args.num_batches_per_iter):
            holder[0], holder[1] = step(holder[0], holder[1], x, y)
        jax.block_until_ready(holder[0])

    def log(s):
        if rank == 0:
            print(s, flush=True)

    nparams = sum(a * b + b for a, b in zip(dims[:-1], dims[1:]))
    log("Model: MLP %s (%.1fM parameters), batch size %d per worker, workers %d"
        % ("-".join(map(str, dims)), nparams / 1e6, args.batch_size, size))
    for _ in range(args.num_warmup_batches):
        holder[0], holder[1] = step(holder[0], holder[1], x, y)
    jax.block_until_ready(holder[0])
    rates = []
    for i in range(args.num_iters):
        t = timeit.timeit(benchmark_step, number=1)
        rates.append(args.batch_size * args.num_batches_per_iter / t)
        log("Iter #%d: %.1f img/sec per worker" % (i, rates[-1]))
    mean, conf = np.mean(rates), 1.96 * np.std(rates)
    log("Img/sec per worker: %.1f +-%.1f" % (mean, conf))
    log("Total img/sec on %d worker(s): %.1f +-%.1f" % (size, size * mean, size * conf))
    hvd.shutdown()


if __name__ == "__main__":
    main()
