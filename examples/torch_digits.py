"""Data-parallel training of a small MLP on scikit-learn's digits with Hora.

    build/bin/horarun -np 2 /usr/bin/python3 examples/torch_digits.py --check

The data ships with scikit-learn (no download). The train/test split is fixed
(seeded); each rank trains on its own shard of the training set (rows
rank::size) and evaluates its own shard of the test set; the metrics are
combined with allreduce. The learning rate is scaled by the number of ranks
(the global batch grows with it). Rank 0 prints, per epoch: the mean training
loss, the test accuracy and the training throughput (samples/s, all ranks).
With --check the script exits with status 1 when the final test accuracy is
below 0.95.

``run(args)`` is importable (the test suite calls it inside its own job).
"""

import argparse
import math
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

import hora.torch as hvd


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--epochs", type=int, default=15)
    p.add_argument("--batch-size", type=int, default=32, help="per rank")
    p.add_argument("--lr", type=float, default=0.05, help="for one rank; scaled by size()")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--check", action="store_true", help="exit 1 if final accuracy < 0.95")
    p.add_argument("--quiet", action="store_true")
    return p.parse_args(argv)


def load_data(seed):
    """The fixed split: (x_train, y_train, x_test, y_test) as tensors."""
    digits = load_digits()
    x = digits.data.astype(np.float32) / 16.0
    x_tr, x_te, y_tr, y_te = train_test_split(x, digits.target, test_size=0.25,
                                              random_state=seed, stratify=digits.target)
    return (torch.from_numpy(x_tr), torch.from_numpy(y_tr).long(),
            torch.from_numpy(x_te), torch.from_numpy(y_te).long())


def evaluate(model, x, y):
    """Global test accuracy: each rank scores its shard; the counts are summed."""
    model.eval()
    with torch.no_grad():
        correct = (model(x).argmax(1) == y).sum().double()
    model.train()
    totals = hvd.allreduce(torch.stack([correct, torch.tensor(float(len(y)), dtype=torch.float64)]),
                           op=hvd.Sum, name="digits.accuracy")
    return float(totals[0] / totals[1])


def run(args):
    """Trains and returns the final test accuracy (the same on every rank)."""
    hvd.init()
    torch.set_num_threads(1)
    rank, size = hvd.rank(), hvd.size()
    x_tr, y_tr, x_te, y_te = load_data(args.seed)
    x_tr, y_tr = x_tr[rank::size], y_tr[rank::size]
    x_te, y_te = x_te[rank::size], y_te[rank::size]

    torch.manual_seed(args.seed + rank)  # different on purpose: broadcast_parameters aligns
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=args.lr * size, momentum=0.9)
    opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)

    # Every rank must take the same number of steps: shards differ by at most one row.
    steps = math.ceil(len(y_tr) / args.batch_size)
    steps = int(hvd.allreduce(torch.tensor(steps), op=hvd.Min, name="digits.steps"))
    # Lower the rate for the last half and quarter of training (steadier final accuracy).
    sched = torch.optim.lr_scheduler.MultiStepLR(
        opt, milestones=[args.epochs // 2, (3 * args.epochs) // 4], gamma=0.3)
    gen = torch.Generator().manual_seed(args.seed * 1000 + rank)
    acc = 0.0
    for epoch in range(args.epochs):
        start = time.perf_counter()
        perm = torch.randperm(len(y_tr), generator=gen)
        loss_sum, seen = 0.0, 0
        for s in range(steps):
            idx = perm[s * args.batch_size:(s + 1) * args.batch_size]
            opt.zero_grad()
            loss = F.cross_entropy(model(x_tr[idx]), y_tr[idx])
            loss.backward()
            opt.step()
            loss_sum += float(loss) * len(idx)
            seen += len(idx)
        elapsed = time.perf_counter() - start
        sched.step()
        stats = hvd.allreduce(torch.tensor([loss_sum, float(seen)], dtype=torch.float64),
                              op=hvd.Sum, name="digits.loss")
        acc = evaluate(model, x_te, y_te)
        if rank == 0 and not args.quiet:
            print("epoch %2d  loss %.4f  test accuracy %.4f  %8.0f samples/s"
                  % (epoch + 1, float(stats[0] / stats[1]), acc, float(stats[1]) / elapsed),
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
