"""Data-parallel Keras 3 training on scikit-learn's digits with Hora, on any
Keras backend (KERAS_BACKEND=tensorflow, jax or torch):

    KERAS_BACKEND=jax horarun -np 2 python examples/keras_digits.py --check

The data ships with scikit-learn (no download). The train/test split is fixed
(seeded); each rank trains on its own shard of the training set (rows
rank::size, cut to the same length on every rank, so that every rank takes
the same number of steps) and evaluates its own shard of the test set; the
accuracy is combined with allreduce. The optimizer is wrapped by
``hora.keras.DistributedOptimizer``; the callbacks broadcast rank 0's initial
variables, average the metrics and warm the learning rate up to
``lr * size``. With --check the script exits with status 1 when the final
test accuracy is below 0.95.
"""

import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import keras  # noqa: E402
import numpy as np  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402

import hora.keras as hvd  # noqa: E402
import hora.numpy as hnp  # noqa: E402


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--epochs", type=int, default=15)
    p.add_argument("--batch-size", type=int, default=32, help="per rank")
    p.add_argument("--lr", type=float, default=0.05, help="for one rank; scaled by size()")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--check", action="store_true", help="exit 1 if final accuracy < 0.95")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    digits = load_digits()
    x = digits.data.astype(np.float32) / 16.0
    x_tr, x_te, y_tr, y_te = train_test_split(x, digits.target, test_size=0.25,
                                              random_state=args.seed, stratify=digits.target)
    n = len(y_tr) // size  # the same number of rows (and steps) on every rank
    x_tr, y_tr = x_tr[rank::size][:n], y_tr[rank::size][:n]
    x_te, y_te = x_te[rank::size], y_te[rank::size]

    keras.utils.set_random_seed(args.seed + rank)  # different: the callback aligns them
    model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(128, activation="relu"),
                              keras.layers.Dense(10)])
    opt = hvd.DistributedOptimizer(keras.optimizers.SGD(args.lr * size, momentum=0.9))
    model.compile(optimizer=opt, metrics=["accuracy"],
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    callbacks = [
        hvd.callbacks.BroadcastGlobalVariablesCallback(0),
        hvd.callbacks.MetricAverageCallback(),
        hvd.callbacks.LearningRateWarmupCallback(args.lr * size, warmup_epochs=3),
        hvd.callbacks.LearningRateScheduleCallback(args.lr * size, 0.3,
                                                   start_epoch=args.epochs // 2),
    ]
    model.fit(x_tr, y_tr, batch_size=args.batch_size, epochs=args.epochs, callbacks=callbacks,
              shuffle=True, verbose=2 if rank == 0 else 0)
    pred = np.argmax(keras.ops.convert_to_numpy(model.predict(x_te, verbose=0)), axis=1)
    counts = hnp.allreduce(np.array([(pred == y_te).sum(), len(y_te)], dtype=np.float64),
                           op=hnp.Sum, name="digits.accuracy")
    acc = counts[0] / counts[1]
    ok = acc >= 0.95
    if rank == 0:
        print("final test accuracy %.4f on %s%s" % (acc, keras.backend.backend(),
                                                    "" if ok or not args.check else " < 0.95"))
    hvd.shutdown()
    return 1 if args.check and not ok else 0


if __name__ == "__main__":
    sys.exit(main())
