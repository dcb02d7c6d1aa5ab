"""join() with uneven data: rank r has r + 1 batches; the others' averages are
over the ranks that still have data, and join returns the last rank to join."""

import torch

import hora.torch as hvd


def test_join_with_uneven_batches():
    r, n = hvd.rank(), hvd.size()
    for step in range(r + 1):
        t = torch.full((4,), float(10 * r + step))
        out = hvd.allreduce(t, op=hvd.Average, name="join.grad")
        active = [p for p in range(n) if step < p + 1]
        want = sum(10 * p + step for p in active) / len(active)
        assert torch.allclose(out, torch.full((4,), want)), (step, out, want)
    assert hvd.join() == n - 1
    # The job goes on normally afterwards.
    assert hvd.allreduce(torch.ones(2), op=hvd.Sum, name="join.after").tolist() == [n, n]
