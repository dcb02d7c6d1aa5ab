"""hora.keras on the Keras backend in KERAS_BACKEND, checked against references
computed locally. Run under horarun (every rank runs every check):

    KERAS_BACKEND=jax horarun -np 2 python keras_check.py

test_keras.py imports it and runs the same checks on the TensorFlow backend.
"""

import copy
import os
import sys
import tempfile

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import keras  # noqa: E402

import hora.keras as hvd  # noqa: E402

B = 4  # rows per rank per step


def _model(seed=0):
    keras.utils.set_random_seed(seed)
    model = keras.Sequential([keras.Input((5,)), keras.layers.Dense(8, activation="tanh"),
                              keras.layers.Dense(1)])
    return model


def _weights(model):
    return [keras.ops.convert_to_numpy(v.value) for v in model.weights]


def check_fit_equals_one_worker():
    r, n = hvd.rank(), hvd.size()
    rng = np.random.default_rng(7)
    steps = 3
    x = rng.standard_normal((steps * B * n, 5)).astype(np.float32)
    y = rng.standard_normal((steps * B * n, 1)).astype(np.float32)
    mine = np.concatenate([np.arange(k * B * n + r * B, k * B * n + (r + 1) * B)
                           for k in range(steps)])
    dist = _model()
    dist.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.1, momentum=0.9)),
                 loss="mse")
    dist.fit(x[mine], y[mine], batch_size=B, epochs=1, shuffle=False, verbose=0)
    ref = _model()
    ref.compile(optimizer=keras.optimizers.SGD(0.1, momentum=0.9), loss="mse")
    ref.fit(x, y, batch_size=B * n, epochs=1, shuffle=False, verbose=0)
    for a, b in zip(_weights(dist), _weights(ref)):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-6)


def check_broadcast_callback():
    r = hvd.rank()
    model = _model(seed=100 + r)  # a different start on each rank
    model.compile(optimizer=keras.optimizers.SGD(0.0), loss="mse")
    root = _weights(_model(seed=100))
    model.fit(np.zeros((B, 5), np.float32), np.zeros((B, 1), np.float32), batch_size=B,
              epochs=1, verbose=0, callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0)])
    for a, b in zip(_weights(model), root):
        np.testing.assert_array_equal(a, b)
    every = hvd.allgather_object([w.tolist() for w in _weights(model)])
    assert all(e == every[0] for e in every)
    # After the first batch, the optimizer's variables (built by that step) are root's
    # too: a plain (not distributed) SGD with momentum on different data per rank.
    model = _model(seed=200 + r)
    model.compile(optimizer=keras.optimizers.SGD(0.1, momentum=0.9), loss="mse")
    rng = np.random.default_rng(r)
    model.fit(rng.standard_normal((B, 5)).astype(np.float32),
              rng.standard_normal((B, 1)).astype(np.float32), batch_size=B, epochs=1,
              verbose=0, callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0)])
    state = _weights(model) + [keras.ops.convert_to_numpy(v.value)
                               for v in model.optimizer.variables]
    assert len(state) > len(model.weights) + 1  # momentum slots, not only the counter
    every = hvd.allgather_object([np.asarray(v).tolist() for v in state])
    assert all(e == every[0] for e in every), "ranks differ after the first batch"


def check_metric_average():
    r, n = hvd.rank(), hvd.size()
    logs = {"loss": float(r), "acc": 10.0 * r + 1}
    hvd.callbacks.MetricAverageCallback().on_epoch_end(0, logs)
    assert abs(logs["loss"] - (n - 1) / 2.0) < 1e-12, logs
    assert abs(logs["acc"] - (10.0 * (n - 1) / 2.0 + 1)) < 1e-12, logs
    if n > 1:
        # Validation logged on rank 0 alone: every rank fails, naming each
        # rank's metrics (not a wait, nor averages of different metrics).
        logs = {"loss": 1.0, "val_loss": 2.0} if r == 0 else {"loss": 1.0}
        try:
            hvd.callbacks.MetricAverageCallback().on_epoch_end(1, logs)
            raise AssertionError("different metrics were averaged")
        except hvd.InvalidArgumentError as e:
            assert "rank 0: loss, val_loss; rank 1: loss" in str(e), e
        # No metrics anywhere: nothing to do, on every rank alike.
        hvd.callbacks.MetricAverageCallback().on_epoch_end(2, {})


