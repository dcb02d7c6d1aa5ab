# Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
"""hora.torch started by a launcher other than horarun, with no HORA_*
variable: mpirun (OpenMPI, MPICH), srun (here: its variables set by hand)
or torchrun. Checks allreduce, allgather and one DistributedOptimizer step
against their exact values, and whether the job initialised MPI.

    launcher_check.py EXPECT_MPI [LATE_RANK LATE_S]

EXPECT_MPI is 1 (mpirun: the rendezvous went through MPI) or 0. With
LATE_RANK, that rank sleeps LATE_S seconds before init (the others must
fail within HORA_START_TIMEOUT_S). Prints "rank R: launcher checks passed
(init S s)" and exits 0, or prints what is wrong and exits 1."""
import sys
import time

import torch

import hora.torch as hvd

expect_mpi = sys.argv[1] == "1"
if len(sys.argv) > 3:
    import os
    for name in ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID", "RANK"):
        if name in os.environ:
            if int(os.environ[name]) == int(sys.argv[2]):
                time.sleep(float(sys.argv[3]))
            break

start = time.time()
try:
    hvd.init()
except Exception as e:  # the message is what the late-rank test checks
    print("init failed after %.1f s: %s" % (time.time() - start, e), flush=True)
    sys.exit(3)
init_s = time.time() - start
rank, n = hvd.rank(), hvd.size()
errors = []


def check(what, got, want):
    if not torch.equal(got, want):
        errors.append("%s: got %s, want %s" % (what, got.tolist(), want.tolist()))


if hvd.mpi_enabled() != expect_mpi:
    errors.append("mpi_enabled() is %s, want %s" % (hvd.mpi_enabled(), expect_mpi))
if expect_mpi and not hvd.mpi_threads_supported():
    errors.append("mpi_threads_supported() is False (Hora asks for MPI_THREAD_MULTIPLE)")

x = torch.arange(5, dtype=torch.float32) * (rank + 1)
check("allreduce sum", hvd.allreduce(x, op=hvd.Sum),
      torch.arange(5, dtype=torch.float32) * (n * (n + 1) / 2))
check("allreduce average", hvd.allreduce(x), torch.arange(5, dtype=torch.float32) * ((n + 1) / 2))
# Rank r gives r + 1 rows of the value r.
rows = torch.full((rank + 1, 2), float(rank))
want = torch.cat([torch.full((r + 1, 2), float(r)) for r in range(n)])
check("allgather", hvd.allgather(rows), want)

# One SGD step on averaged gradients: w = 1, the loss sum(w . x) with
# x = (rank + 1, rank + 1), so the gradient is x and its average (n + 1) / 2.
model = torch.nn.Linear(2, 1, bias=False)
with torch.no_grad():
    model.weight.fill_(1.0)
opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                               named_parameters=model.named_parameters())
hvd.broadcast_parameters(model.state_dict(), root_rank=0)
opt.zero_grad()
model(torch.full((1, 2), float(rank + 1))).sum().backward()
opt.step()
check("weights after a DistributedOptimizer step", model.weight.detach(),
      torch.full((1, 2), 1.0 - 0.1 * (n + 1) / 2))

hvd.shutdown()
if errors:
    for e in errors:
        print("rank %d: %s" % (rank, e))
    sys.exit(1)
print("rank %d: launcher checks passed (init %.2f s)" % (rank, init_s), flush=True)
