"""``hora.tensorflow.keras.callbacks``: :mod:`hora.keras.callbacks` under
Horovod's ``horovod.tensorflow.keras.callbacks`` name."""

from hora.keras.callbacks import (  # noqa: F401
    BestModelCheckpoint,
    BroadcastGlobalVariablesCallback,
    LearningRateScheduleCallback,
    LearningRateWarmupCallback,
    MetricAverageCallback,
)