def _lr(model):
    return float(keras.ops.convert_to_numpy(model.optimizer.learning_rate))


def check_learning_rate_callbacks():
    n = hvd.size()
    model = _model()
    model.compile(optimizer=keras.optimizers.SGD(1.0), loss="mse")
    warm = hvd.callbacks.LearningRateWarmupCallback(0.8, warmup_epochs=4, steps_per_epoch=10)
    warm.set_model(model)
    # Horovod's schedule: the epoch, fractional, at the batch's end.
    for epoch, batch in [(0, 0), (1, 5), (3, 8)]:
        warm.on_epoch_begin(epoch)
        warm.on_train_batch_begin(batch)
        e = epoch + (batch + 1) / 10.0
        want = 0.8 / n * (1 + e * (n - 1) / 4)
        assert abs(_lr(model) - want) < 1e-6, (epoch, batch, _lr(model), want)
    warm.on_train_batch_begin(9)  # the warmup's last batch: the whole rate
    assert abs(_lr(model) - 0.8) < 1e-6, _lr(model)
    # verbose: rank 0 says so at the warmup's end, on a line of its own (after
    # Keras's progress bar), with the optimizer's rate.
    warm.verbose = 1
    import contextlib
    import io
    said = io.StringIO()
    with contextlib.redirect_stdout(said):
        warm.on_epoch_end(3)
    want_said = "\nEpoch 4: finished gradual learning rate warmup to 0.8.\n"
    assert said.getvalue() == (want_said if hvd.rank() == 0 else ""), repr(said.getvalue())
    warm.verbose = 0
    warm.on_epoch_begin(4)
    warm.on_train_batch_begin(0)  # past the warmup: left as it was
    assert abs(_lr(model) - 0.8) < 1e-6, _lr(model)
    sched = hvd.callbacks.LearningRateScheduleCallback(0.8, lambda e: 0.5 ** e, start_epoch=2,
                                                       end_epoch=4)
    sched.set_model(model)
    sched.on_epoch_begin(2)
    assert abs(_lr(model) - 0.2) < 1e-7
    sched.on_epoch_begin(3)
    assert abs(_lr(model) - 0.1) < 1e-7
    sched.on_epoch_begin(4)  # after end_epoch: unchanged
    assert abs(_lr(model) - 0.1) < 1e-7
    # A number: exponential decay from start_epoch (Horovod's), and each
    # epoch's rate in the history as "lr".
    model.compile(optimizer=keras.optimizers.SGD(1.0), loss="mse")
    const = hvd.callbacks.LearningRateScheduleCallback(1.0, multiplier=0.5, start_epoch=1)
    x = np.ones((8, 5), np.float32)
    h = model.fit(x, x[:, :1], batch_size=4, epochs=4, verbose=0, callbacks=[const])
    np.testing.assert_allclose(h.history["lr"], [1.0, 1.0, 0.5, 0.25], rtol=1e-6)


def check_momentum_correction():
    # SGD with momentum 0.5, a constant gradient of 1 and a per-batch rate
    # (1 + the fractional epoch): with momentum_correction the velocity is
    # scaled by new / old rate at each change (Horovod's momentum * new / old
    # for that batch: the same update); without, it is not. The weight after
    # fit against that recurrence, computed here.
    steps, epochs, m = 4, 2, 0.5
    rates = [1.0 + e + b / steps for e in range(epochs) for b in range(steps)]
    x = np.ones((steps, 1), np.float32)
    for correction in (True, False):
        model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(
            1, use_bias=False, kernel_initializer="zeros")])
        model.compile(optimizer=keras.optimizers.SGD(1.0, momentum=m),
                      loss=lambda y, p: keras.ops.mean(p))
        cb = hvd.callbacks.LearningRateScheduleCallback(
            1.0, multiplier=lambda e: 1.0 + e, staircase=False, steps_per_epoch=steps,
            momentum_correction=correction)
        model.fit(x, x, batch_size=1, epochs=epochs, shuffle=False, verbose=0, callbacks=[cb])
        w = v = 0.0
        previous = 1.0
        for lr in rates:
            if correction:
                v *= lr / previous
            v = m * v - lr
            w += v
            previous = lr
        got = float(keras.ops.convert_to_numpy(model.weights[0])[0, 0])
        assert abs(got - w) < 1e-4 * abs(w), (correction, got, w)


