"""hora.numpy against locally computed references."""

import contextlib

import numpy as np
import pytest
import torch

import hora.numpy as hnp
import hora.torch as hvd
from hora.common.basics import engine_counters
from helpers import all_values, reduce_reference, rows_of, value

NP_DTYPES = [np.float16, np.float32, np.float64, np.int32, np.int64, "bfloat16"]
TORCH_OF = {np.float16: torch.float16, np.float32: torch.float32, np.float64: torch.float64,
            np.int32: torch.int32, np.int64: torch.int64, "bfloat16": torch.bfloat16}


def _bfloat16():
    """ml_dtypes' bfloat16 (JAX's and TensorFlow's NumPy arrays of it)."""
    return pytest.importorskip("ml_dtypes", reason="bfloat16 arrays need ml_dtypes").bfloat16


def _np(t):
    if t.dtype == torch.bfloat16:  # (torch has no NumPy bfloat16: through float64, exact)
        return t.to(torch.float64).numpy().astype(_bfloat16())
    return t.numpy()


@pytest.mark.parametrize("dtype", NP_DTYPES, ids=lambda d: getattr(d, "__name__", d))
def test_numpy_collectives(dtype):
    r, n = hnp.rank(), hnp.size()
    assert (r, n) == (hvd.rank(), hvd.size())  # one default session for both
    td = TORCH_OF[dtype]
    tol = 2e-2 if td == torch.bfloat16 else 2e-3
    dtype = _bfloat16() if dtype == "bfloat16" else dtype
    for shape in [(), (0,), (7,), (3, 4)]:
        for op in (hnp.Sum, hnp.Average, hnp.Min, hnp.Max, hnp.Product):
            vals = all_values(shape, td)
            got = hnp.allreduce(_np(vals[r]), op=op)
            want = _np(reduce_reference(vals, op, td))
            assert got.dtype == want.dtype and got.shape == want.shape
            np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                                       rtol=tol, atol=tol)
    x = _np(value(r, (rows_of(r), 2), td))
    got = hnp.allgather(x)
    want = np.concatenate([_np(value(q, (rows_of(q), 2), td)) for q in range(n)])
    np.testing.assert_array_equal(got, want)
    got[...] = 0  # results are writeable
    root = n - 1
    b = hnp.broadcast(_np(value(r, (3, 2), td)), root)
    np.testing.assert_array_equal(b, _np(value(root, (3, 2), td)))
    a2a = hnp.alltoall(np.arange(2 * n, dtype=dtype) + 10 * r)
    np.testing.assert_array_equal(
        a2a, np.concatenate([np.arange(2 * r, 2 * r + 2, dtype=dtype) + 10 * s for s in range(n)]))
    out, received = hnp.alltoall(np.full(n, r, dtype=dtype), splits=[1] * n)
    np.testing.assert_array_equal(out, np.arange(n, dtype=dtype))
    assert received.tolist() == [1] * n
    vals = all_values((2 * n, 3), td)
    rs = hnp.reducescatter(_np(vals[r]), op=hnp.Sum)
    np.testing.assert_array_equal(rs, _np(reduce_reference(vals, hvd.Sum, td))[2 * r:2 * r + 2])


