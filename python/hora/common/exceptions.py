"""Hora's exception types.

They are created by the extension module (``hora._core``), which raises them
from collectives, ``Handle.wait()`` and ``Session()``:

* ``HoraError`` (a ``RuntimeError``): the base of every Hora error.
* ``InvalidArgumentError`` (also a ``ValueError``): unusable arguments
  (dtype, device, layout, sizes).
* ``MismatchError``: ranks disagree about a collective's parameters; raised on
  every rank, naming the tensor and each rank's values. Other collectives go on.
* ``HoraTimeoutError`` (also a ``TimeoutError``): a bounded wait expired.
* ``AbortedError``: cancelled (shutdown, or a failure elsewhere in the job).
* ``UnavailableError``: a peer was lost; the message names it.
* ``InternalError``: a bug in Hora.
* ``UnimplementedError`` (also a ``NotImplementedError``): not supported by
  this build.

This module adds ``NotInitializedError`` (a ``HoraError`` and a
``ValueError``, like Horovod's ``ValueError``), raised by any operation made
before ``init()``.
"""

from hora import _core

HoraError = _core.HoraError
InvalidArgumentError = _core.InvalidArgumentError
MismatchError = _core.MismatchError
HoraTimeoutError = _core.HoraTimeoutError
AbortedError = _core.AbortedError
UnavailableError = _core.UnavailableError
InternalError = _core.InternalError


class _UnimplementedFallback(HoraError, NotImplementedError):
    """Not supported by this build."""


# Older builds of _core may lack UnimplementedError; keep the name available.
UnimplementedError = getattr(_core, "UnimplementedError", _UnimplementedFallback)


class NotInitializedError(HoraError, ValueError):
    """An operation was called before ``init()`` (or after ``shutdown()``)."""


__all__ = [
    "HoraError",
    "InvalidArgumentError",
    "MismatchError",
    "HoraTimeoutError",
    "AbortedError",
    "UnavailableError",
    "InternalError",
    "UnimplementedError",
    "NotInitializedError",
]
