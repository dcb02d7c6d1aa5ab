"""Synthetic training throughput with Hora (like Horovod's pytorch_synthetic_benchmark.py).

    build/bin/horarun -np 2 /usr/bin/python3 examples/torch_synthetic_benchmark.py \\
        --model resnet18 --batch-size 16
    # the same job with PyTorch DDP (gloo) instead of Hora, for comparison:
    build/bin/horarun -np 2 /usr/bin/python3 examples/torch_synthetic_benchmark.py \\
        --model resnet18 --batch-size 16 --ddp

Trains on random images (no data loading) and prints images/s per worker and
in total, with a 95% confidence interval (1.96 standard deviations of the
per-iteration rates). Models come from torchvision when it is installed
(no pretrained weights); otherwise from the compact definitions below, which
follow torchvision's architectures. The default image size is 32 so that it
runs on a small CPU machine; alexnet needs --image-size 64 or more.

--ddp reads its rank and world size from HORA_RANK/HORA_SIZE (horarun),
else RANK/WORLD_SIZE (torchrun), OMPI_COMM_WORLD_RANK/SIZE (mpirun) or
SLURM_PROCID/SLURM_NTASKS; MASTER_ADDR defaults to 127.0.0.1 and MASTER_PORT
to a port derived from HORA_JOB_ID (the same on every rank of a horarun job).
"""

import argparse
import os
import timeit

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

try:
    import torchvision.models as tv_models
except ImportError:
    tv_models = None


# --- Compact models (used when torchvision is missing) -----------------------
def _conv_bn(cin, cout, k=3, s=1, groups=1, act=True):
    layers = [nn.Conv2d(cin, cout, k, s, k // 2, groups=groups, bias=False), nn.BatchNorm2d(cout)]
    return nn.Sequential(*layers, nn.ReLU6(inplace=True)) if act else nn.Sequential(*layers)


class _Block(nn.Module):
    """ResNet basic block (expansion 1) or bottleneck (expansion 4)."""

    def __init__(self, cin, width, stride, bottleneck):
        super().__init__()
        cout = width * (4 if bottleneck else 1)
        if bottleneck:
            self.body = nn.Sequential(
                nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(True),
                nn.Conv2d(width, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width),
                nn.ReLU(True), nn.Conv2d(width, cout, 1, bias=False), nn.BatchNorm2d(cout))
        else:
            self.body = nn.Sequential(
                nn.Conv2d(cin, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width),
                nn.ReLU(True), nn.Conv2d(width, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout))
        self.skip = None
        if stride != 1 or cin != cout:
            self.skip = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                      nn.BatchNorm2d(cout))

    def forward(self, x):
        return F.relu(self.body(x) + (x if self.skip is None else self.skip(x)))


def _resnet(depths, bottleneck, num_classes=1000):
    layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(True),
              nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for i, (width, n) in enumerate(zip((64, 128, 256, 512), depths)):
        for j in range(n):
            layers.append(_Block(cin, width, 2 if (j == 0 and i > 0) else 1, bottleneck))
            cin = width * (4 if bottleneck else 1)
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(cin, num_classes))


class _Inverted(nn.Module):
    def __init__(self, cin, cout, stride, t):
        super().__init__()
        hidden = cin * t
        layers = [] if t == 1 else [_conv_bn(cin, hidden, 1)]
        layers += [_conv_bn(hidden, hidden, 3, stride, groups=hidden),
                   _conv_bn(hidden, cout, 1, act=False)]
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        return x + self.body(x) if self.residual else self.body(x)


