"""allgather, broadcast, alltoall, reducescatter, barrier and handles."""

import pytest
import torch

import hora.torch as hvd
from hora.common import basics
from helpers import DTYPES, assert_equal, reduce_reference, rows_of, value

REST_SHAPES = [(), (3,), (2, 2)]


def _gather_ref(rest, dtype, seed=0):
    return torch.cat([value(r, (rows_of(r),) + rest, dtype, seed) for r in range(hvd.size())])


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_allgather(dtype):
    r = hvd.rank()
    for i, rest in enumerate(REST_SHAPES):
        x = value(r, (rows_of(r),) + rest, dtype, seed=i)
        assert_equal(hvd.allgather(x, name="ag.%s.%d" % (dtype, i)), _gather_ref(rest, dtype, i))
        got = hvd.synchronize(hvd.allgather_async(x))
        assert_equal(got, _gather_ref(rest, dtype, i))
    # A scalar is gathered as a 1-element vector per rank.
    got = hvd.allgather(torch.tensor(r + 1, dtype=dtype))
    assert_equal(got, torch.arange(1, hvd.size() + 1).to(dtype))


def test_allgather_rank_with_zero_rows():
    r = hvd.rank()
    rows = [0 if q == 1 else q + 1 for q in range(hvd.size())]
    x = torch.full((rows[r],), r, dtype=torch.float32)
    want = torch.cat([torch.full((rows[q],), q, dtype=torch.float32) for q in range(hvd.size())])
    assert_equal(hvd.allgather(x), want)


def test_allgather_zero_rows_multidim():
    # A rank with no rows but further dimensions: shape (0, 3).
    r = hvd.rank()
    rows = [0 if q == 1 else 2 for q in range(hvd.size())]
    x = torch.full((rows[r], 3), r, dtype=torch.float32)
    want = torch.cat([torch.full((rows[q], 3), q, dtype=torch.float32)
                      for q in range(hvd.size())])
    # Bounded wait: if one rank refuses its tensor locally, the others must not hang.
    assert_equal(hvd.synchronize(hvd.allgather_async(x, name="ag.zero.multidim"), timeout=10),
                 want)


def test_zero_element_multidim_tensors():
    # Every rank passes the same empty (0, 3) / (2, 0, 2) shapes.
    z = torch.zeros(0, 3)
    assert hvd.allreduce(z, name="zero.ar").shape == (0, 3)
    assert hvd.broadcast(torch.zeros(2, 0, 2), 0, name="zero.bc").shape == (2, 0, 2)
    assert hvd.allgather(z, name="zero.ag").shape == (0, 3)


def test_grouped_allgather():
    r = hvd.rank()
    xs = [value(r, (rows_of(r),) + rest, torch.float64, seed=i)
          for i, rest in enumerate(REST_SHAPES)]
    outs = hvd.grouped_allgather(xs, name="gag")
    for i, (rest, got) in enumerate(zip(REST_SHAPES, outs)):
        assert_equal(got, _gather_ref(rest, torch.float64, i))


@pytest.mark.parametrize("dtype", DTYPES + [torch.bool, torch.uint8], ids=str)
def test_broadcast(dtype):
    r = hvd.rank()
    for root in range(hvd.size()):
        # (260, 260): 66 KB or more in every dtype, an output from Hora's pool.
        for i, shape in enumerate([(), (0,), (1,), (5,), (3, 4), (2, 3, 5), (260, 260)]):
            lo = 0 if dtype in (torch.bool, torch.uint8) else -3
            mine = value(r, shape, dtype, i, lo=lo, hi=min(3, 1 if dtype == torch.bool else 3))
            want = value(root, shape, dtype, i, lo=lo,
                         hi=min(3, 1 if dtype == torch.bool else 3))
            x = mine.clone()
            assert_equal(hvd.broadcast(x, root, name="bc.%d.%d" % (root, i)), want)
            assert torch.equal(x, mine)  # out-of-place leaves the input alone
            out = hvd.broadcast_(x, root)
            assert out is x
            assert_equal(x, want)
            y = mine.clone()
            assert hvd.synchronize(hvd.broadcast_async_(y, root)) is y
            assert_equal(y, want)
            assert_equal(hvd.synchronize(hvd.broadcast_async(mine, root)), want)


