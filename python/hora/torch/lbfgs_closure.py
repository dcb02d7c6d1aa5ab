"""LBFGS under DistributedOptimizer: the closure it calls several times a
step, each call's gradients reduced as it returns and its loss averaged."""

import torch

from hora.common import basics
from hora.common.process_sets import global_process_set
from hora.torch import reduce_ops as ro
from hora.torch.handles import synchronize as _wait


def averaged(opt, closure):
    """``closure`` for LBFGS wrapped by ``opt``: LBFGS reads the gradients as
    the closure returns, so they are reduced there (``opt.synchronize()``),
    and its line search and early exit branch on the loss, which is
    averaged across the ranks (with each rank's own they would take
    different branches, and closure calls, with the same averaged
    gradients, training apart)."""
    if opt.backward_passes_per_step != 1:
        raise ValueError("DistributedOptimizer(LBFGS, backward_passes_per_step=%d): LBFGS calls "
                         "its closure several times a step; accumulate inside the closure "
                         "instead" % opt.backward_passes_per_step)
    calls = [0]

    def call():
        loss = closure()
        calls[0] += 1
        opt.synchronize()
        opt._synchronized = False
        value = torch.as_tensor(loss.detach() if torch.is_tensor(loss) else loss,
                                dtype=torch.float64).clone()
        _wait(ro.allreduce_async_(value, name="lbfgs.loss.%d" % calls[0], op=basics.Average,
                                  process_set=opt._process_set or global_process_set))
        return value
    return call
