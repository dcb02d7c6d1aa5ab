"""Handles of asynchronous collectives: ``poll(handle)`` and ``synchronize(handle)``.

Every ``*_async`` function but ``sparse_allreduce_async`` (a callable, as
Horovod's) returns a :class:`Handle` (a :class:`Done` while torch.compile
traces it). It keeps references to
the tensors the collective reads and writes until it is synchronized (the
core keeps their memory alive as well), so dropping the user's references
early is safe. ``synchronize(handle)`` waits and returns the collective's
result (the output tensor; a list for grouped allreduce and reducescatter, a
tuple for grouped allgather; ``(output, received_splits)`` for alltoall);
calling it again returns the same result, or raises the same error (Horovod's
returns None the second time).

CUDA tensors complete as in Horovod's async completion: ``synchronize``
returns once the collective is done, and the results' last copies to the GPU
are left to torch's current stream (of the tensors' device) to wait for, so
the host does not wait for them. Work queued on that stream afterwards reads
the results; to read them from another stream, make it wait for that one
first (``torch.cuda.Stream.wait_stream``).
"""

import sys
import time

from hora.common.exceptions import HoraTimeoutError


class Handle:
    """A collective in flight. Pass it to ``poll()`` or ``synchronize()``."""

    __slots__ = ("_core", "_finish", "_keep", "_result", "_error", "_done", "_cuda")

    def __init__(self, core_handles, finish, keep=(), host=False):
        """``core_handles``: the ``hora._core.Handle`` objects (one, or a group's);
        ``finish()``: builds the result once they are all done (None: the
        result is ``keep``, an in-place collective's tensor);
        ``keep``: tensors to hold until then; ``host``: the caller knows them
        all to be host tensors (else they are looked through for a CUDA one).
        (A model's gradients have a handle each pending at once: every object
        the collector tracks counts towards its next pass, which scans them
        all, so the common in-place call makes two: this and the list.)"""
        self._core = core_handles
        self._finish = finish
        self._keep = keep
        self._result = None
        self._error = None
        self._done = False
        self._cuda = None if host else _cuda_device(keep)

    @property
    def name(self):
        """The collective's name (a group's first member for grouped ones)."""
        return self._core[0].name if self._core else ""

    def poll(self):
        """True once the collective finished (successfully or not). Never blocks."""
        return self._done or all(h.poll() for h in self._core)

    def wait(self, timeout=None):
        """Waits for completion and returns the result (see module doc).

        ``timeout`` (seconds) bounds the wait; when it expires a
        HoraTimeoutError is raised and the handle stays usable.
        """
        if self._done:
            if self._error is not None:
                raise self._error
            return self._result
        deadline = None if timeout is None else time.monotonic() + timeout
        stream = None
        if self._cuda is not None:
            import torch
            stream = torch.cuda.current_stream(self._cuda).cuda_stream
        try:
            for h in self._core:
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                h.wait(left, stream)
        except HoraTimeoutError:
            if not all(h.poll() for h in self._core):
                raise  # our wait expired; the collective is still running
            self._fail(sys.exc_info()[1])
            raise
        except BaseException as e:  # noqa: B036 - remembered, then re-raised
            if isinstance(e, Exception) and all(h.poll() for h in self._core):
                self._fail(e)
            raise
        try:
            result = self._keep if self._finish is None else self._finish()
        except Exception as e:
            self._fail(e)
            raise
        self._result, self._done = result, True
        self._finish = self._keep = None
        return self._result

    def _fail(self, error):
        self._error, self._done = error, True
        self._finish = self._keep = None

    def __repr__(self):
        state = "done" if self._done else "pending"
        return "<hora Handle %r (%d collective%s, %s)>" % (
            self.name, len(self._core), "" if len(self._core) == 1 else "s", state)


class Done:
    """The handle of an asynchronous call that torch.compile traced: the
    collective is an operator of the graph (hora.torch.compiled_ops), done
    where the graph reaches it; ``wait`` returns its result."""

    __slots__ = ("_result", "name")

    def __init__(self, result, name=None):
        self._result = result
        self.name = name or ""

    def poll(self):
        return True

    def wait(self, timeout=None):
        return self._result


def _cuda_device(keep):
    """The device of the first CUDA tensor in ``keep`` (nested lists and
    tuples too), or None."""
    if not isinstance(keep, (list, tuple)):
        return keep.device if getattr(keep, "is_cuda", False) else None
    for item in keep:
        found = _cuda_device(item)
        if found is not None:
            return found
    return None


def poll(handle):
    """True when the collective of ``handle`` has finished. Never blocks."""
    return handle.poll()


def synchronize(handle, timeout=None):
    """Waits for ``handle`` and returns its result (raises its HoraError on failure)."""
    if callable(handle) and not isinstance(handle, Handle):
        return handle()  # sparse allreduce "handles" are closures, as in Horovod
    return handle.wait(timeout)
