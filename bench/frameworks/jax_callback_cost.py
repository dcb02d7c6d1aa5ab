"""What an allreduce costs from JAX, eagerly and from inside jax.jit (an
ordered io_callback), beside the same allreduce on NumPy arrays.

    horarun -np 2 python bench/frameworks/jax_callback_cost.py

For 4 B and 4 MiB of float32, rank 0 prints the median time per call over
--calls calls (after 20 warm-up calls) of: hora.numpy.allreduce; hora.jax's
eager allreduce (host copies in and out); a jitted function whose body is
one hora.jax allreduce (the callback, with jit's dispatch). Every call's
result is waited for.
"""

import argparse
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

import hora.jax as hj
import hora.numpy as hnp


def timed(fn, calls):
    for _ in range(20):
        fn()
    times = []
    for _ in range(calls):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--calls", type=int, default=200)
    args = p.parse_args()
    hj.init()
    jitted = jax.jit(lambda x: hj.allreduce(x, op=hj.Sum, name="cost.jit"))
    rows = []
    for count in (1, 1 << 20):
        a = np.ones(count, np.float32)
        x = jnp.ones(count, jnp.float32)
        t_np = timed(lambda: hnp.allreduce(a, op=hnp.Sum, name="cost.np"), args.calls)
        t_eager = timed(lambda: hj.allreduce(x, op=hj.Sum, name="cost.eager").block_until_ready(),
                        args.calls)
        t_jit = timed(lambda: jitted(x).block_until_ready(), args.calls)
        rows.append((count * 4, t_np, t_eager, t_jit))
    if hj.rank() == 0:
        print("| bytes | hora.numpy | hora.jax eager | hora.jax in jit |")
        print("|---:|---:|---:|---:|")
        for b, t_np, t_eager, t_jit in rows:
            print("| %d | %.1f us | %.1f us | %.1f us |" % (b, t_np * 1e6, t_eager * 1e6,
                                                           t_jit * 1e6))
    hj.shutdown()


if __name__ == "__main__":
    main()
