"""hora.tensorflow against references computed locally, eager and in tf.function."""

import os

import numpy as np
import pytest
import torch

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
from helpers import framework  # noqa: E402

tf = framework("tensorflow")

import hora.tensorflow as htf  # noqa: E402
from hora.common import basics  # noqa: E402
import hora.torch as hvd  # noqa: E402
from helpers import all_values, reduce_reference, rows_of, value  # noqa: E402

DTYPES = [(tf.float16, torch.float16), (tf.bfloat16, torch.bfloat16),
          (tf.float32, torch.float32), (tf.float64, torch.float64), (tf.int32, torch.int32),
          (tf.int64, torch.int64)]
OPS = [htf.Sum, htf.Average, htf.Min, htf.Max, htf.Product]
MODES = ["eager", "function"]


def _f64(t):
    """``t`` in NumPy, through float64 (exact for these values; torch's
    bfloat16 has no NumPy form)."""
    return t.to(torch.float64).numpy()


def _tf(t, dtype):
    return tf.constant(_f64(t) if t.dtype == torch.bfloat16 else t.numpy(), dtype=dtype)


def _run(mode, fn, *args):
    if mode == "tape":  # eager, under a tape watching the inputs: the gradient's path
        with tf.GradientTape() as tape:
            tape.watch([a for a in args if a.dtype.is_floating])
            return fn(*args)
    return fn(*args) if mode == "eager" else tf.function(fn)(*args)


@pytest.mark.parametrize("mode", MODES + ["tape"])
@pytest.mark.parametrize("tdt,pdt", DTYPES, ids=lambda d: getattr(d, "name", str(d)))
def test_allreduce_every_op(mode, tdt, pdt):
    r = hvd.rank()
    tol = 2e-2 if pdt == torch.bfloat16 else 2e-3
    for shape in [(), (0,), (1,), (7,), (3, 5)]:
        for op in OPS:
            vals = all_values(shape, pdt)
            got = _run(mode, lambda x: htf.allreduce(x, op=op, name="ar.%s.%s" % (shape, op)),
                       _tf(vals[r], tdt))
            want = _f64(reduce_reference(vals, op, pdt))
            assert got.dtype == tdt and tuple(got.shape) == shape
            np.testing.assert_allclose(got.numpy().astype(np.float64), want,
                                       rtol=tol, atol=tol, err_msg="%s %s" % (shape, op))


@pytest.mark.parametrize("mode", MODES)
def test_grouped_allreduce_scaled_and_bool(mode):
    r, n = hvd.rank(), hvd.size()
    vals = [all_values((4,), torch.float32, seed=s) for s in range(3)]

    def f(a, b, c):
        return htf.grouped_allreduce([a, b, c], op=htf.Sum, prescale_factor=0.5,
                                     postscale_factor=3.0)

    got = _run(mode, f, *[_tf(v[r], tf.float32) for v in vals])
    for g, v in zip(got, vals):
        np.testing.assert_allclose(g.numpy(), reduce_reference(v, hvd.Sum, torch.float32,
                                                               0.5, 3.0).numpy(), rtol=1e-6)
    flags = tf.constant([r == 0, True, False])
    anyv = _run(mode, lambda x: htf.allreduce(x, op=htf.Max), flags)
    allv = _run(mode, lambda x: htf.allreduce(x, op=htf.Min), flags)
    assert anyv.numpy().tolist() == [True, True, False]
    assert allv.numpy().tolist() == [n == 1, True, False]


# (Eagerly with no tape the ops skip tf.custom_gradient, which costs >0.1 ms a
# call; "tape" runs the same under one.)
@pytest.mark.parametrize("mode", MODES + ["tape"])
def test_allgather_broadcast_alltoall_reducescatter(mode):
    r, n = hvd.rank(), hvd.size()
    rows = [rows_of(q) for q in range(n)]
    mine = value(r, (rows[r], 3), torch.float32)
    got = _run(mode, lambda x: htf.allgather(x, name="ag"), _tf(mine, tf.float32))
    want = torch.cat([value(q, (rows[q], 3), torch.float32) for q in range(n)])
    np.testing.assert_array_equal(got.numpy(), want.numpy())

    root = n - 1
    got = _run(mode, lambda x: htf.broadcast(x, root, name="bc"),
               _tf(value(r, (2, 2), torch.int64), tf.int64))
    np.testing.assert_array_equal(got.numpy(), value(root, (2, 2), torch.int64).numpy())

    splits = [(r + p) % 3 for p in range(n)]
    x = value(r, (sum(splits), 2), torch.float64)
    out, recv = _run(mode, lambda t, s: htf.alltoall(t, splits=s, name="a2a"),
                     _tf(x, tf.float64), tf.constant(splits, tf.int32))
    parts = []
    for q in range(n):
        sq = [(q + p) % 3 for p in range(n)]
        xq = value(q, (sum(sq), 2), torch.float64)
        parts.append(xq[sum(sq[:r]):sum(sq[:r]) + sq[r]])
    np.testing.assert_array_equal(out.numpy(), torch.cat(parts).numpy())
    assert recv.numpy().tolist() == [(q + r) % 3 for q in range(n)]

    vals = all_values((2 * n + 1, 2), torch.float32)
    got = _run(mode, lambda t: htf.reducescatter(t, op=htf.Sum, name="rs"),
               _tf(vals[r], tf.float32))
    total = reduce_reference(vals, hvd.Sum, torch.float32)
    base, extra = divmod(2 * n + 1, n)
    start = r * base + min(r, extra)
    np.testing.assert_allclose(got.numpy(), total[start:start + base + (r < extra)].numpy())


