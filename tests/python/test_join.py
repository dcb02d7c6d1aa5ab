"""join() with uneven data: rank r has r + 1 batches. As in Horovod, a joined
rank counts as a zero in the others' averages (they divide by size()); Min is
over the ranks with data (Horovod's would be 0 here); join returns the last
rank to join."""

import pytest
import torch

import hora.torch as hvd


def test_join_with_uneven_batches():
    r, n = hvd.rank(), hvd.size()
    for step in range(r + 1):
        t = torch.full((4,), float(10 * r + step))
        out = hvd.allreduce(t, op=hvd.Average, name="join.grad")
        low = hvd.allreduce(t + 1, op=hvd.Min, name="join.min")
        active = [p for p in range(n) if step < p + 1]
        want = sum(10 * p + step for p in active) / n
        assert torch.allclose(out, torch.full((4,), want)), (step, out, want)
        assert low.tolist() == [min(10 * p + step + 1 for p in active)] * 4
    assert hvd.join() == n - 1
    # The job goes on normally afterwards.
    assert hvd.allreduce(torch.ones(2), op=hvd.Sum, name="join.after").tolist() == [n, n]


def test_unnamed_allgather_object_after_a_call_failed_while_others_joined():
    # The last rank's allgather_object fails (the others have joined); unnamed
    # object collectives are named by type, as Horovod's, so the next one still
    # matches across ranks instead of waiting forever.
    r, n = hvd.rank(), hvd.size()
    if n > 1 and r == n - 1:
        with pytest.raises(hvd.HorovodInternalError, match="joined"):
            hvd.allgather_object({"rank": r})
    assert hvd.join() == n - 1
    assert hvd.allgather_object({"rank": r}) == [{"rank": q} for q in range(n)]
    assert hvd.broadcast_object([r] if r == 0 else None, root_rank=0) == [0]


def _unnamed(op, t):
    if op == "allgather":
        return hvd.allgather(t)
    if op == "broadcast":
        return hvd.broadcast(t, root_rank=0)
    if op == "alltoall":
        return hvd.alltoall(t)
    return hvd.reducescatter(t, op=hvd.Sum)


def _input(q, n):
    """Rank q's tensor for the last call: 2n values, different on each rank."""
    return torch.arange(2 * n, dtype=torch.float32) + 100 * q


def _expected(op, r, n):
    """What rank r receives from the ranks' _input()s."""
    if op == "allgather":
        return torch.cat([_input(q, n) for q in range(n)])
    if op == "broadcast":
        return _input(0, n)
    if op == "alltoall":  # (2 rows from each rank: its rows 2r, 2r + 1)
        return torch.cat([_input(q, n)[2 * r:2 * r + 2] for q in range(n)])
    return sum(_input(q, n) for q in range(n))[2 * r:2 * r + 2]  # reducescatter, Sum


@pytest.mark.parametrize("op", ["allgather", "broadcast", "alltoall", "reducescatter"])
def test_unnamed_collectives_beside_each_rank_joined_in_turn(op):
    # Horovod's own loop: each rank joins first in turn; the others' unnamed
    # call fails at once on each of them (naming the joined rank), then they
    # join too. Unnamed calls are numbered per rank, and the joined rank made
    # none: the numbering must still agree afterwards (it hung at np 3).
    r, n = hvd.rank(), hvd.size()
    if n < 2:
        pytest.skip("needs a second rank to join beside")
    t = torch.ones(2 * n)
    for first in range(n):
        if r == first:
            hvd.join()
        else:
            # The error names the joined ranks: `first`, and at np 3 or more
            # perhaps another whose own call failed a cycle sooner and that
            # has joined since ("ranks 0, 2 have joined"). Every rank joins
            # whatever the check found, so that a failure here is reported,
            # not left to hang the tests after it.
            try:
                with pytest.raises(hvd.HorovodInternalError,
                                   match=r"ranks? (\d+, )*%d(, \d+)* ha(s|ve) joined" % first):
                    _unnamed(op, t)
            finally:
                hvd.join()
    assert torch.equal(_unnamed(op, _input(r, n)), _expected(op, r, n))
