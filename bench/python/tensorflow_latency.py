"""Small collectives from hora.tensorflow, eagerly: outside a gradient tape
and under one that watches the input (where each op goes through
tf.custom_gradient, as every eager call did before 2026-12-05).

    PYTHONPATH=build/python build/bin/horarun -np 2 PYTHON \\
        bench/python/tensorflow_latency.py --rows 4 --iters 1000 --rounds 2

Rank 0 prints one line per (collective, form, round): avg and p50 in
microseconds of --iters calls on a float32 tensor of --rows rows a rank
(alltoall and reducescatter: --rows for each rank), after --warmup calls.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import tensorflow as tf  # noqa: E402

import hora.tensorflow as hvd  # noqa: E402
from latency import parser, timed  # noqa: E402 (beside this script)


def main():
    p = parser(__doc__, iters=1000, warmup=100, rounds=2, rows=4)
    args = p.parse_args()
    hvd.init()
    n = hvd.size()
    x = tf.ones([args.rows])
    spread = tf.ones([args.rows * n])
    calls = (
        ("allreduce", x, lambda t: hvd.allreduce(t, name="ar")),
        ("allgather", x, lambda t: hvd.allgather(t, name="ag")),
        ("broadcast", x, lambda t: hvd.broadcast(t, 0, name="bc")),
        ("alltoall", spread, lambda t: hvd.alltoall(t, name="a2a")),
        ("reducescatter", spread, lambda t: hvd.reducescatter(t, op=hvd.Sum, name="rs")),
    )

    def under_tape(fn, t):
        with tf.GradientTape() as tape:
            tape.watch(t)
            return fn(t)

    if hvd.rank() == 0:
        print("np %d, %d float32 rows a rank, %d iters after %d warm-up, avg / p50 in us"
              % (n, args.rows, args.iters, args.warmup))
    for r in range(args.rounds):
        for label, t, fn in calls:
            for form, call in (("", lambda: fn(t)), (", under a tape", lambda: under_tape(fn, t))):
                avg, p50 = timed(call, args.iters, args.warmup)
                if hvd.rank() == 0:
                    print("round %d  %-28s avg %8.1f  p50 %8.1f" % (r + 1, label + form, avg, p50))


if __name__ == "__main__":
    main()
