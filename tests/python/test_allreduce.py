"""allreduce in all its forms, checked against a locally computed reference."""

import pytest
import torch

import hora.torch as hvd
from hora.common import basics
from hora.torch import reduce_ops as ro
from helpers import DTYPES, SHAPES, all_values, assert_equal, reduce_reference, value

OPS = [hvd.Sum, hvd.Average, hvd.Min, hvd.Max, hvd.Product]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_allreduce_ops_shapes(dtype):
    for si, shape in enumerate(SHAPES):
        for op in OPS:
            vals = all_values(shape, dtype, seed=si)
            x = vals[hvd.rank()].clone()
            got = hvd.allreduce(x, op=op, name="ar.%s.%d.%d" % (dtype, si, op))
            assert_equal(got, reduce_reference(vals, op, dtype))
            assert torch.equal(x, vals[hvd.rank()])  # input untouched


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_allreduce_default_is_average_and_unnamed(dtype):
    vals = all_values((5, 3), dtype)
    got = hvd.allreduce(vals[hvd.rank()])
    assert_equal(got, reduce_reference(vals, hvd.Average, dtype))
    # Horovod's deprecated average= flag.
    got = hvd.allreduce(vals[hvd.rank()], average=False)
    assert_equal(got, reduce_reference(vals, hvd.Sum, dtype))


def test_integer_average_rounds_toward_zero():
    n = hvd.size()
    x = torch.tensor([hvd.rank() + 1, -(hvd.rank() + 1), 1 if hvd.rank() == 0 else 0],
                     dtype=torch.int32)
    got = hvd.allreduce(x, op=hvd.Average)
    s = n * (n + 1) // 2
    want = torch.tensor([s // n, -(s // n), 1 // n], dtype=torch.int32)
    assert torch.equal(got, want)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64], ids=str)
