"""hora.jax's gradients (jax.grad, eagerly and inside jax.jit) against
Horovod's rules computed here with NumPy from every rank's cotangent; the
grouped allgather and reducescatter; collectives on arrays a traced step
closed over; allreduce's refusal of a pytree."""

import numpy as np
import pytest

from helpers import framework

jax = framework("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402

import hora.jax as hj  # noqa: E402
import hora.numpy as hnp  # noqa: E402

MODES = ["eager", "jit"]


def _grad(mode, loss, x):
    g = jax.grad(loss)
    return np.asarray(g(x) if mode == "eager" else jax.jit(g)(x))


def _c(q, shape, seed=0):
    """Rank q's cotangent weights (every rank can compute every rank's)."""
    return np.random.default_rng(100 * seed + q).standard_normal(shape)


def _x(r, shape):
    return jnp.asarray(np.arange(np.prod(shape), dtype=np.float64).reshape(shape) + r)


@pytest.mark.parametrize("mode", MODES)
def test_allgather_gradient_is_the_average_of_the_cotangents_rows(mode):
    r, n = hj.rank(), hj.size()
    shape = (2, 3)
    got = _grad(mode, lambda x: (hj.allgather(x * 1.5, name="g.ag") *
                                 _c(r, (2 * n, 3))).sum(), _x(r, shape))
    want = 1.5 * np.mean([_c(q, (2 * n, 3)) for q in range(n)], axis=0)[2 * r:2 * r + 2]
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_allgather_gradient_with_uneven_rows_eagerly():
    # Eagerly the ranks' rows may differ: this rank's rows start after every
    # earlier rank's (rank q has q + 1 rows here).
    r, n = hj.rank(), hj.size()
    total = n * (n + 1) // 2
    got = _grad("eager", lambda x: (hj.allgather(x, name="g.ag.uneven") *
                                    _c(r, (total, 2))).sum(), _x(r, (r + 1, 2)))
    start = r * (r + 1) // 2
    want = np.mean([_c(q, (total, 2)) for q in range(n)], axis=0)[start:start + r + 1]
    np.testing.assert_allclose(got, want, rtol=1e-12)


@pytest.mark.parametrize("mode", MODES)
def test_broadcast_gradient_is_the_average_on_the_root_zeros_elsewhere(mode):
    r, n = hj.rank(), hj.size()
    root = n - 1
    got = _grad(mode, lambda x: (hj.broadcast(x, root, name="g.bc") * _c(r, (4,))).sum(),
                _x(r, (4,)))
    want = np.mean([_c(q, (4,)) for q in range(n)], axis=0) if r == root else np.zeros(4)
    np.testing.assert_allclose(got, want, rtol=1e-12)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("op,factor", [(hj.Sum, lambda n: n * 2.0), (hj.Average, lambda n: 2.0)],
                         ids=["sum", "average"])
def test_reducescatter_gradient_is_the_scaled_allgather_of_the_cotangents(mode, op, factor):
    # 2n + 1 rows: rank 0 gets one more (uneven), eagerly and inside jit.
    r, n = hj.rank(), hj.size()
    rows = [2 + (q < 1) for q in range(n)]
    got = _grad(mode, lambda x: (hj.reducescatter(x, op=op, prescale_factor=2.0, name="g.rs")
                                 * _c(r, (rows[r], 2))).sum(), _x(r, (2 * n + 1, 2)))
    want = factor(n) * np.concatenate([_c(q, (rows[q], 2)) for q in range(n)])
    np.testing.assert_allclose(got, want, rtol=1e-12)


@pytest.mark.parametrize("mode", MODES)
def test_alltoall_gradient_sends_the_cotangent_back(mode):
    r, n = hj.rank(), hj.size()
    got = _grad(mode, lambda x: (hj.alltoall(x, name="g.a2a") * _c(r, (2 * n, 3))).sum(),
                _x(r, (2 * n, 3)))
    # Rank r's rows 2p..2p+1 went to rank p, where they are rows 2r..2r+1.
    want = np.concatenate([_c(p, (2 * n, 3))[2 * r:2 * r + 2] for p in range(n)])
    np.testing.assert_allclose(got, want, rtol=1e-12)


@pytest.mark.parametrize("mode", MODES)
def test_grouped_allgather_and_reducescatter_values_and_gradients(mode):
    r, n = hj.rank(), hj.size()

    def f(x):
        ints = jnp.arange(3, dtype=jnp.int32) + r  # (float0 cotangent: never sent)
        a, b, c = hj.grouped_allgather([x, x[:1] * 2, ints], name="g.gag")
        s, t = hj.grouped_reducescatter([x, jnp.concatenate([x, x]) * 3], op=hj.Sum,
                                        name="g.grs")
        return a, b, c, s, t

    x = _x(r, (n, 2))
    run = f if mode == "eager" else jax.jit(f)
    a, b, c, s, t = run(x)
    xs = [np.asarray(_x(q, (n, 2))) for q in range(n)]
    np.testing.assert_array_equal(a, np.concatenate(xs))
    np.testing.assert_array_equal(b, np.concatenate([2 * v[:1] for v in xs]))
    np.testing.assert_array_equal(c, np.concatenate([np.arange(3) + q for q in range(n)]))
    np.testing.assert_array_equal(s, sum(xs)[r:r + 1])
    np.testing.assert_array_equal(t, 3 * np.concatenate([sum(xs)] * 2)[2 * r:2 * r + 2])

    def loss(x):
        a, b, c, s, t = f(x)
        return ((a * _c(r, a.shape, 1)).sum() + (b * _c(r, b.shape, 2)).sum()
                + (s * _c(r, s.shape, 3)).sum() + (t * _c(r, t.shape, 4)).sum())

    got = _grad(mode, loss, x)
    mean = [np.mean([_c(q, shape, seed) for q in range(n)], axis=0)
            for shape, seed in (((n * n, 2), 1), ((n, 2), 2))]
    want = mean[0][n * r:n * r + n]
    want[:1] += 2 * mean[1][r:r + 1]
    want += n * np.concatenate([_c(q, (1, 2), 3) for q in range(n)])
    every_t = 3 * n * np.concatenate([_c(q, (2, 2), 4) for q in range(n)])
    want += every_t[:n] + every_t[n:]
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_a_collective_on_an_array_the_step_closed_over_runs_every_step(monkeypatch):
    # An array the jitted step closed over is concrete as it is traced: the
    # allreduce must still run each time the step runs (not once, as it is
    # traced, with its result baked into the step).
    r = hj.rank()
    calls = []
    real = hnp.allreduce
    monkeypatch.setattr(hnp, "allreduce", lambda *a, **k: (calls.append(1), real(*a, **k))[1])
    const = jnp.full(3, float(r + 1))
    step = jax.jit(lambda x: x + hj.allreduce(const, op=hj.Sum, name="g.closed"))
    for i in range(3):
        out = step(jnp.full(3, float(i)))
    jax.effects_barrier()
    np.testing.assert_array_equal(out, np.full(3, 2.0 + sum(range(1, hj.size() + 1))))
    assert len(calls) == 3, calls


def test_allreduce_takes_a_list_as_an_array_and_refuses_a_pytree():
    r, n = hj.rank(), hj.size()
    got = hj.allreduce([1.0, 2.0 + r], op=hj.Sum, name="g.list")
    np.testing.assert_array_equal(got, [n, 2.0 * n + sum(range(n))])
    with pytest.raises(TypeError, match="one array.*use grouped_allreduce"):
        hj.allreduce({"a": jnp.ones(2), "b": jnp.ones(3)}, name="g.dict")
    # (Refused before anything was sent: the job goes on.)
    np.testing.assert_array_equal(hj.allreduce(jnp.ones(2), op=hj.Sum, name="g.after"),
                                  np.full(2, float(n)))