@pytest.mark.parametrize("mode", MODES)
def test_gradients_as_horovod_defines_them(mode):
    r, n = hvd.rank(), hvd.size()
    x = tf.Variable(np.arange(4, dtype=np.float32) + r)
    w = tf.reshape(tf.range(2 * 2 * n, dtype=tf.float32), [-1, 2])

    def grads():
        with tf.GradientTape(persistent=True) as tape:
            s = htf.allreduce(x, op=htf.Sum, prescale_factor=2.0)
            loss_s = tf.reduce_sum(s * (r + 1.0))
            g = htf.allgather(tf.reshape(x, [2, 2]))
            loss_g = tf.reduce_sum(g * w)
            b = htf.broadcast(x, 0)
            loss_b = tf.reduce_sum(b) * (r + 2.0)
            rs = htf.reducescatter(x[:n], op=htf.Sum)
            loss_rs = tf.reduce_sum(rs) * (r + 1.0)
            rs_avg = htf.reducescatter(x[:n], op=htf.Average)
            loss_rs_avg = tf.reduce_sum(rs_avg) * (r + 1.0)
            a2a = htf.alltoall(tf.reshape(tf.tile(x, [n]), [n * 4, 1]))
            loss_a2a = tf.reduce_sum(a2a * tf.reshape(tf.range(n * 4, dtype=tf.float32), [-1, 1]))
        return [tape.gradient(v, x) for v in (loss_s, loss_g, loss_b, loss_rs, loss_rs_avg,
                                             loss_a2a)]

    gs, gg, gb, grs, grs_avg, ga2a = [t.numpy() for t in _run(mode, grads)]
    # allreduce's: the allreduce (same op, same scale factors) of each rank's (r + 1).
    np.testing.assert_allclose(gs, np.full(4, 2.0 * sum(q + 1.0 for q in range(n))))
    # allgather's: the Average allreduce of the gradient (w on every rank), this rank's rows.
    np.testing.assert_allclose(gg, np.arange(4 * r, 4 * r + 4, dtype=np.float32))
    # broadcast's: the Average allreduce on the root, zeros elsewhere.
    want = np.full(4, sum(q + 2.0 for q in range(n)) / n) if r == 0 else np.zeros(4)
    np.testing.assert_allclose(gb, want, rtol=1e-6)
    # reducescatter's: size() x the allgather of the gradient for Sum, the allgather for
    # Average. Each rank's slice had gradient (q + 1); every input element reaches one slice.
    np.testing.assert_allclose(grs, np.concatenate([[n * (q + 1.0) for q in range(n)],
                                                    np.zeros(4 - n)]))
    np.testing.assert_allclose(grs_avg, np.concatenate([[q + 1.0 for q in range(n)],
                                                        np.zeros(4 - n)]))
    # alltoall's: the alltoall back. Input row 4p + k of rank r (x_r[k]) went to rank p as
    # its output row 4r + k, weighted 4r + k there; x_r[k] is in n input rows (the tile).
    np.testing.assert_allclose(ga2a, [n * (4 * r + k) for k in range(4)])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("options", [{}, {"gradient_predivide_factor": 2.0},
                                     {"num_groups": 2}, {"compression": htf.Compression.fp16}],
                         ids=["plain", "predivide", "groups", "fp16"])
