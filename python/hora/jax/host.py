"""How hora.jax's collectives run: on the host, at once where nothing is
traced, else as an ordered ``io_callback`` of the traced function (see
:mod:`hora.jax` for the contract and the costs)."""

import logging

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import io_callback

from hora.common import basics

try:  # (JAX's own record of the traces in progress; absent: inputs tell)
    from jax._src.core import trace_ctx as _trace_ctx
except ImportError:  # pragma: no cover - older or newer JAX
    _trace_ctx = None


class _RaisedOnce(logging.Filter):
    """JAX logs an exception a callback raised (at ERROR, with its traceback)
    before raising it again as its own, whose message has Hora's: a Hora
    error is not logged twice (an elastic job's survivors would print a lost
    peer's report as an ERROR, though the job goes on)."""

    def filter(self, record):
        error = record.exc_info[1] if record.exc_info else None
        return not isinstance(error, basics.HoraError)


logging.getLogger("jax._src.callback").addFilter(_RaisedOnce())


def array(x):
    """``x`` as a JAX array: itself when it is one (``jnp.asarray`` of an array
    still costs microseconds), else converted."""
    return x if isinstance(x, jax.Array) else jnp.asarray(x)


def no_values(x):
    """Whether ``x`` is JAX's float0 (the gradient of an integer or bool
    input, ``jax.grad(..., allow_int=True)``): nothing to send."""
    return getattr(x, "dtype", None) == jax.dtypes.float0


def zeros(shape, dtype):
    """Zeros of ``dtype``, float0 among them (which ``jnp.zeros`` refuses)."""
    if dtype == jax.dtypes.float0:
        return np.zeros(shape, dtype)
    return jnp.zeros(shape, dtype)


def traced(leaves):
    """Whether any of ``leaves`` is a tracer (differentiated, or inside jit)."""
    return any(isinstance(x, jax.core.Tracer) for x in leaves)


def tracing():
    """Whether JAX is tracing the caller (``jax.jit``, ``jax.grad``,
    ``eval_shape``...), also where its inputs are concrete (an array the
    traced function closed over): a collective there must be staged into
    the trace, to run each time the step runs, not once as it is traced."""
    return _trace_ctx is not None and not _trace_ctx.is_top_level()


def spec(x, shape=None):
    return jax.ShapeDtypeStruct(x.shape if shape is None else shape, x.dtype)


def what(op, name):
    return "%s %s" % (op, "'%s'" % name if name else "(unnamed)")


def run(fn, leaves, out_specs, collective=None):
    """``fn`` (NumPy arrays -> NumPy arrays) on ``leaves``: at once where
    nothing is traced, else as an ordered io_callback (``out_specs``: the
    results' ShapeDtypeStructs, static; ``collective``: its name, for the
    error where a result does not come in that shape)."""
    if not traced(leaves) and not tracing():
        # A jitted step's callbacks may still be running: wait for them, so that
        # this call comes after theirs on every rank (unnamed calls are numbered).
        jax.effects_barrier()
        return [jnp.asarray(o) for o in fn([np.asarray(x) for x in leaves])]

    def callback(*xs):
        try:
            return checked(fn([np.asarray(x) for x in xs]))
        except basics.HoraError as e:  # (JAX re-raises it as its own: elastic maps it back)
            basics.note_callback_error(e)
            raise

    def checked(results):
        outs = []
        for o, s in zip(results, out_specs):
            o = np.asarray(o, dtype=s.dtype)
            if o.shape != tuple(s.shape):
                raise basics.InvalidArgumentError(
                    "rank %d: %s inside jax.jit: the result came with shape %s, but jit fixed "
                    "it at %s from this rank's input; inside jit every rank must give as many "
                    "rows (call it outside jit where they differ)"
                    % (basics.rank(), collective or "a collective", o.shape, tuple(s.shape)))
            outs.append(o)
        return tuple(outs)

    return list(io_callback(callback, tuple(out_specs), *leaves, ordered=True))


def differentiable(forward, backward, leaves):
    """``forward(leaves)`` (a list of arrays), whose gradient is
    ``backward(real, cotangents)``, where ``leaves`` are traced (JAX cannot
    differentiate a callback): the cotangents of the inputs ``real`` (the
    indices of the floating ones, whose cotangents are given). An integer or
    bool input's cotangent is JAX's float0 (no values), never sent: the
    ranks' dtypes agree, so they send the same collectives."""
    if not traced(leaves):
        return forward(leaves)
    shapes = [(x.shape, x.dtype) for x in leaves]
    real = [i for i, (_, dtype) in enumerate(shapes) if jnp.issubdtype(dtype, jnp.inexact)]

    @jax.custom_vjp
    def f(*xs):
        return tuple(forward(list(xs)))

    def fwd(*xs):
        return f(*xs), None

    def bwd(_, cotangents):
        grads = [np.zeros(shape, jax.dtypes.float0) for shape, _ in shapes]
        if real:
            for i, g in zip(real, backward(real, [cotangents[i] for i in real])):
                grads[i] = g
        return tuple(grads)

    f.defvjp(fwd, bwd)
    return list(f(*leaves))
