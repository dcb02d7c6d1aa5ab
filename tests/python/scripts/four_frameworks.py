"""One job, four frameworks: rank r calls the same named collectives with a
torch tensor (r % 4 == 0), a NumPy array (1), a TensorFlow tensor (2) or a JAX
array (3), and every rank gets the same result, checked against a reference.

    horarun -np 4 python four_frameworks.py
"""

import os
import sys

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import hora.numpy as hnp  # noqa: E402

FRAMEWORKS = ["torch", "numpy", "tensorflow", "jax"]


def mine(r):
    return np.array([r + 1.0, 2.0 * r, -r], dtype=np.float32)


def run(framework, r, n):
    x = mine(r)
    rows = np.arange(r + 1, dtype=np.float32).reshape(-1, 1) + 10 * r  # r + 1 rows
    if framework == "torch":
        import torch
        import hora.torch as hvd
        s = hvd.allreduce(torch.from_numpy(x), op=hvd.Sum, name="four.sum").numpy()
        g = hvd.allgather(torch.from_numpy(rows), name="four.gather").numpy()
        b = hvd.broadcast(torch.from_numpy(x), 2, name="four.bcast").numpy()
    elif framework == "numpy":
        s = hnp.allreduce(x, op=hnp.Sum, name="four.sum")
        g = hnp.allgather(rows, name="four.gather")
        b = hnp.broadcast(x, 2, name="four.bcast")
    elif framework == "tensorflow":
        import tensorflow as tf
        import hora.tensorflow as hvd
        s = hvd.allreduce(tf.constant(x), op=hvd.Sum, name="four.sum").numpy()
        g = hvd.allgather(tf.constant(rows), name="four.gather").numpy()
        b = hvd.broadcast(tf.constant(x), 2, name="four.bcast").numpy()
    else:
        import jax.numpy as jnp
        import hora.jax as hvd
        s = np.asarray(hvd.allreduce(jnp.asarray(x), op=hvd.Sum, name="four.sum"))
        g = np.asarray(hvd.allgather(jnp.asarray(rows), name="four.gather"))
        b = np.asarray(hvd.broadcast(jnp.asarray(x), 2, name="four.bcast"))
    return s, g, b


def main():
    hnp.init()
    r, n = hnp.rank(), hnp.size()
    framework = FRAMEWORKS[r % 4]
    s, g, b = run(framework, r, n)
    np.testing.assert_array_equal(s, sum(mine(q) for q in range(n)))
    np.testing.assert_array_equal(g, np.concatenate(
        [np.arange(q + 1, dtype=np.float32).reshape(-1, 1) + 10 * q for q in range(n)]))
    np.testing.assert_array_equal(b, mine(2))
    every = hnp.allgather_object(framework)
    print("rank %d (%s): the same results as %s" % (r, framework, ", ".join(every)))
    hnp.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
