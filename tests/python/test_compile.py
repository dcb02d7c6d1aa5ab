"""torch.compile over hora.torch's collectives (hora.torch.compiled_ops).

With fullgraph=True (an error at any graph break), the collectives must be
recorded as Hora's operators, give the references' values, carry the eager
rules' gradients, and raise Hora's errors. Needs torch >= 2.4
(torch.library.custom_op): skipped on Debian's torch 1.13, which has no
torch.compile.
"""

import pytest
import torch

import hora.torch as hvd
from hora.torch import compiled_ops
from helpers import all_values, reduce_reference, rows_of, value

pytestmark = pytest.mark.skipif(not compiled_ops.AVAILABLE,
                                reason="torch.compile's operators need torch >= 2.4")


def _recording(seen):
    """A torch.compile backend that notes the graph's operators, then runs it."""
    def backend(gm, example_inputs):
        seen.update(str(n.target) for n in gm.graph.nodes if n.op == "call_function")
        return gm.forward
    return backend


def test_collectives_in_one_graph_equal_the_references():
    r, n = hvd.rank(), hvd.size()
    seen = set()

    def step(x, rows, uneven, tail):
        s = hvd.allreduce(x, op=hvd.Sum, name="c.sum")
        a = hvd.allreduce(x, name="c.avg", prescale_factor=2.0, postscale_factor=0.5)
        m = hvd.allreduce(x, op=hvd.Min, name="c.min")
        g = hvd.allgather(rows, name="c.gather")
        b = hvd.broadcast(x, root_rank=n - 1, name="c.bcast")
        even = hvd.alltoall(tail[:2 * n], name="c.a2a.even")
        got, received = hvd.alltoall(uneven, splits=[1] * n, name="c.a2a.splits")
        scattered = hvd.reducescatter(tail, op=hvd.Sum, name="c.rs")
        grouped = hvd.grouped_allreduce([x, x * 2], op=hvd.Sum, name="c.group")
        inplace = hvd.allreduce_(x.clone(), op=hvd.Max, name="c.max_")
        rooted = hvd.broadcast_(x.clone(), root_rank=0, name="c.bcast_")
        return s, a, m, g, b, even, got, received, scattered, grouped, inplace, rooted

    x = value(r, [5], torch.float32)
    rows = value(r, [rows_of(r), 3], torch.float32, seed=1)
    uneven = value(r, [n, 2], torch.float32, seed=2)
    tail = value(r, [2 * n + 1, 2], torch.float32, seed=3)
    compiled = torch.compile(step, fullgraph=True, backend=_recording(seen))
    s, a, m, g, b, even, got, received, scattered, grouped, inplace, rooted = compiled(
        x, rows, uneven, tail)

    xs = all_values([5], torch.float32)
    torch.testing.assert_close(s, reduce_reference(xs, hvd.Sum, torch.float32))
    torch.testing.assert_close(a, sum(xs) / n)
    torch.testing.assert_close(m, torch.stack(xs).min(0).values)
    torch.testing.assert_close(g, torch.cat([value(q, [rows_of(q), 3], torch.float32, seed=1)
                                            for q in range(n)]))
    torch.testing.assert_close(b, xs[n - 1])
    tails = [value(q, [2 * n + 1, 2], torch.float32, seed=3) for q in range(n)]
    # An even split of 2n rows: 2 to each rank.
    torch.testing.assert_close(even, torch.cat([t[2 * r:2 * r + 2] for t in tails]))
    torch.testing.assert_close(got, torch.stack([value(q, [n, 2], torch.float32, seed=2)[r]
                                                 for q in range(n)]))
    assert received.tolist() == [1] * n and received.dtype == torch.int32
    # This rank's slice of the sum: 2n+1 rows, rank 0 one more.
    start = 2 * r + min(r, 1)
    torch.testing.assert_close(scattered, sum(tails)[start:start + 2 + (r < 1)])
    torch.testing.assert_close(grouped[0], sum(xs))
    torch.testing.assert_close(grouped[1], 2 * sum(xs))
    torch.testing.assert_close(inplace, torch.stack(xs).max(0).values)
    torch.testing.assert_close(rooted, xs[0])
    recorded = {t.split(".")[1] for t in seen if t.startswith("hora.")}
    assert recorded == {"allreduce", "allgather", "broadcast", "alltoall", "keep",
                        "reducescatter", "grouped_allreduce", "allreduce_", "broadcast_"}, seen