def test_integer_scale_factors_round_toward_zero_as_horovod(dtype):
    # Horovod's example: int32 [7, -7, 5, 3] on every rank, prescale 0.5:
    # each rank's 3.5, -3.5, 2.5, 1.5 becomes 3, -3, 2, 1 (C++'s conversion,
    # toward zero), then the sum: at np 2 [6, -6, 4, 2]. Postscale 0.5 on the
    # sum [7n, -7n, 5n, 3n] rounds toward zero too. The same through grouped
    # allreduce and reducescatter.
    n = hvd.size()
    x = torch.tensor([7, -7, 5, 3], dtype=dtype)
    pre = torch.tensor([3 * n, -3 * n, 2 * n, 1 * n], dtype=dtype)
    post = torch.tensor([int(7 * n * 0.5), -int(7 * n * 0.5), int(5 * n * 0.5), int(3 * n * 0.5)],
                        dtype=dtype)
    assert torch.equal(hvd.allreduce(x, op=hvd.Sum, prescale_factor=0.5), pre)
    assert torch.equal(hvd.allreduce(x, op=hvd.Sum, postscale_factor=0.5), post)
    got = hvd.grouped_allreduce([x, x], op=hvd.Sum, prescale_factor=0.5)
    assert torch.equal(got[0], pre) and torch.equal(got[1], pre)
    rows = x.repeat(n)  # every rank gets the four values as its slice
    assert torch.equal(hvd.reducescatter(rows, op=hvd.Sum, prescale_factor=0.5), pre)
    assert torch.equal(hvd.reducescatter(rows, op=hvd.Sum, postscale_factor=0.5), post)
    if n == 2:
        assert pre.tolist() == [6, -6, 4, 2]  # Horovod's documented numbers


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_prescale_postscale(dtype):
    pre, post = (2.0, 1.0) if not dtype.is_floating_point else (0.5, 3.0)
    for op in (hvd.Sum, hvd.Average):
        vals = all_values((9,), dtype)
        got = hvd.allreduce(vals[hvd.rank()], op=op, prescale_factor=pre, postscale_factor=post)
        assert_equal(got, reduce_reference(vals, op, dtype, pre, post))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_allreduce_inplace_and_async(dtype):
    vals = all_values((4, 6), dtype, seed=1)
    want = reduce_reference(vals, hvd.Sum, dtype)
    t = vals[hvd.rank()].clone()
    out = hvd.allreduce_(t, op=hvd.Sum, name="inplace")
    assert out is t
    assert_equal(t, want)

    t = vals[hvd.rank()].clone()
    h = hvd.allreduce_async_(t, op=hvd.Sum)
    assert hvd.synchronize(h) is t
    assert hvd.poll(h)
    assert_equal(t, want)

    x = vals[hvd.rank()].clone()
    h = hvd.allreduce_async(x, op=hvd.Sum, name="async.out")
    out = hvd.synchronize(h)
    assert_equal(out, want)
    assert torch.equal(x, vals[hvd.rank()])
    assert hvd.synchronize(h) is out  # a second synchronize returns the same result


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_allreduce_direct_every_shape_op_and_scale(dtype):
    # allreduce_ and allreduce take their direct path (one call into the
    # core, which waits) for a contiguous host tensor without grad, the
    # global set (or a registered one: test_process_sets.py), no average=
    # (nor compression) and an ASCII name or none;
    # the general one (a handle) otherwise. Both give the reference, and each
    # other's results.
    pre, post = (2.0, 1.0) if not dtype.is_floating_point else (0.5, 3.0)
    for si, shape in enumerate(SHAPES):
        for op in OPS:
            vals = all_values(shape, dtype, seed=si)
            want = reduce_reference(vals, op, dtype, pre, post)
            direct = vals[hvd.rank()].clone()
            assert ro.direct_op(direct, None, "n", op, hvd.global_process_set) == (op, 0)
            assert hvd.allreduce_(direct, op=op, prescale_factor=pre, postscale_factor=post,
                                  name="ip.%s.%d.%d" % (dtype, si, op)) is direct
            assert_equal(direct, want)
            general = vals[hvd.rank()].clone()
            hvd.synchronize(hvd.allreduce_async_(general, op=op, prescale_factor=pre,
                                                 postscale_factor=post))
            assert torch.equal(direct, general)
            # Out of place, the same: a new tensor, the input untouched.
            mine = vals[hvd.rank()].clone()
            out = hvd.allreduce(mine, op=op, prescale_factor=pre, postscale_factor=post,
                                name="op.%s.%d.%d" % (dtype, si, op))
            assert out.dtype == dtype and out.shape == mine.shape and not out.requires_grad
            assert torch.equal(out, general)
            assert torch.equal(mine, vals[hvd.rank()])
    vals = all_values((5,), dtype, seed=9)
    t = vals[hvd.rank()].clone()
    gps = hvd.global_process_set
    assert ro.direct_op(t, None, None, None, gps) == (hvd.Average, 0)
    # What takes the general path: refused here...
    assert ro.direct_op(t, False, None, None, gps) is None
    assert ro.direct_op(t, None, "naïve", hvd.Sum, gps) is None
    assert ro.direct_op(t, None, None, hvd.Adasum, gps) is None
    assert ro.direct_op(torch.nn.Parameter(t.double(), requires_grad=False), None, None,
                        hvd.Sum, gps) is None
    assert ro.direct_op(t.double().requires_grad_(), None, None, hvd.Sum, gps) is None
    # ... or by the core, which leaves the capsule unused: not contiguous, bool
    # (whose capsule torch 1.13 does not make), sparse (none either).
    s = basics.session()
    strided = torch.arange(8, dtype=torch.float64).reshape(4, 2).t()
    for refused in (strided, strided.to(dtype), t.bool()):
        assert ro.direct_op(refused, None, None, hvd.Sum, gps) == (hvd.Sum, 0)
        before = refused.clone()
        for call in (s.allreduce_inplace, s.allreduce_new):
            cap = ro.direct_capsule(refused)
            if cap is None:
                assert refused.dtype == torch.bool
                continue
            assert call("refused", cap, hvd.Sum, 1.0, 1.0) in (False, None)
            assert torch.equal(torch.utils.dlpack.from_dlpack(cap), before)  # (unused)
        assert torch.equal(refused, before)
    assert ro.direct_capsule(torch.ones(3).to_sparse()) is None
    hvd.allreduce_(t)  # op None: Average, unnamed
    assert_equal(t, reduce_reference(vals, hvd.Average, dtype))
    t = vals[hvd.rank()].clone()
    hvd.allreduce_(t, average=False, name="ip.average.flag")  # the general path
    assert_equal(t, reduce_reference(vals, hvd.Sum, dtype))
    t = vals[hvd.rank()].clone()
    hvd.allreduce_(t, op=hvd.Sum, name="ip.naïve")  # not ASCII: the general path
    assert_equal(t, reduce_reference(vals, hvd.Sum, dtype))
    t = vals[hvd.rank()].clone()
    hvd.allreduce_(t, op=hvd.Sum, process_set=hvd.global_process_set, name="ip.set")
    assert_equal(t, reduce_reference(vals, hvd.Sum, dtype))


