"""Hora for JAX: ``import hora.jax as hvd``.

Collectives on ``jax.Array`` (out of place: JAX arrays are immutable) and on
pytrees of them, usable eagerly and inside ``jax.jit``::

    hvd.init()
    params = hvd.broadcast_parameters(params, root_rank=0)
    tx = hvd.DistributedOptimizer(optax.adam(1e-3))   # averages the gradients
    @jax.jit
    def step(params, state, batch):
        grads = jax.grad(loss)(params, batch)
        updates, state = tx.update(grads, state, params)
        return optax.apply_updates(params, updates), state

* ``allreduce, grouped_allreduce`` (a list or any pytree, reduced as one
  fused group), ``allgather, grouped_allgather, broadcast, alltoall,
  reducescatter, grouped_reducescatter`` (lists of arrays, one group each),
  ``barrier, join``, ``broadcast_parameters``, ``broadcast_object,
  allgather_object``; every collective but ``join`` takes ``process_set=``;
  dtypes as ``hora.numpy``'s (bfloat16 included);
* gradients (``jax.grad``, ``jax.vjp``; not of ``alltoall`` with ``splits``,
  which takes concrete arrays only) as ``hora.tensorflow`` and
  ``hora.torch`` define them: allreduce's is the allreduce of the cotangent
  (same op and scale factors); allgather's the Average allreduce of the
  cotangent, this rank's rows; broadcast's that allreduce on the root, zeros
  elsewhere; alltoall's (even splits) the alltoall of the cotangent;
  reducescatter's the allgather of the cotangent times the scale factors
  (and the set's size for Sum). Forward-mode (``jax.jvp``, ``jacfwd``) and
  ``jax.vmap`` are refused by JAX (its callbacks have neither);
* ``DistributedOptimizer(tx)`` wraps an optax ``GradientTransformation``
  (``compression=hvd.Compression.fp16`` or ``.bf16`` casts the gradients
  for the wire, as ``allreduce``'s and ``grouped_allreduce``'s
  ``compression=``; ``backward_passes_per_step=k`` sums k passes' gradients
  on each rank and reduces them once); ``broadcast_optimizer_state`` is
  ``broadcast_parameters`` of an optax state;
* ``elastic``: ``@hvd.elastic.run`` and ``hvd.elastic.JaxState`` (elastic
  training under ``horarun --min-np/--max-np``; :mod:`hora.jax.elastic`).

Inside ``jax.jit`` (and any JAX trace) each collective is an ordered
``jax.experimental.io_callback``: it runs once per step, in program order on
every rank (so the ranks' calls match), on the host, also on an array the
step closed over (``barrier``, ``join``, ``broadcast_parameters``,
``broadcast_optimizer_state`` and the object collectives are not staged:
call them outside jit). Shapes must be
static there: ``allgather`` assumes every
rank has the same number of rows, ``alltoall`` splits evenly. Eagerly, any
shapes work. Costs: each call copies its input to the host once (on CPU, a
copy of the array) and its result into a new ``jax.Array``; inside jit, the
callback also blocks the step's other work on the host.
"""

from hora.common import *  # noqa: F401,F403  (the job, ops, process sets, errors)
from hora.jax.ops import (  # noqa: F401
    allgather,
    allreduce,
    alltoall,
    barrier,
    broadcast,
    grouped_allgather,
    grouped_allreduce,
    grouped_reducescatter,
    join,
    reducescatter,
)
from hora.jax.compression import Compression  # noqa: F401
from hora.jax.training import (  # noqa: F401
    DistributedOptimizer,
    broadcast_optimizer_state,
    broadcast_parameters,
)
from hora.numpy import allgather_object, broadcast_object  # noqa: F401
from hora.jax import elastic  # noqa: E402,F401