def test_gradients_through_a_compiled_function_equal_the_eager_ones():
    # The eager rules (Horovod's) are checked against references in
    # test_autograd.py; compiled, the same rules run as operators.
    r, n = hvd.rank(), hvd.size()

    def loss(w, x):
        y = hvd.allreduce(x * w, op=hvd.Sum, name="g.sum")
        g = hvd.allgather(w[: r + 1] * x[: r + 1], name="g.gather")
        b = hvd.broadcast(w * 3, root_rank=n - 1, name="g.bcast")
        a = hvd.alltoall(torch.cat([w, w]).reshape(2 * n, -1) * (r + 1), name="g.a2a")
        s = hvd.reducescatter(torch.cat([w, w, w]) * x.sum(), op=hvd.Sum, name="g.rs")
        grouped = hvd.grouped_allreduce([w * 2, w * x], name="g.group")
        weights = torch.arange(1.0, g.shape[0] + 1)
        return ((y * y).sum() + (g * weights).sum() + b.sum() + (a * a).sum() + s.sum()
                + (grouped[0] * grouped[1]).sum())

    x = value(r, [2 * n], torch.float32, seed=4)
    grads = []
    for fn in (loss, torch.compile(loss, fullgraph=True, backend="aot_eager")):
        w = (value(r, [2 * n], torch.float32, seed=5) / 4).requires_grad_()
        out = fn(w, x)
        out.backward()
        grads.append((out.detach(), w.grad))
    torch.testing.assert_close(grads[1][0], grads[0][0])
    torch.testing.assert_close(grads[1][1], grads[0][1])
    assert grads[0][1].abs().sum() > 0


def test_an_error_inside_a_compiled_function_is_horas_and_the_job_goes_on():
    r = hvd.rank()
    f = torch.compile(lambda t: hvd.allreduce(t, name="c.bad") * 2, fullgraph=True,
                      backend="aot_eager")
    with pytest.raises(hvd.MismatchError, match=r"allreduce 'c.bad'.*float32\[3\]"):
        f(torch.ones(3 + r))
    torch.testing.assert_close(f(torch.ones(3)), torch.full((3,), 2.0))


def test_a_result_one_rank_does_not_use_is_still_reduced_there():
    # The operators are ordered effects: a collective whose result this
    # rank drops is not dead code (the others would wait for it), and
    # collectives keep their order.
    r, n = hvd.rank(), hvd.size()

    def step(x):
        total = hvd.allreduce(x, op=hvd.Sum, name="c.unused")
        hvd.allreduce(x * 0, name="c.barrier")  # (a barrier: no rank uses it)
        # (Rank 0 splits evenly, the others say so: the same collective.)
        rows = hvd.alltoall(x, name="c.a2a.unused") if r == 0 else \
            hvd.alltoall(x, splits=[2] * n, name="c.a2a.unused")[0]
        return (total, rows) if r == 0 else (x + 1, x)

    for backend in ("aot_eager", "inductor"):
        total, rows = torch.compile(step, fullgraph=True, backend=backend)(torch.ones(2 * n))
        want = torch.full((2 * n,), float(n) if r == 0 else 2.0)
        torch.testing.assert_close(total, want)
        torch.testing.assert_close(rows, torch.ones(2 * n))
        torch._dynamo.reset()


def test_a_strided_input_and_a_removed_set():
    # An input's strides are not the output's (contiguous, as eagerly); a
    # set removed before the call is refused as eagerly, in the user's terms.
    n = hvd.size()
    x = torch.arange(6.0).reshape(2, 3).t()  # (3, 2), not contiguous
    out = torch.compile(lambda t: hvd.allreduce(t, op=hvd.Sum, name="c.strided") + 1,
                        fullgraph=True)(x)
    torch.testing.assert_close(out, x * n + 1)
    ps = hvd.add_process_set([0] if n == 2 else [0, n - 1])
    hvd.remove_process_set(ps)
    f = torch.compile(lambda t: hvd.allreduce(t, process_set=ps, name="c.gone"), fullgraph=True,
                      backend="aot_eager")
    with pytest.raises(ValueError, match="not registered"):
        f(torch.ones(2))


