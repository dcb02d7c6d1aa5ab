"""Horovod's ``horovod.torch.mpi_ops`` under Hora: the same names, for code
that imports from that module (``from hora.torch.mpi_ops import allreduce_async_``).

Everything here is also in :mod:`hora.torch`; this module only re-exports
(the collectives live in :mod:`hora.torch.reduce_ops`,
:mod:`hora.torch.collective_ops` and :mod:`hora.torch.autograd_ops`).
"""

from hora.common.basics import (  # noqa: F401
    Adasum,
    Average,
    Max,
    Min,
    Product,
    Sum,
    ccl_built,
    cross_rank,
    cross_size,
    cuda_built,
    ddl_built,
    gloo_built,
    gloo_enabled,
    init,
    is_homogeneous,
    is_initialized,
    local_rank,
    local_size,
    mpi_built,
    mpi_enabled,
    mpi_threads_supported,
    nccl_built,
    rank,
    rocm_built,
    shutdown,
    size,
    start_timeline,
    stop_timeline,
)
from hora.common.process_sets import (  # noqa: F401
    ProcessSet,
    add_process_set,
    global_process_set,
    remove_process_set,
)
from hora.torch.autograd_ops import (  # noqa: F401
    allgather,
    allreduce,
    alltoall,
    broadcast,
    grouped_allgather,
    grouped_allreduce,
    grouped_reducescatter,
    reducescatter,
)
from hora.torch.collective_ops import (  # noqa: F401
    allgather_async,
    alltoall_async,
    barrier,
    broadcast_,
    broadcast_async,
    broadcast_async_,
    grouped_allgather_async,
    join,
)
from hora.torch.handles import poll, synchronize  # noqa: F401
from hora.torch.reduce_ops import (  # noqa: F401
    allreduce_,
    allreduce_async,
    allreduce_async_,
    grouped_allreduce_,
    grouped_allreduce_async,
    grouped_allreduce_async_,
    grouped_reducescatter_async,
    reducescatter_async,
    sparse_allreduce_async,
)