def test_distributed_gradient_tape_equals_one_worker(mode, options):
    r, n = hvd.rank(), hvd.size()
    rng = np.random.default_rng(5)
    X = rng.standard_normal((4 * n, 3))
    Y = rng.standard_normal((4 * n, 1))
    w = tf.Variable(np.ones((3, 1)))
    emb = tf.Variable(np.ones((5, 1)))
    ids = tf.constant([r % 5, 4])
    w_ref = tf.Variable(np.ones((3, 1)))
    emb_ref = tf.Variable(np.ones((5, 1)))

    def step(x, y):
        with tf.GradientTape() as tape:
            pred = x @ w + tf.reduce_sum(tf.gather(emb, ids))
            loss = tf.reduce_mean((pred - y) ** 2)
        tape = htf.DistributedGradientTape(tape, **options)
        return tape.gradient(loss, [w, emb])

    gw, gemb = _run(mode, step, tf.constant(X[4 * r:4 * r + 4]), tf.constant(Y[4 * r:4 * r + 4]))
    assert isinstance(gemb, tf.IndexedSlices)  # gathered, as Horovod does
    # One worker: the mean over ranks of each rank's local gradient.
    gws, gembs = [], []
    for q in range(n):
        idq = tf.constant([q % 5, 4])
        with tf.GradientTape() as tape:
            pred = tf.constant(X[4 * q:4 * q + 4]) @ w_ref + tf.reduce_sum(tf.gather(emb_ref, idq))
            loss = tf.reduce_mean((pred - tf.constant(Y[4 * q:4 * q + 4])) ** 2)
        a, b = tape.gradient(loss, [w_ref, emb_ref])
        gws.append(a.numpy())
        gembs.append(tf.convert_to_tensor(b).numpy())
    tol = 2e-3 if "compression" in options else 1e-12
    np.testing.assert_allclose(gw.numpy(), np.mean(gws, axis=0), rtol=tol, atol=tol)
    np.testing.assert_allclose(tf.convert_to_tensor(gemb).numpy(), np.mean(gembs, axis=0),
                               rtol=1e-12)


def test_broadcast_variables_and_objects():
    r = hvd.rank()
    vs = [tf.Variable(np.full((2,), float(r))), tf.Variable(r)]
    htf.broadcast_variables(vs, root_rank=0)
    assert vs[0].numpy().tolist() == [0.0, 0.0] and int(vs[1].numpy()) == 0
    assert htf.broadcast_object({"r": r}, root_rank=0) == {"r": 0}
    assert htf.allgather_object(r) == list(range(hvd.size()))
    mixed = [q if q % 2 == 0 else None for q in range(hvd.size())]
    assert htf.allgather_object(mixed[r]) == mixed  # (types differ: one unnamed call)


def test_errors_name_the_operation():
    with pytest.raises(htf.InvalidArgumentError, match="allreduce 'cx'.*complex64"):
        htf.allreduce(tf.constant([1.0], tf.complex64), name="cx")
    with pytest.raises(htf.InvalidArgumentError, match="root_rank 99"):
        htf.broadcast(tf.constant([1.0]), 99, name="far")
    with pytest.raises(htf.InvalidArgumentError, match="at least one dimension"):
        htf.reducescatter(tf.constant(1.0), name="rs0")
    # A groups= that is neither a number nor lists is refused when the tape
    # is wrapped, not at its first gradient().
    with tf.GradientTape() as tape:
        pass
    for wrong in (0, [tf.Variable(1.0)], "2"):
        with pytest.raises(ValueError, match="groups="):
            htf.DistributedGradientTape(tape, groups=wrong)
    # An int is a number of groups, as Horovod's.
    v = tf.Variable([1.0, 2.0])
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(v * v)
    g = htf.DistributedGradientTape(tape, groups=2).gradient(loss, [v])
    np.testing.assert_allclose(g[0].numpy(), [2.0, 4.0])
    # The job goes on.
    assert htf.allreduce(tf.constant([1.0]), op=htf.Sum).numpy()[0] == hvd.size()


def test_an_input_refused_on_one_rank_fails_on_every_rank():
    # A dtype hora takes on no rank but rank 1's (complex64), eagerly and in a
    # tf.function: every rank's call fails, the others naming rank 1's error
    # (they waited for it before); the job goes on.
    r, n = hvd.rank(), hvd.size()
    if n == 1:
        pytest.skip("needs two ranks (skipped on every rank alike)")
    x = tf.constant([1.0, 2.0], tf.complex64 if r == 1 else tf.float32)
    for mode, name in (("eager", "cx.one"), ("eager", None), ("function", "cx.one.f")):
        with pytest.raises((htf.HoraError, tf.errors.OpError)) as info:
            _run(mode, lambda t: htf.allreduce(t, name=name), x)
        message = str(info.value)
        assert "dtype complex64 is not supported" in message, (mode, message)
        if r != 1:
            assert "rank 1: allreduce" in message, (mode, message)
    # A scalar where alltoall needs rows, on rank 1 only.
    y = tf.constant(1.0) if r == 1 else tf.range(2.0 * n)
    for name in ("a2a.scalar.one", None):
        with pytest.raises(htf.HoraError, match="at least one dimension") as info:
            htf.alltoall(y, name=name)
        assert isinstance(info.value, htf.MismatchError if r != 1 else htf.InvalidArgumentError)
    assert htf.allreduce(tf.constant([1.0]), op=htf.Sum).numpy()[0] == n


