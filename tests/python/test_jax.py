"""hora.jax against references computed locally, eagerly and inside jax.jit."""

import numpy as np
import pytest
import torch

from helpers import framework  # noqa: E402

jax = framework("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import optax  # noqa: E402

import hora.jax as hj  # noqa: E402
import hora.torch as hvd  # noqa: E402
from helpers import all_values, reduce_reference, rows_of, value  # noqa: E402

DTYPES = [(jnp.float16, torch.float16), (jnp.bfloat16, torch.bfloat16),
          (jnp.float32, torch.float32), (jnp.float64, torch.float64), (jnp.int32, torch.int32),
          (jnp.int64, torch.int64)]
OPS = [hj.Sum, hj.Average, hj.Min, hj.Max, hj.Product]
MODES = ["eager", "jit"]


def _run(mode, fn, *args):
    return fn(*args) if mode == "eager" else jax.jit(fn)(*args)


def _f64(t):
    """``t`` in NumPy, through float64 (exact for these values; torch's
    bfloat16 has no NumPy form)."""
    return t.to(torch.float64).numpy()


def _j(t, dtype):
    return jnp.asarray(_f64(t) if t.dtype == torch.bfloat16 else t.numpy(), dtype=dtype)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("jdt,pdt", DTYPES, ids=lambda d: getattr(d, "__name__", str(d)))
def test_allreduce_every_op(mode, jdt, pdt):
    r = hvd.rank()
    tol = 2e-2 if pdt == torch.bfloat16 else 2e-3
    for shape in [(), (0,), (1,), (7,), (3, 5)]:
        for op in OPS:
            vals = all_values(shape, pdt)
            got = _run(mode, lambda x: hj.allreduce(x, op=op, name="jar.%s.%s" % (shape, op)),
                       _j(vals[r], jdt))
            want = _f64(reduce_reference(vals, op, pdt))
            assert got.dtype == jnp.dtype(jdt) and got.shape == shape
            np.testing.assert_allclose(np.asarray(got, np.float64), want,
                                       rtol=tol, atol=tol, err_msg="%s %s" % (shape, op))


@pytest.mark.parametrize("mode", MODES)
def test_pytree_grouped_allreduce_and_grad(mode):
    r, n = hvd.rank(), hvd.size()
    tree = {"w": jnp.arange(3.0) + r, "b": [jnp.float32(r), jnp.ones((2, 2)) * r]}
    got = _run(mode, lambda t: hj.grouped_allreduce(t, op=hj.Sum, prescale_factor=2.0), tree)
    total = sum(range(n))
    np.testing.assert_allclose(got["w"], 2 * (n * np.arange(3.0) + total))
    np.testing.assert_allclose(got["b"][0], 2 * total)
    np.testing.assert_allclose(got["b"][1], 2 * total * np.ones((2, 2)))

    # d/dx sum(allreduce_sum(x) * (r + 1)) = Sum over ranks of (r + 1).
    def loss(x):
        return jnp.sum(hj.allreduce(x, op=hj.Sum) * (r + 1.0))

    g = _run(mode, jax.grad(loss), jnp.arange(4.0))
    np.testing.assert_allclose(g, np.full(4, sum(q + 1.0 for q in range(n))))


def test_broadcast_parameters_inside_jit_is_refused_in_the_users_terms():
    with pytest.raises(ValueError, match=r"broadcast_parameters: params\['w'\] is traced "
                                         r"\(inside jax.jit"):
        jax.jit(lambda p: hj.broadcast_parameters(p, 0))({"w": jnp.ones(2)})
    got = hj.broadcast_parameters({"w": jnp.full(2, float(hvd.rank()))}, 0)
    np.testing.assert_array_equal(got["w"], [0.0, 0.0])  # (and the job goes on)


def test_broadcast_parameters_keeps_each_leafs_type():
    # (A Python number came back as a jax.Array: lr=0.2 became Array(0.2).)
    r = hvd.rank()
    got = hj.broadcast_parameters({"w": jnp.full(2, float(r)), "lr": 0.2 + r, "steps": 3 + r,
                                   "host": np.full(2, r, dtype=np.int32)}, 0)
    assert type(got["lr"]) is float and got["lr"] == 0.2
    assert type(got["steps"]) is int and got["steps"] == 3
    assert isinstance(got["host"], np.ndarray) and got["host"].tolist() == [0, 0]
    assert isinstance(got["w"], jax.Array) and np.asarray(got["w"]).tolist() == [0.0, 0.0]


@pytest.mark.parametrize("mode", MODES)
def test_grad_through_a_group_with_an_integer_member(mode):
    # A token-weighted loss: the loss sums and the token counts (int32) in one
    # group. The count's cotangent is JAX's float0: nothing to reduce (it was
    # sent to the core, which refused it). d/dw_r of the sum over ranks of
    # total / count = n * tokens_r / sum(tokens) (the cotangent summed).
    r, n = hvd.rank(), hvd.size()
    tokens = jnp.int32(3 + r)

    def loss(w):
        total, count = hj.grouped_allreduce((jnp.sum(w) * tokens, tokens), op=hj.Sum,
                                            name="tokens.%s" % mode)
        return total / count

    g = _run(mode, jax.grad(loss), jnp.ones(2))
    want = n * (3 + r) / sum(3 + q for q in range(n))
    np.testing.assert_allclose(np.asarray(g), np.full(2, want), rtol=1e-6)


@pytest.mark.parametrize("mode", MODES)
def test_allgather_broadcast_alltoall_reducescatter(mode):
    r, n = hvd.rank(), hvd.size()
    x = value(r, (2, 3), torch.float32)
    got = _run(mode, lambda t: hj.allgather(t, name="jag"), _j(x, jnp.float32))
    np.testing.assert_array_equal(got, torch.cat([value(q, (2, 3), torch.float32)
                                                  for q in range(n)]).numpy())
    got = _run(mode, lambda t: hj.broadcast(t, n - 1, name="jbc"), _j(x, jnp.float32))
    np.testing.assert_array_equal(got, value(n - 1, (2, 3), torch.float32).numpy())
    y = value(r, (2 * n, 2), torch.int64)
    got = _run(mode, lambda t: hj.alltoall(t, name="ja2a"), _j(y, jnp.int64))
    want = torch.cat([value(q, (2 * n, 2), torch.int64)[2 * r:2 * r + 2] for q in range(n)])
    np.testing.assert_array_equal(got, want.numpy())
    vals = all_values((2 * n + 1, 2), torch.float64)
    got = _run(mode, lambda t: hj.reducescatter(t, op=hj.Sum, name="jrs"),
               _j(vals[r], jnp.float64))
    total = reduce_reference(vals, hvd.Sum, torch.float64).numpy()
    base, extra = divmod(2 * n + 1, n)
    start = r * base + min(r, extra)
    np.testing.assert_allclose(got, total[start:start + base + (r < extra)])


def test_eager_uneven_allgather_and_alltoall_splits():
    r, n = hvd.rank(), hvd.size()
    rows = [rows_of(q) for q in range(n)]
    got = hj.allgather(_j(value(r, (rows[r], 2), torch.float32), jnp.float32))
    want = torch.cat([value(q, (rows[q], 2), torch.float32) for q in range(n)])
    np.testing.assert_array_equal(got, want.numpy())
    splits = [1] * n
    out, recv = hj.alltoall(jnp.arange(n, dtype=jnp.int32) + 10 * r, splits=splits)
    assert np.asarray(out).tolist() == [10 * q + r for q in range(n)]
    assert np.asarray(recv).tolist() == [1] * n
    with pytest.raises(hj.UnimplementedError, match="inside jax.jit"):
        jax.jit(lambda t: hj.alltoall(t, splits=splits))(jnp.zeros(n))


def test_optax_training_equals_one_worker_and_broadcast_parameters():
    r, n = hvd.rank(), hvd.size()
    rng = np.random.default_rng(3)
    X = jnp.asarray(rng.standard_normal((4 * n, 3)))
    Y = jnp.asarray(rng.standard_normal((4 * n,)))
    params = hj.broadcast_parameters({"w": jnp.full((3,), float(r)), "b": jnp.float64(r)}, 0)
    assert float(params["b"]) == 0.0 and np.asarray(params["w"]).tolist() == [0.0] * 3

    def loss(p, x, y):
        return jnp.mean((x @ p["w"] + p["b"] - y) ** 2)

    tx = hj.DistributedOptimizer(optax.sgd(0.1, momentum=0.9))
    ref_tx = optax.sgd(0.1, momentum=0.9)

    @jax.jit
    def step(p, s, x, y):
        updates, s = tx.update(jax.grad(loss)(p, x, y), s, p)
        return optax.apply_updates(p, updates), s

    ref, ref_state = params, ref_tx.init(params)
    state = tx.init(params)
    for _ in range(3):
        params, state = step(params, state, X[4 * r:4 * r + 4], Y[4 * r:4 * r + 4])
        # One worker on the whole batch: the mean of equal-sized shards' gradients.
        g = jax.grad(loss)(ref, X, Y)
        upd, ref_state = ref_tx.update(g, ref_state, ref)
        ref = optax.apply_updates(ref, upd)
        for k in ("w", "b"):
            np.testing.assert_allclose(params[k], ref[k], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("wire", ["fp16", "bf16"])
def test_compression_sends_floats_in_the_wire_type(mode, wire):
    r, n = hvd.rank(), hvd.size()
    comp = getattr(hj.Compression, wire)
    wire_np = np.float16 if wire == "fp16" else None
    # Values whose low bits the wire type drops: the result is the sum of
    # each rank's value rounded to it (exact in float64 for these).
    vals = [np.float32(1.0) + np.float32(2.0 ** -13) * (q + 1) + q for q in range(n)]

    def rounded(v):
        if wire_np is not None:
            return np.float64(np.float16(v))
        return np.float64(np.asarray(jnp.asarray(v).astype(jnp.bfloat16).astype(jnp.float32)))

    want = sum(rounded(v) for v in vals)
    x = jnp.full((5,), vals[r], jnp.float32)
    ints = jnp.full((3,), 2 ** 20 + r, jnp.int32)  # (not floating: sent as it is)
    got = _run(mode, lambda t: hj.grouped_allreduce(t, op=hj.Sum, compression=comp),
               {"x": x, "i": ints})
    assert got["x"].dtype == jnp.float32 and got["i"].dtype == jnp.int32
    np.testing.assert_allclose(np.asarray(got["x"], np.float64), want, rtol=1e-3)
    np.testing.assert_array_equal(got["i"], n * 2 ** 20 + sum(range(n)))
    # (Without compression the float32 sum keeps the low bits.)
    exact = hj.allreduce(x, op=hj.Sum, name="uncompressed.%s.%s" % (mode, wire))
    assert float(exact[0]) != float(got["x"][0])
    one = _run(mode, lambda t: hj.allreduce(t, op=hj.Sum, compression=comp), x)
    np.testing.assert_array_equal(one, got["x"])

    # The optimizer's gradients travel the same way.
    tx = hj.DistributedOptimizer(optax.sgd(1.0), op=hj.Sum, compression=comp)
    updates, _ = _run(mode, lambda g: tx.update(g, tx.init(g)), {"x": x})
    np.testing.assert_array_equal(updates["x"], -got["x"])


def _optax_step(tx, mode):
    """A training step applying ``tx``'s update: eager, or jitted."""
    def step(p, s, g):
        updates, s = tx.update(g, s, p)
        return optax.apply_updates(p, updates), s

    return step if mode == "eager" else jax.jit(step)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("average", [False, True])
def test_backward_passes_per_step_reduces_every_kth_pass(monkeypatch, mode, average):
    r, n = hvd.rank(), hvd.size()
    k = 3
    import hora.numpy as hnp

    calls = []
    reduce = hnp.grouped_allreduce
    monkeypatch.setattr(hnp, "grouped_allreduce", lambda *a: calls.append(1) or reduce(*a))
    tx = hj.DistributedOptimizer(optax.sgd(1.0, momentum=0.5), backward_passes_per_step=k,
                                 average_aggregated_gradients=average)
    ref_tx = optax.sgd(1.0, momentum=0.5)
    params = {"w": jnp.zeros((2,))}
    state = tx.init(params)
    ref, ref_state = params, ref_tx.init(params)
    step = _optax_step(tx, mode)
    for q in range(3 * k):
        g = {"w": jnp.array([10.0 * q + r, -1.0 * r])}
        params, state = step(params, state, g)
        assert len(calls) == (q + 1) // k, (q, len(calls))  # (sent once per k passes)
        if (q + 1) % k == 0:
            # Every rank's sum over its k passes (/ k), averaged over ranks.
            passes = range(q + 1 - k, q + 1)
            mean_r = np.mean(range(n))
            summed = np.array([sum(10.0 * i + mean_r for i in passes), -k * mean_r])
            upd, ref_state = ref_tx.update({"w": jnp.asarray(summed / (k if average else 1))},
                                           ref_state, ref)
            ref = optax.apply_updates(ref, upd)
        np.testing.assert_allclose(params["w"], ref["w"], rtol=1e-6, err_msg=str(q))
    np.testing.assert_array_equal(state.passes, 0)
    with pytest.raises(ValueError, match="backward_passes_per_step must be at least 1"):
        hj.DistributedOptimizer(optax.sgd(1.0), backward_passes_per_step=0)


@pytest.mark.parametrize("mode", MODES)
def test_backward_passes_per_step_with_gradients_of_other_dtypes(mode):
    # bfloat16 parameters, float32 gradients (mixed precision): the sum is
    # kept in the parameters' dtype (as optax.MultiSteps's), sent in the
    # gradients', and the state keeps its dtypes in both branches.
    r, n = hvd.rank(), hvd.size()
    k = 2
    for inner in (optax.sgd(0.5, momentum=0.5), optax.adam(0.1)):
        tx = hj.DistributedOptimizer(inner, backward_passes_per_step=k,
                                     average_aggregated_gradients=True)
        ref_tx = inner
        params = {"w": jnp.ones((3,), jnp.bfloat16)}
        state = tx.init(params)
        ref, ref_state = params, ref_tx.init(params)
        step = _optax_step(tx, mode)
        for q in range(2 * k):
            g = {"w": jnp.full((3,), 0.25 * (q + 1) + r, jnp.float32)}
            params, state = step(params, state, g)
            assert params["w"].dtype == jnp.bfloat16
            if (q + 1) % k == 0:
                # bfloat16 sums of the two passes, averaged over the ranks.
                sums = [np.float32(jnp.asarray(0.25 * q + rr, jnp.bfloat16)
                                   + jnp.asarray(0.25 * (q + 1) + rr, jnp.bfloat16))
                        for rr in range(n)]
                want = np.float32(np.mean([np.float32(jnp.asarray(v, jnp.bfloat16))
                                           for v in sums]) / k)
                upd, ref_state = ref_tx.update({"w": jnp.full((3,), want, jnp.float32)},
                                               ref_state, ref)
                ref = optax.apply_updates(ref, upd)
            np.testing.assert_allclose(np.asarray(params["w"], np.float32),
                                       np.asarray(ref["w"], np.float32), rtol=1e-2,
                                       err_msg="%s step %d" % (inner, q))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("k", [1, 2])
def test_integer_parameters_float0_gradients_pass_through(mode, k):
    # jax.grad(..., allow_int=True) gives an integer parameter a float0
    # gradient (no values): optax.multi_transform routes it to
    # set_to_zero, and the DistributedOptimizer passes it on unsent.
    r, n = hvd.rank(), hvd.size()
    params = {"w": jnp.ones((3,)), "count": jnp.array(5, jnp.int32)}

    def loss(p):
        return jnp.sum(p["w"] * p["w"]) * (r + 1) + 0 * p["count"]

    inner = optax.multi_transform({"f": optax.sgd(0.1), "i": optax.set_to_zero()},
                                  {"w": "f", "count": "i"})
    tx = hj.DistributedOptimizer(inner, backward_passes_per_step=k)
    state = tx.init(params)

    def step(p, s, g):  # (optax.apply_updates adds float0 too: skipped as equinox's does)
        updates, s = tx.update(g, s, p)
        return jax.tree_util.tree_map(
            lambda x, u: x if u.dtype == jax.dtypes.float0 else x + u, p, updates), s

    step = step if mode == "eager" else jax.jit(step)
    for q in range(2 * k):
        grads = jax.grad(loss, allow_int=True)(params)
        assert grads["count"].dtype == jax.dtypes.float0
        before = params["w"]
        params, state = step(params, state, grads)
        assert params["count"].dtype == jnp.int32 and int(params["count"]) == 5
        if (q + 1) % k == 0:
            # Each pass's gradient 2 w (r + 1), summed over k passes, averaged over ranks.
            mean = np.mean([2.0 * (rr + 1) for rr in range(n)])
            np.testing.assert_allclose(params["w"], before - 0.1 * k * mean * before,
                                       rtol=1e-6, err_msg=str(q))
        else:
            np.testing.assert_array_equal(params["w"], before)
    # The collectives alone: a float0 leaf comes back as it went.
    got = hj.grouped_allreduce({"a": jnp.full((2,), float(r)),
                                "b": np.zeros((4,), jax.dtypes.float0)})
    np.testing.assert_allclose(got["a"], [np.mean(range(n))] * 2)
    assert got["b"].dtype == jax.dtypes.float0 and got["b"].shape == (4,)


def test_broadcast_optimizer_state_takes_roots_optax_state():
    r = hvd.rank()
    tx = optax.adam(0.1)
    params = {"w": jnp.full((3,), float(r))}
    state = tx.init(params)
    _, state = tx.update({"w": jnp.full((3,), r + 1.0)}, state, params)  # (this rank's moments)
    got = hj.broadcast_optimizer_state(state, root_rank=0)
    _, root = tx.update({"w": jnp.full((3,), 1.0)}, tx.init({"w": jnp.zeros(3)}),
                        {"w": jnp.zeros(3)})
    for a, b in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(root)):
        np.testing.assert_array_equal(a, b)
    assert jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(state)


def test_optimizer_outside_a_process_set_keeps_local_gradients():
    r = hvd.rank()
    ps = hj.add_process_set([0])
    try:
        tx = hj.DistributedOptimizer(optax.sgd(1.0), process_set=ps)
        grads = {"w": jnp.full((2,), r + 1.0)}
        updates, _ = tx.update(grads, tx.init(grads))
        # Rank 0 alone in the set averages with itself; the others keep their own.
        np.testing.assert_allclose(updates["w"], [-(r + 1.0)] * 2)
    finally:
        hj.remove_process_set(ps)


def test_errors_name_the_operation(caplog):
    # A scalar has no axis 0 to scatter (as hora.torch's), eagerly and in
    # jit (there when the step runs, as jit's callbacks raise).
    with pytest.raises(hj.InvalidArgumentError, match="at least one dimension"):
        hj.reducescatter(jnp.float32(1.0))
    with caplog.at_level("ERROR"):
        with pytest.raises(Exception, match="at least one dimension"):
            jax.block_until_ready(jax.jit(hj.reducescatter)(jnp.float32(1.0)))
    # JAX logs a callback's exception before raising its own, whose message
    # has Hora's: not a Hora error's (an elastic job's survivors would print
    # a lost peer's report as an ERROR).
    assert not [r for r in caplog.records if r.levelname == "ERROR"], caplog.text
    # The job goes on.
    assert float(hj.allreduce(jnp.ones(1), op=hj.Sum)[0]) == hj.size()


def test_an_input_refused_on_one_rank_fails_on_every_rank():
    # A scalar where reducescatter needs rows, on rank 1 only: every rank's
    # call fails, the others naming rank 1's error (they waited for it
    # before); the next unnamed call lines up.
    r, n = hj.rank(), hj.size()
    if n < 2:
        pytest.skip("needs two ranks (skipped on every rank alike)")
    x = jnp.float32(1.0) if r == 1 else jnp.ones(2 * n)
    for name in ("rs.scalar.one", None):
        with pytest.raises(hj.HoraError, match="at least one dimension") as info:
            hj.reducescatter(x, name=name)
        assert isinstance(info.value, hj.MismatchError if r != 1 else hj.InvalidArgumentError)
    # Inside jit, after a collective of the same step: it fails when the
    # step runs, on every rank (rank 1's was refused while tracing before,
    # and the others' allreduce met rank 1's next one).
    step = jax.jit(lambda a, b: (hj.allreduce(a, op=hj.Sum), hj.reducescatter(b)))
    with pytest.raises(Exception, match="at least one dimension"):
        jax.block_until_ready(step(jnp.full(1, 100.0 * (r + 1)), x))
    assert float(hj.allreduce(jnp.ones(1), op=hj.Sum)[0]) == n


def test_a_group_of_one_against_a_longer_group_fails_on_every_rank():
    # It went as a lone allreduce, and every rank waited for good.
    r, n = hj.rank(), hj.size()
    if n < 2:
        pytest.skip("needs two ranks (skipped on every rank alike)")
    x = jnp.ones(2)
    with pytest.raises(hj.MismatchError, match="group"):
        hj.grouped_allreduce({"w": x} if r == 1 else {"w": x, "b": x}, op=hj.Sum)
    assert float(hj.allreduce(jnp.ones(1), op=hj.Sum)[0]) == n


def test_reducescatter_outside_its_process_set_says_so():
    # It raised "1 is not in list" on a rank outside the set.
    r = hj.rank()
    ps = hj.add_process_set([0])
    try:
        if r == 0:
            assert hj.reducescatter(jnp.ones(2), process_set=ps).tolist() == [1.0, 1.0]
        else:
            with pytest.raises(hj.InvalidArgumentError, match="is not in process set"):
                hj.reducescatter(jnp.ones(2), process_set=ps)
    finally:
        hj.remove_process_set(ps)


def test_a_reset_drops_the_traces_of_the_old_world(monkeypatch):
    # Inside jit an allgather's shape is fixed by the world it was traced in,
    # and JAX keeps the trace: a step traced before an elastic reset would
    # expect the old world's rows. The reset drops JAX's traces. Here the
    # world seen from Python is 3 ranks larger while the step is traced; the
    # reset's shutdown and init are left out (the world stays the same).
    from hora.common import basics, elastic
    from hora.jax import ops
    r, n = hj.rank(), hj.size()
    step = jax.jit(lambda x: hj.allgather(x * 2.0, name="reset.traces"))
    x = jnp.full(2, float(r))
    real = ops.process_set_ranks
    monkeypatch.setattr(ops, "process_set_ranks", lambda ps: list(real(ps)) + [-1] * 3)
    step.lower(x)  # (traced for n + 3 ranks)
    monkeypatch.undo()
    monkeypatch.setattr(basics, "shutdown", lambda: None)
    monkeypatch.setattr(basics, "init", lambda settings=None: None)
    elastic.reset_world()
    monkeypatch.undo()
    np.testing.assert_array_equal(step(x), np.repeat(2.0 * np.arange(n), 2))


def test_uneven_rows_inside_jit_are_an_error_naming_the_collective():
    # Inside jit the result's shape is fixed from this rank's input; ranks
    # with different row counts (1 and 3 in turn: no rank's guess is right)
    # get an error naming the collective and both shapes.
    r, n = hj.rank(), hj.size()
    if n < 2:
        return
    x = jnp.ones((1 + 2 * (r % 2), 2))
    total = sum(1 + 2 * (q % 2) for q in range(n))
    with pytest.raises(Exception, match=r"allgather 'rows' inside jax.jit: the result came with "
                                        r"shape \(%d, 2\), but jit fixed it at \(%d, 2\)"
                                        % (total, x.shape[0] * n)):
        jax.block_until_ready(jax.jit(lambda a: hj.allgather(a, name="rows"))(x))
    # The job goes on.
    assert float(hj.allreduce(jnp.ones(1), op=hj.Sum)[0]) == n
