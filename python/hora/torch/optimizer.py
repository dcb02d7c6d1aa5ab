"""``DistributedOptimizer``: wraps a torch optimizer so that ``step()`` uses
gradients averaged (by default) across all ranks, like Horovod's.

How it works: a hook on each parameter's gradient accumulator starts that
gradient's allreduce (in place, asynchronously) as soon as backward has
produced it, so communication overlaps the rest of backward. ``step()`` (or
``synchronize()``) submits what has not started yet (parameters without a
gradient this step get a zero gradient, so every rank submits the same
names), waits for every allreduce, then runs the wrapped optimizer's step.

Contract:

* Small gradients (``HORA_GRADIENT_BUCKET_BYTES``, 32 KiB by default) are
  copied into buckets of up to 1 MiB and reduced one allreduce a bucket
  (:mod:`hora.torch.grad_buckets`); so are not those in ``groups``, nor any
  with a ``compression`` other than none.
* Collective names: "allreduce.<name>", the name from ``named_parameters``
  or, without it, Horovod's "allreduce.noname.<group>.<index>" by position in
  the parameter groups; ``_parameter_names`` maps each parameter to that
  name, as Horovod's does. Every rank must build the same model and
  optimizer.
* ``backward_passes_per_step=k``: gradients accumulate locally over k
  backward passes (summed, as torch accumulates them); the allreduce starts
  after the k-th. A (k+1)-th backward before ``step()`` raises AssertionError.
* ``op``: Average (default), Sum, or Adasum (:mod:`hora.torch.optimizer_adasum`:
  the wrapped optimizer's local updates combined by Adasum, as Horovod's;
  on the global process set only, as Horovod's: with ``process_set`` it
  raises NotImplementedError).
  ``gradient_predivide_factor=f`` (Average only): gradients are multiplied by
  1/f before the sum and by f/size() after it.
* ``compression``: ``Compression.none``, ``.fp16`` or ``.bf16`` on the wire.
* ``groups``: an int n (parameters split into n groups of consecutive
  parameters) or a list of lists of parameters; each group's gradients are
  allreduced together with ``grouped_allreduce`` (named "grouped.<first
  member's name>"). Parameters in no group are reduced one by one.
* Sparse gradients (``nn.Embedding(sparse=True)``): allgathered, indices and
  values (``sparse_allreduce_async``), which sums them (/ size() for
  Average), as Horovod does; with ``sparse_as_dense=True`` they are densified
  and allreduced, then made sparse again before the step (``SparseAdam``
  takes only sparse gradients).
* ``process_set``: on ranks outside it the optimizer is a plain local one
  (no hooks, no collectives), as in Horovod.
* ``synchronize()`` then ``with opt.skip_synchronize(): opt.step()`` lets the
  user touch reduced gradients (e.g. clip them) before the step. Where a
  backward pass started every allreduce (every parameter that needs a
  gradient used, none compressed), the reduced gradients are in place when
  it returns; else the allreduces finish at ``synchronize()`` (parameters
  used by some ranks only: the others reduce zeros for them at their
  ``step()``, as Horovod's). A gradient changed in place by torch ops
  (clipping, ``div_``) while its allreduce was in flight (one not in a
  bucket) makes ``step()`` raise RuntimeError on that rank, naming it, and
  take no step there. Where ranks use different parameters, some ranks'
  reduced gradients are in place at the end of backward and others' not:
  clipping without ``synchronize()`` then changes reduced gradients on
  some ranks and local ones, in flight, on others, and the ranks train
  apart (a change of gradients in a bucket is not seen): clip as Horovod
  says, after ``synchronize()``. The end of such a backward pass waits up
  to 10 s for ranks that submit their allreduces at ``step()`` only (a
  collective of their own before it, a loss averaged for logging), warns
  once, and from then on leaves this optimizer's allreduces to ``step()``.
* LBFGS (``step(closure)``): each closure call's gradients are reduced as
  it returns (LBFGS reads them at once) and its loss is averaged across
  the ranks (``step`` returns the average, float64): the line search and
  early exit branch on it, and with each rank's own the ranks would take
  different branches with the same averaged gradients.
  ``backward_passes_per_step`` other than 1 is refused with it.
* GradScaler: torch's own loop, ``scaler.scale(loss).backward();
  scaler.step(opt); scaler.update()``, works as it does on one worker:
  GradScaler's ``unscale_`` calls ``synchronize()`` first
  (:mod:`hora.torch.grad_scaler`); Horovod's loop (``synchronize()``,
  ``scaler.unscale_(opt)``, ``with opt.skip_synchronize(): scaler.step(opt)``)
  works too.
* ``zero_grad()`` once a backward pass ran and before ``step()`` or
  ``synchronize()`` raises AssertionError, as Horovod's, unless that pass
  started every allreduce and all are done (a step GradScaler skipped: their
  results are dropped, as torch drops gradients); an accumulation half way
  (``backward_passes_per_step``) always raises.
* A parameter that needed no gradient when the optimizer was made (a frozen
  backbone) is reduced, alone, from the step where it needs one (Horovod's
  never reduces it: each rank would train it apart).
* In a job of one rank (not elastic) no hooks are registered, as in
  Horovod: ``step()`` reduces every gradient (a GAN's two backward passes
  into one model's gradients, say, are then no error).
"""

