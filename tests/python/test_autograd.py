"""Gradients through the differentiable collectives, against analytic values.

Each rank's loss is sum(output * w_r) with a rank-dependent weight w_r, so
d(loss_k)/d(output) = w_k and every backward rule can be written down.
"""

import pytest
import torch

import hora.torch as hvd
from helpers import assert_equal, rows_of, value


def _w(rank, shape, seed=5):
    return value(rank, shape, torch.float64, seed=seed) + 0.5 * (rank + 1)


def _ws(shape, seed=5):
    return [_w(q, shape, seed) for q in range(hvd.size())]


@pytest.mark.parametrize("op", [hvd.Sum, hvd.Average])
def test_allreduce_grad(op):
    r, n = hvd.rank(), hvd.size()
    x = value(r, (3, 4), torch.float64).requires_grad_()
    y = hvd.allreduce(x, op=op, prescale_factor=2.0, postscale_factor=0.5)
    (y * _w(r, (3, 4))).sum().backward()
    want = sum(_ws((3, 4))) * (1.0 / n if op == hvd.Average else 1.0)
    assert_equal(x.grad, want)


def test_allreduce_gradcheck():
    # Every rank perturbs the same element at the same time, so the numerical
    # Jacobian matches the analytic one (allreduce of the grad) for Sum and Average.
    x = value(hvd.rank(), (3,), torch.float64).requires_grad_()
    for op in (hvd.Sum, hvd.Average):
        assert torch.autograd.gradcheck(lambda t: hvd.allreduce(t, op=op), (x,), eps=1e-6,
                                        atol=1e-6)


def test_grouped_allreduce_grad():
    r, n = hvd.rank(), hvd.size()
    xs = [value(r, s, torch.float64, seed=i).requires_grad_() for i, s in enumerate([(2,), (3, 2)])]
    ys = hvd.grouped_allreduce(xs, op=hvd.Average)
    loss = sum((y * _w(r, y.shape, seed=i)).sum() for i, y in enumerate(ys))
    loss.backward()
    for i, x in enumerate(xs):
        assert_equal(x.grad, sum(_ws(x.shape, seed=i)) / n)


def test_allgather_grad():
    r, n = hvd.rank(), hvd.size()
    rows = [rows_of(q) for q in range(n)]
    x = value(r, (rows[r], 2), torch.float64).requires_grad_()
    y = hvd.allgather(x)
    (y * _w(r, y.shape)).sum().backward()
    # Horovod's rule: the gradient is averaged across ranks, then sliced.
    avg = sum(_ws((sum(rows), 2))) / n
    start = sum(rows[:r])
    assert_equal(x.grad, avg[start:start + rows[r]])


def test_broadcast_grad():
    r, n = hvd.rank(), hvd.size()
    root = n - 1
    x = value(r, (4,), torch.float64).requires_grad_()
    y = hvd.broadcast(x, root)
    assert_equal(y.detach(), value(root, (4,), torch.float64))
    (y * _w(r, (4,))).sum().backward()
    want = sum(_ws((4,))) / n if r == root else torch.zeros(4, dtype=torch.float64)
    assert_equal(x.grad, want)


def test_alltoall_grad():
    r, n = hvd.rank(), hvd.size()
    rows = lambda src, dst: (src + 2 * dst) % 3 + 1  # noqa: E731
    splits = [rows(r, p) for p in range(n)]
    x = value(r, (sum(splits), 2), torch.float64).requires_grad_()
    y, received = hvd.alltoall(x, splits=splits)
    assert received.tolist() == [rows(s, r) for s in range(n)]
    (y * _w(r, y.shape)).sum().backward()
    parts = []
    for p in range(n):  # rank p received our rows after those of ranks < r
        wp = _w(p, (sum(rows(s, p) for s in range(n)), 2))
        off = sum(rows(s, p) for s in range(r))
        parts.append(wp[off:off + rows(r, p)])
    assert_equal(x.grad, torch.cat(parts))


