"""hora.tensorflow's gradient grouping and local gradients (Horovod's
groups= lists, register_local_source, PartialDistributedGradientTape,
register_local_var) against gradients computed locally and averaged here."""

import os

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
from helpers import framework  # noqa: E402

tf = framework("tensorflow")
import keras  # noqa: E402

import hora.tensorflow as htf  # noqa: E402
from hora.tensorflow import mpi_ops  # noqa: E402

MODES = ["eager", "function"]


def _run(mode, fn, *args):
    return fn(*args) if mode == "eager" else tf.function(fn)(*args)


def _variables():
    return [tf.Variable(np.full((2,), 1.0 + k)) for k in range(4)]


def _loss(vs, r):
    # Rank-dependent: each variable's local gradient is (k + 1) * (r + 1) * 2 * v_k.
    return sum((k + 1.0) * (r + 1.0) * tf.reduce_sum(v * v) for k, v in enumerate(vs))


def _local_gradients(vs, q):
    return [2.0 * (k + 1.0) * (q + 1.0) * v.numpy() for k, v in enumerate(vs)]


def _mean_over_ranks(vs, n):
    return [np.mean([_local_gradients(vs, q)[k] for q in range(n)], axis=0)
            for k in range(len(vs))]


@pytest.mark.parametrize("mode", MODES)
def test_groups_lists_make_each_list_one_fused_group(mode, monkeypatch):
    # groups=[[v0, v2]]: v0 and v2 reduced as one group, v1 and v3 each
    # alone (Horovod's rule); the gradients are those averaged either way.
    r, n = htf.rank(), htf.size()
    vs = _variables()
    sizes = []
    grouped = mpi_ops.grouped_allreduce

    def counting(tensors, *a, **kw):
        sizes.append(len(tensors))
        return grouped(tensors, *a, **kw)

    monkeypatch.setattr(mpi_ops, "grouped_allreduce", counting)

    def step():
        with tf.GradientTape() as tape:
            loss = _loss(vs, r)
        tape = htf.DistributedGradientTape(tape, groups=[[vs[0], vs[2]]])
        return tape.gradient(loss, vs)

    got = _run(mode, step)
    assert sizes == [2, 1, 1], sizes
    for g, want in zip(got, _mean_over_ranks(vs, n)):
        np.testing.assert_allclose(g.numpy(), want, rtol=1e-12)


def test_groups_lists_in_another_order_and_a_repeated_source():
    # A list's order may differ by rank (one built from a set): the groups,
    # and so which gradients meet, do not. A source given twice is reduced
    # at both places.
    r, n = htf.rank(), htf.size()
    vs = _variables()
    group = [vs[2], vs[0]] if r % 2 else [vs[0], vs[2]]
    with tf.GradientTape() as tape:
        loss = _loss(vs, r)
    got = htf.DistributedGradientTape(tape, groups=[group]).gradient(loss, vs)
    for g, want in zip(got, _mean_over_ranks(vs, n)):
        np.testing.assert_allclose(g.numpy(), want, rtol=1e-12)
    with tf.GradientTape() as tape:
        loss = _loss(vs, r)
    got = htf.DistributedGradientTape(tape, groups=[[vs[1]]]).gradient(
        loss, [vs[1], vs[1], vs[3]])
    want = _mean_over_ranks(vs, n)
    for g, w in zip(got, [want[1], want[1], want[3]]):
        np.testing.assert_allclose(g.numpy(), w, rtol=1e-12)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("scale", [True, False])
def test_partial_tape_leaves_local_layers_gradients_on_their_rank(mode, scale):
    # The local layer's gradients are this rank's own (divided by the number
    # of ranks where scale_local_gradients), the rest averaged.
    r, n = htf.rank(), htf.size()
    keras.utils.set_random_seed(1)
    shared, local = keras.layers.Dense(3), keras.layers.Dense(1)
    model = keras.Sequential([keras.Input((4,)), shared, local])
    x = tf.constant(np.random.default_rng(r).standard_normal((5, 4)), tf.float32)
    variables = model.trainable_variables

    def grads(distributed):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(model(x) ** 2)
        if distributed:
            tape = htf.PartialDistributedGradientTape(tape, local_layers=local,
                                                      scale_local_gradients=scale)
        return tape.gradient(loss, variables)

    got = _run(mode, lambda: grads(True))
    mine = [g.numpy() for g in grads(False)]
    every = [htf.allgather(tf.constant(g[None])).numpy() for g in mine]
    for v, g, m, e in zip(variables, got, mine, every):
        if any(v is w for w in local.trainable_weights):
            want = m / n if scale else m
        else:
            want = e.mean(axis=0)
        np.testing.assert_allclose(g.numpy(), want, rtol=1e-5, atol=1e-6, err_msg=v.path)


def test_register_local_source_and_wrong_local_layers():
    r, n = htf.rank(), htf.size()
    vs = _variables()
    with tf.GradientTape() as tape:
        loss = _loss(vs, r)
    tape = htf.DistributedGradientTape(tape)
    tape.register_local_source(vs[1])
    got = tape.gradient(loss, vs)
    want = _mean_over_ranks(vs, n)
    want[1] = _local_gradients(vs, r)[1] / n
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), w, rtol=1e-12)
    with pytest.raises(ValueError, match="local_layers must be Keras layers, got ResourceVariable"):
        htf.PartialDistributedGradientTape(tape, local_layers=[vs[0]])


def test_compat_v1_optimizer_groups_and_register_local_var():
    r, n = htf.rank(), htf.size()
    vs = _variables()
    opt = htf.DistributedOptimizer(tf.compat.v1.train.GradientDescentOptimizer(0.1),
                                   groups=[[vs[3], vs[0]]])
    opt.register_local_var(vs[2])
    pairs = opt.compute_gradients(lambda: _loss(vs, r), var_list=vs)
    want = _mean_over_ranks(vs, n)
    want[2] = _local_gradients(vs, r)[2] / n
    for (g, v), w, v0 in zip(pairs, want, vs):
        assert v is v0
        np.testing.assert_allclose(g.numpy(), w, rtol=1e-12)


def test_a_collective_xla_would_compile_is_a_clear_error():
    # XLA cannot compile a py_function: refused while tracing, saying what to
    # do (the job goes on); SyncBatchNormalization tells Keras's "auto" so.
    # (Raised inside the user's function, which autograph converts: it reaches
    # the caller as autograph's StagingError with this message.)
    x = tf.constant([1.0])
    with pytest.raises(Exception, match=r"cannot be compiled by XLA.*jit_compile=False"):
        tf.function(lambda t: htf.allreduce(t, name="xla"), jit_compile=True)(x)
    assert htf.allreduce(x, op=htf.Sum).numpy()[0] == htf.size()
    assert htf.SyncBatchNormalization().supports_jit is False