def test_broadcast_outputs_take_the_memory_of_freed_ones_from_the_pool():
    from hora.common.basics import engine_counters

    def pool():
        c = engine_counters()
        return c["outputs_reused"], c["outputs_fresh"]

    r, n = hvd.rank(), hvd.size()
    root = n - 1
    mine = torch.arange(1 << 17, dtype=torch.float64) + r  # 1 MiB
    want = torch.arange(1 << 17, dtype=torch.float64) + root
    y = hvd.broadcast(mine, root, name="bpool.0")
    assert_equal(y, want)
    first = y.data_ptr()
    del y
    reused, fresh = pool()
    z = hvd.broadcast(mine, root, name="bpool.1")
    assert pool() == (reused + 1, fresh) and z.data_ptr() == first
    assert_equal(z, want)
    w = hvd.broadcast(mine, root, name="bpool.2")  # z alive: other memory
    assert sum(pool()) == reused + fresh + 2 and w.data_ptr() != first
    z += 1  # an ordinary, writeable tensor
    assert_equal(w, want)
    assert torch.equal(mine, torch.arange(1 << 17, dtype=torch.float64) + r)
    # A non-contiguous input: the output is contiguous, of the input's shape.
    t = (torch.arange(1 << 17, dtype=torch.float32).reshape(256, 512) + r).t()
    got = hvd.broadcast(t, 0, name="bpool.t")
    assert got.shape == t.shape and got.is_contiguous()
    assert_equal(got, torch.arange(1 << 17, dtype=torch.float32).reshape(256, 512).t())


def test_broadcast_bad_root():
    with pytest.raises(hvd.InvalidArgumentError, match="root_rank"):
        hvd.broadcast(torch.ones(2), hvd.size())


def _a2a_rows(src, dst):
    # Some pairs exchange no rows; every rank sends and receives some in total.
    return (src + 2 * dst + 1) % 3