@pytest.mark.parametrize("op", [hvd.Sum, hvd.Average])
def test_reducescatter_grad(op):
    r, n = hvd.rank(), hvd.size()
    x = value(r, (2 * n, 3), torch.float64).requires_grad_()
    y = hvd.reducescatter(x, op=op)
    assert y.shape == (2, 3)
    (y * _w(r, y.shape)).sum().backward()
    # Horovod's numbers: the allgathered gradient times size() for Sum, as is for
    # Average (size() times the exact gradient of the sum of the losses).
    want = torch.cat(_ws((2, 3))) * (n if op == hvd.Sum else 1.0)
    assert_equal(x.grad, want)


def test_reducescatter_grad_takes_scale_factors():
    r, n = hvd.rank(), hvd.size()
    x = value(r, (n, 2), torch.float64).requires_grad_()
    y = hvd.reducescatter(x, op=hvd.Sum, prescale_factor=0.5, postscale_factor=3.0)
    (y * _w(r, y.shape)).sum().backward()
    assert_equal(x.grad, torch.cat(_ws((1, 2))) * (n * 1.5))


def test_grouped_allgather_grad():
    r, n = hvd.rank(), hvd.size()
    rows = [rows_of(q) for q in range(n)]
    xs = [value(r, (rows[r], 2), torch.float64).requires_grad_(),
          value(r, (r + 1,), torch.float64, seed=3).requires_grad_(),
          value(r, (), torch.float64, seed=4).requires_grad_()]
    ys = hvd.grouped_allgather(xs)
    assert isinstance(ys, tuple) and len(ys) == 3
    sum(((y * _w(r, y.shape, seed=i)).sum() for i, y in enumerate(ys))).backward()
    # Horovod's rule, per tensor: the gradient averaged across ranks, this rank's rows.
    for i, (x, total, own) in enumerate([(xs[0], sum(rows), rows[:r]),
                                         (xs[1], n * (n + 1) // 2, [q + 1 for q in range(r)]),
                                         (xs[2], n, [1] * r)]):
        avg = sum(_ws((total,) + tuple(x.shape[1:]), seed=i)) / n
        start = sum(own)
        want = avg[start:start + (x.shape[0] if x.dim() else 1)]
        assert_equal(x.grad, want.reshape(x.shape))


@pytest.mark.parametrize("op", [hvd.Sum, hvd.Average])
def test_grouped_reducescatter_grad(op):
    r, n = hvd.rank(), hvd.size()
    xs = [value(r, (2 * n, 3), torch.float64).requires_grad_(),
          value(r, (n,), torch.float64, seed=2).requires_grad_()]
    ys = hvd.grouped_reducescatter(xs, op=op, postscale_factor=2.0)
    assert isinstance(ys, list) and [y.shape for y in ys] == [(2, 3), (1,)]
    sum(((y * _w(r, y.shape, seed=i)).sum() for i, y in enumerate(ys))).backward()
    k = (n if op == hvd.Sum else 1.0) * 2.0
    assert_equal(xs[0].grad, torch.cat(_ws((2, 3), seed=0)) * k)
    assert_equal(xs[1].grad, torch.cat(_ws((1,), seed=1)) * k)


def test_grouped_reducescatter_takes_compression():
    r, n = hvd.rank(), hvd.size()
    xs = [value(r, (n, 2), torch.float32), value(r, (2 * n,), torch.float64, seed=1)]
    # Horovod's positional order: tensors, name, compression, op.
    ys = hvd.grouped_reducescatter(xs, "gr_fp16", hvd.Compression.fp16, hvd.Sum)
    assert [y.dtype for y in ys] == [torch.float32, torch.float64]
    for i, (x, y) in enumerate(zip(xs, ys)):
        full = sum(value(q, x.shape, x.dtype, seed=i) for q in range(n))
        rows = x.shape[0] // n
        assert_equal(y, full[r * rows:(r + 1) * rows])


def test_compressed_allreduce_grad():
    r = hvd.rank()
    x = value(r, (5,), torch.float32).requires_grad_()
    y = hvd.allreduce(x, op=hvd.Sum, compression=hvd.Compression.fp16)
    assert y.dtype == torch.float32
    (y * _w(r, (5,)).float()).sum().backward()
    assert_equal(x.grad, sum(_ws((5,))).float())
