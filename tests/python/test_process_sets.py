"""Process sets: hvd.add_process_set / remove_process_set and process_set= on
every collective. Every rank adds the sets (collective over the job); each
rank then works in its parity set (evens, odds), and results are checked
against values computed here from the set's ranks."""

import pytest
import torch

import hora.torch as hvd
from hora.common.exceptions import HoraError


needs_two = pytest.mark.skipif(hvd.size() < 2, reason="a set of every rank is the global set")


@pytest.fixture
def parity_sets():
    n = hvd.size()
    evens = hvd.add_process_set([r for r in range(n) if r % 2 == 0])
    odds = hvd.add_process_set([r for r in range(n) if r % 2 == 1]) if n > 1 else None
    mine = odds if hvd.rank() % 2 else evens
    yield mine
    if odds is not None:
        hvd.remove_process_set(odds)
    hvd.remove_process_set(evens)


@needs_two
def test_collectives_in_a_set(parity_sets):
    ps, r = parity_sets, hvd.rank()
    members = ps.ranks
    assert ps.included() and ps.size() == len(members) and ps.rank() == members.index(r)
    for dtype in (torch.float32, torch.int64, torch.float16):
        out = hvd.allreduce(torch.full((5,), r, dtype=dtype), op=hvd.Sum, name="ps.sum",
                            process_set=ps)
        assert out.tolist() == [sum(members)] * 5, (dtype, out)
    avg = hvd.allreduce(torch.full((3,), float(r)), name="ps.avg", process_set=ps)
    assert torch.allclose(avg, torch.full((3,), sum(members) / len(members)))
    # The global set at the same time, with the same name.
    glob = hvd.allreduce(torch.full((5,), float(r)), op=hvd.Sum, name="ps.sum")
    assert glob.tolist() == [float(sum(range(hvd.size())))] * 5
    gathered = hvd.allgather(torch.full((r + 1, 2), r), process_set=ps)
    want = torch.cat([torch.full((p + 1, 2), p) for p in members])
    assert torch.equal(gathered, want)
    root = members[-1]
    b = hvd.broadcast(torch.full((4,), float(r)), root_rank=root, name="ps.b", process_set=ps)
    assert b.tolist() == [float(root)] * 4
    splits = list(range(1, len(members) + 1))
    out, received = hvd.alltoall(torch.full((sum(splits),), float(r)), splits=splits,
                                 process_set=ps)
    assert received.tolist() == [ps.rank() + 1] * len(members)
    assert out.tolist() == [float(p) for p in members for _ in range(ps.rank() + 1)]
    rs = hvd.reducescatter(torch.ones(2 * len(members), 3), op=hvd.Sum, process_set=ps)
    assert torch.equal(rs, torch.full((2, 3), float(len(members))))
    grouped = hvd.grouped_allreduce([torch.ones(2) * r, torch.ones(3) * 2 * r], op=hvd.Sum,
                                    process_set=ps)
    assert grouped[0].tolist() == [sum(members)] * 2
    assert grouped[1].tolist() == [2 * sum(members)] * 3
    obj = hvd.broadcast_object({"from": r}, root_rank=root, process_set=ps)
    assert obj == {"from": root}
    assert hvd.allgather_object(r, process_set=ps) == members
    hvd.barrier(process_set=ps)


