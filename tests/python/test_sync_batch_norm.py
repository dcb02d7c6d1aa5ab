"""SyncBatchNorm on N ranks == one BatchNorm on the concatenation of their batches.

Ranks have different batch sizes (2 + rank rows). Each rank's loss is
sum(y_r * w_r) with w_r its rows of a fixed global weight, so the exact
gradient of the sum of the ranks' losses is the single BatchNorm's gradient
of sum(y * w). float64 throughout; tolerance 1e-10.
"""

import pytest
import torch

import hora.torch as hvd
from hora.torch import compiled_ops

TOL = dict(rtol=1e-10, atol=1e-10)

# (A warning from Hora's own code at training time is a defect: torch's
# "Converting a tensor with requires_grad=True to a scalar" was one.)
pytestmark = pytest.mark.filterwarnings("error::UserWarning")


def _rows():
    return [2 + q for q in range(hvd.size())]


@pytest.mark.parametrize("momentum", [0.3, None], ids=["momentum", "cumulative"])
@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
@pytest.mark.parametrize("shape", [(3,), (3, 5), (3, 2, 4)], ids=["2d", "3d", "4d"])
def test_sync_batch_norm_matches_full_batch(shape, compiled, momentum):
    # Compiled: torch.compile(fullgraph=True) records Hora's operators
    # (hora.torch.compiled_ops), the batch check included.
    if compiled and not compiled_ops.AVAILABLE:
        pytest.skip("torch.compile's operators need torch >= 2.4")
    rows, r = _rows(), hvd.rank()
    start = sum(rows[:r])
    g = torch.Generator().manual_seed(11)
    x_all = torch.randn((sum(rows),) + shape, generator=g, dtype=torch.float64) * 2 + 1
    w_all = torch.randn(x_all.shape, generator=g, dtype=torch.float64)
    c = shape[0]

    sbn = hvd.SyncBatchNorm(c, momentum=momentum).double()
    ref = {1: torch.nn.BatchNorm1d, 2: torch.nn.BatchNorm1d, 3: torch.nn.BatchNorm2d}[len(shape)](
        c, momentum=momentum).double()
    with torch.no_grad():
        for m in (sbn, ref):
            m.weight.copy_(torch.linspace(0.5, 1.5, c, dtype=torch.float64))
            m.bias.copy_(torch.linspace(-0.2, 0.3, c, dtype=torch.float64))

    x = x_all[start:start + rows[r]].clone().requires_grad_()
    xr = x_all.clone().requires_grad_()
    run = torch.compile(sbn, fullgraph=True, backend="aot_eager") if compiled else sbn
    for _ in range(3):  # statistics accumulate (momentum=None: 1, 1/2, 1/3)
        y = run(x)
        yr = ref(xr)
    torch.testing.assert_close(y, yr[start:start + rows[r]], **TOL)
    torch.testing.assert_close(sbn.running_mean, ref.running_mean, **TOL)
    torch.testing.assert_close(sbn.running_var, ref.running_var, **TOL)
    assert int(sbn.num_batches_tracked) == int(ref.num_batches_tracked) == 3

    (y * w_all[start:start + rows[r]]).sum().backward()
    (yr * w_all).sum().backward()
    torch.testing.assert_close(x.grad, xr.grad[start:start + rows[r]], **TOL)
    # Parameter gradients are local; their sum over ranks is the full one.
    torch.testing.assert_close(hvd.allreduce(sbn.weight.grad, op=hvd.Sum), ref.weight.grad, **TOL)
    torch.testing.assert_close(hvd.allreduce(sbn.bias.grad, op=hvd.Sum), ref.bias.grad, **TOL)

    sbn.eval()
    ref.eval()
    torch.testing.assert_close(sbn(x_all), ref(x_all), **TOL)


def test_sync_batch_norm_float32_and_input_check():
    sbn = hvd.SyncBatchNorm(4)
    x = torch.randn(3, 4) + hvd.rank()
    y = sbn(x)
    assert y.dtype == torch.float32 and y.shape == x.shape
    with pytest.raises(ValueError, match="2D"):
        sbn(torch.randn(4))
    # torch's factory arguments, as BatchNorm's.
    sbn64 = hvd.SyncBatchNorm(4, device="cpu", dtype=torch.float64)
    assert sbn64.weight.dtype == torch.float64 and sbn64.running_mean.dtype == torch.float64
    assert sbn64(x.double()).dtype == torch.float64


def test_every_rank_empty_fails_also_when_compiled():
    for compiled in (False, True):
        if compiled and not compiled_ops.AVAILABLE:
            continue
        sbn = hvd.SyncBatchNorm(2)
        run = torch.compile(sbn, fullgraph=True, backend="aot_eager") if compiled else sbn
        with pytest.raises(ValueError, match="every rank's batch is empty"):
            run(torch.zeros(0, 2))

