"""Horovod's ``horovod.torch.elastic`` module path under Hora.

Elastic training (``hvd.elastic.run``, ``TorchState``, ``ElasticSampler``)
is not built yet: each raises ``UnimplementedError`` (a
``NotImplementedError``) saying so, at the call, so a script fails at once
and clearly rather than running without elasticity. A lost rank fails the
job cleanly today (docs/faults.md); restart it from a checkpoint.
The exception types elastic code catches are here already.
"""

from hora.common.exceptions import (  # noqa: F401
    HorovodInternalError,
    HostsUpdatedInterrupt,
    UnimplementedError,
)

_WHY = ("elastic training (%s) is not supported by this version of hora yet; a lost rank "
        "fails the whole job, which can restart from a checkpoint")


def run(func):
    """Horovod's ``@hvd.elastic.run``: not supported yet (raises)."""
    raise UnimplementedError(_WHY % "hvd.elastic.run")


class TorchState:
    """Horovod's ``hvd.elastic.TorchState``: not supported yet (raises)."""

    def __init__(self, *args, **kwargs):
        raise UnimplementedError(_WHY % "hvd.elastic.TorchState")


class ElasticSampler:
    """Horovod's ``hvd.elastic.ElasticSampler``: not supported yet (raises)."""

    def __init__(self, *args, **kwargs):
        raise UnimplementedError(_WHY % "hvd.elastic.ElasticSampler")
