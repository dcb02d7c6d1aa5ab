"""hora.keras on Keras's TensorFlow backend (the checks of scripts/keras_check.py;
ctest python_keras_backends runs them on the JAX and torch backends)."""

import os
import sys

import pytest

from helpers import framework  # noqa: E402

framework("keras", minversion="3")
if os.environ.get("KERAS_BACKEND", "tensorflow") != "tensorflow":
    pytest.skip("KERAS_BACKEND is not tensorflow (skipped on every rank alike)",
                allow_module_level=True)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "scripts"))
import keras_check  # noqa: E402


@pytest.mark.parametrize("check", keras_check.CHECKS, ids=lambda c: c.__name__)
def test_keras_on_tensorflow(check):
    check()


def test_horovods_tensorflow_keras_name():
    # import horovod.tensorflow.keras as hvd, Horovod's most common Keras line.
    import hora.keras
    import hora.tensorflow.keras as hvd
    from hora.tensorflow.keras import callbacks

    assert hvd.DistributedOptimizer is hora.keras.DistributedOptimizer
    assert hvd.load_model is hora.keras.load_model and hvd.allreduce is hora.keras.allreduce
    assert callbacks.MetricAverageCallback is hora.keras.callbacks.MetricAverageCallback
    assert callbacks.BestModelCheckpoint is hora.keras.callbacks.BestModelCheckpoint
    assert hvd.callbacks.BroadcastGlobalVariablesCallback is \
        hora.keras.callbacks.BroadcastGlobalVariablesCallback
    assert hvd.size() == hora.keras.size()