def test_a_group_of_one_against_a_longer_group_fails_on_every_rank():
    # It went as a lone allreduce, and every rank waited for good: as a
    # DistributedGradientTape whose gradient of one variable is None on one
    # rank only.
    r, n = hvd.rank(), hvd.size()
    if n == 1:
        pytest.skip("needs two ranks (skipped on every rank alike)")
    x = tf.constant([1.0, 2.0])
    with pytest.raises(htf.MismatchError, match="group"):
        htf.grouped_allreduce([x] if r == 1 else [x, x], op=htf.Sum)
    w, b = tf.Variable([1.0, 2.0]), tf.Variable([3.0])
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(w * w) + (0.0 if r == 1 else tf.reduce_sum(b))
    with pytest.raises(htf.MismatchError, match="group"):
        htf.DistributedGradientTape(tape).gradient(loss, [w, b])
    assert htf.allreduce(tf.constant([1.0]), op=htf.Sum).numpy()[0] == n
    # A lone allreduce meets hora.torch's under its name; a group of one
    # meets hora.torch's group of one.
    got = htf.allreduce(x, op=htf.Sum, name="tf.lone") if r % 2 == 0 else \
        hvd.allreduce(torch.tensor([1.0, 2.0]), op=hvd.Sum, name="tf.lone")
    np.testing.assert_allclose(np.asarray(got), [n, 2.0 * n])
    got = htf.grouped_allreduce([x], op=htf.Sum, name="tf.one")[0] if r % 2 == 0 else \
        hvd.grouped_allreduce([torch.tensor([1.0, 2.0])], op=hvd.Sum, name="tf.one")[0]
    np.testing.assert_allclose(np.asarray(got), [n, 2.0 * n])


def test_allgather_of_an_input_of_unknown_rank_keeps_its_rank():
    # Its static shape was fixed at one dimension: reduce_sum over axis 1
    # failed while tracing.
    n = hvd.size()

    @tf.function(input_signature=[tf.TensorSpec(None, tf.float32)])
    def rows(t):
        y = htf.allgather(t, name="unknown.rank")
        return tf.reduce_sum(y, axis=1), tf.rank(y)

    sums, r = rows(tf.ones((2, 3)))
    assert int(r) == 2
    np.testing.assert_allclose(sums.numpy(), [3.0] * (2 * n))


def test_compat_v1_distributed_optimizer_and_keras_delegation():
    r, n = hvd.rank(), hvd.size()
    w = tf.Variable([1.0, 2.0])
    opt = htf.DistributedOptimizer(tf.compat.v1.train.GradientDescentOptimizer(0.5))
    pairs = opt.compute_gradients(lambda: tf.reduce_sum(w * (r + 1.0)), var_list=[w])
    # The average over ranks of each rank's gradient (r + 1).
    np.testing.assert_allclose(pairs[0][0].numpy(), np.full(2, (n + 1) / 2.0))
    opt.apply_gradients(pairs)
    np.testing.assert_allclose(w.numpy(), [1.0 - 0.5 * (n + 1) / 2.0, 2.0 - 0.5 * (n + 1) / 2.0])
    import keras
    kopt = htf.DistributedOptimizer(keras.optimizers.SGD(0.5))
    assert getattr(kopt, "_hora_distributed", False) and isinstance(kopt, keras.optimizers.SGD)
    v = keras.Variable([1.0])
    kopt.apply_gradients([(tf.constant([r + 1.0]), v)])
    np.testing.assert_allclose(v.numpy(), [1.0 - 0.5 * (n + 1) / 2.0])


def test_broadcast_global_variables_hook_in_a_session():
    r = hvd.rank()
    with tf.Graph().as_default():
        v = tf.compat.v1.Variable([float(r), 10.0 + r])
        hook = htf.BroadcastGlobalVariablesHook(root_rank=hvd.size() - 1)
        with tf.compat.v1.train.MonitoredSession(hooks=[hook]) as sess:
            got = sess.run(v)
    root = hvd.size() - 1
    np.testing.assert_array_equal(got, [float(root), 10.0 + root])