def test_a_process_set_inside_a_compiled_function():
    r, n = hvd.rank(), hvd.size()
    members = [0, n - 1] if n > 2 else [1]  # (not every rank: that is the global set)
    ps = hvd.add_process_set(members)
    try:
        if ps.included():
            f = torch.compile(lambda t: hvd.allreduce(t, op=hvd.Sum, process_set=ps,
                                                      name="c.set"),
                              fullgraph=True, backend="aot_eager")
            want = reduce_reference([value(q, [4], torch.float32) for q in members], hvd.Sum,
                                    torch.float32)
            torch.testing.assert_close(f(value(r, [4], torch.float32)), want)
    finally:
        hvd.remove_process_set(ps)


def test_inductor_compiles_a_step_with_collectives():
    # The default backend (Inductor: the operators as extern kernels around
    # generated code), a dimension 0 known only as the graph runs included.
    r, n = hvd.rank(), hvd.size()

    def step(x):
        total = hvd.allreduce(x.sin(), op=hvd.Sum, name="i.sum")
        every = hvd.allgather(x[: r + 1].cos(), name="i.gather")
        return total * 2, every.reshape(-1, 1).mean(0)

    x = value(r, [n + 1], torch.float32)
    total, mean = torch.compile(step, fullgraph=True)(x)
    torch.testing.assert_close(total, 2 * sum(v.sin() for v in all_values([n + 1], torch.float32)))
    rows = torch.cat([value(q, [n + 1], torch.float32)[: q + 1].cos() for q in range(n)])
    torch.testing.assert_close(mean, rows.mean().reshape(1))

    # alltoall with uneven splits (rank q sends p + q + 1 rows to rank p),
    # its received splits, and its gradient (each row's own: 2 x).
    def splits_of(q):
        return [p + q + 1 for p in range(n)]

    def exchange(t):
        out, received = hvd.alltoall(t, splits=splits_of(r), name="i.a2a")
        return (out * out).sum(), out, received

    inp = value(r, [sum(splits_of(r)), 2], torch.float32).requires_grad_()
    loss, out, received = torch.compile(exchange, fullgraph=True)(inp)
    loss.backward()
    assert received.tolist() == [splits_of(q)[r] for q in range(n)]
    want = torch.cat([value(q, [sum(splits_of(q)), 2], torch.float32)[
        sum(splits_of(q)[:r]):sum(splits_of(q)[:r + 1])] for q in range(n)])
    torch.testing.assert_close(out, want)
    torch.testing.assert_close(inp.grad, 2 * inp.detach())


