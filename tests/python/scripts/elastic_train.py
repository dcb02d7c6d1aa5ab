"""Elastic training that loses a worker (run by tests/mp/elastic_kill_test.sh
under horarun --min-np/--max-np).

Each step every rank computes the gradient of a batch fixed by (step, rank,
world size), the gradients are averaged, SGD steps, and the state commits.
The state also records the world size of each committed step, so rank 0
can replay the run: the final model must equal that replay, and every step
must have been committed exactly once.

    --kill-at S     the worker of rank --kill-rank (2) in the first world
                    kills itself with SIGKILL at step S, after its backward
                    pass (not a worker started later).
    --steps N       steps to train (12).
    --step-sleep S  seconds between steps (0.02), for a longer run.
    --distributed-optimizer
                    the gradients averaged by hvd.DistributedOptimizer (its
                    hooks and buckets) instead of one allreduce each.

Each worker prints "elastic started pid P" once it has a world, "elastic
first commit T" (time.time()) at its first commit, and "elastic resumed T"
at its first commit after a reset (bench/elastic/kill_trials.py reads them).
"""

import argparse
import os
import signal
import sys
import threading
import time

import torch
import torch.nn as nn

import hora.torch as hvd

def batch(step, rank, size):
    g = torch.Generator().manual_seed(step * 1000 + rank * 10 + size)
    return torch.randn(6, 4, generator=g), torch.randn(6, 1, generator=g)


def model_0():
    torch.manual_seed(7)
    return nn.Linear(4, 1)


def grads(model, step, rank, size):
    model.zero_grad()
    x, y = batch(step, rank, size)
    nn.functional.mse_loss(model(x), y).backward()
    return [p.grad.clone() for p in model.parameters()]


def replay(sizes):
    model = model_0()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step, size in enumerate(sizes):
        per_rank = [grads(model, step, r, size) for r in range(size)]
        for i, p in enumerate(model.parameters()):
            p.grad = sum(g[i] for g in per_rank) / size
        opt.step()
    return model


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--kill-at", type=int, default=-1)
    parser.add_argument("--kill-rank", type=int, default=2)
    # What befalls it: SIGKILL, SIGSTOP (frozen), or exit0 (it leaves with 0,
    # as if its work were done).
    parser.add_argument("--kill-how", choices=["KILL", "STOP", "exit0"], default="KILL")
    # A second loss: this rank kills itself (SIGKILL) that long after the
    # first one went, while the others re-form their world.
    parser.add_argument("--second-kill-rank", type=int, default=-1)
    parser.add_argument("--second-kill-delay", type=float, default=0.3)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--step-sleep", type=float, default=0.02)
    parser.add_argument("--distributed-optimizer", action="store_true")
    args = parser.parse_args()
    # What horarun exported at the start, before init() (scripts pick a
    # device by HOROVOD_LOCAL_RANK here).
    print("elastic spawned as %s: %s" % (
        os.environ.get("HORA_WORKER_ID"),
        " ".join("%s=%s" % (k, os.environ.get("HOROVOD_" + k))
                 for k in ("RANK", "SIZE", "LOCAL_RANK", "LOCAL_SIZE", "CROSS_RANK"))),
        flush=True)
    hvd.init()
    print("elastic started pid %d" % os.getpid(), flush=True)
    first_rank = hvd.rank()
    # (A worker horarun started later, on a slot freed or added, is never the
    # one that kills itself.)
    worker = os.environ.get("HORA_WORKER_ID", "")
    first_launch = not worker or int(worker.rsplit("/", 1)[1]) < hvd.size()
    model = model_0()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    if args.distributed_optimizer:
        opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters())
    state = hvd.elastic.TorchState(model, opt, step=0, committed=(), sizes=())
    resets = []
    state.register_reset_callbacks([lambda: resets.append(hvd.size())])
    # Rollbacks to the last commit (a lost worker's), as against resets
    # where hosts changed (HostsUpdatedInterrupt: nothing rolled back).
    restores = []
    restore = state.restore
    state.restore = lambda: (restores.append(1), restore())

    @hvd.elastic.run
    def train(state):
        while state.step < args.steps:
            step = state.step
            g = grads(state.model, step, hvd.rank(), hvd.size())
            if (step == args.kill_at and first_rank == args.second_kill_rank and not resets
                    and first_launch and not second):
                second.append(threading.Timer(args.second_kill_delay,
                                              lambda: os.kill(os.getpid(), signal.SIGKILL)))
                second[0].start()
            if step == args.kill_at and first_rank == args.kill_rank and not resets and first_launch:
                sys.stdout.flush()
                if args.kill_how == "exit0":
                    os._exit(0)
                os.kill(os.getpid(), getattr(signal, "SIG" + args.kill_how))
            if not args.distributed_optimizer:  # (else its hooks started them)
                for p, gi in zip(state.model.parameters(), g):
                    p.grad = hvd.allreduce(gi, name="grad.%d" % len(p.shape), op=hvd.Average)
            state.optimizer.step()
            state.committed = state.committed + (step,)
            state.sizes = state.sizes + (hvd.size(),)
            state.step = step + 1
            state.commit()
            if not first:
                first.append(time.time())
                print("elastic first commit %.6f" % first[0], flush=True)
            if resets and not resumed:
                resumed.append(time.time())
                print("elastic resumed %.6f" % resumed[0], flush=True)
            time.sleep(args.step_sleep)

    resumed, first, second = [], [], []
    train(state)
    assert state.committed == tuple(range(args.steps)), state.committed
    # An elastic worker's rank variables follow its world, as Horovod's.
    if os.environ.get("HORA_WORKER_ID"):
        assert os.environ["HOROVOD_RANK"] == str(hvd.rank()), os.environ["HOROVOD_RANK"]
        assert os.environ["HORA_SIZE"] == str(hvd.size()), os.environ["HORA_SIZE"]
        assert os.environ["HOROVOD_ELASTIC"] == "1"  # (as horovodrun's elastic mode)
    ref = replay(state.sizes)
    for p, q in zip(model.parameters(), ref.parameters()):
        assert torch.allclose(p, q, rtol=1e-5, atol=1e-6), (p, q)
    print("elastic ok: worker %s rank %d of %d, sizes %s, resets %s, restores %d"
          % (os.environ.get("HORA_WORKER_ID"), hvd.rank(), hvd.size(), list(state.sizes), resets,
             len(restores)),
          flush=True)


if __name__ == "__main__":
    main()
