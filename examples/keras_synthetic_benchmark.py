"""Synthetic training throughput of a Keras 3 model trained by a TensorFlow
step with Hora's DistributedGradientTape, or with TensorFlow's
tf.distribute.MultiWorkerMirroredStrategy for comparison (like Horovod's
tensorflow2_synthetic_benchmark.py):

    horarun -np 2 python examples/keras_synthetic_benchmark.py --model resnet18ish
    # the same job with MultiWorkerMirroredStrategy (TensorFlow backend only):
    horarun -np 2 python examples/keras_synthetic_benchmark.py --model resnet18ish --mwms

Trains on random images (no data loading) with the same ``tf.function`` step
both ways and prints images/s per worker and in total, with a 95% confidence
interval (1.96 standard deviations of the per-iteration rates). (Keras 3's
``fit`` does not take MultiWorkerMirroredStrategy's per-replica batches in
TensorFlow 2.21, hence the step of our own.)
--mwms reads its rank and size from HORA_RANK/HORA_SIZE (horarun) and builds
TF_CONFIG for workers on 127.0.0.1 at --mwms-port + rank.
"""

import argparse
import json
import os
import timeit

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="resnet18ish", choices=["resnet18ish", "mlp"])
    p.add_argument("--batch-size", type=int, default=32, help="per worker")
    p.add_argument("--image-size", type=int, default=32)
    p.add_argument("--num-warmup-batches", type=int, default=3)
    p.add_argument("--num-batches-per-iter", type=int, default=5)
    p.add_argument("--num-iters", type=int, default=5)
    p.add_argument("--mwms", action="store_true", help="MultiWorkerMirroredStrategy, not Hora")
    p.add_argument("--mwms-port", type=int, default=24561)
    return p.parse_args()


def build_model(keras, name, image_size):
    inputs = keras.Input((image_size, image_size, 3))
    x = inputs
    if name == "mlp":
        x = keras.layers.Flatten()(x)
        for _ in range(3):
            x = keras.layers.Dense(1024, activation="relu")(x)
    else:  # a ResNet-18-shaped network (4 stages of 2 basic blocks)
        x = keras.layers.Conv2D(64, 3, padding="same", use_bias=False)(x)
        x = keras.layers.ReLU()(keras.layers.BatchNormalization()(x))
        for i, width in enumerate([64, 128, 256, 512]):
            for j in range(2):
                stride = 2 if i > 0 and j == 0 else 1
                y = keras.layers.Conv2D(width, 3, stride, padding="same", use_bias=False)(x)
                y = keras.layers.ReLU()(keras.layers.BatchNormalization()(y))
                y = keras.layers.Conv2D(width, 3, padding="same", use_bias=False)(y)
                y = keras.layers.BatchNormalization()(y)
                if stride != 1 or x.shape[-1] != width:
                    x = keras.layers.Conv2D(width, 1, stride, use_bias=False)(x)
                x = keras.layers.ReLU()(keras.layers.Add()([x, y]))
        x = keras.layers.GlobalAveragePooling2D()(x)
    outputs = keras.layers.Dense(1000)(x)
    return keras.Model(inputs, outputs)


def main():
    args = parse_args()
    os.environ["KERAS_BACKEND"] = "tensorflow"  # the training step is TensorFlow's
    if args.mwms:
        rank, size = int(os.environ.get("HORA_RANK", 0)), int(os.environ.get("HORA_SIZE", 1))
        os.environ["TF_CONFIG"] = json.dumps({
            "cluster": {"worker": ["127.0.0.1:%d" % (args.mwms_port + r) for r in range(size)]},
            "task": {"type": "worker", "index": rank}})
        import tensorflow as tf
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        backend = "MultiWorkerMirroredStrategy"
    else:
        import tensorflow as tf
        import hora.tensorflow as hvd
        hvd.init()
        rank, size = hvd.rank(), hvd.size()
        strategy = tf.distribute.get_strategy()  # the default: no distribution
        backend = "Hora (DistributedGradientTape)"
    import keras
    with strategy.scope():
        model = build_model(keras, args.model, args.image_size)
        opt = keras.optimizers.SGD(0.01)
        opt.build(model.trainable_variables)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True,
                                                         reduction="sum_over_batch_size")
    rng = np.random.default_rng(rank)
    data = tf.constant(rng.standard_normal((args.batch_size, args.image_size, args.image_size, 3),
                                           dtype=np.float32))
    target = tf.constant(rng.integers(0, 1000, args.batch_size))

    def replica_step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
            if args.mwms:  # the strategy sums the replicas' gradients
                loss = loss / size
        if not args.mwms:
            tape = hvd.DistributedGradientTape(tape)
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    @tf.function
    def train_step(x, y):
        return strategy.run(replica_step, args=(x, y))

    def benchmark_step():
        for _ in range(args.num_batches_per_iter):
            train_step(data, target)

    def log(s):
        if rank == 0:
            print(s, flush=True)

    log("Model: %s, batch size %d per worker, image size %d, %s, workers %d"
        % (args.model, args.batch_size, args.image_size, backend, size))
    for _ in range(args.num_warmup_batches):
        train_step(data, target)
    if not args.mwms:
        hvd.broadcast_variables(model.variables, root_rank=0)
    rates = []
    for i in range(args.num_iters):
        t = timeit.timeit(benchmark_step, number=1)
        rates.append(args.batch_size * args.num_batches_per_iter / t)
        log("Iter #%d: %.1f img/sec per worker" % (i, rates[-1]))
    mean, conf = np.mean(rates), 1.96 * np.std(rates)
    log("Img/sec per worker: %.1f +-%.1f" % (mean, conf))
    log("Total img/sec on %d worker(s): %.1f +-%.1f" % (size, size * mean, size * conf))


if __name__ == "__main__":
    main()
