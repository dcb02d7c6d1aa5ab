"""Small eager collectives from hora.jax on concrete arrays.

    PYTHONPATH=build/python build/bin/horarun -np 2 PYTHON \\
        bench/python/jax_latency.py --rows 4 --iters 1000 --rounds 2

Rank 0 prints one line per (collective, round): avg and p50 in
microseconds of --iters calls on a float32 array of --rows rows a rank
(reducescatter: --rows for each rank), after --warmup calls.
"""

import argparse
import statistics
import time

import jax.numpy as jnp

import hora.jax as hvd


def timed(fn, iters, warmup):
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1e6)
    return statistics.mean(out), statistics.median(out)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=4)
    p.add_argument("--iters", type=int, default=1000)
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument("--rounds", type=int, default=2)
    args = p.parse_args()
    hvd.init()
    n = hvd.size()
    x = jnp.ones(args.rows)
    spread = jnp.ones(args.rows * n)
    calls = (
        ("allreduce", lambda: hvd.allreduce(x, name="ar")),
        ("allgather", lambda: hvd.allgather(x, name="ag")),
        ("broadcast", lambda: hvd.broadcast(x, 0, name="bc")),
        ("reducescatter", lambda: hvd.reducescatter(spread, op=hvd.Sum, name="rs")),
    )
    if hvd.rank() == 0:
        print("np %d, %d float32 rows a rank, %d iters after %d warm-up, avg / p50 in us"
              % (n, args.rows, args.iters, args.warmup))
    for r in range(args.rounds):
        for label, call in calls:
            avg, p50 = timed(call, args.iters, args.warmup)
            if hvd.rank() == 0:
                print("round %d  %-14s avg %8.1f  p50 %8.1f" % (r + 1, label, avg, p50))


if __name__ == "__main__":
    main()
