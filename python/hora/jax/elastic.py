"""Elastic training for a JAX loop, with Horovod's names (``hvd.elastic``
of ``hora.jax``; see docs/guide/elastic.md):

* ``@hvd.elastic.run``: runs ``train(state, ...)``; when a collective fails
  across the job every rank rolls back to the last ``state.commit()``, Hora
  is reset (a new world without the lost workers; JAX's traces of the old
  world are dropped), the state is synced from the new rank 0 and ``train``
  is called again; when hosts were added or removed it resets without
  rolling back.
* ``JaxState(**values)``: pytrees of arrays (parameters, an optax state) and
  plain values as attributes, with ``commit()``, ``restore()``, ``sync()``
  and ``register_reset_callbacks()``. JAX arrays are immutable, so a commit
  keeps references (assign new values; do not change NumPy leaves in place).
"""

from hora.common import basics
from hora.common.elastic import ObjectState, State, reset_world, run  # noqa: F401
from hora.common.exceptions import (  # noqa: F401
    HoraInternalError,
    HorovodInternalError,
    HostsUpdatedInterrupt,
)
from hora.numpy import broadcast_object

import hora.jax.ops  # noqa: F401  (its reset hook drops JAX's traces)


class JaxState(ObjectState):
    """``JaxState(params=..., opt_state=..., epoch=0)``: every keyword is an
    attribute, committed, restored and synced (from rank 0, pickled) as one
    state."""

    def __init__(self, **values):
        super().__init__(bcast_object=lambda obj: broadcast_object(obj, 0, name="elastic.state"),
                         get_rank=basics.rank, **values)


__all__ = ["run", "State", "ObjectState", "JaxState", "HostsUpdatedInterrupt",
           "HoraInternalError"]
