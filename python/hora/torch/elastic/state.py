"""``TorchState``: a model, an optimizer, samplers and plain values as one
elastic state (Horovod's ``TorchState``).

Each value is given to the first handler of the registry whose type it is:
``torch.nn.Module`` (its ``state_dict``), ``torch.optim.Optimizer`` (a
``DistributedOptimizer`` too), ``ElasticSampler``; anything else (``None``
included) is a plain ``ObjectState`` attribute. A handler saves a deep copy
of its value's ``state_dict()``, restores it with ``load_state_dict``, and
syncs from rank 0 with ``broadcast_parameters``,
``broadcast_optimizer_state`` or ``broadcast_object``. Assigning a handled
attribute (``state.model = other``) hands the new value to its handler and
saves it at once.
"""

import copy

import torch

from hora.common import basics
from hora.common.elastic import ObjectState
from hora.torch.elastic.sampler import ElasticSampler
from hora.torch.functions import (
    broadcast_object,
    broadcast_optimizer_state,
    broadcast_parameters,
)


class StateHandler:
    """Keeps one value's committed copy."""

    def __init__(self, value):
        self.value = value

    def save(self):
        raise NotImplementedError

    def restore(self):
        raise NotImplementedError

    def sync(self):
        raise NotImplementedError

    def set_value(self, value):
        self.value = value
        self.save()


class _StateDictHandler(StateHandler):
    def __init__(self, value):
        super().__init__(value)
        self._saved = None
        self.save()

    def save(self):
        self._saved = copy.deepcopy(self.value.state_dict())

    def restore(self):
        self.value.load_state_dict(self._saved)


class ModelStateHandler(_StateDictHandler):
    def sync(self):
        broadcast_parameters(self.value.state_dict(), root_rank=0)


class OptimizerStateHandler(_StateDictHandler):
    def sync(self):
        broadcast_optimizer_state(self.value, root_rank=0)


class SamplerStateHandler(_StateDictHandler):
    def sync(self):
        self.value.load_state_dict(
            broadcast_object(self.value.state_dict(), 0, name="elastic.sampler"))


_handler_registry = [
    (torch.nn.Module, ModelStateHandler),
    (torch.optim.Optimizer, OptimizerStateHandler),
    (ElasticSampler, SamplerStateHandler),
]


def get_handler_registry():
    """The (type, handler class) pairs, first match wins."""
    return _handler_registry


def set_handler_registry(registry):
    global _handler_registry
    _handler_registry = registry


def _handler_for(value):
    for kind, handler in _handler_registry:
        if isinstance(value, kind):
            return handler(value)
    return None


class TorchState(ObjectState):
    """``TorchState(model=None, optimizer=None, **kwargs)``: the model's and
    optimizer's state, and every keyword value, committed and restored
    together; ``state.model``, ``state.optimizer`` and ``state.<kwarg>`` are
    the live values."""

    def __init__(self, model=None, optimizer=None, **kwargs):
        kwargs.update(model=model, optimizer=optimizer)
        handlers = {}
        plain = {}
        for name, value in kwargs.items():
            handler = _handler_for(value)
            if handler is None:
                plain[name] = value
            else:
                handlers[name] = handler
        object.__setattr__(self, "_handlers", handlers)
        for name, handler in handlers.items():
            object.__setattr__(self, name, handler.value)
        super().__init__(bcast_object=lambda obj: broadcast_object(obj, 0, name="elastic.state"),
                         get_rank=basics.rank, **plain)

    def save(self):
        for handler in self._handlers.values():
            handler.save()
        super().save()

    def restore(self):
        for handler in self._handlers.values():
            handler.restore()
        super().restore()

    def reset(self):
        # After every reset: a world formed without a sync (hosts only
        # removed) has samplers still sharded for the last one; each
        # reshards what is left of its epoch over this world (after a sync
        # load_state_dict has done it already: the same shards).
        for handler in self._handlers.values():
            if isinstance(handler.value, ElasticSampler):
                handler.value.reset()
        super().reset()

    def sync(self):
        # The optimizers first: a worker whose optimizer has no state yet
        # (one that just joined) takes a local step to make it (as Horovod's
        # broadcast_optimizer_state), which weight decay turns into a change
        # of its weights; the model's sync after it gives them rank 0's.
        # (By what each handles: a handler of one's own for optimizers,
        # installed with set_handler_registry, goes first too.)
        handlers = sorted(self._handlers.values(),
                          key=lambda h: not isinstance(h.value, torch.optim.Optimizer))
        for handler in handlers:
            handler.sync()
        super().sync()

    def __setattr__(self, name, value):
        handlers = self.__dict__.get("_handlers", {})
        if name in handlers:
            handlers[name].set_value(value)
        super().__setattr__(name, value)