def _a2a_input(src, dtype):
    parts = []
    for dst in range(hvd.size()):
        k = torch.arange(_a2a_rows(src, dst), dtype=torch.int64)
        rows = (src * 16 + dst * 4 + k) % 50
        parts.append(torch.stack([rows, -rows], 1))
    return torch.cat(parts).to(dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_alltoall_with_splits(dtype):
    r, n = hvd.rank(), hvd.size()
    x = _a2a_input(r, dtype)
    splits = [_a2a_rows(r, p) for p in range(n)]
    out, received = hvd.alltoall(x, splits=splits, name="a2a.%s" % dtype)
    want_parts = []
    for src in range(n):
        full = _a2a_input(src, dtype)
        start = sum(_a2a_rows(src, p) for p in range(r))
        want_parts.append(full[start:start + _a2a_rows(src, r)])
    assert_equal(out, torch.cat(want_parts))
    assert received.dtype == torch.int32
    assert received.tolist() == [_a2a_rows(src, r) for src in range(n)]
    # splits as a tensor, through the async form.
    out2, rec2 = hvd.synchronize(hvd.alltoall_async(x, splits=torch.tensor(splits)))
    assert_equal(out2, out)
    assert torch.equal(rec2, received)


def test_alltoall_even_split():
    r, n = hvd.rank(), hvd.size()
    x = torch.arange(2 * n, dtype=torch.float32) + 100 * r
    out = hvd.alltoall(x)
    assert isinstance(out, torch.Tensor)
    want = torch.cat([torch.arange(2 * r, 2 * r + 2, dtype=torch.float32) + 100 * s
                      for s in range(n)])
    assert_equal(out, want)


def _scatter_rows(dim0, r, n):
    return dim0 // n + (1 if r < dim0 % n else 0)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_reducescatter(dtype):
    r, n = hvd.rank(), hvd.size()
    for i, shape in enumerate([(2 * n,), (2 * n + 1, 3), (1,), (7, 2, 2)]):
        for op in (hvd.Sum, hvd.Average, hvd.Min, hvd.Max, hvd.Product):
            vals = [value(q, shape, dtype, seed=i) for q in range(n)]
            full = reduce_reference(vals, op, dtype)
            start = sum(_scatter_rows(shape[0], q, n) for q in range(r))
            want = full[start:start + _scatter_rows(shape[0], r, n)]
            got = hvd.reducescatter(vals[r], op=op, name="rs.%s.%d.%d" % (dtype, i, op))
            assert_equal(got, want)
    vals = [value(q, (n * 3,), dtype) for q in range(n)]
    got = hvd.synchronize(hvd.reducescatter_async(vals[r], op=hvd.Sum))
    assert_equal(got, reduce_reference(vals, hvd.Sum, dtype)[3 * r:3 * r + 3])


def test_grouped_reducescatter():
    r, n = hvd.rank(), hvd.size()
    shapes = [(2 * n, 2), (n + 1,)]
    vals = [[value(q, s, torch.float32, seed=i) for q in range(n)] for i, s in enumerate(shapes)]
    outs = hvd.grouped_reducescatter([v[r] for v in vals], op=hvd.Sum)
    for s, v, got in zip(shapes, vals, outs):
        start = sum(_scatter_rows(s[0], q, n) for q in range(r))
        want = reduce_reference(v, hvd.Sum, torch.float32)
        assert_equal(got, want[start:start + _scatter_rows(s[0], r, n)])


def test_barrier_and_handles():
    hvd.barrier()
    h = hvd.allreduce_async(torch.ones(3), op=hvd.Sum, name="handle.test")
    assert isinstance(hvd.poll(h), bool)
    assert_equal(hvd.synchronize(h, timeout=30), torch.full((3,), float(hvd.size())))
    assert hvd.poll(h)
    assert "handle.test" in repr(h) and h.name == "handle.test"
    hvd.barrier()


def test_outputs_cross_without_a_copy():
    # The output Hora allocates reaches torch and NumPy as views of the same
    # memory (DLPack capsule and buffer), not copies.
    import numpy as np
    from torch.utils import dlpack
    from hora.common import basics
    n = hvd.size()
    x = torch.full((2, 3), float(hvd.rank()))
    h = basics.session().allgather_async("zero.copy", dlpack.to_dlpack(x))
    h.wait()
    t1 = dlpack.from_dlpack(h.output())
    t2 = dlpack.from_dlpack(h.output())
    a = np.frombuffer(h.output_buffer(), dtype=np.float32)
    assert t1.data_ptr() == t2.data_ptr() == a.ctypes.data
    assert t1.shape == (2 * n, 3) and a.size == 6 * n
    t1[0, 0] = 42.0  # one memory: the others see the write
    assert t2[0, 0].item() == 42.0 and a[0] == 42.0


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_one_call_forms_match_the_general_path(dtype):
    # allgather, broadcast, alltoall and reducescatter of a plain host tensor
    # (no grad, the global set, an ASCII name or none) go to the core in one
    # call that waits there (Session.allgather_new and the like); the async
    # forms take the general path (a handle). Both give the same, and a
    # tensor that requires grad takes the autograd path.
    r, n = hvd.rank(), hvd.size()
    s = basics.session()
    x = value(r, (rows_of(r), 3), dtype, seed=5)
    cap = torch.utils.dlpack.to_dlpack(x)
    assert s.allgather_new("one.ag.core", cap) is not None  # (the core takes it)
    got = hvd.allgather(x, name="one.ag")
    assert torch.equal(got, hvd.synchronize(hvd.allgather_async(x)))
    assert_equal(got, torch.cat([value(q, (rows_of(q), 3), dtype, seed=5) for q in range(n)]))
    for root in range(n):
        y = value(r, (4, 2), dtype, seed=root)
        got = hvd.broadcast(y, root, name="one.bc.%d" % root)
        assert torch.equal(y, value(r, (4, 2), dtype, seed=root))  # input untouched
        assert torch.equal(got, hvd.synchronize(hvd.broadcast_async(y, root)))
        assert_equal(got, value(root, (4, 2), dtype, seed=root))
    z = _a2a_input(r, dtype)
    splits = [_a2a_rows(r, p) for p in range(n)]
    out, received = hvd.alltoall(z, splits=splits, name="one.a2a")
    out2, rec2 = hvd.synchronize(hvd.alltoall_async(z, splits=splits))
    assert torch.equal(out, out2) and torch.equal(received, rec2)
    assert received.dtype == torch.int32
    even = value(r, (2 * n, 2), dtype, seed=3)
    got = hvd.alltoall(even)
    assert isinstance(got, torch.Tensor)
    assert torch.equal(got, hvd.synchronize(hvd.alltoall_async(even))[0])
    if dtype.is_floating_point:
        pre, post = 0.5, 3.0
    else:
        pre, post = 2.0, 1.0
    vals = [value(q, (2 * n + 1, 3), dtype, seed=7) for q in range(n)]
    for op in (hvd.Sum, hvd.Average, hvd.Max):
        got = hvd.reducescatter(vals[r], op=op, prescale_factor=pre, postscale_factor=post,
                                name="one.rs.%d" % op)
        general = hvd.synchronize(hvd.reducescatter_async(
            vals[r], op=op, prescale_factor=pre, postscale_factor=post))
        assert torch.equal(got, general)
        start = sum(_scatter_rows(2 * n + 1, q, n) for q in range(r))
        want = reduce_reference(vals, op, dtype, pre, post)
        assert_equal(got, want[start:start + _scatter_rows(2 * n + 1, r, n)])
    if dtype.is_floating_point:
        w = value(r, (2 * n, 2), dtype, seed=1).requires_grad_()
        for got in (hvd.allgather(w), hvd.broadcast(w, 0), hvd.alltoall(w),
                    hvd.reducescatter(w, op=hvd.Sum)):
            assert got.requires_grad  # (the autograd path)


def test_one_call_forms_leave_other_tensors_to_the_general_path():
    # The core declines (None, the capsule unused) what the general path
    # handles or refuses with its own message: a scalar where the collective
    # needs a dimension, a tensor that is not contiguous, bool.
    r, n = hvd.rank(), hvd.size()
    s = basics.session()
    scalar = torch.tensor(float(r + 1))
    strided = torch.arange(4 * n, dtype=torch.float32).reshape(2, 2 * n).t() + r
    calls = {
        "allgather": lambda c: s.allgather_new("declined", c),
        "alltoall": lambda c: s.alltoall_new("declined", c),
        "reducescatter": lambda c: s.reducescatter_new("declined", c, hvd.Sum),
    }
    for what, call in calls.items():
        for declined in (scalar, strided):
            cap = torch.utils.dlpack.to_dlpack(declined)
            assert call(cap) is None, what
            assert torch.equal(torch.utils.dlpack.from_dlpack(cap), declined)  # (unused)
    cap = torch.utils.dlpack.to_dlpack(strided)
    assert s.broadcast_new("declined", cap, 0) is None
    # ... which the general path then runs.
    assert_equal(hvd.allgather(scalar), torch.arange(1, n + 1, dtype=torch.float32))
    assert_equal(hvd.broadcast(strided, 0), strided - r)
    want = torch.cat([(strided - r + q)[2 * r:2 * r + 2] for q in range(n)])
    assert_equal(hvd.alltoall(strided), want)
    got = hvd.reducescatter(strided, op=hvd.Sum)
    assert_equal(got, (n * (strided - r) + n * (n - 1) // 2)[2 * r:2 * r + 2])
    flags = torch.tensor([r % 2 == 0, True])
    assert hvd.allgather(flags).tolist() == [q % 2 == 0 if i == 0 else True
                                             for q in range(n) for i in range(2)]
    assert hvd.broadcast(flags, n - 1).tolist() == [(n - 1) % 2 == 0, True]
    with pytest.raises(hvd.InvalidArgumentError, match="bool"):
        hvd.reducescatter(flags)
    # Errors raised from the one-call forms are the general path's.
    with pytest.raises(hvd.InvalidArgumentError, match="root_rank"):
        hvd.broadcast(torch.ones(2), n, name="one.bad.root")
    with pytest.raises(hvd.InvalidArgumentError, match="splits"):
        hvd.alltoall(torch.ones(n, 2), splits=[1] * (n + 1), name="one.bad.splits")
    if n > 1:
        with pytest.raises(hvd.InvalidArgumentError):
            hvd.alltoall(torch.ones(n + 1, 2), name="one.uneven")


def test_alltoall_splits_wrong_on_one_rank_fail_on_every_rank():
    # Splits computed from a rank's data (a mixture of experts' routing) and
    # wrong on rank 1 only: every rank's call fails, rank 1's with its own
    # error, the others' naming it (they waited for rank 1 before), and the
    # next unnamed alltoall meets its peers'.
    r, n = hvd.rank(), hvd.size()
    if n == 1:
        pytest.skip("needs two ranks (skipped on every rank alike)")
    x = torch.arange(2 * n, dtype=torch.float32)
    bad = {1: [2] * (n + 1), 2: [-2] + [2] * (n - 1)}
    for name in ("a2a.bad.count", None):
        for kind, splits in bad.items():
            with pytest.raises(hvd.HoraError, match="rank 1: alltoall") as info:
                hvd.alltoall(x, splits=splits if r == 1 else [2] * n,
                             name=None if name is None else "%s.%d" % (name, kind))
            assert isinstance(info.value, hvd.InvalidArgumentError if r == 1
                              else hvd.MismatchError), info.value
    got = hvd.alltoall(torch.full((n,), float(r)))
    assert got.tolist() == [float(q) for q in range(n)]


def _one_rank_bad_torch(r, n):
    """(label, call(name), what every rank's error says): rank 1's input is
    one hora.torch's own checks refuse; the others' is good."""
    bad = r == 1

    def f32():
        return torch.arange(2 * n, dtype=torch.float32)

    def c64():
        return f32().to(torch.complex64)

    def strided():
        return torch.zeros(2 * n, 2)[:, 0]

    flags = f32() > 1
    return [
        ("allreduce", lambda nm: hvd.allreduce(c64() if bad else f32(), name=nm),
         "dtype torch.complex64 is not supported"),
        ("allreduce_", lambda nm: hvd.allreduce_(strided() if bad else f32(), name=nm),
         "in-place operations need a contiguous tensor"),
        ("allreduce_async_", lambda nm: hvd.synchronize(hvd.allreduce_async_(
            c64() if bad else f32(), name=nm)), "dtype torch.complex64 is not supported"),
        ("allreduce of bool", lambda nm: hvd.allreduce(flags if bad else f32(), name=nm),
         "bool tensors accept Sum, Min, Max and Product"),
        ("grouped_allreduce", lambda nm: hvd.grouped_allreduce(
            [f32(), c64() if bad else f32()], name=nm), "dtype torch.complex64 is not supported"),
        ("grouped_allreduce_", lambda nm: hvd.grouped_allreduce_(
            [f32(), strided() if bad else f32(), f32()], name=nm),
         "in-place operations need a contiguous tensor"),
        ("allgather", lambda nm: hvd.allgather(c64() if bad else f32(), name=nm),
         "dtype torch.complex64 is not supported"),
        ("grouped_allgather", lambda nm: hvd.grouped_allgather(
            [c64() if bad else f32(), f32()], name=nm), "dtype torch.complex64 is not supported"),
        ("broadcast", lambda nm: hvd.broadcast(f32(), n if bad else 0, name=nm),
         "root_rank %d is not a rank of this job" % n),
        ("broadcast_", lambda nm: hvd.broadcast_(f32(), -1 if bad else 0, name=nm),
         "root_rank -1 is not a rank of this job"),
        ("alltoall", lambda nm: hvd.alltoall(torch.tensor(1.0) if bad else f32(), name=nm),
         "alltoall needs at least one dimension"),
        ("alltoall splits", lambda nm: hvd.alltoall(
            f32(), splits=[float("nan")] * n if bad else [2] * n, name=nm),
         "splits must be a sequence of ints"),
        ("reducescatter", lambda nm: hvd.reducescatter(flags if bad else f32(), name=nm),
         "bool tensors are not supported by reducescatter"),
        ("grouped_reducescatter", lambda nm: hvd.grouped_reducescatter(
            [f32(), torch.tensor(1.0) if bad else f32()], name=nm),
         "reducescatter needs at least one dimension"),
    ]


def test_an_input_hora_torch_refuses_on_one_rank_fails_on_every_rank():
    # What hora.torch's own checks refuse (a dtype, a layout, a root, a
    # scalar where rows are due) on rank 1 only: every rank's call fails,
    # rank 1's with its own error, the others' with a MismatchError naming
    # rank 1's (they waited for good before), named or not; the next unnamed
    # calls line up.
    r, n = hvd.rank(), hvd.size()
    if n == 1:
        pytest.skip("needs two ranks (skipped on every rank alike)")
    for label, call, says in _one_rank_bad_torch(r, n):
        for name in ("refused." + label.replace(" ", "_"), None):
            with pytest.raises((hvd.HoraError, ValueError, TypeError)) as info:
                call(name)
            message = str(info.value)
            assert says in message, (label, message)
            if r != 1:
                assert isinstance(info.value, hvd.MismatchError), (label, message)
                assert message.startswith("rank 1: "), (label, message)
    got = hvd.allreduce(torch.full((3,), float(r)), op=hvd.Sum)
    assert got.tolist() == [float(n * (n - 1) // 2)] * 3
    got = hvd.grouped_allgather([torch.full((1,), r, dtype=torch.int32)] * 2)
    assert [g.tolist() for g in got] == [list(range(n))] * 2