def _mobilenet_v2(num_classes=1000):
    layers, cin = [_conv_bn(3, 32, 3, 2)], 32
    for t, c, n, s in [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                       (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]:
        for i in range(n):
            layers.append(_Inverted(cin, c, s if i == 0 else 1, t))
            cin = c
    return nn.Sequential(*layers, _conv_bn(cin, 1280, 1), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Dropout(0.2), nn.Linear(1280, num_classes))


def _alexnet(num_classes=1000):
    return nn.Sequential(
        nn.Conv2d(3, 64, 11, 4, 2), nn.ReLU(True), nn.MaxPool2d(3, 2),
        nn.Conv2d(64, 192, 5, padding=2), nn.ReLU(True), nn.MaxPool2d(3, 2),
        nn.Conv2d(192, 384, 3, padding=1), nn.ReLU(True),
        nn.Conv2d(384, 256, 3, padding=1), nn.ReLU(True),
        nn.Conv2d(256, 256, 3, padding=1), nn.ReLU(True), nn.MaxPool2d(3, 2),
        nn.AdaptiveAvgPool2d(6), nn.Flatten(), nn.Dropout(), nn.Linear(256 * 36, 4096),
        nn.ReLU(True), nn.Dropout(), nn.Linear(4096, 4096), nn.ReLU(True),
        nn.Linear(4096, num_classes))


_COMPACT = {
    "resnet18": lambda: _resnet((2, 2, 2, 2), False),
    "resnet50": lambda: _resnet((3, 4, 6, 3), True),
    "mobilenet_v2": _mobilenet_v2,
    "alexnet": _alexnet,
}


def build_model(name):
    if tv_models is not None:
        return getattr(tv_models, name)()
    return _COMPACT[name]()


# --- Launch ------------------------------------------------------------------
def _env_int(*names, default=None):
    for n in names:
        if n in os.environ:
            return int(os.environ[n])
    return default


def init_ddp():
    """torch.distributed (gloo) from the launcher's environment; returns (rank, size)."""
    import torch.distributed as dist
    rank = _env_int("HORA_RANK", "RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID",
                    default=0)
    size = _env_int("HORA_SIZE", "WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE",
                    "SLURM_NTASKS", default=1)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    job = os.environ.get("HORA_JOB_ID", "0")
    os.environ.setdefault("MASTER_PORT", str(20000 + int(job, 16) % 20000 if job else 29500))
    dist.init_process_group("gloo", rank=rank, world_size=size)
    return rank, size


def main():
    p = argparse.ArgumentParser(description="Synthetic training throughput (Hora or DDP)")
    p.add_argument("--model", default="resnet50", choices=sorted(_COMPACT))
    p.add_argument("--batch-size", type=int, default=32, help="per worker")
    p.add_argument("--image-size", type=int, default=32)
    p.add_argument("--num-warmup-batches", type=int, default=10)
    p.add_argument("--num-batches-per-iter", type=int, default=10)
    p.add_argument("--num-iters", type=int, default=10)
    p.add_argument("--num-threads", type=int, default=1, help="torch threads per worker")
    p.add_argument("--fp16-allreduce", action="store_true", help="float16 gradients on the wire")
    p.add_argument("--ddp", action="store_true", help="torch.distributed DDP (gloo), not Hora")
    args = p.parse_args()
    if args.model == "alexnet" and args.image_size < 64:
        p.error("alexnet needs --image-size 64 or more")
    torch.set_num_threads(args.num_threads)

    model = build_model(args.model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    if args.ddp:
        rank, size = init_ddp()
        model = nn.parallel.DistributedDataParallel(model)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01 * size)
        backend = "DDP (gloo)"
    else:
        import hora.torch as hvd
        hvd.init()
        rank, size = hvd.rank(), hvd.size()
        for g in optimizer.param_groups:
            g["lr"] *= size
        compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none
        optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                             compression=compression)
        hvd.broadcast_parameters(model.state_dict(), root_rank=0)
        hvd.broadcast_optimizer_state(optimizer, root_rank=0)
        backend = "Hora" + (" (fp16 allreduce)" if args.fp16_allreduce else "")

    torch.manual_seed(rank)
    data = torch.randn(args.batch_size, 3, args.image_size, args.image_size)
    target = torch.randint(0, 1000, (args.batch_size,))

    def benchmark_step():
        optimizer.zero_grad()
        F.cross_entropy(model(data), target).backward()
        optimizer.step()

    def log(s):
        if rank == 0:
            print(s, flush=True)

    log("Model: %s, batch size %d, image size %d, backend %s, workers %d"
        % (args.model, args.batch_size, args.image_size, backend, size))
    log("Running warmup...")
    timeit.timeit(benchmark_step, number=args.num_warmup_batches)
    log("Running benchmark...")
    rates = []
    for i in range(args.num_iters):
        t = timeit.timeit(benchmark_step, number=args.num_batches_per_iter)
        rate = args.batch_size * args.num_batches_per_iter / t
        log("Iter #%d: %.1f img/sec per worker" % (i, rate))
        rates.append(rate)
    mean, conf = np.mean(rates), 1.96 * np.std(rates)
    log("Img/sec per worker: %.1f +-%.1f" % (mean, conf))
    log("Total img/sec on %d worker(s): %.1f +-%.1f" % (size, size * mean, size * conf))
    if args.ddp:
        torch.distributed.destroy_process_group()
    else:
        hvd.shutdown()


if __name__ == "__main__":
    main()