def test_tf1_graph_collectives_in_control_flow_match_on_every_rank():
    # A TF1 graph runs independent ops in any order: unnamed collectives
    # inside tf.cond and tf.while_loop, beside top-level ones, paired with
    # other ranks' in another order (wrong sums in ~1 run in 10, no error;
    # "inputs from different frames" with control flow v1). They are named
    # after their graph ops now.
    n = hvd.size()
    with tf.Graph().as_default():
        c = tf.cond(tf.constant(True), lambda: htf.allreduce(tf.constant([10.0]), op=htf.Sum),
                    lambda: tf.constant([0.0]))
        t = htf.allreduce(tf.constant([1.0]), op=htf.Sum)
        loop = tf.while_loop(lambda i, x: i < 3,
                             lambda i, x: (i + 1, htf.allreduce(x, op=htf.Sum)),
                             [tf.constant(0), tf.constant([1.0])])[1]
        after = htf.allgather(tf.constant([3.0]))
        with tf.compat.v1.Session() as sess:
            for _ in range(30):
                got = sess.run([c, t, loop, after])
                assert [g.tolist() for g in got] == [[10.0 * n], [1.0 * n], [float(n ** 3)],
                                                     [3.0] * n]


def test_tf1_graph_many_collectives_and_horovods_hook_pattern():
    # Each collective's op holds a session thread while it waits: sixteen
    # independent ones in one run (ranks taking them in different orders,
    # every thread taken) waited for good without the chain. Horovod's
    # pattern (a placeholder model, DistributedOptimizer,
    # BroadcastGlobalVariablesHook) failed for an unfed placeholder while
    # the hook's broadcasts were chained after the train step's allreduce;
    # they are one op of their own now, also for many variables.
    r, n = hvd.rank(), hvd.size()
    with tf.Graph().as_default():
        outs = [htf.allreduce(tf.constant([float(k + r)]), op=htf.Sum) for k in range(16)]
        with tf.compat.v1.Session() as sess:
            for _ in range(3):
                got = sess.run(outs)
                assert [g.tolist() for g in got] == [[k * n + n * (n - 1) / 2] for k in range(16)]
    with tf.Graph().as_default():
        ws = [tf.compat.v1.get_variable("w%d" % k, initializer=tf.constant([float(r + k), 5.0 * r]))
              for k in range(8)]
        x = tf.compat.v1.placeholder(tf.float32, [2])
        loss = tf.add_n([tf.reduce_sum(w * x) for w in ws])
        train = htf.DistributedOptimizer(tf.compat.v1.train.GradientDescentOptimizer(0.1)) \
            .minimize(loss)
        hook = htf.BroadcastGlobalVariablesHook(0)
        with tf.compat.v1.train.MonitoredTrainingSession(hooks=[hook]) as sess:
            assert [sess.run(w).tolist() for w in ws] == [[float(k), 0.0] for k in range(8)]
            for _ in range(2):
                sess.run(train, feed_dict={x: np.array([1.0, 2.0]) * (r + 1)})
            # Each step subtracts 0.1 times the ranks' mean of (r + 1) * [1, 2].
            step = 0.1 * (n + 1) / 2.0
            for k, w in enumerate(ws):
                np.testing.assert_allclose(sess.run(w), [k - 2 * step, -4 * step], rtol=1e-6)


def test_a_lone_collectives_gradient_meets_torchs():
    # TensorFlow's gradient of a lone allreduce (and reducescatter) is a
    # lone call, as hora.torch's backward is: a TF rank's tape meets a torch
    # rank's backward (it went as a group of one and waited for good). (One
    # collective a backward pass: the frameworks order a pass's own
    # gradients differently, and each waits for its peers.)
    r, n = hvd.rank(), hvd.size()
    x = [1.0, 2.0] * n
    for kind in ("allreduce", "reducescatter"):
        if r % 2 == 0:
            v = tf.Variable(x)
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(getattr(htf, kind)(v * 1.0, op=htf.Sum, name="x." + kind))
            g = tape.gradient(loss, v).numpy().tolist()
        else:
            v = torch.tensor(x, requires_grad=True)
            getattr(hvd, kind)(v * 1.0, op=hvd.Sum, name="x." + kind).sum().backward()
            g = v.grad.tolist()
        # Sum's gradient: n (allreduce's; reducescatter's, the set's size
        # times the allgather of ones).
        assert g == [float(n)] * (2 * n), kind


def test_tensorflow_state_eagerly():
    # save/restore/sync of variables and plain values; sync gives rank 0's
    # to every rank, restore the last commit's.
    from hora.tensorflow import elastic
    r = hvd.rank()
    v, w = tf.Variable([float(r), 1.0 + r]), tf.Variable(10 * r)
    state = elastic.TensorFlowState([v, w], epoch=r)
    state.sync()
    assert v.numpy().tolist() == [0.0, 1.0] and int(w.numpy()) == 0 and state.epoch == 0
    v.assign([5.0, 5.0 + r])
    state.epoch = 3
    state.commit()
    v.assign([9.0, 9.0])
    w.assign(7)
    state.epoch = 4
    state.restore()
    assert v.numpy().tolist() == [5.0, 5.0 + r] and int(w.numpy()) == 0 and state.epoch == 3
    with pytest.raises(ValueError, match="variables=None"):
        elastic.TensorFlowState()