import contextlib
import os
import warnings
import weakref

import torch
from torch.autograd import Variable

from hora.common import basics
from hora.common.process_sets import global_process_set, process_set_id
from hora.common.exceptions import UnimplementedError
from hora.torch import backward_end, grad_buckets, grad_scaler, holding, lbfgs_closure
from hora.torch import param_names
from hora.torch import reduce_ops as ro
from hora.torch.compression import Compression
from hora.torch.handles import synchronize as _wait
from hora.torch.optimizer_adasum import _DistributedAdasumOptimizer



class _Slot:
    """A parameter's state in the optimizer, which its hook holds: a step
    looks nothing up by the tensor (whose hash is a call into Python)."""

    __slots__ = ("p", "name", "group", "bucket", "delay")

    def __init__(self, p, name, delay):
        self.p, self.name, self.group, self.bucket, self.delay = p, name, None, None, delay


def _bucket_limit():
    value = basics._setting("HORA_GRADIENT_BUCKET_BYTES")
    return 32 << 10 if value is None else int(value)


class _DistributedOptimizer(torch.optim.Optimizer):
    def __init__(self, params, named_parameters, compression, backward_passes_per_step=1,
                 op=basics.Average, gradient_predivide_factor=1.0, groups=None,
                 sparse_as_dense=False, process_set=None):
        super(self.__class__, self).__init__(params)
        self._compression = compression
        self._process_set = process_set
        all_params = [p for g in self.param_groups for p in g["params"]]
        self._parameter_names, self._named = param_names.parameter_names(self.param_groups,
                                                                          named_parameters)
        self._names = {p: "allreduce." + n for p, n in self._parameter_names.items()}
        self.backward_passes_per_step = backward_passes_per_step
        self.op = op
        self.gradient_predivide_factor = gradient_predivide_factor
        self.sparse_as_dense = sparse_as_dense
        self._requires_update = [p for p in all_params if p.requires_grad]
        # (Frozen when the optimizer was made: reduced once they need a gradient.)
        self._frozen = [p for p in all_params if not p.requires_grad]
        self._slots = [_Slot(p, self._names[p], backward_passes_per_step)
                       for p in self._requires_update]
        self._groups = param_names.plan_groups(groups, self._requires_update)
        self._p_to_group = {p: gi for gi, g in enumerate(self._groups) for p in g}
        for slot in self._slots:
            slot.group = self._p_to_group.get(slot.p)
        self._group_ready = [0] * len(self._groups)
        self._buckets = (grad_buckets.plan(self._slots, _bucket_limit())
                         if compression is Compression.none else [])
        self._started_buckets = []  # this step's, in the order they started
        self._handles = {}  # _Slot -> (handle, ctx), started this step
        self._group_handles = {}  # group index -> (handle, ctxs), started this step
        self._grad_accs = []
        self._sparse_dims = {}  # param -> sparse_dim of a gradient densified this step
        self._synchronized = False
        self._should_synchronize = True
        self._local = process_set is not None and not process_set.included()
        self._finish_queued = False  # this backward pass finishes its buckets at its end
        self._wait_in_backward = True  # (backward_end.BackwardEnd)
        self._scaler_synchronized = False  # (GradScaler's unscale_ called synchronize())
        # Gradients whose allreduce is in flight, as they were when it started:
        # param -> (tensor, its _version then, name); see synchronize().
        self._flight = {}
        self._hooked = not self._local and (basics.size() > 1 or os.environ.get("HORA_WORKER_ID"))
        if self._hooked:
            self._register_hooks()

    def add_param_group(self, param_group):
        """The wrapped optimizer's, and the new group's parameters' gradients
        are reduced as the others' are (each alone), from the next backward
        pass on. Named as at construction: by ``named_parameters`` (which
        must hold them), else ``allreduce.noname.<group>.<index>``. (Horovod
        reduces only the parameters the optimizer held at construction.)"""
        parent = super(self.__class__, self)
        parent.add_param_group(param_group)
        if "_slots" not in self.__dict__:  # (the constructor's own groups)
            return
        gi = len(self.param_groups) - 1
        group = self.param_groups[gi]["params"]
        if self._named:
            unnamed = [i for i, p in enumerate(group) if p not in self._parameter_names]
            if unnamed:
                self.param_groups.pop()
                raise ValueError("add_param_group: named_parameters given to "
                                 "DistributedOptimizer does not hold the new group's parameters "
                                 "at positions %s" % unnamed)
        else:
            for pi, p in enumerate(group):
                self._parameter_names.setdefault(p, param_names.noname(gi, pi))
        known = set(self._requires_update)
        for p in group:
            if p in known:
                continue
            known.add(p)
            if p.requires_grad:
                self._add_slot(p)
            else:
                self._frozen.append(p)

    def _add_slot(self, p):
        """``p``'s gradient reduced alone from the next backward pass on."""
        self._names.setdefault(p, "allreduce." + self._parameter_names[p])
        slot = _Slot(p, self._names[p], self.backward_passes_per_step)
        self._requires_update.append(p)
        self._slots.append(slot)
        if self._hooked:
            self._hook(slot)

    def _take_thawed(self):
        """Parameters frozen (``requires_grad=False``) when the optimizer was
        made, or their group added, that need a gradient now (a backbone
        unfrozen for fine-tuning): reduced, each alone, from now on, this
        step's gradient too. (Horovod's never reduces them: each rank trains
        them on its own, apart.)"""
        if not any(p.requires_grad for p in self._frozen):
            return
        for p in [p for p in self._frozen if p.requires_grad]:
            self._add_slot(p)
        self._frozen = [p for p in self._frozen if not p.requires_grad]

    def _register_hooks(self):
        for slot in self._slots:
            self._hook(slot)

    def _hook(self, slot):
        grad_acc = slot.p.expand_as(slot.p).grad_fn.next_functions[0][0]
        grad_acc.register_hook(self._make_hook(slot))
        self._grad_accs.append(grad_acc)  # the node lives only while referenced

    def _make_hook(self, slot):
        me = holding.held(self)  # (weakly: see holding.held())

        def hook(*unused):
            self = me()
            if self is None:
                return
            if slot.delay <= 0:
                raise AssertionError(
                    "Gradients were computed more than backward_passes_per_step times before "
                    "call to step(). Increase backward_passes_per_step to accumulate gradients "
                    "locally.")
            slot.delay -= 1
            if slot.delay > 0:
                return
            if not self._finish_queued:
                self._finish_queued = True
                # (New gradients: a synchronize() before them, say of a step
                # GradScaler skipped, is not theirs.)
                self._synchronized = self._scaler_synchronized = False
                Variable._execution_engine.queue_callback(self._backward_done)
            b = slot.bucket
            if b is not None:
                b.ready += 1
                if b.ready == len(b.slots):
                    self._start_bucket(b)
                return
            gi = slot.group
            if gi is None:
                self._handles[slot] = self._allreduce_grad_async(slot)
            else:
                self._group_ready[gi] += 1
                if self._group_ready[gi] == len(self._groups[gi]):
                    self._group_handles[gi] = self._grouped_allreduce_async(gi)
        return hook

    def _scale(self):
        if self.op == basics.Average:
            return 1.0 / self.gradient_predivide_factor, self.gradient_predivide_factor
        return 1.0, 1.0

    def _dense_grad(self, p):
        """p.grad as a dense contiguous tensor (zero when missing)."""
        g = p.grad  # (each read of .grad is a call into torch)
        if g is None:
            g = p.grad = torch.zeros_like(p, memory_format=torch.contiguous_format)
        elif g.is_sparse and self.sparse_as_dense:
            self._sparse_dims[p] = g.sparse_dim()
            g = p.grad = g.to_dense()
        if not g.is_sparse and not g.is_contiguous():
            g = p.grad = g.contiguous()
        return g

    def _allreduce_grad_async(self, slot):
        grad, name = self._dense_grad(slot.p), slot.name
        self._watch(slot.p, grad, name)
        if grad.is_sparse:
            return self._sparse_allreduce_async(grad, name), None
        if self._compression is Compression.none:
            compressed, ctx = grad, None
        else:
            compressed, ctx = self._compression.compress(grad)
        pre, post = self._scale()
        h = ro.allreduce_async_(compressed, name=name, op=self.op, prescale_factor=pre,
                                postscale_factor=post, process_set=self._process_set)
        return h, ctx

    def _grouped_allreduce_async(self, gi):
        grads = [self._dense_grad(p) for p in self._groups[gi]]
        for p, g in zip(self._groups[gi], grads):
            self._watch(p, g, self._names[p])
        if any(g.is_sparse for g in grads):
            raise ValueError("groups cannot hold parameters with sparse gradients unless "
                             "sparse_as_dense=True")
        pairs = [self._compression.compress(g) for g in grads]
        pre, post = self._scale()
        h = ro.grouped_allreduce_async_([c for c, _ in pairs],
                                        name="grouped." + self._names[self._groups[gi][0]],
                                        op=self.op, prescale_factor=pre, postscale_factor=post,
                                        process_set=self._process_set)
        return h, [c for _, c in pairs]

    def _sparse_allreduce_async(self, grad, name):
        return ro.sparse_allreduce_async(grad, name, self.op, self._process_set)

    def synchronize(self):
        """Starts the allreduces not started yet and waits for all of them; the
        parameters' ``.grad`` then hold the reduced gradients. Outside the
        optimizer's process set it does nothing (the gradients stay local)."""
        if self._local:
            self._synchronized = True
            return
        if self._frozen:
            self._take_thawed()
        # A gradient changed in place while its allreduce was in flight (code
        # between backward() and step() that did not call synchronize()
        # first): the change would be overwritten by the result, or mixed
        # into the sum, and the ranks train apart. Raised once every
        # allreduce is done.
        raced = [name for t, v, name in self._flight.values() if t._version != v]
        self._flight.clear()
        for b in self._buckets:
            if b.handle is None:
                self._start_bucket(b)
        for slot in self._slots:
            if slot.group is None and slot.bucket is None and slot not in self._handles:
                self._handles[slot] = self._allreduce_grad_async(slot)
        for gi in range(len(self._groups)):
            if gi not in self._group_handles:
                self._group_handles[gi] = self._grouped_allreduce_async(gi)
        error = None
        # (Reduced in place with nothing to undo: no compression, no gradient
        # densified this step.)
        plain = self._compression is Compression.none and not self._sparse_dims
        for b in self._started_buckets:
            if b.handle is grad_buckets.MEMBERS_ALONE:
                continue
            if b.done:
                error = error or b.error
                if b.error is None:
                    self._refresh_replaced(b)
                continue
            try:
                self._finish_bucket(b)
            except Exception as e:  # wait for the others before raising
                error = error or e
        for slot, (handle, ctx) in self._handles.items():
            try:
                out = _wait(handle)
            except Exception as e:  # wait for the others before raising
                error = error or e
                continue
            if plain and out is slot.p.grad:
                continue
            self._store(slot.p,
                        out if callable(handle) else self._compression.decompress(out, ctx))
        for gi, (handle, ctxs) in self._group_handles.items():
            try:
                outs = _wait(handle)
            except Exception as e:
                error = error or e
                continue
            for p, o, c in zip(self._groups[gi], outs, ctxs):
                self._store(p, self._compression.decompress(o, c))
        self._reset()
        if error is None and raced:
            error = backward_end.changed_in_flight(raced)
        if error is not None:  # (not synchronized: the next step() reduces again)
            raise error
        self._synchronized = True

    def _store(self, p, reduced):
        sparse_dim = self._sparse_dims.pop(p, None) if self._sparse_dims else None
        if sparse_dim is not None:  # sparse_as_dense: sparse again, as it came
            reduced = reduced.to_sparse(sparse_dim)
        if reduced is p.grad:
            return
        if reduced.is_sparse or p.grad.is_sparse:
            p.grad = reduced
        else:
            p.grad.copy_(reduced)

    def _reset(self):
        self._flight.clear()
        self._handles.clear()
        self._sparse_dims.clear()
        self._group_handles.clear()
        self._group_ready = [0] * len(self._groups)
        for b in self._started_buckets:
            b.handle = b.copied = b.into = b.written = b.error = None
            b.done = False
        for b in self._buckets:
            b.ready = 0
        self._started_buckets.clear()
        for slot in self._slots:
            slot.delay = self.backward_passes_per_step

    def set_backward_passes_per_step(self, passes):
        """Changes backward_passes_per_step (takes effect at once)."""
        self.backward_passes_per_step = passes
        self._reset()

    @contextlib.contextmanager
    def skip_synchronize(self):
        """Within it, ``step()`` does not synchronize (call ``synchronize()`` first)."""
        self._should_synchronize = False
        try:
            yield
        finally:
            self._should_synchronize = True

    def step(self, closure=None):
        if closure is not None and not self._local and isinstance(self, torch.optim.LBFGS):
            # (Each closure call's gradients are reduced as it returns.)
            closure = lbfgs_closure.averaged(self, closure)
            self._synchronized = self._scaler_synchronized = False
            return super(self.__class__, self).step(closure)
        if self._should_synchronize:
            if self._scaler_synchronized:
                pass  # (GradScaler's unscale_ synchronized: hora/torch/grad_scaler.py)
            else:
                if self._synchronized:
                    warnings.warn("optimizer.step() called without "
                                  "optimizer.skip_synchronize() after optimizer.synchronize(); "
                                  "the gradients are reduced twice")
                self.synchronize()
        self._synchronized = self._scaler_synchronized = False
        return super(self.__class__, self).step(closure)

    def _local_step(self, closure=None):
        """The wrapped optimizer's step, without any collective."""
        return super(self.__class__, self).step(closure)

    def zero_grad(self, set_to_none=None):
        passes = self.backward_passes_per_step
        if self._handles or self._group_handles or self._started_buckets or any(
                b.ready for b in self._buckets) or any(s.delay != passes for s in self._slots):
            # After a backward pass that started every allreduce, all done
            # now: a step skipped on purpose (GradScaler found an inf in the
            # reduced gradients, alike on every rank), whose results are
            # dropped as torch drops gradients. Else Horovod's error: it
            # would race with allreduces in flight, drop accumulated passes,
            # or leave a rank's allreduce to meet another step's.
            if not (self._all_started() and self._all_done()):
                raise AssertionError("optimizer.zero_grad() was called after loss.backward() "
                                     "but before optimizer.step() or optimizer.synchronize(); "
                                     "this is prohibited as it races with the allreduces in "
                                     "flight")
            error = self._settle_skipped()
            self._reset()
            if error is not None:  # (the gradients are dropped all the same)
                raise error
        # (None: torch's own default, as Horovod's zero_grad() takes it.)
        parent = super(self.__class__, self)
        return parent.zero_grad() if set_to_none is None else parent.zero_grad(set_to_none)

    def load_state_dict(self, *args, **kwargs):
        self._reset()
        self._synchronized = False
        return super(self.__class__, self).load_state_dict(*args, **kwargs)


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none,
                         backward_passes_per_step=1, op=basics.Average,
                         gradient_predivide_factor=1.0, num_groups=0, groups=None,
                         sparse_as_dense=False, process_set=global_process_set):
    """Returns a distributed version of ``optimizer`` (a subclass of its class,
    of the same name, with the same parameter groups and hyper-parameters; its
    state is not copied). See the module doc. Refused with ValueError, where
    Horovod's goes on: an ``op`` other than Average, Sum or Adasum, and a
    ``groups`` list holding a parameter that needs no gradient."""
    process_set_id(process_set)
    grad_scaler.install()
    op = basics.check_op(op)
    if op not in (basics.Average, basics.Sum, basics.Adasum):
        raise ValueError("DistributedOptimizer supports op=Average, Sum or Adasum, got %s"
                         % basics.op_name(op))
    if gradient_predivide_factor != 1.0 and op != basics.Average:
        raise ValueError("gradient_predivide_factor is supported only with op=Average")
    if backward_passes_per_step < 1:
        raise ValueError("backward_passes_per_step must be >= 1")
    if op == basics.Adasum and basics.size() > 1:
        if process_set is not None and process_set.ranks is not None:
            raise UnimplementedError("DistributedOptimizer(op=Adasum) runs on the global process "
                                     "set only (as Horovod's)")
        cls = type(optimizer.__class__.__name__, (optimizer.__class__,),
                   dict(_DistributedAdasumOptimizer.__dict__))
        return _with_defaults(cls(optimizer.param_groups, named_parameters, compression,
                                  backward_passes_per_step), optimizer)
    if num_groups:
        if groups is not None:
            raise ValueError("give groups or num_groups (deprecated), not both")
        groups = num_groups
    cls = type(optimizer.__class__.__name__, (optimizer.__class__, grad_buckets.BucketSteps,
                                              backward_end.BackwardEnd),
               dict(_DistributedOptimizer.__dict__))
    return _with_defaults(cls(optimizer.param_groups, named_parameters, compression,
                              backward_passes_per_step, op, gradient_predivide_factor, groups,
                              sparse_as_dense, process_set), optimizer)


def _with_defaults(distributed, optimizer):
    """``distributed`` with ``optimizer``'s defaults: made from the groups
    alone, it had its class's (torch's SGD: lr 1e-3, or none), and a group
    added later (``add_param_group`` without an lr) took those. ``optimizer``
    warns when it is stepped once ``distributed`` is gone (:mod:`.holding`)."""
    distributed.defaults = dict(optimizer.defaults)
    if holding.WATCHES_THE_WRAPPED and basics.size() > 1:
        optimizer.register_step_pre_hook(holding.stepped_alone(weakref.ref(distributed)))
    return distributed

