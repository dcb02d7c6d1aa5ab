"""Adasum (op=hvd.Adasum) against a reference written from its definition:
the binary tree of pairwise combinations
    combine(a, b) = (1 - a.b / 2|a|^2) a + (1 - a.b / 2|b|^2) b
over ranks 0..n-1, in float64. At 3 ranks (not a power of two) every rank
gets NotImplementedError at the call, as from Horovod's CPU Adasum.
"""

import pytest
import torch
import torch.nn as nn

import hora.torch as hvd
from helpers import value


def _combine(a, b):
    ab, aa, bb = float((a * b).sum()), float((a * a).sum()), float((b * b).sum())
    ca = 1 - ab / (2 * aa) if aa > 0 else 1.0
    cb = 1 - ab / (2 * bb) if bb > 0 else 1.0
    return ca * a + cb * b


def _tree(vectors):
    v = [t.to(torch.float64) for t in vectors]
    width = 1
    while width < len(v):
        for r in range(0, len(v), 2 * width):
            v[r] = _combine(v[r], v[r + width])
        width *= 2
    return v[0]


def _power_of_two():
    n = hvd.size()
    return n & (n - 1) == 0


def _input(r, shape, dtype, seed=0):
    return (value(r, shape, torch.float64, seed=seed) * (0.5 + 0.25 * r)
            + torch.linspace(-1, 1, int(torch.tensor(shape).prod())).reshape(shape)).to(dtype)


TOL = {torch.float16: 5e-3, torch.bfloat16: 3e-2, torch.float32: 1e-5, torch.float64: 1e-12}


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
@pytest.mark.parametrize("shape", [(1,), (7,), (3, 5), (1031,)])
def test_allreduce_adasum_matches_definition(dtype, shape):
    r, n = hvd.rank(), hvd.size()
    x = _input(r, shape, dtype)
    if not _power_of_two():
        with pytest.raises(NotImplementedError, match="power-of-two"):
            hvd.allreduce(x, op=hvd.Adasum)
        return
    got = hvd.allreduce(x, op=hvd.Adasum, name="ada.%s.%s" % (dtype, shape))
    want = _tree([_input(q, shape, dtype) for q in range(n)])
    assert got.dtype == dtype and got.shape == x.shape
    torch.testing.assert_close(got.to(torch.float64), want, rtol=TOL[dtype], atol=TOL[dtype])
    every = hvd.allgather(got.reshape(1, -1), name="ada.same.%s.%s" % (dtype, shape))
    assert all(torch.equal(every[0], row) for row in every), "ranks differ"


def test_adasum_scale_invariance_and_refusals():
    r = hvd.rank()
    if _power_of_two():
        x = _input(r, (6,), torch.float64)
        plain = hvd.allreduce(x, op=hvd.Adasum, name="ada.plain")
        scaled = hvd.allreduce(x, op=hvd.Adasum, prescale_factor=0.5, postscale_factor=3.0,
                               name="ada.scaled")
        torch.testing.assert_close(scaled, plain * 1.5)
        with pytest.raises(ValueError, match="Adasum"):
            hvd.allreduce(torch.ones(3, dtype=torch.int32), op=hvd.Adasum, name="ada.int")
    with pytest.raises(ValueError, match="Adasum"):
        hvd.reducescatter(torch.ones(4), op=hvd.Adasum, name="ada.rs")


def test_distributed_optimizer_adasum():
    # Adasum combines each rank's local update (SGD: -lr * grad), then every
    # parameter is its start plus the combination.
    r, n = hvd.rank(), hvd.size()
    torch.manual_seed(0)
    model = nn.Linear(4, 2).double()
    start = [p.detach().clone() for p in model.parameters()]
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    if not _power_of_two():
        dopt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters(),
                                        op=hvd.Adasum)
        # (raised in the gradient hook; autograd may wrap it)
        with pytest.raises((NotImplementedError, RuntimeError), match="power-of-two"):
            model(torch.ones(1, 4, dtype=torch.float64)).sum().backward()
        return
    dopt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters(),
                                    op=hvd.Adasum)

    def data(q):
        g = torch.Generator().manual_seed(100 + q)
        return torch.randn(3, 4, generator=g, dtype=torch.float64)

    model(data(r)).pow(2).sum().backward()
    dopt.step()
    # Reference: every rank's local delta, from a copy of the starting model.
    deltas = []
    for q in range(n):
        ref = nn.Linear(4, 2).double()
        with torch.no_grad():
            for p, s in zip(ref.parameters(), start):
                p.copy_(s)
        ref(data(q)).pow(2).sum().backward()
        deltas.append([-0.1 * p.grad for p in ref.parameters()])
    for i, (p, s) in enumerate(zip(model.parameters(), start)):
        want = s + _tree([d[i] for d in deltas])
        torch.testing.assert_close(p.detach(), want, rtol=1e-12, atol=1e-12)
    with pytest.raises(AssertionError):
        with dopt.skip_synchronize():
            pass


def test_a_failed_adasum_step_leaves_the_parameters_as_they_were():
    # Each parameter holds this rank's delta while it is reduced; where the
    # reduction fails (here: rank 1's layer is wider, a mismatch every rank
    # sees), step() raises with every parameter back at its value before.
    if not _power_of_two() or hvd.size() < 2:
        return  # (an Adasum optimizer refuses to reduce here, before any delta)
    r = hvd.rank()
    torch.manual_seed(2)
    model = nn.Linear(4, 2 + (r % 2)).double()
    start = [p.detach().clone() for p in model.parameters()]
    dopt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                    named_parameters=model.named_parameters(), op=hvd.Adasum)
    model(torch.ones(3, 4, dtype=torch.float64)).sum().backward()
    with pytest.raises(hvd.MismatchError,
                       match=r"rank 0 float64\[2\] adasum; rank 1 float64\[3\]"):
        dopt.step()
    for p, s in zip(model.parameters(), start):
        torch.testing.assert_close(p.detach(), s, rtol=0, atol=0)


def test_broadcast_optimizer_state_of_an_adasum_optimizer_runs_no_collective_step():
    # Ranks without state yet take one local step to make it (as Horovod's);
    # the Adasum optimizer's own step() is a collective, which the root, with
    # state already, would not join: it must not be the step taken.
    if not _power_of_two():
        return  # (an Adasum optimizer refuses to reduce here; nothing to broadcast)
    r = hvd.rank()
    torch.manual_seed(1)
    model = nn.Linear(3, 2).double()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    dopt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters(),
                                    op=hvd.Adasum)
    if r == 0:  # the root alone has state (a local step of the wrapped optimizer)
        for p in model.parameters():
            p.grad = torch.full_like(p, 0.5)
        dopt._local_step()
        for p in model.parameters():
            p.grad = None
    hvd.broadcast_optimizer_state(dopt, root_rank=0)
    steps = [float(dopt.state[p]["step"]) for p in model.parameters()]
    assert steps == [1.0, 1.0], steps
    root = hvd.broadcast_object([dopt.state[p]["exp_avg"] for p in model.parameters()], 0)
    for p, want in zip(model.parameters(), root):
        torch.testing.assert_close(dopt.state[p]["exp_avg"], want)