def test_tensorflow_state_in_a_tf1_session():
    # Horovod's TF1 form: the graph's global variables by default, read and
    # assigned through the session (given, or the default one).
    from hora.tensorflow import elastic
    r = hvd.rank()
    with tf.Graph().as_default():
        v = tf.compat.v1.Variable([float(r), 1.0 + r])
        w = tf.compat.v1.Variable(10 * r, dtype=tf.int64)
        bump = v.assign_add([1.0, 1.0])
        with tf.compat.v1.Session() as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            state = elastic.TensorFlowState(session=sess, batch=r)
            assert state.variables == [v, w]
            state.sync()
            assert sess.run(v).tolist() == [0.0, 1.0] and sess.run(w) == 0 and state.batch == 0
            sess.run(bump)
            state.commit()
            sess.run([bump, w.assign(5)])
            state.restore()
            assert sess.run(v).tolist() == [1.0, 2.0] and sess.run(w) == 0
        # Without session=, the default session when each is done; none: said.
        with tf.compat.v1.Session() as sess2:
            sess2.run(tf.compat.v1.global_variables_initializer())
            with sess2.as_default():
                state2 = elastic.TensorFlowState([v])
                sess2.run(v.assign([3.0 + r, 4.0]))
                state2.sync()
                assert sess2.run(v).tolist() == [3.0, 4.0]
        with pytest.raises(ValueError, match="pass session="):
            state2.restore()
    # Made inside a MonitoredTrainingSession, whose graph is finalized: no op
    # is added (assignments go through the variables' initializers).
    with tf.Graph().as_default():
        v = tf.compat.v1.Variable([float(r), 5.0])
        bump = v.assign_add([1.0, 1.0])
        with tf.compat.v1.train.MonitoredTrainingSession() as mon:
            state = elastic.TensorFlowState([v], session=mon)
            state.restore()  # (nothing read yet: left as it is)
            assert mon.run(v).tolist() == [float(r), 5.0]
            state.sync()
            assert mon.run(v).tolist() == [0.0, 5.0]
            mon.run(bump)
            state.commit()
            mon.run(bump)
            state.restore()
            assert mon.run(v).tolist() == [1.0, 6.0]


def test_horovods_tf1_names():
    # broadcast_global_variables (a TF1 graph's op; eagerly a ValueError, as
    # Horovod's), broadcast_object_fn, local_size_op, process_set_included_op,
    # the timeline.
    r, n = hvd.rank(), hvd.size()
    with tf.Graph().as_default():
        v = tf.compat.v1.Variable([float(r), 1.0 + r])
        op = htf.broadcast_global_variables(n - 1)
        with tf.compat.v1.Session() as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            sess.run(op)
            assert sess.run(v).tolist() == [float(n - 1), float(n)]
            bcast = htf.broadcast_object_fn(root_rank=n - 1, session=sess)
            assert bcast({"from": r}) == {"from": n - 1}
            assert bcast([r] * r) == [n - 1] * (n - 1)  # (sizes differ by rank)
        # broadcast_variables and broadcast_ in a graph: ops that do it when
        # run (Horovod's; they assigned nothing the session ran before).
        w = tf.compat.v1.Variable([float(r)] * 3)
        b = tf.compat.v1.Variable([10.0 + r])
        by_list = htf.broadcast_variables([w], root_rank=0)
        in_place = htf.broadcast_([b], root_rank=n - 1)
        assert isinstance(by_list, tf.Operation) and isinstance(in_place, tf.Operation)
        # Two such ops in one run go at once: each names its broadcasts apart.
        c = tf.compat.v1.Variable([20.0 + r])
        other = htf.broadcast_variables([c], root_rank=n - 1)
        config = tf.compat.v1.ConfigProto(inter_op_parallelism_threads=4)
        with tf.compat.v1.Session(config=config) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            for _ in range(3):
                sess.run([by_list, in_place, other])
                assert sess.run(w).tolist() == [0.0] * 3
                assert sess.run(b).tolist() == [10.0 + n - 1]
                assert sess.run(c).tolist() == [20.0 + n - 1]
    # join and barrier built after a collective of a fed placeholder run on
    # their own: out of the chain, they need no feed (and run no allreduce).
    with tf.Graph().as_default():
        x = tf.compat.v1.placeholder(tf.float32, [2])
        total = htf.allreduce(x, op=htf.Sum, name="fed")
        barrier, join = htf.barrier(), htf.join()
        with tf.compat.v1.Session() as sess:
            assert sess.run(total, {x: [1.0, r]}).tolist() == [n, n * (n - 1) / 2]
            sess.run(barrier)
            assert 0 <= sess.run(join) < n
    with pytest.raises(ValueError, match="tf.compat.v1 optimizer's gradients are reduced every"):
        htf.DistributedOptimizer(tf.compat.v1.train.GradientDescentOptimizer(0.1),
                                 backward_passes_per_step=2)
    assert htf.broadcast_object_fn(name="eager")(("x", r)) == ("x", 0)
    with pytest.raises(RuntimeError, match="broadcast_variables"):
        htf.broadcast_global_variables(0)
    assert int(htf.local_size_op()) == hvd.local_size()
    assert int(htf.process_set_included_op(0)) == 1
    ps = htf.add_process_set([0])
    try:
        assert int(htf.process_set_included_op(ps.process_set_id)) == int(r == 0)
        assert int(htf.process_set_included_op(ps)) == int(r == 0)  # (the object: its id)
    finally:
        htf.remove_process_set(ps)
    with pytest.raises(htf.InvalidArgumentError, match="no process set 99"):
        htf.process_set_included_op(99)
    with pytest.raises(htf.InvalidArgumentError, match="never added"):
        htf.process_set_included_op(htf.ProcessSet([0]))
    assert htf.start_timeline is basics.start_timeline and htf.is_homogeneous() in (True, False)