def check_collectives_on_values():
    # Horovod's hvd.allreduce and the others on values: a tensor of the
    # backend back, against sums computed here.
    r, n = hvd.rank(), hvd.size()

    def arr(t):
        return keras.ops.convert_to_numpy(t).tolist()

    assert arr(hvd.allreduce(np.array([r + 1.0], "float32"), op=hvd.Sum,
                             name="k.sum")) == [n * (n + 1) / 2]
    assert arr(hvd.allreduce(keras.ops.convert_to_tensor([2.0 * r]))) == [float(n - 1)]
    assert arr(hvd.allgather(np.full((r + 1, 2), r, "int32"))) == [
        [q, q] for q in range(n) for _ in range(q + 1)]
    assert arr(hvd.broadcast(np.array([r], "int64"), n - 1, name="k.bcast")) == [n - 1]
    rows = np.arange(2 * n, dtype="float32") * (r + 1)
    total = np.arange(2 * n, dtype="float32") * (n * (n + 1) / 2)
    assert arr(hvd.reducescatter(rows, op=hvd.Sum)) == total[2 * r:2 * r + 2].tolist()
    hvd.barrier()


def check_load_model():
    # A model saved with DistributedOptimizer loads (Keras could not find the
    # optimizer's class before), as the optimizer it wraps; hvd.load_model
    # makes that distributed again: ranks fitting different data keep equal
    # weights.
    r = hvd.rank()
    model = _model()
    model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.Adam(0.01)), loss="mse")
    x = np.ones((B, 5), "float32")
    model.fit(x, np.ones((B, 1), "float32"), batch_size=B, verbose=0)
    path = os.path.join(tempfile.mkdtemp(), "model.keras")
    model.save(path)
    plain = keras.models.load_model(path)
    assert type(plain.optimizer).__name__ == "Adam"
    assert not getattr(plain.optimizer, "_hora_distributed", False)
    loaded = hvd.load_model(path)
    assert getattr(loaded.optimizer, "_hora_distributed", False)
    loaded.fit(x * (r + 1), np.full((B, 1), r, "float32"), batch_size=B, verbose=0)
    mine = [w.tolist() for w in _weights(loaded)]
    assert all(w == mine for w in hvd.allgather_object(mine))
    assert mine != [w.tolist() for w in _weights(model)]  # (it trained)
    # A registered optimizer of the user's own is found by its registered
    # name ("package>Name"), as the class it wraps.
    model = _model()
    model.compile(optimizer=hvd.DistributedOptimizer(RegisteredSGD(0.01)), loss="mse")
    model.fit(x, np.ones((B, 1), "float32"), batch_size=B, verbose=0)
    path = os.path.join(tempfile.mkdtemp(), "registered.keras")
    model.save(path)
    assert type(keras.models.load_model(path).optimizer) is RegisteredSGD
    assert getattr(hvd.load_model(path).optimizer, "_hora_distributed", False)
    # A copy would reduce nothing (Keras copies through the config): refused.
    try:
        copy.deepcopy(model.optimizer)
    except TypeError as e:
        assert "hora.keras.load_model" in str(e), e
    else:
        raise AssertionError("a DistributedOptimizer was copied")


@keras.saving.register_keras_serializable(package="hora_check")
class RegisteredSGD(keras.optimizers.SGD):
    pass


