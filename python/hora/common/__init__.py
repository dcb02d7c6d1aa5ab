"""Framework-independent parts of Hora's Python layer.

* :mod:`hora.common.basics` -- the process-wide default Session (``init``,
  ``shutdown``, ``rank``, ``size``...) and the reduction op codes.
* :mod:`hora.common.exceptions` -- the exception types.
* :mod:`hora.common.process_sets` -- ``ProcessSet``, ``add_process_set``, ``remove_process_set``.
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
from hora.common.process_sets import ProcessSet, global_process_set  # noqa: F401
