"""DistributedOptimizer's buckets: small gradients reduced together.

A gradient's own allreduce costs its hook's call into the core, a handle and
the engine's record of it: several microseconds, more than the bytes of a
bias or a norm's weight take. The optimizer copies every gradient of at most
``HORA_GRADIENT_BUCKET_BYTES`` (default 32 KiB; 0: none) into a bucket of up
to 1 MiB and reduces each bucket with one allreduce once the last of its
gradients is ready. Where a backward pass started every allreduce, the
buckets' results are in the gradients when it returns
(:mod:`hora.torch.backward_end`); else at ``synchronize()``.

A bucket's members are the gradients of one dtype and device, taken in the
order of their names: every rank with the same parameters has the same
buckets, whatever order its optimizer lists them in (gradients are matched
across ranks by name, as each one's own allreduce is). The engine compares
a bucket's size across ranks, not its members' shapes: the first step a
bucket takes also gathers a digest of its members' names and shapes from
every rank (``Bucket.layout_digest``), so that a parameter whose shape
differs on a rank at the same size (a transposed weight) fails that step
on every rank instead of mixing the gradients up.
"""

import time
import zlib

import torch

from hora.common import basics
from hora.common.exceptions import HoraTimeoutError, MismatchError
from hora.common.process_sets import process_set_ranks
from hora.torch import collective_ops as co
from hora.torch import reduce_ops as ro
from hora.torch.handles import synchronize as _wait

BUCKET_CAPACITY = 1 << 20  # bytes a bucket holds at most (one member may hold more)

# One call copies a list of tensors (torch 2.1 and later); else one each.
_foreach_copy = getattr(torch, "_foreach_copy_", None)


def copy_all(dst, src):
    """dst[i].copy_(src[i]) for every i."""
    if not dst:
        return
    if _foreach_copy is not None:
        _foreach_copy(dst, src)
    else:
        for d, s in zip(dst, src):
            d.copy_(s)


class Bucket:
    """Gradients reduced as one flat tensor. ``slots`` are the members (the
    optimizer's ``_Slot``); ``ready`` counts those whose hook has fired this
    step; ``handle`` is the bucket's allreduce in flight, ``copied`` the
    members whose gradients were copied into it then (a sparse one goes
    alone) and ``into`` their places in ``flat``; ``done`` once the results
    are in the gradients, ``written`` (those gradients), ``error`` the
    allreduce's, for ``synchronize()`` to raise."""

    __slots__ = ("slots", "name", "numel", "flat", "views", "ready", "handle", "copied", "into",
                 "done", "written", "error", "layout_agreed", "layout_check", "layout_asked")

    def __init__(self, slots):
        self.slots = slots
        # "allreduce.bucket.<first member's parameter>+<members after it>"
        first = slots[0].name
        self.name = "allreduce.bucket.%s+%d" % (first[first.startswith("allreduce.") * 10:],
                                                len(slots) - 1)
        self.numel = sum(s.p.numel() for s in slots)
        self.flat, self.views = None, None
        self.ready, self.handle, self.copied, self.into = 0, None, None, None
        self.done, self.written, self.error = False, None, None
        # The Session in which every rank's members were seen to have the
        # same names and shapes (an elastic reset makes a new one, whose
        # world may hold a new worker: asked again there); the allgather of
        # their digests while that is being asked, and its Session (one
        # left unread from an old Session is asked again; one of this
        # Session, whatever happened since, is read, as every rank reads it).
        self.layout_agreed, self.layout_check, self.layout_asked = None, None, None

    def layout(self):
        """The members as this rank has them: "fc.bias [10], fc.weight [10, 20]"."""
        return ", ".join("%s %s" % (s.name[s.name.startswith("allreduce.") * 10:],
                                    list(s.p.shape)) for s in self.slots)

    def layout_digest(self):
        """A digest of the members' names and shapes, alike in every process."""
        return zlib.crc32(";".join("%s%s" % (s.name, tuple(s.p.shape))
                                   for s in self.slots).encode())

    def place(self, like):
        """The flat tensor and the members' views into it, as ``like`` (a
        member's gradient) in dtype and device; made again where those changed
        (the model moved)."""
        if self.flat is None or self.flat.dtype != like.dtype or self.flat.device != like.device:
            self.flat = torch.empty(self.numel, dtype=like.dtype, device=like.device)
            self.views, at = [], 0
            for s in self.slots:
                n = s.p.numel()
                self.views.append(self.flat[at:at + n].view(s.p.shape))
                at += n
        return self.flat, self.views


