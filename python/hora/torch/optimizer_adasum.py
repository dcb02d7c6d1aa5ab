"""``DistributedOptimizer(op=Adasum)``: Horovod's Adasum optimizer.

Adasum combines the *updates* the wrapped optimizer would make on each rank,
not the gradients: when a parameter's gradient is ready (after
``backward_passes_per_step`` backward passes), the optimizer steps that
parameter alone, locally, and the change it made (the local delta) is
reduced across ranks with Adasum (in place, asynchronously, overlapping the
rest of backward). ``step()`` waits for every delta and sets each parameter
to its value before the local step plus the combined delta.

Contract (Horovod's):

* Used when ``op=Adasum`` and the job has more than one rank; global process
  set only (NotImplementedError otherwise); the number of ranks must be a
  power of two (NotImplementedError at the first reduction otherwise).
* Only ``named_parameters``, ``compression`` and ``backward_passes_per_step``
  apply; gradient groups, ``sparse_as_dense`` and
  ``gradient_predivide_factor`` do not.
* Every parameter that requires grad gets a zero ``.grad`` at construction,
  so one that receives no gradient still takes part (as does one whose
  ``.grad`` ``zero_grad()`` set to None: ``zero_grad()`` takes torch's
  default for ``set_to_none``, as the plain optimizer does).
* ``synchronize()`` does nothing (``step()`` does the work);
  ``skip_synchronize()`` raises AssertionError; ``zero_grad()`` between
  backward and ``step()`` raises AssertionError.
"""

import contextlib

import torch

from hora.common import basics
from hora.torch import holding
from hora.torch import reduce_ops as ro
from hora.torch.handles import synchronize as _wait


class _DistributedAdasumOptimizer(torch.optim.Optimizer):
    def __init__(self, params, named_parameters, compression, backward_passes_per_step=1):
        super(self.__class__, self).__init__(params)
        self._compression = compression
        all_params = [p for g in self.param_groups for p in g["params"]]
        if named_parameters is not None:
            named = list(named_parameters)
            names = [n for n, _ in named]
            if len(set(names)) != len(names):
                raise ValueError("parameter names in named_parameters must be unique")
            self._parameter_names = {p: n for n, p in named}
            missing = [i for i, p in enumerate(all_params) if p not in self._parameter_names]
            if missing:
                raise ValueError("named_parameters was given but the optimizer's parameters at "
                                 "positions %s are not in it" % missing)
        else:
            self._parameter_names = {p: "allreduce.noname.%d.%d" % (gi, pi)
                                     for gi, g in enumerate(self.param_groups)
                                     for pi, p in enumerate(g["params"])}
        self.backward_passes_per_step = backward_passes_per_step
        self._requires_update = [p for p in all_params if p.requires_grad]
        self._delay = {p: backward_passes_per_step for p in self._requires_update}
        self._starting_models = {p: torch.zeros_like(p, requires_grad=False)
                                 for p in self._requires_update}
        self._handles = {}  # param -> (handle, compression ctx)
        self._grad_accs = []
        for p in self._requires_update:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            acc = p.expand_as(p).grad_fn.next_functions[0][0]
            acc.register_hook(self._make_hook(p))
            self._grad_accs.append(acc)

    def _make_hook(self, p):
        me = holding.held(self)  # (weakly: see holding.held())

        def hook(*unused):
            self = me()
            if self is None:
                return
            if p in self._handles and self._handles[p][0] is not None and self._delay[p] <= 0:
                raise AssertionError(
                    "Gradients were computed more than backward_passes_per_step times before "
                    "call to step(). Increase backward_passes_per_step to accumulate gradients "
                    "locally.")
            self._delay[p] -= 1
            if self._delay[p] == 0:
                self._handles[p] = self._reduce_delta_async(p)
            else:
                self._handles[p] = (None, None)
        return hook

    def _step_one(self, p):
        """The wrapped optimizer's step on parameter ``p`` alone."""
        stashed = [g["params"] for g in self.param_groups]
        try:
            for g in self.param_groups:
                g["params"] = [p] if any(q is p for q in g["params"]) else []
            super(self.__class__, self).step()
        finally:
            for g, params in zip(self.param_groups, stashed):
                g["params"] = params

    def _reduce_delta_async(self, p):
        start = self._starting_models[p]
        with torch.no_grad():
            start.copy_(p)
            self._step_one(p)
            p.sub_(start)  # p holds this rank's delta now
            compressed, ctx = self._compression.compress(p.data)
        try:
            h = ro.allreduce_async_(compressed, name="allreduce." + self._parameter_names[p],
                                    op=basics.Adasum)
        except BaseException:
            with torch.no_grad():
                p.copy_(start)  # (its value before the step)
            raise
        return h, (compressed, ctx)

    def synchronize(self):
        """Nothing to do: ``step()`` waits for the reductions (Horovod's Adasum)."""

    @contextlib.contextmanager
    def skip_synchronize(self):
        raise AssertionError("skip_synchronize cannot be used with the Adasum optimizer: "
                             "step() applies the combined updates itself")
        yield  # pragma: no cover

    def step(self, closure=None):
        loss = closure() if closure is not None else None
        for p in self._requires_update:
            if p not in self._handles or self._handles[p][0] is None:
                self._handles[p] = self._reduce_delta_async(p)
        error = None
        for p, (handle, (compressed, ctx)) in self._handles.items():
            try:
                _wait(handle)
            except Exception as e:  # wait for the others before raising
                error = error or e
                # p held its delta: back to its value before the step (the
                # wrapped optimizer's own state, momentum say, has taken it).
                with torch.no_grad():
                    p.copy_(self._starting_models[p])
                continue
            with torch.no_grad():
                delta = self._compression.decompress(compressed, ctx)
                start = self._starting_models[p]
                start.add_(delta)
                p.copy_(start)
        self._handles.clear()
        for p in self._delay:
            self._delay[p] = self.backward_passes_per_step
        if error is not None:
            raise error
        return loss

    def _local_step(self, closure=None):
        """The wrapped optimizer's step, without any collective (for
        ``broadcast_optimizer_state``'s first state, as Horovod's)."""
        return super(self.__class__, self).step(closure)

    def zero_grad(self, set_to_none=None):
        if self._handles:
            raise AssertionError("optimizer.zero_grad() was called after loss.backward() but "
                                 "before optimizer.step(); this is prohibited as it races with "
                                 "the reductions in flight")
        # (None: torch's own default, as Horovod's zero_grad() takes it.)
        parent = super(self.__class__, self)
        return parent.zero_grad() if set_to_none is None else parent.zero_grad(set_to_none)