def test_size_and_rank_ops_read_the_world_as_the_graph_runs(monkeypatch):
    # Horovod's size_op and the others give the value when the graph runs,
    # not when it was built: a step traced before an elastic reset reads
    # the new world. Here the world "changes" under a traced function.
    from hora.tensorflow import mpi_ops
    r, n = hvd.rank(), hvd.size()
    ops = tf.function(lambda: tf.stack([htf.size_op(), htf.rank_op(), htf.local_size_op(),
                                        htf.local_rank_op(), htf.size_op(0)]))
    assert ops().numpy().tolist() == [n, r, hvd.local_size(), hvd.local_rank(), n]
    traced = ops.experimental_get_tracing_count()
    for fn, value in (("size", 7), ("rank", 5), ("local_size", 4), ("local_rank", 3)):
        monkeypatch.setattr(mpi_ops, fn, lambda value=value: value)
    assert ops().numpy().tolist() == [7, 5, 4, 3, 7]
    assert ops.experimental_get_tracing_count() == traced
    # Eagerly tensors too (Horovod's are ops), and in a TF1 graph.
    assert isinstance(htf.size_op(), tf.Tensor) and int(htf.rank_op()) == 5
    monkeypatch.undo()
    with tf.Graph().as_default():
        size = htf.size_op()
        with tf.compat.v1.Session() as sess:
            assert sess.run(size) == n
    with pytest.raises(htf.InvalidArgumentError, match="size_op: there is no process set 99"):
        htf.size_op(99)
    # Under XLA, which runs no py_function: the value at tracing.
    xla = tf.function(lambda: htf.size_op() + 0, jit_compile=True)
    assert int(xla()) == n


def test_a_traced_steps_scale_factors_follow_the_world(monkeypatch):
    # gradient_predivide_factor and the local gradients' division by the
    # set's size inside a step traced once: the size is the one as the step
    # runs (the engine's Average; a local gradient's divisor read then). The
    # "world" seen from Python is 3 ranks larger while the step is traced
    # and first run, then back.
    from hora.tensorflow import mpi_ops
    r, n = hvd.rank(), hvd.size()
    shared, mine = tf.Variable([1.0, 2.0]), tf.Variable([3.0])

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(shared * (r + 1.0)) + tf.reduce_sum(mine * (r + 1.0))
        tape = htf.DistributedGradientTape(tape, gradient_predivide_factor=4.0)
        tape.register_local_source(mine)
        return tape.gradient(loss, [shared, mine])

    real = mpi_ops.process_set_ranks
    monkeypatch.setattr(mpi_ops, "process_set_ranks", lambda ps: list(real(ps)) + [-1] * 3)
    mean = (n + 1) / 2.0
    g_shared, g_mine = step()
    np.testing.assert_allclose(g_shared.numpy(), [mean, mean], rtol=1e-6)
    np.testing.assert_allclose(g_mine.numpy(), [(r + 1.0) / (n + 3)], rtol=1e-6)
    monkeypatch.undo()
    g_shared, g_mine = step()
    np.testing.assert_allclose(g_shared.numpy(), [mean, mean], rtol=1e-6)
    np.testing.assert_allclose(g_mine.numpy(), [(r + 1.0) / n], rtol=1e-6)
    assert step.experimental_get_tracing_count() == 1


