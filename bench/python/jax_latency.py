"""Small eager collectives from hora.jax on concrete arrays.

    PYTHONPATH=build/python build/bin/horarun -np 2 PYTHON \\
        bench/python/jax_latency.py --rows 4 --iters 1000 --rounds 2

Rank 0 prints one line per (collective, round): avg and p50 in
microseconds of --iters calls on a float32 array of --rows rows a rank
(reducescatter: --rows for each rank), after --warmup calls.
"""

import jax.numpy as jnp

import hora.jax as hvd
from latency import parser, run_rounds  # (beside this script)


def main():
    p = parser(__doc__, iters=1000, warmup=100, rounds=2, rows=4)
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
    run_rounds(calls, args, hvd.rank() == 0)


if __name__ == "__main__":
    main()
