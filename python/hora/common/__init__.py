"""Framework-independent parts of Hora's Python layer.

* :mod:`hora.common.basics` -- the process-wide default Session (``init``,
  ``shutdown``, ``rank``, ``size``...) and the reduction op codes.
* :mod:`hora.common.exceptions` -- the exception types.
* :mod:`hora.common.process_sets` -- ``ProcessSet``, ``add_process_set``, ``remove_process_set``.

``from hora.common import *`` gives a framework module the job (``init,
shutdown, rank, size, local_rank, local_size, cross_rank, cross_size,
is_initialized``), the ops, process sets and the exception types.
"""

from hora.common.basics import (  # noqa: F401
    Adasum,
    Average,
    Max,
    Min,
    Product,
    Sum,
    cross_rank,
    cross_size,
    init,
    is_initialized,
    local_rank,
    local_size,
    rank,
    shutdown,
    size,
)
from hora.common.exceptions import *  # noqa: F401,F403
from hora.common.process_sets import (  # noqa: F401
    ProcessSet,
    add_process_set,
    global_process_set,
    remove_process_set,
)

# What every framework module re-exports (``from hora.common import *``): the
# job, the ops, process sets and the exception types.
__all__ = sorted(n for n, v in dict(globals()).items()
                 if not n.startswith("_") and type(v).__name__ != "module")
