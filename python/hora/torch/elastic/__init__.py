"""Elastic training for PyTorch, with Horovod's names (``hvd.elastic``).

* ``@hvd.elastic.run``: runs ``train(state, ...)``; when a collective fails
  across the job, every rank rolls back to the last ``state.commit()``,
  Hora is reset (shutdown, init: a new world without the lost workers),
  the state is synced from the new rank 0, and
  ``train`` is called again. When hosts were added or removed
  (``HostsUpdatedInterrupt`` from ``commit()``), it resets without rolling
  back. A ``MismatchError`` (ranks that called a collective differently: a
  bug that a reset would only repeat) is not retried.
* ``TorchState(model, optimizer, **extra)``: the model's and optimizer's
  ``state_dict()`` (deep copies) and any other values, with ``commit()``,
  ``restore()``, ``sync()``, ``check_host_updates()`` and
  ``register_reset_callbacks()``.
* ``ElasticSampler(dataset, shuffle=True, seed=0)``: shards a dataset over
  the ranks, counts what was processed (``record_batch``), and reshards the
  rest after a reset.
* ``State`` and ``ObjectState`` (``hora.common.elastic``) for states of
  one's own.

The world is re-formed by ``horarun``'s elastic mode
(``horarun -np 3 --min-np 2 --max-np 3 ...``: docs/guide/elastic.md). Under
a fixed launch, a lost worker still ends the job: the reset's ``init()``
waits for every rank of the launch (``HORA_START_TIMEOUT_S``) and fails
naming who is missing.
"""

from hora.common.elastic import ObjectState, State, reset_world, run  # noqa: F401
from hora.common.exceptions import (  # noqa: F401
    HoraInternalError,
    HorovodInternalError,
    HostsUpdatedInterrupt,
)
from hora.torch.elastic.sampler import ElasticSampler
from hora.torch.elastic.state import (  # noqa: F401
    ModelStateHandler,
    OptimizerStateHandler,
    SamplerStateHandler,
    StateHandler,
    TorchState,
    get_handler_registry,
    set_handler_registry,
)


_reset = reset_world  # (tests and scripts that reset by hand)


__all__ = ["run", "State", "ObjectState", "TorchState", "ElasticSampler",
           "HostsUpdatedInterrupt", "HoraInternalError"]
