"""DistributedOptimizer's buckets: small gradients reduced together.

A gradient's own allreduce costs its hook's call into the core, a handle and
the engine's record of it: several microseconds, more than the bytes of a
bias or a norm's weight take. The optimizer copies every gradient of at most
``HORA_GRADIENT_BUCKET_BYTES`` (default 32 KiB; 0: none) into a bucket of up
to 1 MiB and reduces each bucket with one allreduce once the last of its
gradients is ready; the end of that backward pass waits for it and copies
the results back (``synchronize()`` does, for a bucket it starts), so that
code between ``backward()`` and ``step()`` (GradScaler's ``unscale_``,
clipping) works on the reduced gradients, as it does in practice on a
gradient reduced alone, whose allreduce writes in place and is done by then.

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

import zlib

import torch

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
                 "done", "written", "error", "layout_agreed", "layout_check")

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
        # Whether every rank's members were seen to have the same names and
        # shapes; the allgather of their digests while that is being asked.
        self.layout_agreed, self.layout_check = False, None

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