def test_allreduce_direct_small_integer_dtypes():
    for dtype in (torch.uint8, torch.int8, torch.int16):
        lo = 0 if dtype == torch.uint8 else -3
        vals = all_values((6,), dtype, lo=lo)
        t = vals[hvd.rank()].clone()
        assert ro.direct_op(t, None, None, hvd.Sum, hvd.global_process_set) == (hvd.Sum, 0)
        hvd.allreduce_(t, op=hvd.Sum)
        assert_equal(t, reduce_reference(vals, hvd.Sum, dtype))
        assert_equal(hvd.allreduce(vals[hvd.rank()], op=hvd.Max),
                     reduce_reference(vals, hvd.Max, dtype))


def test_allreduce_direct_errors_as_the_general_path():
    r = hvd.rank()
    with pytest.raises(ValueError, match="unknown reduction op"):
        hvd.allreduce_(torch.ones(2), op=17)
    with pytest.raises(TypeError, match="name must be a str"):
        hvd.allreduce_(torch.ones(2), name=3)
    with pytest.raises(hvd.InvalidArgumentError, match="contiguous"):
        hvd.allreduce_(torch.ones(4, 2).t(), op=hvd.Sum)
    if hvd.size() > 1:
        # Found with the other ranks: every rank fails, naming the tensor;
        # the next call works.
        with pytest.raises(hvd.MismatchError, match="ip.mismatch.op"):
            hvd.allreduce_(torch.ones(3), op=hvd.Sum if r == 0 else hvd.Max,
                           name="ip.mismatch.op")
        with pytest.raises(hvd.MismatchError, match="ip.mismatch.shape"):
            hvd.allreduce_(torch.ones(r + 1), op=hvd.Sum, name="ip.mismatch.shape")
    with pytest.raises(ValueError, match="unknown reduction op"):
        hvd.allreduce(torch.ones(2), op=17)
    if hvd.size() > 1:
        with pytest.raises(hvd.MismatchError, match="op.mismatch.shape"):
            hvd.allreduce(torch.ones(r + 1), op=hvd.Sum, name="op.mismatch.shape")
    t = torch.ones(2)
    hvd.allreduce_(t, op=hvd.Sum, name="ip.after")
    assert torch.equal(t, torch.full((2,), float(hvd.size())))
    # A name still in flight is refused as it is submitted, and the one in
    # flight finishes.
    h = hvd.allreduce_async_(torch.ones(2), op=hvd.Sum, name="ip.twice")
    with pytest.raises(ValueError, match="ip.twice"):
        hvd.allreduce_(torch.ones(2), op=hvd.Sum, name="ip.twice")
    with pytest.raises(ValueError, match="ip.twice"):
        hvd.allreduce(torch.ones(2), op=hvd.Sum, name="ip.twice")
    assert torch.equal(hvd.synchronize(h), torch.full((2,), float(hvd.size())))
    # A leaf that needs grad, under no_grad (as an optimizer updates its
    # parameters): the general path, which hands the core a detached view.
    w = torch.ones(2, requires_grad=True)
    with torch.no_grad():
        hvd.allreduce_(w, op=hvd.Sum, name="ip.grad")
    assert torch.equal(w.detach(), torch.full((2,), float(hvd.size())))


