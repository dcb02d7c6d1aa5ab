"""hora.torch on real CUDA tensors: runs on a machine with a GPU and
HORA_DEVICE=cuda (scripts/gpu_run.sh); every rank skips it alike elsewhere.

Several ranks may share one GPU: Hora stages GPU tensors through pinned host
memory, which needs no GPU of its own per rank.
"""

import os

import pytest
import torch

import hora.torch as hvd
from helpers import all_values, reduce_reference, value

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available() or os.environ.get("HORA_DEVICE") == "host",
    reason="needs a GPU and HORA_DEVICE=cuda or auto (scripts/gpu_run.sh)")


def device():
    d = torch.device("cuda", hvd.local_rank() % torch.cuda.device_count())
    torch.cuda.set_device(d)
    return d


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int32])
@pytest.mark.parametrize("op", [hvd.Sum, hvd.Average, hvd.Min, hvd.Max])
@pytest.mark.parametrize("shape", [(0,), (1,), (1031,), (64, 1025)])
def test_allreduce_of_cuda_tensors(dtype, op, shape):
    d = device()
    out = hvd.allreduce(value(hvd.rank(), shape, dtype).to(d), op=op,
                        name="cuda.ar.%s.%s.%s" % (dtype, op, shape))
    assert out.device == d
    want = reduce_reference(all_values(shape, dtype), op, dtype)
    torch.testing.assert_close(out.cpu(), want, rtol=1e-2, atol=1e-2)


def test_inplace_grouped_and_async():
    d = device()
    ts = [value(hvd.rank(), (i * 37 + 1,), torch.float32, seed=i).to(d) for i in range(20)]
    hs = [hvd.allreduce_async_(t, op=hvd.Sum, name="cuda.async.%d" % i) for i, t in enumerate(ts)]
    for h in hs:
        hvd.synchronize(h)
    sums = [reduce_reference(all_values((i * 37 + 1,), torch.float32, seed=i), hvd.Sum,
                             torch.float32) for i in range(len(ts))]
    for t, want in zip(ts, sums):
        torch.testing.assert_close(t.cpu(), want)
    # Every rank holds the sums now: their Average is the sums again.
    outs = hvd.grouped_allreduce([t.clone() for t in ts], op=hvd.Average, name="cuda.group")
    assert all(o.device == d for o in outs)
    for o, want in zip(outs, sums):
        torch.testing.assert_close(o.cpu(), want)


def test_a_tensor_still_being_computed_is_read_after_its_kernels():
    # No synchronize: the GPU spins for about half a second before the kernel
    # that writes the tensor, all queued on torch's stream when the tensor is
    # handed over; Hora's stream must wait for them (without DLPack's stream
    # argument it would read the zeros).
    d = device()
    x = torch.zeros(1 << 20, device=d)
    torch.cuda._sleep(1 << 30)  # GPU clock cycles: ~0.5 s at 2 GHz
    x.fill_(float(hvd.rank() + 1))
    out = hvd.allreduce(x, op=hvd.Sum, name="cuda.pending")
    n = hvd.size()
    assert torch.all(out == float(n * (n + 1) // 2)).item()


def test_allgather_broadcast_alltoall_on_cuda():
    d = device()
    r, n = hvd.rank(), hvd.size()
    g = hvd.allgather(torch.full((r + 1, 2), float(r), device=d), name="cuda.ag")
    assert g.device == d
    assert g.shape[0] == n * (n + 1) // 2
    b = torch.full((5,), float(r), device=d)
    hvd.broadcast_(b, root_rank=n - 1, name="cuda.bc")
    assert torch.all(b == n - 1).item()
    a = hvd.alltoall(torch.arange(n, dtype=torch.float32, device=d) + 10 * r, name="cuda.a2a")
    assert a.device == d
    assert a.cpu().tolist() == [float(r + 10 * q) for q in range(n)]


def test_distributed_optimizer_on_cuda():
    d = device()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1)).to(d)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters())
    x = torch.randn(32, 16, device=d) * (hvd.rank() + 1)
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    flat = torch.cat([p.detach().flatten() for p in model.parameters()])
    every = hvd.allgather(flat.unsqueeze(0), name="cuda.params")
    for q in range(hvd.size()):
        torch.testing.assert_close(every[q], every[0])


