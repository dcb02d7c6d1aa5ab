"""Horovod's Keras collectives on values of any Keras backend.

``hvd.allreduce(value)`` and the others take what ``keras.ops`` converts
(a backend tensor, a NumPy array, a Python number) and return a tensor of
the backend, computed through :mod:`hora.numpy` (names, ops and matching
across ranks are its). Not differentiable (Horovod's Keras forms are
values, not layers): inside a model's step use the backend's own module
(:mod:`hora.tensorflow`, :mod:`hora.jax`, :mod:`hora.torch`).
"""

import keras

import hora.numpy as hnp
from hora.common import basics
from hora.common.process_sets import global_process_set


def _array(value):
    # (Through a tensor: a Python float is Keras's float type, float32.)
    return keras.ops.convert_to_numpy(keras.ops.convert_to_tensor(value))


def _tensor(array):
    return keras.ops.convert_to_tensor(array)


def allreduce(value, name=None, average=None, prescale_factor=1.0, postscale_factor=1.0,
              op=None, compression=None, process_set=global_process_set):
    """``value`` reduced across ranks (Average by default). ``compression`` is
    taken for Horovod's signature; values travel as they are."""
    del compression
    op = basics.check_op(op, average)
    return _tensor(hnp.allreduce(_array(value), op, name, prescale_factor, postscale_factor,
                                 process_set))


def allgather(value, name=None, process_set=global_process_set):
    """Every rank's ``value`` concatenated along axis 0, in rank order."""
    return _tensor(hnp.allgather(_array(value), name, process_set))


def broadcast(value, root_rank, name=None, process_set=global_process_set):
    """Root's ``value`` on every rank."""
    return _tensor(hnp.broadcast(_array(value), root_rank, name, process_set))


def reducescatter(value, name=None, op=basics.Average, process_set=global_process_set):
    """``value`` reduced across ranks (Average by default), this rank's slice of
    axis 0 (``dim0 // size`` rows, the first ``dim0 % size`` ranks one more)."""
    return _tensor(hnp.reducescatter(_array(value), op, name, process_set=process_set))


def barrier(process_set=global_process_set):
    """Returns when every rank (of ``process_set``) has called barrier()."""
    hnp.barrier(process_set)


def join():
    """This rank is out of data (see ``hora.torch.join``); returns the last rank to join."""
    return hnp.join()