def test_async_calls_and_grouped_forms_equal_the_references():
    # Compiled, an *_async call is its operator, done where the graph
    # reaches it; its handle (hvd.Done) gives the result to poll and
    # synchronize, inside the graph or, returned, outside it.
    r, n = hvd.rank(), hvd.size()
    seen = set()

    def step(x, rows, tail):
        hs = [hvd.allreduce_async(x, op=hvd.Sum, name="a.sum"),
              hvd.allreduce_async_(x.clone(), op=hvd.Max, name="a.max_"),
              hvd.allgather_async(rows, name="a.gather"),
              hvd.broadcast_async(x, root_rank=n - 1, name="a.bcast"),
              hvd.broadcast_async_(x.clone(), root_rank=0, name="a.bcast_"),
              hvd.alltoall_async(tail[:2 * n], name="a.a2a"),
              hvd.reducescatter_async(tail, op=hvd.Sum, name="a.rs"),
              hvd.grouped_allreduce_async([x, x * 2], op=hvd.Sum, name="a.group"),
              hvd.grouped_allreduce_async_([x.clone(), x * 3], op=hvd.Sum, name="a.group_"),
              hvd.grouped_allgather_async([rows, x], name="a.ggather"),
              hvd.grouped_reducescatter_async([tail, tail * 2], op=hvd.Sum, name="a.grs")]
        assert all(hvd.poll(h) for h in hs)
        out = [hvd.synchronize(h) for h in hs]
        out.append(hvd.grouped_allgather([rows, x], name="s.ggather"))
        out.append(hvd.grouped_reducescatter([tail, tail * 2], op=hvd.Sum, name="s.grs"))
        out.append(hvd.grouped_allreduce_([x.clone(), x * 5], op=hvd.Sum, name="s.group_"))
        out.append(hvd.grouped_allreduce_([], name="s.empty"))
        return out, hvd.allreduce_async(x * 2, op=hvd.Sum, name="a.returned")

    x = value(r, [5], torch.float32)
    rows = value(r, [rows_of(r), 3], torch.float32, seed=1)
    tail = value(r, [2 * n + 1, 2], torch.float32, seed=3)
    xs = all_values([5], torch.float32)
    gathered = torch.cat([value(q, [rows_of(q), 3], torch.float32, seed=1) for q in range(n)])
    tails = sum(value(q, [2 * n + 1, 2], torch.float32, seed=3) for q in range(n))
    start = 2 * r + min(r, 1)
    mine = tails[start:start + 2 + (r < 1)]
    even = torch.cat([value(q, [2 * n + 1, 2], torch.float32, seed=3)[2 * r:2 * r + 2]
                      for q in range(n)])
    want = [sum(xs), torch.stack(xs).max(0).values, gathered, xs[n - 1], xs[0],
            (even, torch.full((n,), 2, dtype=torch.int32)), mine, [sum(xs), 2 * sum(xs)],
            [sum(xs), 3 * sum(xs)], (gathered, torch.cat(xs)), [mine, 2 * mine],
            (gathered, torch.cat(xs)), [mine, 2 * mine], [sum(xs), 5 * sum(xs)], []]
    for backend in (_recording(seen), "inductor"):
        out, handle = torch.compile(step, fullgraph=True, backend=backend)(x, rows, tail)
        torch.testing.assert_close(out, want)
        assert isinstance(handle, hvd.Done) and hvd.poll(handle)
        torch.testing.assert_close(hvd.synchronize(handle), 2 * sum(xs))
    recorded = {t.split(".")[1] for t in seen if t.startswith("hora.")}
    assert recorded == {"allreduce", "allreduce_", "allgather", "broadcast", "broadcast_",
                        "alltoall", "keep", "reducescatter", "grouped_allreduce",
                        "grouped_allreduce_", "grouped_allgather",
                        "grouped_reducescatter"}, seen


def test_collectives_of_rank_dependent_sizes_keep_their_order():
    # Ranks whose shapes differ compile different graphs; the operators
    # whose sizes are known only as they run (alltoall, the grouped
    # allgather and reducescatter) must still run in program order on every
    # rank (Inductor ran o.grs2 before o.grs on one rank here, and the ranks
    # waited for each other). Gradients equal the eager rules'.
    r, n = hvd.rank(), hvd.size()

    def grouped(w, x):
        ga = hvd.grouped_allgather([w[: r + 1] * x[: r + 1], w.sum() * 2], name="o.ggather")
        rs = hvd.grouped_reducescatter([torch.cat([w, w, w]).reshape(-1, 2) * x.sum(),
                                        w.reshape(-1, 2) * 3], op=hvd.Sum, name="o.grs")
        rs2 = hvd.grouped_reducescatter([w.reshape(-1, 2) * 3], op=hvd.Average,
                                        prescale_factor=2.0, name="o.grs2")
        weights = torch.arange(1.0, ga[0].shape[0] + 1)
        return ((ga[0] * weights).sum() + (ga[1] * ga[1]).sum() + (rs[0] * rs[0]).sum()
                + rs[1].sum() + (rs2[0] ** 2).sum())

    def exchanged(w, x):
        a, _ = hvd.alltoall(torch.cat([w, w[: r + 1]]), splits=[1] * (n - 1) + [n + r + 2],
                            name="o.a2a")
        a2 = hvd.alltoall(w.reshape(n, -1) * x[0], name="o.a2a.even")
        return (a * a).sum() + (a2 ** 3).sum()

    x = torch.arange(2.0 * n) + r
    for loss in (grouped, exchanged):
        results = []
        for backend in (None, "aot_eager", "inductor"):
            fn = loss if backend is None else torch.compile(loss, fullgraph=True,
                                                            backend=backend)
            w = (torch.arange(2.0 * n) / 4 + r).requires_grad_()
            out = fn(w, x)
            out.backward()
            results.append((out.detach(), w.grad))
        for out, grad in results[1:]:
            torch.testing.assert_close(out, results[0][0])
            torch.testing.assert_close(grad, results[0][1])
        assert results[0][1].abs().sum() > 0