def test_many_async_in_flight_in_rank_dependent_order():
    n = 20
    vals = [all_values((i + 1,), torch.float32, seed=i) for i in range(n)]
    order = list(range(n)) if hvd.rank() % 2 == 0 else list(reversed(range(n)))
    handles = {i: hvd.allreduce_async(vals[i][hvd.rank()], name="many.%d" % i, op=hvd.Sum)
               for i in order}
    for i in range(n):
        assert_equal(hvd.synchronize(handles[i]), reduce_reference(vals[i], hvd.Sum,
                                                                    torch.float32))


def test_grouped_allreduce():
    dtypes = [torch.float32, torch.float64, torch.int32, torch.bfloat16, torch.float16,
              torch.int64]
    shapes = [(3,), (2, 2), (0,), (5, 1), (7,), (1, 3)]
    vals = [all_values(s, d, seed=i) for i, (s, d) in enumerate(zip(shapes, dtypes))]
    mine = [v[hvd.rank()] for v in vals]
    want = [reduce_reference(v, hvd.Average, d) for v, d in zip(vals, dtypes)]
    for got, w in zip(hvd.grouped_allreduce(mine, name="grp"), want):
        assert_equal(got, w)
    for got, w in zip(hvd.synchronize(hvd.grouped_allreduce_async(mine)), want):
        assert_equal(got, w)
    copies = [m.clone() for m in mine]
    outs = hvd.grouped_allreduce_(copies, name="grp.inplace")
    assert all(o is c for o, c in zip(outs, copies))
    for got, w in zip(copies, want):
        assert_equal(got, w)
    copies = [m.clone() for m in mine]
    hvd.synchronize(hvd.grouped_allreduce_async_(copies, op=hvd.Max))
    for got, v, d in zip(copies, vals, dtypes):
        assert_equal(got, reduce_reference(v, hvd.Max, d))
    assert hvd.grouped_allreduce([]) == []


@pytest.mark.parametrize("compression", [hvd.Compression.fp16, hvd.Compression.bf16],
                         ids=["fp16", "bf16"])
def test_compression(compression):
    vals = all_values((33,), torch.float32)
    got = hvd.allreduce(vals[hvd.rank()], op=hvd.Sum, compression=compression)
    assert got.dtype == torch.float32
    assert_equal(got, reduce_reference(vals, hvd.Sum, torch.float32))
    ints = all_values((4,), torch.int64)  # not floating: passes uncompressed
    assert_equal(hvd.allreduce(ints[hvd.rank()], op=hvd.Sum, compression=compression),
                 reduce_reference(ints, hvd.Sum, torch.int64))


def test_bool_and_small_integer_dtypes():
    r, n = hvd.rank(), hvd.size()
    b = torch.tensor([r == 0, True, False, r % 2 == 1])
    assert torch.equal(hvd.allreduce(b, op=hvd.Sum), torch.tensor([True, True, False, n > 1]))
    assert torch.equal(hvd.allreduce(b, op=hvd.Min), torch.tensor([n == 1, True, False, False]))
    t = b.clone()
    hvd.allreduce_(t, op=hvd.Max)
    assert torch.equal(t, torch.tensor([True, True, False, n > 1]))
    with pytest.raises(hvd.InvalidArgumentError):
        hvd.allreduce(b, op=hvd.Average)
    for dtype in (torch.uint8, torch.int8, torch.int16):
        lo = 0 if dtype == torch.uint8 else -3
        vals = all_values((6,), dtype, lo=lo)
        assert_equal(hvd.allreduce(vals[r], op=hvd.Sum), reduce_reference(vals, hvd.Sum, dtype))


def test_non_contiguous():
    base = value(hvd.rank(), (4, 6), torch.float32)
    nc = base.t()
    assert not nc.is_contiguous()
    want = reduce_reference([value(r, (4, 6), torch.float32).t() for r in range(hvd.size())],
                            hvd.Sum, torch.float32)
    assert_equal(hvd.allreduce(nc, op=hvd.Sum), want)  # out-of-place: a contiguous copy
    with pytest.raises(hvd.InvalidArgumentError, match="contiguous"):
        hvd.allreduce_(nc, op=hvd.Sum)
    with pytest.raises(ValueError, match="contiguous"):  # InvalidArgumentError is a ValueError
        hvd.allreduce_async_(nc)