def check_elastic_state_and_callbacks():
    # KerasState: sync gives every rank rank 0's weights (each starts apart)
    # and optimizer; restore rolls back weights and optimizer to the commit.
    r = hvd.rank()
    model = _model(seed=300 + r)
    model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.1, momentum=0.9)),
                  loss="mse")
    state = hvd.elastic.KerasState(model, epoch=0, batch=0, tag="rank %d" % r)
    assert model.optimizer.built, "the state builds the optimizer, to roll its slots back"
    state.sync()
    for a, b in zip(_weights(model), _weights(_model(seed=300))):
        np.testing.assert_allclose(a, b, rtol=0, atol=0)
    assert state.tag == "rank 0", state.tag
    rng = np.random.default_rng(11 + r)
    x = rng.standard_normal((3 * B, 5)).astype(np.float32)
    y = rng.standard_normal((3 * B, 1)).astype(np.float32)
    model.fit(x[:B], y[:B], batch_size=B, epochs=1, shuffle=False, verbose=0)
    state.commit()
    committed = _weights(model)
    committed_opt = [keras.ops.convert_to_numpy(v.value) for v in model.optimizer.variables]
    model.fit(x, y, batch_size=B, epochs=1, shuffle=False, verbose=0)
    assert not np.allclose(_weights(model)[0], committed[0])
    state.restore()
    for a, b in zip(_weights(model), committed):
        np.testing.assert_allclose(a, b, rtol=0, atol=0)
    for v, b in zip(model.optimizer.variables, committed_opt):
        np.testing.assert_allclose(keras.ops.convert_to_numpy(v.value), b, rtol=0, atol=0)
    # The callbacks: epochs and batches counted, commits every 2 batches
    # (the count runs on across epochs) and at each epoch's end.
    commits = []
    commit = state.commit
    state.commit = lambda: (commits.append((state.epoch, state.batch)), commit())
    model.fit(x, y, batch_size=B, epochs=2, shuffle=False, verbose=0, callbacks=[
        hvd.elastic.UpdateEpochStateCallback(state),
        hvd.elastic.UpdateBatchStateCallback(state),
        hvd.elastic.CommitStateCallback(state, batches_per_commit=2)])
    assert commits == [(0, 1), (1, 0), (1, 0), (1, 2), (2, 0)], commits
    assert (state.epoch, state.batch) == (2, 0)
    try:
        hvd.elastic.CommitStateCallback(state, batches_per_commit=0)
    except ValueError as e:
        assert "batches_per_commit=0" in str(e), e
    else:
        raise AssertionError("batches_per_commit=0 was taken")


def check_mixed_precision_steps_agree():
    # mixed_float16: compile() wraps the optimizer in a LossScaleOptimizer,
    # which skips a step whose scaled gradients overflow. Rank 1's data
    # overflow at the first loss scales, rank 0's do not: every rank must
    # skip those steps alike (a rank that skipped alone left the others
    # waiting in the gradients' allreduce), and end with the same weights.
    r = hvd.rank()
    keras.mixed_precision.set_dtype_policy("mixed_float16")
    try:
        keras.utils.set_random_seed(5)
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8),
                                  keras.layers.Dense(1, dtype="float32")])
    finally:
        keras.mixed_precision.set_dtype_policy("float32")
    model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(1e-4)), loss="mse")
    assert isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer), model.optimizer
    # (Local variables registered through model.optimizer reach the optimizer
    # it wraps; this one takes no part in the model.)
    spare = keras.Variable(np.zeros(2, np.float32))
    model.optimizer.register_local_var(spare)
    assert id(spare) in model.optimizer.inner_optimizer._hora_local.ids()
    x = np.random.default_rng(r).standard_normal((16, 4)).astype(np.float32)
    x *= 300.0 if r == 1 else 0.01
    model.fit(x, x.sum(axis=1, keepdims=True), batch_size=4, epochs=2, shuffle=False, verbose=0)
    mine = np.concatenate([w.reshape(-1) for w in _weights(model)]).astype(np.float64)
    every = np.asarray(hvd.allgather(mine[None, :]))
    assert all(np.array_equal(every[q], every[0]) for q in range(hvd.size())), every
    assert np.all(np.isfinite(mine)), mine


