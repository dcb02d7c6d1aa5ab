"""What hora.torch's DistributedOptimizer adds to a training step of many
small tensors: the same model with the wrapped optimizer alone and with
DistributedOptimizer, in one job, alternating rounds.

    PYTHONPATH=build/python build/bin/horarun -np 2 /usr/bin/python3 \\
        bench/python/optimizer_overhead.py --layers 100 --iters 300 --rounds 3

The model is --layers Linear(16, 16) layers (two tensors each) on a batch
of 8, SGD, one torch thread: the step is almost all per-tensor work.
Rank 0 prints, per round and optimizer, the p50 in microseconds of each
part of the step (zero_grad, forward, backward, which starts every
gradient's allreduce from its hook, synchronize, the wrapped step) and of
the whole, and the main thread's CPU time per step.
"""

import argparse
import time

import torch

import hora.torch as hvd

PARTS = ("zero_grad", "forward", "backward", "synchronize", "step")


def run(model, opt, distributed, x, iters, warmup):
    times = {k: [] for k in PARTS + ("whole", "cpu")}
    for i in range(warmup + iters):
        c0, t0 = time.thread_time(), time.perf_counter()
        opt.zero_grad()
        t1 = time.perf_counter()
        y = model(x).sum()
        t2 = time.perf_counter()
        y.backward()
        t3 = time.perf_counter()
        if distributed:
            opt.synchronize()
        t4 = time.perf_counter()
        if distributed:
            with opt.skip_synchronize():
                opt.step()
        else:
            opt.step()
        t5, c5 = time.perf_counter(), time.thread_time()
        if i >= warmup:
            for k, a, b in zip(PARTS + ("whole", "cpu"), (t0, t1, t2, t3, t4, t0, c0),
                               (t1, t2, t3, t4, t5, t5, c5)):
                times[k].append((b - a) * 1e6)
    return {k: sorted(v)[len(v) // 2] for k, v in times.items()}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--layers", type=int, default=100)
    p.add_argument("--iters", type=int, default=300)
    p.add_argument("--warmup", type=int, default=30)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    torch.set_num_threads(1)
    hvd.init()
    torch.manual_seed(0)

    def make():  # (one model each: DistributedOptimizer hooks its model's gradients)
        return torch.nn.Sequential(*[torch.nn.Linear(16, 16) for _ in range(args.layers)])

    plain, model = make(), make()
    x = torch.randn(8, 16)
    local = torch.optim.SGD(plain.parameters(), lr=1e-3)
    dist = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=1e-3),
                                    named_parameters=model.named_parameters())
    if hvd.rank() == 0:
        print("np %d, %d tensors, p50 us of %d steps: %s, whole, cpu"
              % (hvd.size(), 2 * args.layers, args.iters, ", ".join(PARTS)))
    for r in range(args.rounds):
        for label, m, opt, distributed in (("SGD", plain, local, False),
                                           ("DistributedOptimizer", model, dist, True)):
            t = run(m, opt, distributed, x, args.iters, args.warmup)
            if hvd.rank() == 0:
                print("round %d  %-21s %s" % (r + 1, label,
                                              "  ".join("%s %.0f" % (k, t[k]) for k in t)))


if __name__ == "__main__":
    main()
