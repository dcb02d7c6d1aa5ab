"""One rank of the training study: trains a model on synthetic data, times it.

    PYTHONPATH=build/python OMP_NUM_THREADS=1 MASTER_PORT=29511 \\
      build/bin/horarun -np 2 /usr/bin/python3 bench/train_study/worker.py \\
        --mode hora --model resnet18 --batch 32 --result /tmp/r.json

Modes (modes.py): hora (DistributedOptimizer), ddp (DDP over gloo), ps
(parameter server on rank 0, ps.py). MASTER_PORT is needed by ddp and ps.
SGD (lr 0.01, momentum 0.9, not scaled by np: only speed is measured here).
Runs --warmup untimed steps, a barrier, then --steps timed steps; every rank's
timings are gathered and rank 0 writes one JSON record to --result (see
metrics.step_stats: the slowest rank counts). --dump DIR makes every rank
save its trainable parameters before and after training (DIR/rank<r>.pt), for
the correctness tests. --deadline-s bounds the whole process: past it the
rank prints its stack and exits, so a stuck job never hangs.
"""

import argparse
import faulthandler
import json
import os
import platform
import sys
import time

import torch
import torch.nn.functional as F

import metrics
import modes
import workloads


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mode", required=True, choices=modes.MODES)
    p.add_argument("--model", default="resnet18", choices=sorted(workloads.INPUT_SIZE))
    p.add_argument("--batch", type=int, default=32, help="images per rank per step")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--steps", type=int, default=10, help="timed steps")
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--result", help="rank 0 writes its JSON record here")
    p.add_argument("--dump", help="directory: every rank saves its parameters there")
    p.add_argument("--launcher", default="shm", help="label recorded in the result")
    p.add_argument("--mpi-flavour", default="none", help="label recorded in the result")
    p.add_argument("--deadline-s", type=float, default=600)
    args = p.parse_args(argv)
    if args.batch < 1 or args.steps < 1 or args.warmup < 0:
        p.error("--batch and --steps must be positive, --warmup not negative")
    return args


def _params(model):
    return [p.detach().clone() for p in workloads.trainable(model)]


def train(args, sync, images, labels):
    """Warm-up and timed steps; returns (elapsed seconds, list of step seconds)."""
    model = sync.model

    def step():
        model.zero_grad()
        F.cross_entropy(model(images), labels).backward()
        sync.update()

    for _ in range(args.warmup):
        step()
    sync.barrier()
    times = []
    start = time.perf_counter()
    for _ in range(args.steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return time.perf_counter() - start, times


def record(args, sync, base_model, stats):
    return dict(
        status="ok", model=args.model, mode=args.mode, np=sync.size, batch=args.batch,
        image_size=workloads.INPUT_SIZE[args.model], launcher=args.launcher,
        mpi_flavour=args.mpi_flavour, transport=os.environ.get("HORA_TRANSPORT") or "default",
        backend=sync.backend, warmup=args.warmup, params=workloads.param_count(base_model),
        gradient_bytes=workloads.gradient_bytes(base_model), torch=torch.__version__,
        python=platform.python_version(), **stats)


def main(argv=None):
    args = parse_args(argv)
    faulthandler.dump_traceback_later(args.deadline_s, exit=True)
    torch.set_num_threads(1)
    base_model = workloads.build_model(args.model, seed=args.seed)
    sync = modes.setup(args.mode, base_model, args.lr, args.momentum,
                       timeout_s=max(30.0, args.deadline_s / 2))
    images, labels = workloads.synthetic_batch(
        sync.rank, args.batch, workloads.INPUT_SIZE[args.model], seed=args.seed)
    initial = _params(base_model)
    elapsed, times = train(args, sync, images, labels)
    rows = sync.gather_rows(torch.tensor([elapsed] + times, dtype=torch.float64))
    if args.dump:
        os.makedirs(args.dump, exist_ok=True)
        torch.save({"initial": initial, "final": _params(base_model)},
                   os.path.join(args.dump, "rank%d.pt" % sync.rank))
    if sync.rank == 0:
        rows = rows.tolist()
        stats = metrics.step_stats([r[0] for r in rows], [r[1:] for r in rows], args.batch)
        rec = record(args, sync, base_model, stats)
        if args.result:
            with open(args.result, "w") as f:
                json.dump(rec, f, indent=1)
        print("%s %s np=%d batch=%d: %.1f images/s (%.1f per rank), step %.0f ms (p50 %.0f)"
              % (args.mode, args.model, sync.size, args.batch, rec["images_per_s"],
                 rec["images_per_s_per_rank"], rec["step_ms_mean"], rec["step_ms_p50"]),
              flush=True)
    sync.barrier()
    sync.close()
    if args.mode != "hora":
        # torch's gloo modes leave without the interpreter's teardown (gloo's
        # threads have been seen to hang there after the results were out),
        # still under the watchdog. Hora's mode exits normally: its atexit
        # handlers finalize MPI when Hora started it.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    faulthandler.cancel_dump_traceback_later()
    return 0


if __name__ == "__main__":
    sys.exit(main())