def check_bfloat16_weights():
    # A model of bfloat16 weights (the "bfloat16" dtype policy): its gradients
    # reduce as bfloat16. Every rank ends with the same weights, within
    # bfloat16's rounding of one worker's training on all the data.
    r, n = hvd.rank(), hvd.size()
    rng = np.random.default_rng(11)
    x = rng.standard_normal((2 * B * n, 5)).astype(np.float32)
    y = rng.standard_normal((2 * B * n, 1)).astype(np.float32)
    mine = np.concatenate([np.arange(k * B * n + r * B, k * B * n + (r + 1) * B)
                           for k in range(2)])
    keras.mixed_precision.set_dtype_policy("bfloat16")
    try:
        dist, ref = _model(), _model()
    finally:
        keras.mixed_precision.set_dtype_policy("float32")
    dist.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.1)), loss="mse")
    dist.fit(x[mine], y[mine], batch_size=B, epochs=1, shuffle=False, verbose=0)
    ref.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    ref.fit(x, y, batch_size=B * n, epochs=1, shuffle=False, verbose=0)
    got = _weights(dist)
    assert all(str(w.dtype) == "bfloat16" for w in got), [w.dtype for w in got]
    flat = np.concatenate([w.astype(np.float32).reshape(-1) for w in got])
    every = np.asarray(hvd.allgather(flat[None, :]))
    assert all(np.array_equal(every[q], every[0]) for q in range(n)), every
    for a, b in zip(got, _weights(ref)):
        np.testing.assert_allclose(a.astype(np.float32), b.astype(np.float32), atol=3e-2)


def _bn_model(layer, seed=3):
    keras.utils.set_random_seed(seed)
    return keras.Sequential([keras.Input((5,)), keras.layers.Dense(6), layer(momentum=0.5),
                             keras.layers.Dense(1)])


def check_sync_batch_norm():
    # SyncBatchNormalization: each rank's rows normalized by every rank's
    # rows' statistics, and training (gradients through the statistics,
    # moving statistics) equal to one worker's BatchNormalization on all
    # the rows. Ranks hold different row counts in the forward check.
    r, n = hvd.rank(), hvd.size()
    rng = np.random.default_rng(21)
    rows = [3 + q for q in range(n)]
    start = sum(rows[:r])
    for offset in (1.0, 3000.0):  # (a mean large against the spread: no cancellation)
        every = (rng.standard_normal((sum(rows), 4)) * 3 + offset).astype(np.float32)
        kept = rng.random(sum(rows)) < 0.7
        kept[np.cumsum([0] + rows[:-1])] = True  # (a row counted on every rank)
        for mask in (None, kept):
            sync = hvd.SyncBatchNormalization(axis=-1)
            mine = every[start:start + rows[r]]
            got = sync(mine, training=True,
                       mask=None if mask is None else mask[start:start + rows[r]])
            counted = every.astype(np.float64)[mask if mask is not None else slice(None)]
            want = (mine - counted.mean(0)) / np.sqrt(counted.var(0) + sync.epsilon)
            np.testing.assert_allclose(keras.ops.convert_to_numpy(got), want, rtol=1e-4,
                                       atol=2e-4, err_msg="offset %s, mask %s"
                                       % (offset, mask is not None))

    steps = 3
    x = rng.standard_normal((steps * B * n, 5)).astype(np.float32)
    y = rng.standard_normal((steps * B * n, 1)).astype(np.float32)
    mine = np.concatenate([np.arange(k * B * n + r * B, k * B * n + (r + 1) * B)
                           for k in range(steps)])
    dist = _bn_model(hvd.SyncBatchNormalization)
    dist.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.1)), loss="mse")
    dist.fit(x[mine], y[mine], batch_size=B, epochs=1, shuffle=False, verbose=0)
    ref = _bn_model(keras.layers.BatchNormalization)
    ref.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    ref.fit(x, y, batch_size=B * n, epochs=1, shuffle=False, verbose=0)
    for a, b in zip(_weights(dist), _weights(ref)):  # (moving statistics included)
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    if r == 0:  # inference uses the moving statistics: no collective to wait for
        dist.predict(x[:2], verbose=0)
    config = dist.layers[1].get_config()
    assert type(dist.layers[1]).from_config(config).get_config() == config
    try:
        hvd.SyncBatchNormalization(fused=True)
        raise AssertionError("fused=True was taken")
    except ValueError as e:
        assert "fused" in str(e), e
    hvd.barrier()


