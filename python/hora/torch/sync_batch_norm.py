"""``SyncBatchNorm``: batch normalization whose batch statistics span all ranks.

In training mode each rank computes, per channel, its sample count, mean and
sum of squared deviations; one allgather shares them and every rank combines
them into the global mean and (biased) variance of the union of all ranks'
batches, exactly as one BatchNorm would on the concatenated batch. The
running statistics are updated with the global mean and the unbiased global
variance. Backward is exact for the sum of all ranks' losses: the gradient
of the shared statistics is summed across ranks (one allreduce), as in
Horovod's SyncBatchNorm. In eval mode (with running stats) it is a plain
BatchNorm. Works on CPU tensors of any floating dtype (float16/bfloat16 are
computed in float32), and on CUDA tensors through Hora's GPU path (tested
only where a GPU is: tests/python/test_torch_cuda.py). Every rank must call
it in training mode together. Inside torch.compile it is Hora's operators
(hora.torch.compiled_ops), with no graph break (``momentum=None`` too).
"""

import torch
import torch.nn.functional as F
from torch.nn.modules.batchnorm import _BatchNorm

from hora.common import basics
from hora.torch import traced
from hora.torch.autograd_ops import allgather_sum_grad


class SyncBatchNorm(_BatchNorm):
    """Drop-in for ``torch.nn.BatchNorm{1,2,3}d`` (input of shape (N, C, ...)),
    ``device=`` and ``dtype=`` for its parameters and buffers included."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, device=None, dtype=None):
        super().__init__(num_features, eps, momentum, affine, track_running_stats,
                         device=device, dtype=dtype)

    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError("expected at least 2D input (got %dD input)" % input.dim())

    def forward(self, input):
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:  # cumulative moving average
                factor = self._cumulative_factor()
        use_batch_stats = self.training or not self.track_running_stats
        if not use_batch_stats or basics.size() == 1:
            return F.batch_norm(input, self.running_mean, self.running_var, self.weight,
                                self.bias, use_batch_stats, factor, self.eps)
        return self._sync_forward(input, factor)

    def _cumulative_factor(self):
        """1 / batches tracked; a tensor while torch.compile traces (the
        count is data there; torch 2.15 traces ``float`` of it, but a tensor
        needs no such support)."""
        if traced.compiling():
            return torch.reciprocal(self.num_batches_tracked.to(torch.float64))
        return 1.0 / float(self.num_batches_tracked)

    def _sync_forward(self, input, factor):
        c = input.shape[1]
        compute = torch.float64 if input.dtype == torch.float64 else torch.float32
        x = input.to(compute)
        dims = [0] + list(range(2, x.dim()))
        shape = [1, c] + [1] * (x.dim() - 2)
        n = x.numel() // c if c else 0
        if n > 0:
            mean = x.mean(dims)
            m2 = ((x - mean.view(shape)) ** 2).sum(dims)
        else:  # an empty local batch contributes nothing
            mean = x.new_zeros(c) + x.sum() * 0
            m2 = mean.clone()
        count = x.new_full((1,), float(n))
        stats = torch.cat([count, mean, m2]).unsqueeze(0)
        # One row per rank: [count, mean (C), M2 (C)].
        every = allgather_sum_grad(stats, rows_per_rank=1)
        counts = every[:, :1]
        total = counts.sum()
        if traced.compiling():  # (the count is data there: checked as the graph runs)
            total = traced.nonempty_batch(total)
        elif float(total.detach()) == 0:
            raise ValueError("SyncBatchNorm: every rank's batch is empty")
        means, m2s = every[:, 1:1 + c], every[:, 1 + c:]
        g_mean = (counts * means).sum(0) / total
        g_m2 = (m2s + counts * (means - g_mean) ** 2).sum(0)
        var = g_m2 / total
        if self.training and self.track_running_stats:
            with torch.no_grad():
                unbiased = g_m2 / torch.clamp(total - 1.0, min=1.0)
                self.running_mean.mul_(1 - factor).add_(factor * g_mean.to(self.running_mean))
                self.running_var.mul_(1 - factor).add_(factor * unbiased.to(self.running_var))
        y = (x - g_mean.view(shape)) * torch.rsqrt(var + self.eps).view(shape)
        if self.weight is not None:
            y = y * self.weight.to(compute).view(shape) + self.bias.to(compute).view(shape)
        return y.to(input.dtype)
