"""DistributedOptimizer's end of a backward pass, and what it notes of the
allreduces in flight (a base of the distributed optimizer's class, as
:mod:`hora.torch.grad_buckets`' ``BucketSteps``, which holds the state these
use: ``_handles``, ``_group_handles``, ``_groups``, ``_buckets``,
``_started_buckets``, ``_slots``, ``_flight``, ``_wait_in_backward``,
``_scaler_synchronized``).

Where a backward pass started every allreduce, it waits for them at its end
(``_backward_done``), so that code before ``step()`` (clipping) reads reduced
gradients; else they finish at ``synchronize()``, as Horovod's. Each
gradient's torch ``_version`` is noted when its allreduce starts
(``_watch``): one changed in place while in flight is refused at
``synchronize()`` (``changed_in_flight``). GradScaler's ``unscale_`` calls
``_hora_before_unscale`` first (:mod:`hora.torch.grad_scaler`).
"""

import time
import warnings

from hora.common import basics
from hora.torch import grad_buckets
from hora.torch.handles import synchronize as _wait

# The longest a backward pass waits at its end for its allreduces (_backward_done).
BACKWARD_WAIT_S = 10.0


def changed_in_flight(raced):
    """The error for gradients (their names, ``raced``) changed in place while
    their allreduces were in flight."""
    return RuntimeError(
        "rank %d: DistributedOptimizer: the gradient%s of %s changed in place while %s allreduce "
        "was in flight (clipping or scaling before step(), without synchronize()?), so the "
        "change is lost or mixed into the sum and the ranks would train apart; the "
        "step is not taken. Call optimizer.synchronize() before changing gradients, "
        "then optimizer.step() inside `with optimizer.skip_synchronize():`"
        % (basics.rank(), "s" if len(raced) > 1 else "", ", ".join(
            repr(n[n.startswith("allreduce.") * 10:]) for n in sorted(raced)[:5])
           + (" and %d more" % (len(raced) - 5) if len(raced) > 5 else ""),
           "their" if len(raced) > 1 else "its"))


class BackwardEnd:
    """See the module doc."""

    def _backward_done(self):
        """The end of a backward pass. Where it started every allreduce (every
        parameter used; the last of ``backward_passes_per_step``), it waits
        for them, so that code before ``step()`` (clipping) reads reduced
        gradients. Else they finish at
        ``synchronize()``, as Horovod's all do: another rank may have started
        the allreduces this one did not and be waiting for this one's, which
        start at its ``step()`` (unused gradients as zeros), so a wait here
        would wait for good. Should a wait still last ``BACKWARD_WAIT_S`` (a
        rank that used every parameter, another that did not and runs a
        collective before its ``step()``), it stops, says so once, and this
        optimizer's allreduces finish at ``synchronize()`` from then on."""
        self._finish_queued = False
        if not self._wait_in_backward or not self._all_started():
            return
        deadline = time.monotonic() + BACKWARD_WAIT_S
        late = self._finish_started_buckets(deadline)
        pending = [h for h, _ in self._handles.values()] + \
            [h for h, _ in self._group_handles.values()]
        # (The last started first: the engine mostly finishes them in order,
        # so the others are then done, and a poll is cheaper than a wait.)
        for h in reversed(pending) if late is None else []:
            if callable(h) or h.poll():  # (sparse: a closure, not waited for here)
                continue
            if not grad_buckets.done_by(h, deadline):
                late = h.name
                break
        if late is None:
            # Reduced in place and done: a change to these gradients from now
            # on is the user's to make (a compressed one's result reaches
            # p.grad only at synchronize(): still watched).
            for slot, (h, ctx) in self._handles.items():
                if ctx is None and not callable(h):
                    self._flight.pop(slot.p, None)
            for gi, (h, ctxs) in self._group_handles.items():
                if all(c is None for c in ctxs):
                    for p in self._groups[gi]:
                        self._flight.pop(p, None)
        else:
            self._wait_in_backward = False
            warnings.warn(
                "DistributedOptimizer: rank %d waited %g s at the end of backward() for %r, "
                "which another rank has not started (a parameter it did not use, reduced at its "
                "step(); or a rank that is slow, or skipped this step); from now on this optimizer's allreduces finish at step() or "
                "synchronize(), as Horovod's do: code that reads gradients between backward() "
                "and step() should call optimizer.synchronize() first"
                % (basics.rank(), BACKWARD_WAIT_S, late))

    def _all_started(self):
        """Whether every allreduce of a parameter that needs a gradient now
        has started (one frozen since the optimizer was made does not count:
        its allreduce starts at synchronize() on every rank that froze it)."""
        for b in self._buckets:
            if b.handle is None and any(m.p.requires_grad for m in b.slots):
                return False
        for gi, group in enumerate(self._groups):
            if gi not in self._group_handles and any(p.requires_grad for p in group):
                return False
        return all(s in self._handles or not s.p.requires_grad for s in self._slots
                   if s.group is None and s.bucket is None)

    def _watch(self, p, g, name):
        """``p``'s gradient ``g`` goes into an allreduce now (see synchronize())."""
        if not g.is_sparse:
            self._flight[p] = (g, g._version, name)

    def _hora_before_unscale(self):
        """GradScaler is about to unscale this optimizer's gradients (or look
        for infs in them): where a backward pass left some not yet reduced,
        they are reduced first (hora/torch/grad_scaler.py)."""
        if self._local or not self._pending():
            return
        self.synchronize()
        self._scaler_synchronized = True

    def _pending(self):
        """Whether a backward pass since the last synchronize() left anything
        to reduce (an allreduce started, or a gradient ready)."""
        return bool(self._handles or self._group_handles or self._started_buckets
                    or any(b.ready for b in self._buckets)
                    or any(s.delay != self.backward_passes_per_step for s in self._slots))

    def _all_done(self):
        """Whether every allreduce started this step has finished (a sparse
        gradient's, which cannot be asked, counts as not)."""
        handles = [h for h, _ in self._handles.values()] + \
            [h for h, _ in self._group_handles.values()] + \
            [b.handle for b in self._started_buckets
             if b.handle is not grad_buckets.MEMBERS_ALONE and not b.done]
        return all(not callable(h) and h.poll() for h in handles)

    def _settle_skipped(self):
        """For a step skipped by zero_grad(): reads the buckets' layout checks
        still pending (every rank sent one; a rank that read its own at the
        end of backward would otherwise ask again alone next step) and
        returns the first error of the step's collectives (one that failed,
        a layout that differs across ranks, is not dropped with the step),
        or None. (Every collective started is done: zero_grad() checked.)"""
        error = None
        for handle, _ in list(self._handles.values()) + list(self._group_handles.values()):
            try:
                _wait(handle)
            except Exception as e:
                error = error or e
        for b in self._started_buckets:
            if b.layout_check is not None:
                try:
                    self._check_layout(b)
                except Exception as e:  # (raised once the others are read)
                    error = error or e
            error = error or b.error
        return error