@needs_two
def test_one_call_forms_in_a_set(parity_sets):
    # A plain host tensor's collectives on a registered set go to the core in
    # one call, as the global set's (hora.torch.reduce_ops.direct_op); the
    # async forms make a handle. Both give the same.
    from hora.torch import reduce_ops as ro
    ps, r = parity_sets, hvd.rank()
    members, k = ps.ranks, ps.size()
    x = torch.full((3,), float(r + 1))
    assert ro.direct_op(x, None, "n", hvd.Sum, ps) == (hvd.Sum, ps.process_set_id)
    assert ro.direct_op(x, None, "n", hvd.Sum, hvd.ProcessSet([0])) is None  # not registered
    y = x.clone()
    assert hvd.allreduce_(y, op=hvd.Sum, name="ps.one.ip", process_set=ps) is y
    general = hvd.synchronize(hvd.allreduce_async(x, op=hvd.Sum, process_set=ps))
    assert torch.equal(y, general)
    assert y.tolist() == [float(sum(p + 1 for p in members))] * 3
    assert torch.equal(hvd.allreduce(x, op=hvd.Max, name="ps.one.op", process_set=ps),
                       torch.full((3,), float(members[-1] + 1)))
    g = torch.full((r + 1, 2), float(r))
    assert torch.equal(hvd.allgather(g, name="ps.one.ag", process_set=ps),
                       hvd.synchronize(hvd.allgather_async(g, process_set=ps)))
    root = members[0]
    b = torch.full((4,), float(r))
    assert hvd.broadcast(b, root, name="ps.one.bc", process_set=ps).tolist() == [float(root)] * 4
    splits = [q + 1 for q in range(k)]
    z = torch.arange(sum(splits), dtype=torch.float64) + 100 * r
    out, received = hvd.alltoall(z, splits=splits, name="ps.one.a2a", process_set=ps)
    out2, rec2 = hvd.synchronize(hvd.alltoall_async(z, splits=splits, process_set=ps))
    assert torch.equal(out, out2) and torch.equal(received, rec2)
    assert received.tolist() == [ps.rank() + 1] * k
    even = torch.arange(2 * k, dtype=torch.float32) + r
    assert torch.equal(hvd.alltoall(even, process_set=ps),
                       hvd.synchronize(hvd.alltoall_async(even, process_set=ps))[0])
    with pytest.raises(HoraError, match="%d splits given for %d ranks" % (k + 1, k)):
        hvd.alltoall(z, splits=splits + [0], process_set=ps)
    v = torch.ones(2 * k + 1, 2) * (r + 1)
    got = hvd.reducescatter(v, op=hvd.Sum, name="ps.one.rs", process_set=ps)
    assert torch.equal(got, hvd.synchronize(hvd.reducescatter_async(v, op=hvd.Sum,
                                                                    process_set=ps)))


@needs_two
def test_autograd_in_a_set(parity_sets):
    ps = parity_sets
    x = torch.full((4,), float(hvd.rank() + 1), requires_grad=True)
    y = hvd.allreduce(x, op=hvd.Sum, name="ps.grad", process_set=ps)
    y.sum().backward()
    # d(sum over the set)/dx, reduced over the set again: the set's size.
    assert x.grad.tolist() == [float(ps.size())] * 4


@needs_two
def test_optimizer_in_a_set(parity_sets):
    ps = parity_sets
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1, bias=False)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters(), process_set=ps)
    x = torch.full((2, 3), float(hvd.rank()))
    opt.zero_grad()
    model(x).sum().backward()
    opt.step()
    # The gradient is the set's average of 2 * rank per input.
    mean = sum(ps.ranks) / ps.size()
    grad = model.weight.grad
    assert torch.allclose(grad, torch.full((1, 3), 2 * mean)), grad


@needs_two
def test_errors():
    n, r = hvd.size(), hvd.rank()
    unregistered = hvd.ProcessSet([0])
    with pytest.raises(ValueError, match="not registered"):
        hvd.allreduce(torch.ones(1), process_set=unregistered)
    with pytest.raises(HoraError, match="already has ranks"):
        hvd.add_process_set(list(range(n)))
    ps = hvd.add_process_set([0])
    try:
        if r != 0:
            with pytest.raises(HoraError, match="rank %d is not in process set" % r):
                hvd.allreduce(torch.ones(1), process_set=ps)
        else:
            assert hvd.allreduce(torch.ones(1), op=hvd.Sum, process_set=ps).tolist() == [1.0]
            if n > 1:
                with pytest.raises(HoraError, match="root_rank 1 is not in"):
                    hvd.broadcast(torch.ones(1), root_rank=1, process_set=ps)
    finally:
        assert hvd.remove_process_set(ps) is True
    with pytest.raises(ValueError, match="not registered"):
        hvd.allreduce(torch.ones(1), process_set=ps)
    # As Horovod's: removing the global set, or a set not (or no longer)
    # added, does nothing and says False.
    assert hvd.remove_process_set(hvd.global_process_set) is False
    assert hvd.remove_process_set(ps) is False
    # The job goes on.
    assert hvd.allreduce(torch.ones(1), op=hvd.Sum, name="ps.after").tolist() == [float(n)]


