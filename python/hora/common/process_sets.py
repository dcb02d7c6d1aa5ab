"""Process sets (Horovod's ``ProcessSet``): collectives over a subset of ranks.

Only the global process set (every rank of the job) is supported for now.
The class exists so that Horovod code that names ``global_process_set`` or
passes ``process_set=`` keeps working; any other set is refused with
``UnimplementedError`` (a ``NotImplementedError``) when it is used.
"""

from hora.common import basics
from hora.common.exceptions import UnimplementedError


class ProcessSet:
    """A set of ranks. ``ProcessSet(None)`` (or ``global_process_set``) is every rank."""

    def __init__(self, ranks=None):
        self.ranks = None if ranks is None else sorted(int(r) for r in ranks)
        self.process_set_id = 0 if ranks is None else None

    def _is_global(self):
        if self.ranks is None:
            return True
        return basics.is_initialized() and self.ranks == list(range(basics.size()))

    def size(self):
        """Number of ranks in the set."""
        return basics.size() if self.ranks is None else len(self.ranks)

    def rank(self):
        """This process's rank within the set (-1 when not included)."""
        if self.ranks is None:
            return basics.rank()
        r = basics.rank()
        return self.ranks.index(r) if r in self.ranks else -1

    def included(self):
        """True when this process belongs to the set."""
        return self.ranks is None or basics.rank() in self.ranks

    def __eq__(self, other):
        return isinstance(other, ProcessSet) and self.ranks == other.ranks

    def __hash__(self):
        return hash(None if self.ranks is None else tuple(self.ranks))

    def __repr__(self):
        return "ProcessSet(global)" if self.ranks is None else "ProcessSet(%s)" % self.ranks


global_process_set = ProcessSet(None)


def check_process_set(process_set):
    """Accepts None or the global set; refuses every other set clearly."""
    if process_set is None or process_set is global_process_set:
        return
    if not isinstance(process_set, ProcessSet):
        raise TypeError("process_set must be a hora ProcessSet, got %s" % type(process_set).__name__)
    if not process_set._is_global():
        raise UnimplementedError("hora supports only the global process set for now (got %r)"
                                 % (process_set,))


def add_process_set(process_set):
    """Horovod's dynamic process sets: not supported yet."""
    raise UnimplementedError("hora supports only the global process set for now; "
                             "add_process_set(%r) is not available" % (process_set,))


def remove_process_set(process_set):
    """Horovod's dynamic process sets: not supported yet."""
    raise UnimplementedError("hora supports only the global process set for now; "
                             "remove_process_set(%r) is not available" % (process_set,))