def test_out_of_place_outputs_reuse_the_memory_of_freed_ones():
    # 1 MiB: from Hora's pool (HORA_OUTPUT_POOL_BYTES). An output's memory,
    # once the output is freed, is the next one's; one still alive is not.
    x = torch.full((1 << 18,), float(hvd.rank() + 1))
    want = torch.full_like(x, float(sum(range(1, hvd.size() + 1))))
    y = hvd.allreduce(x, op=hvd.Sum, name="pool.0")
    assert torch.equal(y, want)
    first = y.data_ptr()
    del y
    z = hvd.allreduce(x, op=hvd.Sum, name="pool.1")
    assert z.data_ptr() == first
    assert torch.equal(z, want)
    z += 1  # an ordinary tensor: writable
    w = hvd.synchronize(hvd.allreduce_async(x, op=hvd.Sum, name="pool.2"))
    assert w.data_ptr() != z.data_ptr()
    assert torch.equal(w, want) and torch.equal(z, want + 1)
    assert torch.equal(x, torch.full_like(x, float(hvd.rank() + 1)))  # input untouched


def test_grouped_out_of_place_outputs_reuse_the_memory_of_freed_ones():
    a = torch.full((1 << 17,), float(hvd.rank() + 1))  # 512 KiB
    b = torch.arange(1 << 16, dtype=torch.int64) * (hvd.rank() + 1)  # 512 KiB
    n = hvd.size()
    want = [torch.full_like(a, float(n * (n + 1) // 2)), b // (hvd.rank() + 1) * (n * (n + 1) // 2)]
    got = hvd.grouped_allreduce([a, b], op=hvd.Sum, name="gpool.0")
    assert all(torch.equal(g, w) for g, w in zip(got, want))
    ptrs = {g.data_ptr() for g in got}
    del got
    again = hvd.grouped_allreduce([a, b], op=hvd.Sum, name="gpool.1")
    assert {g.data_ptr() for g in again} == ptrs
    assert all(torch.equal(g, w) for g, w in zip(again, want))


def test_pending_in_place_handles_stay_light_for_the_collector():
    # DistributedOptimizer keeps a handle per gradient pending until step():
    # every object Python's collector tracks counts towards its next pass,
    # which then scans them all (a model of 200 tensors made one pass a
    # step before, 20% of its time). allreduce_async_ of a plain host
    # tensor makes two: the Handle and its list of core handles.
    import gc
    ts = [torch.full((3,), float(i)) for i in range(100)]
    gc.collect()
    gc.disable()
    try:
        before = gc.get_count()[0]
        hs = [hvd.allreduce_async_(t, op=hvd.Sum, name="light.%d" % i) for i, t in enumerate(ts)]
        tracked = gc.get_count()[0] - before
    finally:
        gc.enable()
    for i, h in enumerate(hs):
        assert hvd.synchronize(h) is ts[i]
        assert_equal(ts[i], torch.full((3,), float(i * hvd.size())))
    assert tracked < 3 * len(ts), tracked  # (the list of handles too; eight each before)


def test_op_codes_are_horovods():
    # Horovod's ReduceOp codes (message.h): a script that passes the int, or
    # keeps one, means the same op. (Hora's were Sum 0, Average 1.)
    assert (hvd.Average, hvd.Sum, hvd.Adasum, hvd.Min, hvd.Max, hvd.Product) == (0, 1, 2, 3, 4, 5)
    n, r = hvd.size(), hvd.rank()
    x = torch.tensor([float(r), 1.0])
    assert hvd.allreduce(x, op=0, name="op.code.0").tolist() == [(n - 1) / 2, 1.0]
    assert hvd.allreduce(x, op=1, name="op.code.1").tolist() == [n * (n - 1) / 2, float(n)]
    assert hvd.allreduce(x, op=4, name="op.code.4").tolist() == [float(n - 1), 1.0]
