"""Small collectives from hora.numpy, the layer under hora.tensorflow,
hora.jax and hora.keras.

    PYTHONPATH=build/python build/bin/horarun -np 2 PYTHON \\
        bench/python/numpy_latency.py --rows 4 --iters 3000 --rounds 2

Rank 0 prints one line per (collective, round): avg and p50 in
microseconds of --iters calls on a float32 array of --rows rows a rank
(alltoall and reducescatter: --rows for each rank), after --warmup calls.
Since 2026-12-06 a single array's allreduce, allgather, alltoall and
reducescatter is one call into the core, which waits there; broadcast and
the grouped forms make a handle and wait on it.
"""

import numpy as np

import hora.numpy as hnp
from latency import parser, run_rounds  # (beside this script)


def main():
    args = parser(__doc__, iters=3000, warmup=200, rounds=2, rows=4).parse_args()
    hnp.init()
    n = hnp.size()
    x = np.ones(args.rows, np.float32)
    spread = np.ones(args.rows * n, np.float32)
    calls = (("allreduce", lambda: hnp.allreduce(x, op=hnp.Sum)),
             ("allgather", lambda: hnp.allgather(x)),
             ("broadcast", lambda: hnp.broadcast(x, 0)),
             ("alltoall", lambda: hnp.alltoall(spread)),
             ("reducescatter", lambda: hnp.reducescatter(spread, op=hnp.Sum)),
             ("grouped allreduce of 1", lambda: hnp.grouped_allreduce([x], op=hnp.Sum)))
    if hnp.rank() == 0:
        print("np %d, %d float32 rows a rank, %d iters after %d warm-up, avg / p50 in us"
              % (n, args.rows, args.iters, args.warmup))
    run_rounds(calls, args, hnp.rank() == 0)


if __name__ == "__main__":
    main()
