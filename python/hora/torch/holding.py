"""How a DistributedOptimizer's gradient hooks hold it, and the warning
for a program that steps the optimizer it wrapped instead of it.
"""

import warnings
import weakref

import torch

# torch 2.0's step hooks: with them the gradient hooks hold their optimizer
# weakly (held()), and the optimizer it wraps says when it is stepped
# without it.
WATCHES_THE_WRAPPED = hasattr(torch.optim.Optimizer, "register_step_pre_hook")


def held(optimizer):
    """How a gradient hook holds ``optimizer``: a call that returns it, or
    None once it is gone. Weakly where torch watches the wrapped optimizer:
    a program that makes a new DistributedOptimizer over the same parameters
    (``opt = hvd.DistributedOptimizer(...)`` again, a new stage) frees the
    old at once, and its hooks, left on gradient accumulators the new one
    holds, do nothing (held strongly, the old one lived on in a cycle until
    a garbage collection and both reduced each gradient). One dropped as it
    is made (``hvd.DistributedOptimizer(opt)`` on a line of its own, then
    ``opt.step()``) then reduces nothing: ``opt``'s step warns. With torch
    1.13, strongly: that mistake fails at the second backward()."""
    if WATCHES_THE_WRAPPED:
        return weakref.ref(optimizer)
    return lambda: optimizer


def stepped_alone(made):
    """A step pre-hook for the optimizer a DistributedOptimizer wraps: warns
    once when it is stepped after ``made()`` (the DistributedOptimizer) is
    gone."""
    said = []

    def pre_hook(optimizer, args, kwargs):
        if made() is None and not said:
            said.append(True)
            warnings.warn(
                "%s.step(): this optimizer was given to hvd.DistributedOptimizer, whose result "
                "is gone: its gradients are not averaged across ranks, and the ranks' models "
                "drift apart; keep what hvd.DistributedOptimizer(...) returns and step that"
                % type(optimizer).__name__, stacklevel=3)

    return pre_hook
