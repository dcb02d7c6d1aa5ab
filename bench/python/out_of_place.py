"""Out-of-place against in-place allreduce from Python, side by side in one run.

    PYTHONPATH=build/python build/bin/horarun -np 2 /usr/bin/python3 \\
        bench/python/out_of_place.py --sizes 4,1M,64M --iters 30 --rounds 3

For each size, rank 0 prints one line per (call, round): the p50 and avg in
microseconds of ``hvd.allreduce_(x)`` (in place) and ``y = hvd.allreduce(x)``
(a new output each call; the last one is dropped when the next is made, as
in a training loop), alternating, and the ratio of the p50s.

``--api numpy``: the out-of-place call is ``hora.numpy.allreduce`` (which
``hora.tensorflow`` and ``hora.jax`` call) on a NumPy array; the in-place
one is still ``hvd.allreduce_`` on a torch tensor over the same memory.
``--op broadcast``: ``broadcast_`` (in place) against ``broadcast`` (out of
place) from rank 0, in torch or NumPy. ``--op allgather``: ``allgather`` of
x (the output is np times x), with no in-place call to compare against; run
it with and without ``HORA_OUTPUT_POOL_BYTES=0`` to see the pool's share.
"""

import argparse

import torch

import hora.numpy as hnp
import hora.torch as hvd
from allreduce_latency import timed  # (this folder: avg and p50 of a call)


def parse_size(s):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * units[s[-1]] if s[-1] in units else int(s)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="4,1M,64M")
    p.add_argument("--iters", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--api", choices=("torch", "numpy"), default="torch")
    p.add_argument("--op", choices=("allreduce", "broadcast", "allgather"), default="allreduce")
    args = p.parse_args()
    torch.set_num_threads(1)
    hvd.init()
    if hvd.rank() == 0:
        print("np %d, float32 %s, %s, %d iters after %d warm-up, p50 / avg in us; torch %s"
              % (hvd.size(), {"allreduce": "sum"}.get(args.op, args.op), args.api,
                 args.iters, args.warmup, torch.__version__))
    for size in (parse_size(s) for s in args.sizes.split(",")):
        x = torch.ones(max(1, size // 4))
        xn = x.numpy()
        kept = [None]

        def in_place():
            if args.op == "broadcast":
                hvd.broadcast_(x, 0, name="ip")
            else:
                hvd.allreduce_(x, op=hvd.Sum, name="ip")

        def broadcast():
            kept[0] = (hnp.broadcast(xn, 0, name="oop") if args.api == "numpy"
                       else hvd.broadcast(x, 0, name="oop"))

        def out_of_place():
            kept[0] = hvd.allreduce(x, op=hvd.Sum, name="oop")

        def numpy_out_of_place():
            kept[0] = hnp.allreduce(xn, op=hnp.Sum, name="oop")

        def allgather():
            kept[0] = (hnp.allgather(xn, name="ag") if args.api == "numpy"
                       else hvd.allgather(x, name="ag"))

        for r in range(args.rounds):
            if args.op == "allgather":
                avg, p50 = timed(allgather, args.iters, args.warmup)
                kept[0] = None
                if hvd.rank() == 0:
                    print("%10d B round %d  allgather p50 %9.1f avg %9.1f"
                          % (4 * x.numel(), r + 1, p50, avg))
                continue
            got = {}
            for label, fn in (("allreduce_ (in place)", in_place),
                              ("allreduce (out of place)",
                               broadcast if args.op == "broadcast" else
                              numpy_out_of_place if args.api == "numpy" else out_of_place)):
                avg, p50 = timed(fn, args.iters, args.warmup)
                got[label] = (p50, avg)
            kept[0] = None
            if hvd.rank() == 0:
                (a, am), (b, bm) = got.values()
                print("%10d B round %d  in place p50 %9.1f avg %9.1f  out of place p50 %9.1f "
                      "avg %9.1f  out/in %.2f" % (4 * x.numel(), r + 1, a, am, b, bm, b / a))


if __name__ == "__main__":
    main()
