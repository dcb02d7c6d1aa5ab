"""The three ways the training study synchronises ranks (imported by worker.py).

    hora  hora.torch's DistributedOptimizer: each gradient is allreduced
          (averaged) as soon as backward produces it, overlapped with the rest
          of backward; step() waits for them.
    ddp   torch.nn.parallel.DistributedDataParallel over gloo (its defaults:
          bucketed allreduce overlapped with backward, buffers broadcast from
          rank 0 before every forward).
    ps    a parameter server on rank 0 (see ps.py), over gloo.

setup(mode, model, lr, momentum) returns a Sync: the rank and size, the model
to run, update() to call after backward, and barrier() / gather_rows() used
for timing. ddp and ps read their rank and size from HORA_RANK/HORA_SIZE,
else OMPI_COMM_WORLD_RANK/SIZE or PMI_RANK/PMI_SIZE (horarun --mpi hands the
start to mpirun), and reach each other at MASTER_ADDR:MASTER_PORT.
"""

import datetime
import os

import torch

import ps as ps_lib
import workloads

MODES = ("hora", "ddp", "ps")


def _env_int(names):
    for name in names:
        if os.environ.get(name):
            return int(os.environ[name])
    raise RuntimeError("no rank layout in the environment: none of %s is set (start the "
                       "worker with horarun)" % ", ".join(names))


def _init_gloo(timeout_s):
    import torch.distributed as dist
    rank = _env_int(("HORA_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK"))
    size = _env_int(("HORA_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE"))
    if not os.environ.get("MASTER_PORT"):
        raise RuntimeError("MASTER_PORT is not set: the driver passes a free port in it")
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    dist.init_process_group("gloo", rank=rank, world_size=size,
                            timeout=datetime.timedelta(seconds=timeout_s))
    return rank, size


class Sync:
    """What the timing loop needs from a mode."""

    def __init__(self, rank, size, model, update, barrier, gather_rows, close, backend):
        self.rank, self.size, self.model, self.backend = rank, size, model, backend
        self.update, self.barrier, self.close = update, barrier, close
        self.gather_rows = gather_rows


def _gloo_sync(rank, size, model, update, backend):
    import torch.distributed as dist

    def gather_rows(t):
        rows = [torch.zeros_like(t) for _ in range(size)]
        dist.all_gather(rows, t)
        return torch.stack(rows)

    # No destroy_process_group at the end: after the final barrier the
    # process leaves with os._exit (worker.py); gloo's teardown is where
    # torch 1.13 was seen to hang.
    return Sync(rank, size, model, update, dist.barrier, gather_rows, lambda: None, backend)


def _setup_hora(model, lr, momentum):
    import hora.torch as hvd
    hvd.init()
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum)
    opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    backend = "hora/" + os.environ.get("HORA_BACKEND", "hora")
    return Sync(hvd.rank(), hvd.size(), model, opt.step, hvd.barrier,
                lambda t: hvd.allgather(t.unsqueeze(0), name="train_study.gather"),
                hvd.shutdown, backend)


def _setup_ddp(model, lr, momentum, timeout_s):
    rank, size = _init_gloo(timeout_s)
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=lr, momentum=momentum)
    return _gloo_sync(rank, size, ddp, opt.step, "gloo")


def _setup_ps(model, lr, momentum, timeout_s):
    rank, size = _init_gloo(timeout_s)
    server = ps_lib.ParameterServer(
        workloads.trainable(model),
        lambda params: torch.optim.SGD(params, lr=lr, momentum=momentum), rank, size)
    server.initial_pull()
    return _gloo_sync(rank, size, model, server.step, "gloo p2p")


def setup(mode, model, lr, momentum, timeout_s=60):
    """Initialises the job for `mode` and wraps `model`; returns a Sync."""
    if mode == "hora":
        return _setup_hora(model, lr, momentum)
    if mode == "ddp":
        return _setup_ddp(model, lr, momentum, timeout_s)
    if mode == "ps":
        return _setup_ps(model, lr, momentum, timeout_s)
    raise ValueError("unknown mode %r: expected one of %s" % (mode, ", ".join(MODES)))