def test_allgather_and_reducescatter_gradients_read_the_world_as_they_run(monkeypatch):
    # Traced once, run after the world seen from Python "changed": the
    # allgather gradient's rows are this rank's as it runs, reducescatter's
    # Sum gradient is scaled by the size as it runs.
    from hora.tensorflow import mpi_ops
    r, n = hvd.rank(), hvd.size()
    x = tf.Variable(tf.fill([2], float(r + 1)))

    @tf.function
    def gather_grad():
        with tf.GradientTape() as tape:
            y = htf.allgather(x * 1.0, name="g.grad")
            loss = tf.reduce_sum(y * tf.range(2 * n, dtype=tf.float32))
        return tape.gradient(loss, x)

    # d/dx_r: the Average over ranks of the gradient (range(2n)), rows 2r, 2r+1.
    np.testing.assert_allclose(gather_grad().numpy(), [2.0 * r, 2.0 * r + 1])
    other = (r + 1) % n
    monkeypatch.setattr(mpi_ops, "_set_rank", lambda ps: other)
    np.testing.assert_allclose(gather_grad().numpy(), [2.0 * other, 2.0 * other + 1])
    monkeypatch.undo()
    assert gather_grad.experimental_get_tracing_count() == 1

    v = tf.Variable(tf.ones([2 * n]))

    @tf.function
    def scatter_grad():
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(htf.reducescatter(v * 1.0, op=htf.Sum, name="rs.grad"))
        return tape.gradient(loss, v)

    np.testing.assert_allclose(scatter_grad().numpy(), np.full(2 * n, float(n)))
    real = mpi_ops.process_set_ranks
    monkeypatch.setattr(mpi_ops, "process_set_ranks", lambda ps: list(real(ps)) + [-1] * 3)
    np.testing.assert_allclose(scatter_grad().numpy(), np.full(2 * n, float(n + 3)))
    assert scatter_grad.experimental_get_tracing_count() == 1


def test_an_even_alltoall_splits_for_the_world_as_it_runs(monkeypatch):
    # alltoall without splits, traced while the world seen from Python is 3
    # ranks larger, run in the real one: the even split is the real world's
    # (a step traced before an elastic reset runs in the new world).
    from hora.tensorflow import mpi_ops
    r, n = hvd.rank(), hvd.size()
    x = tf.Variable(tf.reshape(tf.range(2 * n, dtype=tf.float32) + 100.0 * r, [2 * n, 1]))

    @tf.function
    def exchange():
        with tf.GradientTape() as tape:
            y = htf.alltoall(x * 1.0, name="a2a.even.world")
            loss = tf.reduce_sum(y * tf.reshape(tf.range(2 * n, dtype=tf.float32), [-1, 1]))
        return y, tape.gradient(loss, x)

    real = mpi_ops.process_set_ranks
    monkeypatch.setattr(mpi_ops, "process_set_ranks", lambda ps: list(real(ps)) + [-1] * 3)
    exchange.get_concrete_function()
    monkeypatch.undo()
    y, g = exchange()
    assert exchange.experimental_get_tracing_count() == 1
    # Rows 2r and 2r+1 of every rank q, in rank order.
    want = [[100.0 * q + 2 * r + k] for q in range(n) for k in (0, 1)]
    np.testing.assert_array_equal(y.numpy(), want)
    # The gradient goes back: rank p weighted the rows it got from this rank
    # (its rows 2r, 2r+1) by 2r and 2r+1, and this rank's rows 2p, 2p+1 came there.
    np.testing.assert_array_equal(g.numpy(), [[2.0 * r + k] for _ in range(n) for k in (0, 1)])


def test_tape_outside_a_process_set_keeps_local_gradients():
    r = hvd.rank()
    ps = htf.add_process_set([0])
    try:
        w = tf.Variable([1.0, 1.0])
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(w * (r + 1.0))
        g = htf.DistributedGradientTape(tape, process_set=ps).gradient(loss, [w])[0]
        # Rank 0 alone in the set averages with itself; the others keep their own.
        np.testing.assert_allclose(g.numpy(), [r + 1.0, r + 1.0])
    finally:
        htf.remove_process_set(ps)


def test_barrier_and_join_run_each_time_a_tf_function_runs(monkeypatch):
    import hora.numpy as hnp
    calls = []
    real_barrier, real_join = hnp.barrier, hnp.join
    monkeypatch.setattr(hnp, "barrier", lambda ps: calls.append("barrier") or real_barrier(ps))
    monkeypatch.setattr(hnp, "join", lambda: calls.append("join") or real_join())
    f = tf.function(lambda: (htf.barrier(), htf.join()))
    for _ in range(3):
        _, last = f()
        assert 0 <= int(last) < hvd.size()
    assert calls == ["barrier", "join"] * 3, calls
    assert htf.barrier() is None  # eagerly, as Horovod's