def check_partial_optimizer_and_groups():
    # PartialDistributedOptimizer: one step on each rank's rows. The shared
    # layers take the average of the ranks' gradients, as one worker's step
    # on every row does; the local layer takes this rank's own gradient
    # divided by the number of ranks, as a step at lr / n on its rows does.
    # groups= lists: the same step as one worker's, whatever the grouping.
    r, n = hvd.rank(), hvd.size()
    rng = np.random.default_rng(31)
    x = rng.standard_normal((B * n, 5)).astype(np.float32)
    y = rng.standard_normal((B * n, 1)).astype(np.float32)
    mine = slice(r * B, (r + 1) * B)
    lr = 0.2
    dist = _model(seed=4)
    local = dist.layers[-1]
    dist.compile(optimizer=hvd.PartialDistributedOptimizer(keras.optimizers.SGD(lr),
                                                           local_layers=[local]), loss="mse")
    dist.fit(x[mine], y[mine], batch_size=B, epochs=1, shuffle=False, verbose=0)
    every = _model(seed=4)
    every.compile(optimizer=keras.optimizers.SGD(lr), loss="mse")
    every.fit(x, y, batch_size=B * n, epochs=1, shuffle=False, verbose=0)
    alone = _model(seed=4)
    alone.compile(optimizer=keras.optimizers.SGD(lr / n), loss="mse")
    alone.fit(x[mine], y[mine], batch_size=B, epochs=1, shuffle=False, verbose=0)
    for layer, want_every, want_alone in zip(dist.layers, every.layers, alone.layers):
        want = want_alone if layer is local else want_every
        for a, b in zip(_weights(layer), _weights(want)):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=layer.name)
    try:
        hvd.PartialDistributedOptimizer(keras.optimizers.SGD(lr), local_layers=["dense"])
        raise AssertionError("a string was taken as a local layer")
    except ValueError as e:
        assert "local_layers must be Keras layers, got str" in str(e), e

    grouped = _model(seed=4)
    kernel0, bias1 = grouped.layers[0].kernel, grouped.layers[1].bias
    # (The list's order differs by rank: the groups do not.)
    group = [bias1, kernel0] if r % 2 else [kernel0, bias1]
    grouped.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(lr),
                                                       groups=[group]), loss="mse")
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import hora.tensorflow.mpi_ops as module
    elif backend == "jax":
        import hora.jax as module
    else:
        import hora.torch as module
    sizes, own = [], module.grouped_allreduce

    def counting(tensors, *args, **kwargs):
        sizes.append(len(tensors))
        return own(tensors, *args, **kwargs)

    module.grouped_allreduce = counting
    try:
        grouped.fit(x[mine], y[mine], batch_size=B, epochs=1, shuffle=False, verbose=0)
    finally:
        module.grouped_allreduce = own
    # kernel0 and bias1 one group, kernel1 and bias0 each alone (traced once or run once).
    assert sizes and sizes == [2, 1, 1] * (len(sizes) // 3), sizes
    for a, b in zip(_weights(grouped), _weights(every)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def check_fp16_compression():
    # One SGD step (lr 1) on a kernel at zero, loss mean(x * w): the gradient
    # is 1.0001 (r + 1) on rank r. fp16 on the wire rounds it to r + 1 before
    # the average ((n + 1) / 2, exact); without compression it stays.
    r, n = hvd.rank(), hvd.size()
    x = np.full((B, 1), 1.0001 * (r + 1), np.float32)
    got = {}
    for compression in (hvd.Compression.none, hvd.Compression.fp16):
        model = keras.Sequential([keras.Input((1,)),
                                  keras.layers.Dense(1, use_bias=False,
                                                     kernel_initializer="zeros")])
        opt = hvd.DistributedOptimizer(keras.optimizers.SGD(1.0), compression=compression)
        model.compile(optimizer=opt, loss=lambda y, p: keras.ops.mean(p))
        model.fit(x, np.zeros((B, 1), np.float32), batch_size=B, epochs=1, verbose=0)
        got[compression] = float(_weights(model)[0][0, 0])
    mean = (n + 1) / 2.0
    assert got[hvd.Compression.fp16] == -mean, got
    np.testing.assert_allclose(got[hvd.Compression.none], -1.0001 * mean, rtol=1e-6)
    try:
        hvd.DistributedOptimizer(keras.optimizers.SGD(1.0), compression="int8")
        raise AssertionError("an unknown compression was taken")
    except ValueError as e:
        assert "compression must be hvd.Compression.none or hvd.Compression.fp16" in str(e), e


def check_best_model_checkpoint():
    # Horovod's BestModelCheckpoint: the path given later (.filepath), or as
    # filepath=; the model of the best epoch kept (mode "max" here: not the
    # last epoch's), the metrics it reads averaged over the ranks first.
    r = hvd.rank()
    rng = np.random.default_rng(11 + r)
    x = rng.standard_normal((4 * B, 5)).astype(np.float32)
    y = rng.standard_normal((4 * B, 1)).astype(np.float32)
    with tempfile.TemporaryDirectory() as d:
        for weights_only in (False, True):
            path = os.path.join(d, "best.weights.h5" if weights_only else "best.keras")
            if weights_only:
                best = hvd.callbacks.BestModelCheckpoint(monitor="val_loss", mode="max",
                                                         save_weights_only=True, filepath=path)
            else:
                best = hvd.callbacks.BestModelCheckpoint(monitor="val_loss", mode="max")
                unset = _model()
                unset.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse")
                try:
                    unset.fit(x, y, epochs=1, verbose=0, callbacks=[best])
                    raise AssertionError("fit without a checkpoint path went on")
                except ValueError as e:
                    assert "BestModelCheckpoint: no file path; set .filepath" in str(e), e
                best.filepath = path
            assert best.save_best_only
            seen = []
            record = keras.callbacks.LambdaCallback(
                on_epoch_end=lambda epoch, logs: seen.append((logs["val_loss"],
                                                              _weights(model))))
            model = _model(seed=5)
            model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.05)),
                          loss="mse")
            model.fit(x, y, batch_size=B, epochs=4, verbose=0, validation_data=(x, y),
                      callbacks=[hvd.callbacks.MetricAverageCallback(), best, record])
            losses = [v for v, _ in seen]
            assert hvd.allgather_object(losses) == [losses] * hvd.size()  # (averaged)
            want = seen[int(np.argmax(losses))][1]
            if weights_only:
                saved = _model(seed=6)
                saved.load_weights(path)
            else:
                saved = keras.models.load_model(path)
            for a, b in zip(_weights(saved), want):
                np.testing.assert_array_equal(a, b)


CHECKS = [check_fit_equals_one_worker, check_fp16_compression, check_broadcast_callback, check_metric_average,
          check_learning_rate_callbacks, check_momentum_correction, check_collectives_on_values,
          check_load_model,
          check_elastic_state_and_callbacks, check_mixed_precision_steps_agree,
          check_bfloat16_weights, check_sync_batch_norm, check_partial_optimizer_and_groups,
          check_best_model_checkpoint]

if __name__ == "__main__":
    hvd.init()
    want = os.environ.get("KERAS_BACKEND")
    assert want is None or keras.backend.backend() == want, (keras.backend.backend(), want)
    for check in CHECKS:
        check()
        print("rank %d: %s on %s OK" % (hvd.rank(), check.__name__, keras.backend.backend()))
    hvd.shutdown()
    sys.exit(0)
