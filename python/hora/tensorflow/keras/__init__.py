"""``import hora.tensorflow.keras as hvd``: Horovod's ``horovod.tensorflow.keras``
name for :mod:`hora.keras` (Keras 3, on the TensorFlow backend or any other).
"""

from hora.keras import *  # noqa: F401,F403
from hora.keras import callbacks, elastic  # noqa: F401