def test_ranks_that_disagree_on_the_device_are_named():
    if hvd.size() < 2:
        pytest.skip("a disagreement needs two ranks")  # (every rank skips alike)
    d = device()
    t = torch.ones(8, device=d) if hvd.rank() == 0 else torch.ones(8)
    with pytest.raises(Exception) as e:
        hvd.allreduce(t, op=hvd.Sum, name="cuda.mixed")
    # (Each rank's tensor and device, named: rank 0's on the GPU, the others'
    # on the CPU.)
    assert "rank 0 float32[8] sum on cuda" in str(e.value), str(e.value)
    assert "rank 1 float32[8] sum on cpu" in str(e.value), str(e.value)


def test_sync_batch_norm_on_cuda_matches_one_batch_norm():
    # Ranks have 2 + rank rows; float64, so the only difference from one
    # BatchNorm (on the CPU) over the concatenated batch is rounding.
    d = device()
    rows = [2 + q for q in range(hvd.size())]
    start, r = sum(rows[:hvd.rank()]), hvd.rank()
    g = torch.Generator().manual_seed(11)
    x_all = torch.randn((sum(rows), 3, 4), generator=g, dtype=torch.float64) * 2 + 1
    w_all = torch.randn(x_all.shape, generator=g, dtype=torch.float64)
    sbn = hvd.SyncBatchNorm(3, momentum=0.3).double().to(d)
    ref = torch.nn.BatchNorm1d(3, momentum=0.3).double()
    x = x_all[start:start + rows[r]].to(d).requires_grad_()
    xr = x_all.clone().requires_grad_()
    for _ in range(2):
        y = sbn(x)
        yr = ref(xr)
    tol = dict(rtol=1e-9, atol=1e-9)
    assert y.device == d
    torch.testing.assert_close(y.cpu(), yr[start:start + rows[r]].detach(), **tol)
    torch.testing.assert_close(sbn.running_var.cpu(), ref.running_var, **tol)
    (y * w_all[start:start + rows[r]].to(d)).sum().backward()
    (yr * w_all).sum().backward()
    torch.testing.assert_close(x.grad.cpu(), xr.grad[start:start + rows[r]], **tol)


def test_broadcast_optimizer_state_sparse_on_cuda():
    # An optimizer with no state yet gets zero gradients on its parameters'
    # GPU (torch refuses a gradient on another device), sparse where the
    # optimizer or the model makes them so.
    d = device()
    emb = torch.nn.Embedding(6, 2, sparse=True).to(d)
    sopt = torch.optim.SparseAdam(emb.parameters(), lr=0.1)
    hvd.broadcast_optimizer_state(sopt, root_rank=0)
    state = sopt.state[emb.weight]
    assert float(state["step"]) == 1.0 and state["exp_avg"].device == d
    model = torch.nn.Sequential(torch.nn.Embedding(6, 2, sparse=True),
                                torch.nn.Linear(2, 1)).to(d)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    hvd.broadcast_optimizer_state(opt, root_rank=0, model=model)
    buf = opt.state[model[0].weight]["momentum_buffer"]
    assert buf.is_sparse and buf.device == d
    assert not opt.state[model[1].weight]["momentum_buffer"].is_sparse


def test_broadcast_optimizer_state_on_cuda():
    d = device()
    torch.manual_seed(hvd.rank())  # every rank's model and state differ
    model = torch.nn.Linear(8, 4).to(d)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    model(torch.randn(5, 8, device=d)).sum().backward()
    opt.step()
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    state = [opt.state[p][k] for p in model.parameters() for k in ("exp_avg", "exp_avg_sq")]
    assert all(s.device == d for s in state)
    flat = torch.cat([s.flatten() for s in state])
    every = hvd.allgather(flat.unsqueeze(0), name="cuda.opt_state")
    for q in range(hvd.size()):
        torch.testing.assert_close(every[q], every[0])
