# Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
"""hora.torch over the MPI transport or backend, as found from the Python
package (the plugin beside hora/_core). Run under `horarun --mpi` with
HORA_TRANSPORT=mpi or HORA_BACKEND=mpi; exits 1 on a wrong sum."""
import sys

import torch

import hora.torch as hvd

hvd.init()
if not (hvd.mpi_built() and hvd.mpi_enabled() and hvd.mpi_threads_supported()):
    print("rank %d: mpi_built %s, mpi_enabled %s under MPI" % (hvd.rank(), hvd.mpi_built(),
                                                            hvd.mpi_enabled()))
    sys.exit(1)
n = hvd.size()
x = torch.arange(7, dtype=torch.float32) * (hvd.rank() + 1)
got = hvd.allreduce(x, op=hvd.Sum)
want = torch.arange(7, dtype=torch.float32) * (n * (n + 1) / 2)
if not torch.equal(got, want):
    print("rank %d: got %s, want %s" % (hvd.rank(), got.tolist(), want.tolist()))
    sys.exit(1)
print("rank %d: ok" % hvd.rank())
