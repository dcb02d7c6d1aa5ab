"""Process sets (Horovod's ``ProcessSet``): collectives over a subset of ranks.

``add_process_set(ranks)`` is collective over every rank of the job (members
or not, the same ranks on each, in the same order as other process-set
calls); collectives then take ``process_set=`` and run only among the set's
ranks, on an engine of their own (own response cache, own thread), at the
same time as work on other sets. ``remove_process_set`` is collective too.
``global_process_set`` is every rank (id 0). Broadcast roots are ranks of
the job, as in Horovod; allgather and alltoall order rows by rank.
"""

from hora.common import basics


class ProcessSet:
    """A set of ranks; usable once ``add_process_set`` (or ``init(process_sets=...)``)
    registered it. ``ProcessSet(None)`` is the global set."""

    def __init__(self, ranks=None):
        if ranks is None:
            self.ranks = None
            self.process_set_id = 0
        else:
            self.ranks = sorted(int(r) for r in ranks)
            self.process_set_id = None  # set by add_process_set

    def size(self):
        """Number of ranks in the set."""
        return basics.size() if self.ranks is None else len(self.ranks)

    def rank(self):
        """This process's rank within the set; ``ValueError`` where it is not
        one of the set's (as Horovod's: ``included()`` asks)."""
        if self.ranks is None:
            return basics.rank()
        r = basics.rank()
        if r not in self.ranks:
            raise ValueError("%r: rank %d is not one of its ranks (included() tells)" % (self, r))
        return self.ranks.index(r)

    def included(self):
        """True when this process belongs to the set."""
        return self.ranks is None or basics.rank() in self.ranks

    def __eq__(self, other):
        return isinstance(other, ProcessSet) and self.ranks == other.ranks

    def __hash__(self):
        return hash(None if self.ranks is None else tuple(self.ranks))

    def __repr__(self):
        if self.ranks is None:
            return "ProcessSet(global)"
        return "ProcessSet(id=%s, ranks=%s)" % (self.process_set_id, self.ranks)


global_process_set = ProcessSet(None)


def _check_type(process_set):
    if not isinstance(process_set, ProcessSet):
        raise TypeError("process_set must be a hora ProcessSet, got %s"
                        % type(process_set).__name__)


def process_set_id(process_set):
    """The engine id of ``process_set`` (0 for None or the global set, and for a
    set of every rank of the job, added or not); raises ``ValueError`` for
    another set that was never added or has been removed."""
    if process_set is None:
        return 0
    _check_type(process_set)
    if process_set.process_set_id is None:
        if process_set.ranks == list(range(basics.size())):
            return 0  # every rank: the global set
        raise ValueError("%r is not registered: call add_process_set(...) on every rank first"
                         % (process_set,))
    return process_set.process_set_id


def process_set_ranks(process_set):
    """The job ranks of ``process_set`` (every rank for the global set)."""
    if process_set is None or process_set.ranks is None:
        return list(range(basics.size()))
    return list(process_set.ranks)


def add_process_set(process_set):
    """Registers a process set (a ``ProcessSet`` or a list of ranks) on every rank and
    returns it. Collective over every rank of the job, members or not."""
    if not isinstance(process_set, ProcessSet):
        process_set = ProcessSet(process_set)
    if process_set.ranks is None:
        raise ValueError("the global process set exists already")
    if process_set.process_set_id is not None:
        raise ValueError("%r was added already" % (process_set,))
    process_set.process_set_id = basics.session().add_process_set(process_set.ranks)
    basics.note_added_set(process_set)
    return process_set


basics._process_set_adder = add_process_set  # (for init(process_sets=...))


def remove_process_set(process_set):
    """Removes a process set added before; collective over every rank of the job.
    Returns True; False (and nothing done) for the global set, as Horovod's,
    and for a set not added or removed already (where Horovod's fails an
    assertion)."""
    _check_type(process_set)
    if process_set.ranks is None or process_set.process_set_id is None:
        return False
    basics.session().remove_process_set(process_set_id(process_set))
    process_set.process_set_id = None
    return True