def plan(slots, limit):
    """The buckets of ``slots`` whose parameters hold at most ``limit`` bytes
    (dense, of a floating dtype); sets each member's ``bucket``. Buckets of
    one member are not made (its own allreduce is the same work)."""
    if limit <= 0:
        return []
    small = sorted((s for s in slots
                    if s.group is None and s.p.layout is torch.strided
                    and s.p.dtype.is_floating_point
                    and s.p.numel() * s.p.element_size() <= limit), key=lambda s: s.name)
    open_, done = {}, []  # (dtype, device) -> [members, bytes]
    for s in small:
        key = (s.p.dtype, s.p.device)
        size = s.p.numel() * s.p.element_size()
        members = open_.setdefault(key, [[], 0])
        if members[0] and members[1] + size > BUCKET_CAPACITY:
            done.append(members[0])
            members = open_[key] = [[], 0]
        members[0].append(s)
        members[1] += size
    done.extend(m for m, _ in open_.values())
    buckets = [Bucket(m) for m in done if len(m) > 1]
    for b in buckets:
        for s in b.slots:
            s.bucket = b
    return buckets


# A bucket whose members went to their own allreduces (see _start_bucket).
MEMBERS_ALONE = object()


def done_by(handle, deadline):
    """Whether ``handle``'s collective finished by ``deadline``
    (time.monotonic()); a failure counts as finished (its wait raises it)."""
    try:
        _wait(handle, max(0.0, deadline - time.monotonic()))
    except HoraTimeoutError:
        return handle.poll()
    except Exception:  # (finished with an error: the step's wait raises it)
        pass
    return True