def test_numpy_bfloat16_large_grouped_scaled_and_as_the_core_sees_it():
    # bfloat16 arrays (ml_dtypes', as JAX's and TensorFlow's) reduce as
    # bfloat16 (float32 arithmetic, rounded), not as their uint16 bits: large
    # ones (pooled outputs, the broadcast's pooled buffer), read-only and
    # non-contiguous ones, grouped with float32, with scale factors.
    bf16 = _bfloat16()
    r, n = hnp.rank(), hnp.size()
    big = (np.arange(1 << 17) % 7 - 3).astype(bf16) * (r + 1)  # 256 KiB
    want = ((np.arange(1 << 17) % 7 - 3) * (n * (n + 1) // 2)).astype(bf16)
    got = hnp.allreduce(big, op=hnp.Sum, name="bf.big")
    assert got.dtype == bf16 and got.flags.writeable
    np.testing.assert_array_equal(got, want)
    b = hnp.broadcast(big, n - 1, name="bf.bcast")
    np.testing.assert_array_equal(b, big / (r + 1) * n)
    ro = np.full((3, 4), 1.5, dtype=bf16)
    ro.flags.writeable = False
    np.testing.assert_array_equal(hnp.allreduce(ro.T, op=hnp.Sum, name="bf.ro"),
                                  np.full((4, 3), 1.5 * n, dtype=bf16))
    g = hnp.grouped_allreduce([np.full(5, r + 1, dtype=bf16), np.full(2, r, dtype=np.float32)],
                              op=hnp.Sum, prescale_factor=0.5, postscale_factor=4.0,
                              name="bf.group")
    assert [a.dtype for a in g] == [bf16, np.float32]
    np.testing.assert_array_equal(g[0], np.full(5, n * (n + 1), dtype=bf16))
    np.testing.assert_array_equal(g[1], np.full(2, n * (n - 1), dtype=np.float32))
    # The core's view of the bits: a capsule re-described once, then used up.
    from hora import _core
    cap = np.zeros(2, dtype=np.uint16).__dlpack__()
    bcap = _core.as_bfloat16(cap)
    with pytest.raises(hnp.InvalidArgumentError, match="unused DLPack capsule"):
        _core.as_bfloat16(cap)
    with pytest.raises(hnp.InvalidArgumentError, match="16-bit integer"):
        _core.as_bfloat16(np.zeros(2, dtype=np.float32).__dlpack__())
    del bcap  # (its deleter frees NumPy's export)


def test_numpy_bool_readonly_and_noncontiguous():
    r, n = hnp.rank(), hnp.size()
    b = np.array([r == 0, True, False])
    np.testing.assert_array_equal(hnp.allreduce(b, op=hnp.Sum), [True, True, False])
    np.testing.assert_array_equal(hnp.allreduce(b, op=hnp.Min), [n == 1, True, False])
    ro = np.arange(6, dtype=np.float64).reshape(2, 3)
    ro.flags.writeable = False
    np.testing.assert_array_equal(hnp.allreduce(ro.T, op=hnp.Sum), ro.T * n)
    hnp.barrier()


def test_numpy_outputs_share_the_cores_memory_and_are_writeable():
    # allgather, alltoall and reducescatter return the buffer Hora allocated,
    # without a copy: writeable, owned through the array's base, alive after
    # the handle is gone; bool outputs too; empty outputs are arrays.
    import gc
    r, n = hnp.rank(), hnp.size()
    got = hnp.allgather(np.full((2, 3), r, dtype=np.float32))
    assert got.flags.writeable and got.base is not None
    assert not got.flags.owndata  # a view of Hora's buffer, not a copy
    gc.collect()
    np.testing.assert_array_equal(got, np.repeat(np.arange(n, dtype=np.float32), 2)[:, None]
                                  * np.ones((1, 3), dtype=np.float32))
    got += 1
    assert got[0, 0] == 1
    a2a = hnp.alltoall(np.arange(n, dtype=np.int64))
    assert a2a.flags.writeable and not a2a.flags.owndata
    np.testing.assert_array_equal(a2a, np.full(n, r, dtype=np.int64))
    rs = hnp.reducescatter(np.ones((n, 2), dtype=np.float64), op=hnp.Sum)
    assert rs.flags.writeable and not rs.flags.owndata
    np.testing.assert_array_equal(rs, np.full((1, 2), n, dtype=np.float64))
    gb = hnp.allgather(np.array([r % 2 == 0]))
    assert gb.dtype == np.bool_ and gb.tolist() == [q % 2 == 0 for q in range(n)]
    empty = hnp.allgather(np.zeros((0, 4), dtype=np.float32))
    assert empty.shape == (0, 4) and empty.dtype == np.float32


def _pool():
    c = engine_counters()
    return c["outputs_reused"], c["outputs_fresh"]


def test_numpy_outputs_take_the_memory_of_freed_ones_from_the_pool():
    # 1 MiB outputs come from Hora's pool (HORA_OUTPUT_POOL_BYTES): once an
    # output array is freed, the next output of its size takes its memory,
    # already faulted in; one still alive keeps its own. allreduce (so
    # hora.tensorflow's and hora.jax's, which are these), allgather and
    # broadcast. (Earlier tests may have left idle blocks in the pool: an
    # output with no freed block of its own may take one of those.)
    r, n = hnp.rank(), hnp.size()
    x = np.full(1 << 18, r + 1, dtype=np.float32)
    want = np.full_like(x, n * (n + 1) // 2)
    y = hnp.allreduce(x, op=hnp.Sum, name="npool.0")
    np.testing.assert_array_equal(y, want)
    first = _addr(y)
    del y
    reused, fresh = _pool()
    z = hnp.allreduce(x, op=hnp.Sum, name="npool.1")
    assert _pool() == (reused + 1, fresh) and _addr(z) == first
    np.testing.assert_array_equal(z, want)
    w = hnp.allreduce(x, op=hnp.Sum, name="npool.2")  # z alive: other memory
    assert sum(_pool()) == reused + fresh + 2 and _addr(w) != first
    z += 1
    np.testing.assert_array_equal(w, want)
    np.testing.assert_array_equal(x, np.full_like(x, r + 1))  # input untouched
    del z, w
    reused, fresh = _pool()
    g = hnp.grouped_allreduce([x, 2 * x], op=hnp.Max, name="npool.g")
    assert _pool() == (reused + 2, fresh)  # both from the freed z and w
    np.testing.assert_array_equal(g[0], np.full_like(x, n))
    np.testing.assert_array_equal(g[1], np.full_like(x, 2 * n))
    del g
    # 768 KiB a rank: an output no freed 1 MiB block fits at any np.
    rows = np.arange(3 << 16, dtype=np.float64).reshape(-1, 2) + r
    ag = hnp.allgather(rows, name="npool.ag")
    np.testing.assert_array_equal(ag, np.concatenate([rows - r + q for q in range(n)]))
    first = _addr(ag)
    del ag
    reused, fresh = _pool()
    again = hnp.allgather(rows, name="npool.ag2")
    assert _pool() == (reused + 1, fresh) and _addr(again) == first
    np.testing.assert_array_equal(again, np.concatenate([rows - r + q for q in range(n)]))
    # broadcast: root's data, in an output from the pool (g's freed 1 MiB).
    root = n - 1
    b = hnp.broadcast(x, root, name="npool.b")
    assert _pool() == (reused + 2, fresh)
    np.testing.assert_array_equal(b, np.full_like(x, root + 1))
    b += 1  # writeable
    np.testing.assert_array_equal(x, np.full_like(x, r + 1))  # input untouched
    flags = np.arange(1 << 17) % 3 == r % 3  # bool, 128 KiB: pooled too
    fb = hnp.broadcast(flags, 0, name="npool.bb")
    assert fb.dtype == np.bool_
    np.testing.assert_array_equal(fb, np.arange(1 << 17) % 3 == 0)


def _addr(a):
    return a.__array_interface__["data"][0]


def test_numpy_bool_reducescatter_is_a_clear_error():
    with pytest.raises(hnp.HoraError, match="reducescatter 'rsb': bool arrays are not supported"):
        hnp.reducescatter(np.ones(hnp.size(), dtype=np.bool_), name="rsb")
    # A scalar has no axis 0 to scatter (as hora.torch's), one array or a group.
    for call in (lambda: hnp.reducescatter(np.float32(1.0), name="rs0"),
                 lambda: hnp.grouped_reducescatter([np.ones(2), np.float32(1.0)], name="rs0")):
        with pytest.raises(hnp.HoraError, match="reducescatter 'rs0': .*at least one dimension"):
            call()
    # The job goes on.
    np.testing.assert_array_equal(hnp.allreduce(np.ones(2), op=hnp.Sum), np.full(2, hnp.size()))


@pytest.mark.skipif(hnp.size() < 2, reason="a set of every rank is the global set")
def test_numpy_one_call_forms_match_the_grouped_forms_and_take_sets():
    # A single array's collective is one call into the core (buffer=True: a
    # writeable buffer over the output); the grouped forms take handles.
    # Both give the same, in the global set and in a registered one.
    from hora.common.basics import session
    r, n = hnp.rank(), hnp.size()
    x = np.arange(6, dtype=np.float32).reshape(2, 3) + r
    buf = session().allreduce_new("np.one.core", x.__dlpack__(), hnp.Sum, 1.0, 1.0, 0, True)
    np.testing.assert_array_equal(np.frombuffer(buf, dtype=np.float32).reshape(2, 3),
                                  hnp.grouped_allreduce([x], op=hnp.Sum)[0])
    evens = hnp.add_process_set([q for q in range(n) if q % 2 == 0])
    try:
        for ps in (hnp.global_process_set, evens):
            if not ps.included():
                with pytest.raises(hnp.HoraError, match="rank %d is not in process set" % r):
                    hnp.allreduce(x, op=hnp.Sum, process_set=ps)
                continue
            k, ranks = ps.size(), ps.ranks or list(range(n))
            for op in (hnp.Sum, hnp.Max, hnp.Min):
                np.testing.assert_array_equal(
                    hnp.allreduce(x, op=op, process_set=ps),
                    hnp.grouped_allreduce([x], op=op, process_set=ps)[0])
            np.testing.assert_array_equal(hnp.allgather(x, process_set=ps),
                                          hnp.grouped_allgather([x], process_set=ps)[0])
            root = ranks[-1]
            np.testing.assert_array_equal(hnp.broadcast(x, root, process_set=ps),
                                          np.arange(6, dtype=np.float32).reshape(2, 3) + root)
            even = np.arange(2 * k, dtype=np.int64) + 10 * r
            out, received = hnp.alltoall(even, splits=[2] * k, process_set=ps)
            assert out.flags.writeable and received.tolist() == [2] * k
            np.testing.assert_array_equal(
                out, np.concatenate([np.arange(2 * ps.rank(), 2 * ps.rank() + 2) + 10 * q
                                     for q in ranks]))
            v = np.ones((2 * k, 2), dtype=np.float64) * (r + 1)
            np.testing.assert_array_equal(
                hnp.reducescatter(v, op=hnp.Sum, process_set=ps),
                hnp.grouped_reducescatter([v], op=hnp.Sum, process_set=ps)[0])
    finally:
        hnp.remove_process_set(evens)


def test_numpy_objects_mixed_types_and_one_that_does_not_pickle():
    import threading

    r, n = hvd.rank(), hvd.size()
    mixed = [{"rank": q} if q % 2 == 0 else None for q in range(n)]
    assert hnp.allgather_object(mixed[r]) == mixed  # (one unnamed call, whatever the types)
    assert hnp.broadcast_object({"r": r}, root_rank=n - 1) == {"r": n - 1}
    lock = threading.Lock()
    if r == 0:
        with pytest.raises(TypeError, match="pickle"):
            hnp.broadcast_object(lock, root_rank=0)
        with pytest.raises(TypeError, match="pickle"):
            hnp.allgather_object(lock)
    else:
        with pytest.raises(hnp.InvalidArgumentError, match=r"rank\(s\) 0 could not pickle"):
            hnp.broadcast_object(None, root_rank=0)
        with pytest.raises(hnp.InvalidArgumentError, match=r"rank\(s\) 0 could not pickle"):
            hnp.allgather_object(r)
    assert hnp.allgather_object(r) == list(range(n))


def test_numpy_bool_allreduce_refuses_what_has_no_logical_meaning():
    # Adasum was taken as AND (Min) and returned a result; Average and scale
    # factors were refused. Each is refused on every rank, and the job goes on.
    b = np.array([True, False, hnp.rank() == 0, True])
    for op in (hnp.Adasum, hnp.Average):
        with pytest.raises(hnp.HoraError, match="allreduce 'bad_bool': bool arrays accept "
                           "Sum, Min, Max and Product, not %s" % ("Adasum" if op == hnp.Adasum
                                                                 else "Average")):
            hnp.allreduce(b, name="bad_bool", op=op)
    with pytest.raises(hnp.HoraError, match="bool arrays take no scale factors"):
        hnp.allreduce(b, name="bad_bool", op=hnp.Sum, prescale_factor=2.0)
    got = hnp.allreduce(b, name="good_bool", op=hnp.Min)
    assert got.tolist() == [True, False, hnp.size() == 1, True]


def test_a_call_one_rank_refuses_fails_on_every_rank_and_the_next_lines_up():
    # Bad splits on rank 1 only: rank 1's call fails with its error, every
    # other rank's naming rank 1's (they waited for good before), named or
    # not; the next unnamed call meets its peers' (it was shifted by one).
    r, n = hnp.rank(), hnp.size()
    if n == 1:
        pytest.skip("needs two ranks (skipped on every rank alike)")
    x = np.arange(4 * n, dtype=np.float32)
    for name in ("refused.splits", None):
        with pytest.raises(hnp.HoraError, match="rank 1: alltoall '%s': splits add up to %d rows"
                           % (name or "alltoall.noname.[0-9]+", n)) as info:
            hnp.alltoall(x, splits=[1] * n if r == 1 else [4] * n, name=name)
        assert isinstance(info.value, hnp.InvalidArgumentError if r == 1 else hnp.MismatchError)
    got = hnp.alltoall(np.full(n, float(r), dtype=np.float32))
    assert got.tolist() == [float(q) for q in range(n)]


def _one_rank_bad_numpy(r, n):
    """(label, call(name), what every rank's error says): rank 1's input is
    one the module's own checks refuse; the others' is good."""
    bad = r == 1
    f32 = np.arange(2 * n, dtype=np.float32)
    c64 = f32.astype(np.complex64)
    return [
        ("allreduce", lambda nm: hnp.allreduce(c64 if bad else f32, name=nm),
         "dtype complex64 is not supported"),
        ("grouped_allreduce", lambda nm: hnp.grouped_allreduce(
            [f32, c64 if bad else f32, f32], name=nm), "dtype complex64 is not supported"),
        ("grouped_allreduce of one", lambda nm: hnp.grouped_allreduce(
            [c64 if bad else f32], name=nm), "dtype complex64 is not supported"),
        ("allreduce of bool", lambda nm: hnp.allreduce(f32 > 1 if bad else f32, name=nm),
         "bool arrays accept Sum, Min, Max and Product, not Average"),
        ("allgather", lambda nm: hnp.allgather(np.array(["a"]) if bad else f32, name=nm),
         "dtype <U1 is not supported"),
        ("grouped_allgather", lambda nm: hnp.grouped_allgather(
            [f32, np.array(["a"]) if bad else f32], name=nm), "dtype <U1 is not supported"),
        ("broadcast", lambda nm: hnp.broadcast(f32, n if bad else 0, name=nm),
         "root_rank %d is not a rank of this job" % n),
        ("alltoall", lambda nm: hnp.alltoall(np.float32(1) if bad else f32, name=nm),
         "alltoall needs at least one dimension"),
        ("reducescatter", lambda nm: hnp.reducescatter(f32 > 1 if bad else f32, name=nm),
         "bool arrays are not supported"),
        ("grouped_reducescatter", lambda nm: hnp.grouped_reducescatter(
            [f32, np.float32(1) if bad else f32], name=nm),
         "reducescatter needs at least one dimension"),
    ]


def test_an_input_the_module_refuses_on_one_rank_fails_on_every_rank():
    # What hora.numpy's own checks refuse (a dtype, a root, a scalar where
    # rows are due) on rank 1 only: every rank's call fails, rank 1's with
    # its own error, the others' with a MismatchError naming rank 1's (they
    # waited for good before), named or not; the next unnamed call lines up.
    r, n = hnp.rank(), hnp.size()
    if n == 1:
        pytest.skip("needs two ranks (skipped on every rank alike)")
    for label, call, says in _one_rank_bad_numpy(r, n):
        for name in ("refused." + label.replace(" ", "_"), None):
            with pytest.raises((hnp.HoraError, ValueError, TypeError)) as info:
                call(name)
            message = str(info.value)
            assert says in message, (label, message)
            if r != 1:
                assert isinstance(info.value, hnp.MismatchError), (label, message)
                assert message.startswith("rank 1: "), (label, message)
    # An empty group reaches the core on no rank, refused or not.
    with pytest.raises(ValueError) if r == 1 else contextlib.nullcontext():
        assert hnp.grouped_allreduce([], op="Sum" if r == 1 else hnp.Sum) == []
    got = hnp.allreduce(np.full(3, float(r), dtype=np.float32), op=hnp.Sum)
    assert got.tolist() == [float(n * (n - 1) // 2)] * 3
    got = hnp.grouped_allgather([np.full(1, r, dtype=np.int32)] * 2)
    assert [g.tolist() for g in got] == [list(range(n))] * 2


def test_a_group_of_one_is_a_group():
    # A group of one array against a longer group on another rank fails on
    # every rank naming both sizes (it went as a lone call, and every rank
    # waited for good); a group of one matches hora.torch's group of one.
    r, n = hnp.rank(), hnp.size()
    x = np.full(2, float(r + 1), dtype=np.float32)
    if n > 1:
        for call in (lambda xs: hnp.grouped_allreduce(xs, op=hnp.Sum),
                     lambda xs: hnp.grouped_allgather(xs),
                     lambda xs: hnp.grouped_reducescatter(xs, op=hnp.Sum)):
            with pytest.raises(hnp.MismatchError, match="group"):
                call([x] if r == 1 else [x, x])
    got = hnp.grouped_allreduce([x], op=hnp.Sum, name="one.member")
    want = hvd.grouped_allreduce([torch.from_numpy(x.copy())], op=hvd.Sum,
                                 name="one.member.torch")
    assert got[0].tolist() == want[0].tolist() == [n * (n + 1) / 2] * 2
    # hora.numpy's group of one meets hora.torch's under one name.
    if r % 2 == 0:
        got = hnp.grouped_allreduce([x], op=hnp.Sum, name="one.mixed")[0]
    else:
        got = hvd.grouped_allreduce([torch.from_numpy(x.copy())], op=hvd.Sum,
                                    name="one.mixed")[0].numpy()
    assert got.tolist() == [n * (n + 1) / 2] * 2
