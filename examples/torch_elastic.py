"""Elastic data-parallel training on scikit-learn's digits with Hora.

    build/bin/horarun -np 3 --min-np 2 --max-np 3 /usr/bin/python3 examples/torch_elastic.py

Horovod's elastic API: the model, the optimizer, the sampler and the epoch
live in a ``TorchState``; ``state.commit()`` after every few batches saves
them in memory. When a worker is lost, the others roll back to their last
commit, horarun re-forms the world without it (at least ``--min-np``
workers), the state is synced from the new rank 0, the sampler shares out
what is left of the epoch, and training goes on. No process restarts.

``--kill-worker R --kill-at-epoch E``: the worker of rank R (in the first
world) kills itself with SIGKILL during epoch E, to watch that happen.
``--check``: exit 1 unless the final test accuracy is at least 0.95.
"""

import argparse
import os
import signal
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

import hora.torch as hvd


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--epochs", type=int, default=15)
    p.add_argument("--batch-size", type=int, default=32, help="per worker")
    p.add_argument("--lr", type=float, default=0.05, help="for one worker; scaled by size()")
    p.add_argument("--commit-every", type=int, default=5, help="batches between commits")
    p.add_argument("--kill-worker", type=int, default=-1)
    p.add_argument("--kill-at-epoch", type=int, default=-1)
    p.add_argument("--check", action="store_true")
    return p.parse_args()


def main():
    args = parse_args()
    hvd.init()
    digits = load_digits()
    x = torch.from_numpy(digits.data.astype(np.float32) / 16.0)
    y = torch.from_numpy(digits.target).long()
    x_tr, x_te, y_tr, y_te = train_test_split(x, y, test_size=0.25, random_state=42,
                                              stratify=y)
    train_set = torch.utils.data.TensorDataset(x_tr, y_tr)

    torch.manual_seed(42)
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
    optimizer = hvd.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=args.lr * hvd.size(), momentum=0.9),
        named_parameters=model.named_parameters())
    sampler = hvd.elastic.ElasticSampler(train_set, shuffle=True, seed=42)
    state = hvd.elastic.TorchState(model, optimizer, sampler=sampler, epoch=0)
    first_rank = hvd.rank()

    def on_reset():
        # The global batch changes with the world: so does the learning rate.
        for group in optimizer.param_groups:
            group["lr"] = args.lr * hvd.size()
        if hvd.rank() == 0:
            print("world re-formed: %d worker(s)" % hvd.size(), flush=True)

    state.register_reset_callbacks([on_reset])

    @hvd.elastic.run
    def train(state):
        while state.epoch < args.epochs:
            # (After a reset the sampler holds what is left of the epoch.)
            loader = torch.utils.data.DataLoader(train_set, batch_size=args.batch_size,
                                                 sampler=state.sampler)
            for i, (xb, yb) in enumerate(loader):
                if (state.epoch == args.kill_at_epoch and first_rank == args.kill_worker
                        and hvd.size() == 3 and i == 3):
                    os.kill(os.getpid(), signal.SIGKILL)
                optimizer.zero_grad()
                F.cross_entropy(model(xb), yb).backward()
                optimizer.step()
                state.sampler.record_batch(i, args.batch_size)
                if (i + 1) % args.commit_every == 0:
                    state.commit()
            state.epoch += 1
            state.sampler.set_epoch(state.epoch)
            state.commit()

    train(state)
    model.eval()
    with torch.no_grad():
        accuracy = (model(x_te).argmax(1) == y_te).double().mean().item()
    if hvd.rank() == 0:
        print("final test accuracy %.4f with %d worker(s)" % (accuracy, hvd.size()), flush=True)
    if args.check and accuracy < 0.95:
        sys.exit(1)


if __name__ == "__main__":
    main()