class BucketSteps:
    """DistributedOptimizer's steps of a bucket: started once its last
    gradient is ready, finished at the end of that backward pass (or at
    ``synchronize()``). A base of the distributed optimizer's class, which
    holds the state these use (``_started_buckets``, ``_handles``,
    ``_sparse_dims``, ``_process_set``, ``op``, ``_flight``) and the helpers
    (``_dense_grad``, ``_allreduce_grad_async``, ``_sparse_allreduce_async``,
    ``_scale``, ``_watch``)."""

    def _start_bucket(self, b):
        """Copies the bucket's gradients into it and starts its allreduce. A
        sparse gradient (without sparse_as_dense) goes to its own; so does
        every member where their gradients' dtypes or devices differ."""
        self._started_buckets.append(b)
        grads = [self._dense_grad(s.p) for s in b.slots]
        dense = [g for g in grads if not g.is_sparse]
        if not dense or any(g.dtype != dense[0].dtype or g.device != dense[0].device
                            for g in dense):
            b.handle = MEMBERS_ALONE
            for s in b.slots:
                self._handles[s] = self._allreduce_grad_async(s)
            return
        flat, views = b.place(dense[0])
        members = b.slots
        if len(dense) < len(grads):
            views = [v for v, g in zip(views, grads) if not g.is_sparse]
            members = [s for s, g in zip(b.slots, grads) if not g.is_sparse]
            for s, g in zip(b.slots, grads):
                if g.is_sparse:
                    self._handles[s] = self._sparse_allreduce_async(g, s.name), None
        copy_all(views, dense)
        b.copied, b.into = members, views
        for m in members:
            self._watch(m.p, m.p.grad, m.name)
        pre, post = self._scale()
        b.handle = ro.allreduce_async_(flat, name=b.name, op=self.op, prescale_factor=pre,
                                       postscale_factor=post, process_set=self._process_set)
        session = basics.session()
        if b.layout_agreed is not session and (b.layout_check is None
                                               or b.layout_asked is not session):
            b.layout_check = co.allgather_async(
                torch.tensor([b.layout_digest()], dtype=torch.int64),
                name=b.name + ".layout", process_set=self._process_set)
            b.layout_asked = session

    def _finish_started_buckets(self, deadline):
        """At the end of a backward pass (see
        ``backward_end.BackwardEnd``): the buckets started have their results in the
        gradients (an error waits for synchronize()). Returns the name of one
        not finished by ``deadline`` (time.monotonic()), leaving it and the
        rest to synchronize(), or None."""
        for b in self._started_buckets:
            if b.handle is MEMBERS_ALONE or b.done:
                continue
            for h in (b.handle, b.layout_check):
                if h is not None and not done_by(h, deadline):
                    return b.name
            try:
                self._finish_bucket(b)
            except Exception as e:  # (raised by synchronize(), as the others')
                b.error = e
            b.done = True
            for m in b.copied:
                self._flight.pop(m.p, None)
        return None

    def _finish_bucket(self, b):
        """Waits for the bucket's allreduce and copies the results into the
        gradients the parameters hold now (code may have replaced one since
        the bucket started: p.grad = p.grad * 2). A bucket whose members'
        shapes differ across ranks raises that instead (on every rank)."""
        try:
            _wait(b.handle)
        finally:
            if b.layout_check is not None:  # (waited for also when the allreduce failed)
                self._check_layout(b)
        grads = [s.p.grad for s in b.copied]
        if any(g is None for g in grads):  # (set to None meanwhile)
            for s, g, v in zip(b.copied, grads, b.into):
                if g is None:
                    s.p.grad = v.clone()
            grads = [s.p.grad for s in b.copied]
        copy_all(grads, b.into)
        if self._sparse_dims:  # sparse_as_dense: sparse again, as they came
            for s in b.slots:
                dim = self._sparse_dims.pop(s.p, None)
                if dim is not None:
                    s.p.grad = s.p.grad.to_sparse(dim)
        b.written = [s.p.grad for s in b.copied]

    def _check_layout(self, b):
        """Raises MismatchError where the bucket's members' names or shapes
        differ across ranks (asked until every rank agrees once)."""
        check, b.layout_check = b.layout_check, None
        digests = _wait(check).tolist()
        if all(d == digests[0] for d in digests):
            b.layout_agreed = basics.session()
            return
        ranks = process_set_ranks(self._process_set)  # (None: every rank)
        mine = b.layout_digest()
        others = [str(r) for r, d in zip(ranks, digests) if d != mine]
        # (A disagreement across ranks, as a gradient reduced alone reports
        # it: Horovod's HorovodInternalError, not a bad argument.)
        raise MismatchError(
            "DistributedOptimizer: the gradients reduced together as %r have other names or "
            "shapes on rank%s %s than on rank %d, which has %s (every rank must train the same "
            "model; with HORA_GRADIENT_BUCKET_BYTES=0 each gradient is reduced alone and the "
            "one that differs is named)"
            % (b.name, "s" if len(others) > 1 else "", ", ".join(others), basics.rank(),
               b.layout()))

    def _refresh_replaced(self, b):
        """At synchronize(), for a bucket finished at the end of backward: a
        member whose ``p.grad`` was replaced since (``p.grad = p.grad * 2``)
        gets the reduced gradient, as Horovod's ``set_`` puts it there (and
        as a gradient reduced alone gets it); one edited in place keeps the
        edit (GradScaler's ``unscale_``, clipping)."""
        for s, before, v in zip(b.copied, b.written, b.into):
            g = s.p.grad
            if g is before:
                continue
            if g is None or g.is_sparse or before.is_sparse:
                reduced = v.clone()
                s.p.grad = reduced.to_sparse(before.sparse_dim()) if before.is_sparse else reduced
            else:
                g.copy_(v)