@pytest.mark.skipif(hvd.size() < 3, reason="needs a set of two that is not the global set")
def test_a_collective_in_flight_in_a_removed_set_fails_naming_the_removal():
    # Rank 0 starts an allreduce in {0, 1} that rank 1 never joins; the set
    # is removed: rank 0's fails saying so (it said the Sessions were shut
    # down).
    ps = hvd.add_process_set([0, 1])
    h = (hvd.allreduce_async(torch.ones(2), name="removed.inflight", process_set=ps)
         if hvd.rank() == 0 else None)
    sid = ps.process_set_id
    assert hvd.remove_process_set(ps) is True
    if h is not None:
        with pytest.raises(HoraError, match="process set %d \\(ranks 0, 1\\) was removed "
                           "\\(remove_process_set\\)" % sid):
            hvd.synchronize(h)
    assert hvd.allreduce(torch.ones(1), op=hvd.Sum, name="removed.after").tolist() == [
        float(hvd.size())]


@needs_two
def test_init_registers_the_sets_it_is_given():
    # Horovod's init(process_sets=[...]): registered on every rank before
    # init returns, usable at once (a fresh Session, on every rank alike).
    n = hvd.size()
    hvd.shutdown()
    evens = hvd.ProcessSet([r for r in range(n) if r % 2 == 0])
    odds = hvd.ProcessSet([r for r in range(n) if r % 2 == 1])
    hvd.init(process_sets=[evens, odds])
    try:
        assert evens.process_set_id is not None and odds.process_set_id is not None
        mine = odds if hvd.rank() % 2 else evens
        out = hvd.allreduce(torch.full((3,), float(hvd.rank())), op=hvd.Sum, process_set=mine)
        assert out.tolist() == [float(sum(mine.ranks))] * 3
    finally:
        hvd.remove_process_set(odds)
        hvd.remove_process_set(evens)


def test_rank_in_a_set_this_rank_is_not_in_is_refused():
    # Horovod's ProcessSet.rank() raises ValueError there (Hora gave -1).
    others = [r for r in range(hvd.size()) if r != hvd.rank()]
    if not others:
        pytest.skip("needs two ranks")
    ps = hvd.ProcessSet(others)
    assert not ps.included()
    with pytest.raises(ValueError, match="rank %d is not one of its ranks" % hvd.rank()):
        ps.rank()
    assert hvd.ProcessSet([hvd.rank()]).rank() == 0


def test_init_takes_dynamic_in_any_case():
    # Horovod's init(process_sets="dynamic") compares without case.
    hvd.shutdown()
    with pytest.raises(ValueError, match="expected a list of process sets or 'dynamic'"):
        hvd.init(process_sets="static")
    hvd.init(process_sets="DYNAMIC")
    assert hvd.allreduce(torch.ones(1), op=hvd.Sum, name="dynamic.any.case").tolist() == [
        float(hvd.size())]


def test_shutdown_unregisters_the_sets_of_its_session():
    # A set added in a Session is unregistered by shutdown(): a new Session
    # starts without it (its id would name nothing there, or another set),
    # and the same object can be added again.
    n = hvd.size()
    everyone_but_last = hvd.add_process_set(list(range(max(n - 1, 1))))
    assert everyone_but_last.process_set_id is not None
    hvd.shutdown()
    assert everyone_but_last.process_set_id is None
    hvd.init()
    if n > 1:
        with pytest.raises(ValueError, match="is not registered"):
            hvd.allreduce(torch.ones(2), process_set=everyone_but_last)
    hvd.add_process_set(everyone_but_last)
    try:
        if everyone_but_last.included():
            out = hvd.allreduce(torch.full((2,), float(hvd.rank())), op=hvd.Sum,
                                process_set=everyone_but_last)
            assert out.tolist() == [float(sum(everyone_but_last.ranks))] * 2
    finally:
        hvd.remove_process_set(everyone_but_last)
