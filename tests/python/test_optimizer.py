"""DistributedOptimizer: N ranks with batch b take the same step as one worker
with batch N*b (computed locally on the concatenation of every rank's batch).

Models are float64, so the only differences are summation order: the
tolerance is 1e-9 (absolute and relative) on every parameter after 3 steps.
Every test runs three ways: small gradients in buckets as by default (the
test model's are all small: one bucket), every gradient alone, and small
buckets beside gradients alone (grad_buckets' limits lowered).
"""

import time
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import hora.torch as hvd
import hora.torch.backward_end as backward_end
import hora.torch.grad_buckets as grad_buckets
import hora.torch.optimizer as hora_optimizer
from helpers import run_alone

TOL = dict(rtol=1e-9, atol=1e-9)
B = 4  # rows per rank per backward pass


def pytest_generate_tests(metafunc):
    # (Tests marked bucketing_once set their own limits, or reduce no
    # gradient of a DistributedOptimizer in this process: once is enough.)
    once = metafunc.definition.get_closest_marker("bucketing_once") is not None
    metafunc.parametrize("bucketing", ["buckets"] if once else
                         ["buckets", "alone", "small_buckets"], indirect=True)


@pytest.fixture(autouse=True)
def bucketing(request, monkeypatch):
    """The bucket limits each test runs with (see the module doc): in
    "small_buckets", the test model's biases share a bucket and its weights
    go alone."""
    if request.param == "alone":
        monkeypatch.setattr(hora_optimizer, "_bucket_limit", lambda: 0)
    elif request.param == "small_buckets":
        monkeypatch.setattr(hora_optimizer, "_bucket_limit", lambda: 200)
        monkeypatch.setattr(grad_buckets, "BUCKET_CAPACITY", 100)
    return request.param


def _started(dopt):
    """The names of the allreduces started this step, and of the gradients
    each reduces (a bucket's members)."""
    out = {h.name: [s.name] for s, (h, _) in dopt._handles.items()}
    for b in dopt._started_buckets:
        out[b.handle.name] = [s.name for s in b.slots]
    return out


def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 3)).double()


def _batch(step, micro=0):
    """The global batch of a step (every rank's rows, rank r's at [r*B, (r+1)*B))."""
    g = torch.Generator().manual_seed(1000 * step + micro)
    x = torch.randn(hvd.size() * B, 5, generator=g, dtype=torch.float64)
    y = torch.randint(0, 3, (hvd.size() * B,), generator=g)
    return x, y


def _mine(t):
    return t[hvd.rank() * B:(hvd.rank() + 1) * B]


def _reference_step(ref, ropt, x, y):
    """One worker's step on the whole batch."""
    ropt.zero_grad()
    F.cross_entropy(ref(x), y).backward()
    ropt.step()


def _assert_same(dist, ref, step, tol=TOL):
    for (name, p), q in zip(dist.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p, q, **tol, msg=lambda m: "step %d %s: %s" % (step, name, m))


def _make_opt(kind, params, eps=1e-8):
    if kind == "adam":
        return torch.optim.Adam(params, lr=0.01, eps=eps)
    return torch.optim.SGD(params, lr=0.1, momentum=0.9)


def _run(kind="sgd", steps=3, passes=1, lr_scale=1.0, eps=1e-8, tol=TOL, **dist_kwargs):
    dist, ref = _model(), _model()
    dopt = hvd.DistributedOptimizer(_make_opt(kind, dist.parameters(), eps),
                                    named_parameters=dist.named_parameters(),
                                    backward_passes_per_step=passes, **dist_kwargs)
    for g in dopt.param_groups:
        g["lr"] *= lr_scale
    ropt = _make_opt(kind, ref.parameters(), eps)
    for step in range(steps):
        dopt.zero_grad()
        ropt.zero_grad()
        for micro in range(passes):
            x, y = _batch(step, micro)
            F.cross_entropy(dist(_mine(x)), _mine(y)).backward()
            F.cross_entropy(ref(x), y).backward()
        dopt.step()
        ropt.step()
        for (name, p), q in zip(dist.named_parameters(), ref.parameters()):
            torch.testing.assert_close(p, q, **tol, msg=lambda m: "step %d %s: %s"
                                       % (step, name, m))
    return dopt


@pytest.mark.parametrize("kind", ["sgd", "adam"])
def test_equivalent_to_one_worker(kind):
    dopt = _run(kind)
    assert isinstance(dopt, torch.optim.SGD if kind == "sgd" else torch.optim.Adam)


def test_backward_passes_per_step_2():
    _run(passes=2)


@pytest.mark.parametrize("groups", [1, 3])
def test_groups(groups):
    _run(groups=groups)


def test_groups_with_backward_passes_per_step_2():
    _run(passes=2, groups=2)


def test_groups_explicit_lists():
    dist, ref = _model(), _model()
    ps = list(dist.parameters())
    dopt = hvd.DistributedOptimizer(_make_opt("sgd", dist.parameters()),
                                    named_parameters=dist.named_parameters(),
                                    groups=[[ps[0], ps[3]], [ps[1]]])  # ps[2] alone
    ropt = _make_opt("sgd", ref.parameters())
    for step in range(2):
        x, y = _batch(step)
        dopt.zero_grad()
        ropt.zero_grad()
        F.cross_entropy(dist(_mine(x)), _mine(y)).backward()
        F.cross_entropy(ref(x), y).backward()
        dopt.step()
        ropt.step()
    for p, q in zip(dist.parameters(), ref.parameters()):
        torch.testing.assert_close(p, q, **TOL)


def test_no_named_parameters_sum_predivide():
    # op=Sum with lr/size, and Average with a predivide factor, each take the
    # step of one worker on the whole batch (computed here, alone).
    dist, pre_model, one = _model(), _model(), _model()
    dopt = hvd.DistributedOptimizer(torch.optim.SGD(dist.parameters(), lr=0.1 / hvd.size()),
                                    op=hvd.Sum)
    pre = hvd.DistributedOptimizer(torch.optim.SGD(pre_model.parameters(), lr=0.1),
                                   named_parameters=pre_model.named_parameters(),
                                   gradient_predivide_factor=2.0)
    one_opt = torch.optim.SGD(one.parameters(), lr=0.1)
    for step in range(2):
        x, y = _batch(step)
        for opt, model in ((dopt, dist), (pre, pre_model)):
            opt.zero_grad()
            F.cross_entropy(model(_mine(x)), _mine(y)).backward()
            opt.step()
        one_opt.zero_grad()
        F.cross_entropy(one(x), y).backward()
        one_opt.step()
    for model in (dist, pre_model):
        for p, q in zip(model.parameters(), one.parameters()):
            torch.testing.assert_close(p, q, **TOL)


@pytest.mark.parametrize("kind", ["sgd", "adam"])
def test_op_sum_with_lr_over_size_equivalent_to_one_worker(kind):
    # Sum of the ranks' mean-loss gradients is size() times the one-worker
    # gradient: with SGD the learning rate divided by size() takes the same
    # step; Adam is invariant to the gradient's scale (up to its eps).
    if kind == "sgd":
        _run(op=hvd.Sum, lr_scale=1.0 / hvd.size())
    else:
        _run("adam", op=hvd.Sum, eps=1e-30, tol=dict(rtol=1e-7, atol=1e-9))


@pytest.mark.parametrize("factor", [0.5, 2.0, 3.0])
@pytest.mark.parametrize("passes", [1, 2])
def test_gradient_predivide_factor_equivalent_to_one_worker(factor, passes):
    # Divided by the factor before the sum and multiplied by factor/size()
    # after: the same average.
    _run(passes=passes, gradient_predivide_factor=factor)


@pytest.mark.parametrize("compression,tol", [("fp16", 1e-3), ("bf16", 1e-2)])
def test_compression_close(compression, tol):
    # float16 / bfloat16 on the wire: equal up to the rounding of the gradients.
    dist, ref = _model(), _model()
    dopt = hvd.DistributedOptimizer(torch.optim.SGD(dist.parameters(), lr=0.1),
                                    named_parameters=dist.named_parameters(),
                                    compression=getattr(hvd.Compression, compression))
    ropt = torch.optim.SGD(ref.parameters(), lr=0.1)
    x, y = _batch(0)
    F.cross_entropy(dist(_mine(x)), _mine(y)).backward()
    F.cross_entropy(ref(x), y).backward()
    dopt.step()
    ropt.step()
    for p, q in zip(dist.parameters(), ref.parameters()):
        assert p.dtype == torch.float64
        torch.testing.assert_close(p, q, rtol=tol, atol=tol)
        assert not torch.equal(p, q)  # the wire really rounded


def test_synchronize_skip_synchronize_and_unused_parameter():
    dist, ref = _model(), _model()
    extra_d = nn.Parameter(torch.ones(2, dtype=torch.float64))  # gets no gradient
    extra_r = nn.Parameter(torch.ones(2, dtype=torch.float64))
    dopt = hvd.DistributedOptimizer(torch.optim.SGD(list(dist.parameters()) + [extra_d], lr=0.1))
    ropt = torch.optim.SGD(list(ref.parameters()) + [extra_r], lr=0.1)
    x, y = _batch(7)
    F.cross_entropy(dist(_mine(x)), _mine(y)).backward()
    F.cross_entropy(ref(x), y).backward()
    dopt.synchronize()
    torch.nn.utils.clip_grad_norm_(dist.parameters(), 0.5)
    torch.nn.utils.clip_grad_norm_(ref.parameters(), 0.5)
    with dopt.skip_synchronize():
        dopt.step()
    ropt.step()
    for p, q in zip(list(dist.parameters()) + [extra_d], list(ref.parameters()) + [extra_r]):
        torch.testing.assert_close(p, q, **TOL)


def test_sparse_gradients():
    for sparse_as_dense in (False, True):
        torch.manual_seed(0)
        dist = nn.Embedding(10, 3, sparse=True).double()
        torch.manual_seed(0)
        ref = nn.Embedding(10, 3, sparse=True).double()
        dopt = hvd.DistributedOptimizer(torch.optim.SGD(dist.parameters(), lr=0.5),
                                        named_parameters=dist.named_parameters(),
                                        sparse_as_dense=sparse_as_dense)
        ropt = torch.optim.SGD(ref.parameters(), lr=0.5)
        idx = torch.arange(hvd.size() * B) % 7
        dist(_mine(idx)).pow(2).mean().backward()
        ref(idx).pow(2).mean().backward()
        dopt.step()
        ropt.step()
        torch.testing.assert_close(dist.weight, ref.weight, **TOL)


def test_misuse_is_reported():
    dist = _model()
    dopt = hvd.DistributedOptimizer(torch.optim.SGD(dist.parameters(), lr=0.1),
                                    named_parameters=dist.named_parameters())
    x, y = _batch(0)
    F.cross_entropy(dist(_mine(x)), _mine(y)).backward()
    with pytest.raises((AssertionError, RuntimeError), match="backward_passes_per_step"):
        F.cross_entropy(dist(_mine(x)), _mine(y)).backward()
    dopt.synchronize()  # completes what the first backward started, on every rank
    dopt.zero_grad()
    with pytest.raises(ValueError, match="unique"):
        hvd.DistributedOptimizer(torch.optim.SGD(dist.parameters(), lr=0.1),
                                 named_parameters=[("a", p) for p in dist.parameters()])
    with pytest.raises(ValueError, match="Average, Sum or Adasum"):
        hvd.DistributedOptimizer(torch.optim.SGD(dist.parameters(), lr=0.1), op=hvd.Min)


def test_allreduces_start_during_backward():
    dist = _model()
    dopt = hvd.DistributedOptimizer(torch.optim.SGD(dist.parameters(), lr=0.1),
                                    named_parameters=dist.named_parameters())
    x, y = _batch(3)
    F.cross_entropy(dist(_mine(x)), _mine(y)).backward()
    # The hooks started every gradient's allreduce, or its bucket's; step()
    # only waits for them.
    started = _started(dopt)
    assert sorted(n for names in started.values() for n in names) == sorted(
        "allreduce." + n for n, _ in dist.named_parameters())
    assert all(n.startswith("allreduce.") for n in started)
    dopt.step()
    assert not dopt._handles and not dopt._started_buckets


@pytest.mark.bucketing_once
def test_unnamed_parameters_do_not_collide_with_unnamed_calls():
    # The core names unnamed calls "allreduce.noname.<N>" from N = 0 in a fresh
    # process; the optimizer's unnamed parameters must not hold those names.
    res = run_alone("""
        import torch, hora.torch as hvd
        hvd.init()
        m = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2))
        opt = hvd.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=0.1))
        m(torch.ones(2, 3)).sum().backward()  # 4 gradients in flight
        for _ in range(5):
            hvd.allreduce(torch.ones(1))
        opt.step()
        print("OK")
    """)
    assert res.returncode == 0 and "OK" in res.stdout, res.stdout + res.stderr


@pytest.mark.parametrize("sparse_as_dense", [False, True])
def test_sparse_adam(sparse_as_dense):
    # SparseAdam takes only sparse gradients: with sparse_as_dense the reduced
    # gradient is made sparse again before the step, as in Horovod.
    torch.manual_seed(0)
    dist = nn.Embedding(10, 3, sparse=True).double()
    torch.manual_seed(0)
    ref = nn.Embedding(10, 3, sparse=True).double()
    dopt = hvd.DistributedOptimizer(torch.optim.SparseAdam(dist.parameters(), lr=0.1),
                                    named_parameters=dist.named_parameters(),
                                    sparse_as_dense=sparse_as_dense)
    ropt = torch.optim.SparseAdam(ref.parameters(), lr=0.1)
    for step in range(3):
        idx = (torch.arange(hvd.size() * B) * (step + 1)) % 9
        dist(_mine(idx)).pow(2).mean().backward()
        ref(idx).pow(2).mean().backward()
        dopt.step()
        assert dist.weight.grad.is_sparse
        ropt.step()
        dopt.zero_grad()
        ropt.zero_grad()
        torch.testing.assert_close(dist.weight, ref.weight, **TOL)


@pytest.mark.bucketing_once
@pytest.mark.parametrize("op", [hvd.Sum, hvd.Average])
def test_sparse_allreduce_async(op):
    r, n = hvd.rank(), hvd.size()
    rows = torch.tensor([[r % 4, (r + 1) % 4]])
    t = torch.sparse_coo_tensor(rows, torch.tensor([[1.0, r], [2.0, r]]), (4, 2))
    h = hvd.sparse_allreduce_async(t, name="sparse.%d" % op, op=op)
    assert callable(h)
    got = hvd.synchronize(h)
    want = torch.zeros(4, 2)
    for q in range(n):
        want[q % 4] += torch.tensor([1.0, q])
        want[(q + 1) % 4] += torch.tensor([2.0, q])
    if op == hvd.Average:
        want /= n
    assert got.is_sparse
    torch.testing.assert_close(got.to_dense(), want)
    with pytest.raises(ValueError, match="sparse"):
        hvd.sparse_allreduce_async(torch.ones(2), name="dense", op=op)


@pytest.mark.bucketing_once
def test_parameter_names_as_horovod():
    m = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 1))
    opt = torch.optim.SGD([{"params": m[0].parameters()}, {"params": m[1].parameters()}], lr=0.1)
    dopt = hvd.DistributedOptimizer(opt)
    assert sorted(dopt._parameter_names.values()) == [
        "allreduce.noname.0.0", "allreduce.noname.0.1", "allreduce.noname.1.0",
        "allreduce.noname.1.1"]
    named = hvd.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=0.1),
                                     named_parameters=m.named_parameters())
    assert set(named._parameter_names.values()) == {"0.weight", "0.bias", "1.weight", "1.bias"}


def test_process_set_non_members_step_locally():
    # Horovod: outside the optimizer's process set it is a plain local optimizer.
    r, n = hvd.rank(), hvd.size()
    if n == 1:
        pytest.skip("needs two ranks (skipped on every rank alike)")
    ps = hvd.add_process_set([0])
    try:
        torch.manual_seed(0)
        m = nn.Linear(3, 1, bias=False).double()
        dopt = hvd.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=1.0),
                                        named_parameters=m.named_parameters(), process_set=ps)
        before = m.weight.detach().clone()
        x = torch.full((1, 3), float(r + 1), dtype=torch.float64)
        m(x).sum().backward()
        dopt.step()
        # Rank 0 is alone in the set: its average is its own gradient; the others
        # step on their own gradient without any collective.
        torch.testing.assert_close(m.weight, before - x, **TOL)
    finally:
        hvd.remove_process_set(ps)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compiled_model_equivalent_to_one_worker(backend):
    # A torch.compile'd model: its gradients still reach the parameters' hooks,
    # and the step equals one worker's on the whole batch (uncompiled).
    if not hasattr(torch, "compile"):
        pytest.skip("torch %s has no torch.compile (skipped on every rank alike)"
                    % torch.__version__)
    if backend == "inductor" and hvd.size() > 2:
        # (Every rank compiles C++ at once: on CI's 2 cores, np 2 checks it.)
        pytest.skip("inductor runs at np 2 only, for CI's time (skipped on every rank alike)")
    dist, ref = _model(), _model()
    compiled = torch.compile(dist, backend=backend)
    dopt = hvd.DistributedOptimizer(torch.optim.SGD(dist.parameters(), lr=0.1, momentum=0.9),
                                    named_parameters=dist.named_parameters())
    ropt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    for step in range(3):
        dopt.zero_grad()
        ropt.zero_grad()
        x, y = _batch(step)
        F.cross_entropy(compiled(_mine(x)), _mine(y)).backward()
        assert sum(len(names) for names in _started(dopt).values()) == len(
            list(dist.parameters())), step
        F.cross_entropy(ref(x), y).backward()
        dopt.step()
        ropt.step()
        for (name, p), q in zip(dist.named_parameters(), ref.parameters()):
            torch.testing.assert_close(p, q, **TOL, msg=lambda m: "%s step %d %s: %s"
                                       % (backend, step, name, m))


def test_zero_grad_takes_torchs_default_as_the_plain_optimizer():
    # Horovod's zero_grad() calls torch's with its default: set_to_none is
    # True from torch 2.0, False before.
    def after_zero_grad(distributed):
        model = torch.nn.Linear(2, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        if distributed:
            opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters())
        model(torch.ones(1, 2)).sum().backward()
        if distributed:
            opt.step()
        opt.zero_grad()
        return [p.grad is None for p in model.parameters()]

    assert after_zero_grad(True) == after_zero_grad(False)


def _counted(dopt, model, x, y):
    """One step; the allreduces it started (names -> members) and how many
    tensors the engine completed for it."""
    before = hvd.engine_counters()["tensors"]
    dopt.zero_grad()
    F.cross_entropy(model(_mine(x)), _mine(y)).backward()
    started = _started(dopt)
    dopt.step()
    return started, hvd.engine_counters()["tensors"] - before


@pytest.mark.bucketing_once
def test_small_gradients_share_a_bucket(monkeypatch):
    # Gradients of at most the limit go in buckets by name; the weight above it
    # alone; one engine tensor a bucket. The results: one worker's step.
    monkeypatch.setattr(hora_optimizer, "_bucket_limit", lambda: 32 << 10)
    monkeypatch.setattr(grad_buckets, "BUCKET_CAPACITY", 1 << 20)
    torch.manual_seed(0)
    dist = nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 1100), nn.Tanh(),
                         nn.Linear(1100, 3)).double()
    ref = nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 1100), nn.Tanh(),
                        nn.Linear(1100, 3)).double()
    ref.load_state_dict(dist.state_dict())
    dopt = hvd.DistributedOptimizer(torch.optim.SGD(dist.parameters(), lr=0.1),
                                    named_parameters=dist.named_parameters())
    ropt = torch.optim.SGD(ref.parameters(), lr=0.1)
    for step in range(2):
        x, y = _batch(step)
        started, tensors = _counted(dopt, dist, x, y)
        # 4.weight is 3 x 1100 doubles (26,400 bytes): in; 2.weight 8 x 1100 out.
        assert started == {
            "allreduce.bucket.0.bias+4": ["allreduce.0.bias", "allreduce.0.weight",
                                          "allreduce.2.bias", "allreduce.4.bias",
                                          "allreduce.4.weight"],
            "allreduce.2.weight": ["allreduce.2.weight"]}, started
        # (The first step also gathers the bucket's layout digest: one more.)
        assert tensors == (3 if step == 0 else 2), tensors
        assert all(b.layout_agreed and b.layout_check is None for b in dopt._buckets)
        _reference_step(ref, ropt, x, y)
        _assert_same(dist, ref, step)


@pytest.mark.parametrize("named", [True, False])
def test_parameters_added_by_add_param_group_are_reduced(named):
    # The optimizer starts with the first layer; the second joins by
    # add_param_group (a layer unfrozen for fine-tuning) with an lr of its
    # own. From then on its gradients are averaged too: every step is one
    # worker's on the whole batch. (Horovod reduced only the parameters the
    # optimizer held at construction: the joined layer trained apart.)
    dist, ref = _model(), _model()
    dopt = hvd.DistributedOptimizer(
        torch.optim.SGD(dist[0].parameters(), lr=0.1),
        named_parameters=dist.named_parameters() if named else None)
    ropt = torch.optim.SGD(ref[0].parameters(), lr=0.1)
    for step in range(3):
        if step == 1:
            dopt.add_param_group({"params": list(dist[2].parameters()), "lr": 0.05})
            ropt.add_param_group({"params": list(ref[2].parameters()), "lr": 0.05})
        x, y = _batch(step)
        dist.zero_grad()
        F.cross_entropy(dist(_mine(x)), _mine(y)).backward()
        dopt.step()
        ref.zero_grad()
        F.cross_entropy(ref(x), y).backward()
        ropt.step()
        for p, q in zip(dist.parameters(), ref.parameters()):
            torch.testing.assert_close(p, q, **TOL)
    assert [s.name for s in dopt._slots][2:] == (
        ["allreduce.2.weight", "allreduce.2.bias"] if named
        else ["allreduce.allreduce.noname.1.0", "allreduce.allreduce.noname.1.1"])


def test_add_param_group_of_parameters_named_parameters_lacks_is_refused():
    dist = _model()
    dopt = hvd.DistributedOptimizer(torch.optim.SGD(dist[0].parameters(), lr=0.1),
                                    named_parameters=dist[0].named_parameters())
    with pytest.raises(ValueError, match="named_parameters given to DistributedOptimizer does "
                                         r"not hold the new group's parameters at positions \[0, 1\]"):
        dopt.add_param_group({"params": list(dist[2].parameters())})
    assert len(dopt.param_groups) == 1 and len(dopt._slots) == 2


def test_a_group_added_without_an_lr_takes_the_wrapped_optimizers():
    # (Made from the groups alone, the wrapper had SGD's class defaults:
    # lr 1e-3 on torch 2, none on torch 1.13, which raised.)
    dist = _model()
    dopt = hvd.DistributedOptimizer(torch.optim.SGD(dist[0].parameters(), lr=0.1, momentum=0.9),
                                    named_parameters=dist.named_parameters())
    dopt.add_param_group({"params": [dist[2].weight]})
    assert (dopt.param_groups[1]["lr"], dopt.param_groups[1]["momentum"]) == (0.1, 0.9)


def test_a_new_optimizer_over_the_same_parameters_replaces_the_old():
    # A second training stage: `opt = DistributedOptimizer(...)` again. The
    # old one is freed as the name is rebound (its hooks held it only
    # weakly), so each gradient is reduced once, by the new one; before,
    # both reduced it and the second found the name in flight. (torch 1.13,
    # whose hooks hold it strongly: del, and a garbage collection, first.)
    import gc
    import weakref

    from hora.torch import holding

    dist, ref = _model(), _model()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(dist.parameters(), lr=0.1),
                                   named_parameters=dist.named_parameters())
    ropt = torch.optim.SGD(ref.parameters(), lr=0.1)
    for step in range(4):
        if step == 2:
            old = weakref.ref(opt)
            if not holding.WATCHES_THE_WRAPPED:
                del opt  # (the old one's hooks hold it: gone only once collected)
                gc.collect()
            opt = hvd.DistributedOptimizer(torch.optim.SGD(dist.parameters(), lr=0.05,
                                                           momentum=0.5),
                                           named_parameters=dist.named_parameters())
            ropt = torch.optim.SGD(ref.parameters(), lr=0.05, momentum=0.5)
            assert old() is None
        x, y = _batch(step)
        opt.zero_grad()
        F.cross_entropy(dist(_mine(x)), _mine(y)).backward()
        opt.step()
        _reference_step(ref, ropt, x, y)
        _assert_same(dist, ref, step)


def test_stepping_the_optimizer_a_dropped_wrapper_wrapped_is_said():
    # hvd.DistributedOptimizer(opt) on a line of its own, then opt.step():
    # nothing is averaged. torch 2: the wrapper is freed at once (its hooks
    # hold it weakly) and opt's step warns; torch 1.13: held strongly, its
    # hooks count the backward passes, and the second fails (Horovod's way).
    from hora.torch import holding

    dist = _model()
    base = torch.optim.SGD(dist.parameters(), lr=0.1)
    hvd.DistributedOptimizer(base, named_parameters=dist.named_parameters())
    x, y = _batch(0)
    for step in range(2):
        base.zero_grad()
        if holding.WATCHES_THE_WRAPPED:
            F.cross_entropy(dist(_mine(x)), _mine(y)).backward()
            if step == 0:
                with pytest.warns(UserWarning, match="given to hvd.DistributedOptimizer, whose "
                                                     "result is gone"):
                    base.step()
            else:
                with warnings.catch_warnings():
                    warnings.simplefilter("error")  # (said once)
                    base.step()
        elif step == 1:
            with pytest.raises(AssertionError, match="more than backward_passes_per_step"):
                F.cross_entropy(dist(_mine(x)), _mine(y)).backward()
        else:
            F.cross_entropy(dist(_mine(x)), _mine(y)).backward()
            base.step()


@pytest.mark.bucketing_once
def test_a_bucket_whose_members_differ_in_shape_across_ranks_fails_every_rank(monkeypatch):
    # Odd ranks hold "a" transposed: the bucket's size agrees, its layout
    # does not. Every rank's step raises (the gradients stay unmixed), on
    # every step; a model alike everywhere then trains, its collectives in
    # step with the others'.
    monkeypatch.setattr(hora_optimizer, "_bucket_limit", lambda: 32 << 10)
    odd = hvd.rank() % 2 == 1

    class Skewed(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Parameter(torch.ones((3, 2) if odd else (2, 3)))
            self.b = nn.Parameter(torch.ones(5))

    m = Skewed()
    # (process_set=None, as the collectives take it: every rank.)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=0.1),
                                   named_parameters=m.named_parameters(), process_set=None)
    others = [r for r in range(hvd.size()) if r % 2 != hvd.rank() % 2]
    for _ in range(2):
        opt.zero_grad()
        (m.a.sum() * (hvd.rank() + 1) + m.b.sum()).backward()
        # (A disagreement across ranks: HorovodInternalError, as a gradient
        # reduced alone reports it.)
        with pytest.raises(hvd.MismatchError) as raised:
            opt.step()
        assert isinstance(raised.value, hvd.HorovodInternalError)
        said = str(raised.value)
        assert "'allreduce.bucket.a+1' have other names or shapes on rank" in said, said
        assert ", ".join(str(r) for r in others) + " than on rank %d, which has a %s, b [5]" % (
            hvd.rank(), "[3, 2]" if odd else "[2, 3]") in said, said
        torch.testing.assert_close(m.a.grad, torch.full_like(m.a, hvd.rank() + 1.0))
        torch.testing.assert_close(m.a, torch.ones_like(m.a))  # no step taken
    dist, ref = _model(), _model()
    dopt = hvd.DistributedOptimizer(torch.optim.SGD(dist.parameters(), lr=0.1),
                                    named_parameters=dist.named_parameters())
    ropt = torch.optim.SGD(ref.parameters(), lr=0.1)
    for step in range(2):
        x, y = _batch(step)
        dopt.zero_grad()
        F.cross_entropy(dist(_mine(x)), _mine(y)).backward()
        dopt.step()
        _reference_step(ref, ropt, x, y)
        _assert_same(dist, ref, step)


@pytest.mark.bucketing_once
def test_buckets_follow_names_not_the_optimizers_order(monkeypatch):
    # Odd ranks list the parameters in reverse: the buckets hold the same
    # gradients in the same places on every rank (by name), so the step is
    # still one worker's. Two buckets (capacity 400 bytes), dtypes apart.
    monkeypatch.setattr(hora_optimizer, "_bucket_limit", lambda: 32 << 10)
    monkeypatch.setattr(grad_buckets, "BUCKET_CAPACITY", 400)
    dist, ref = _model(), _model()
    extra_d = nn.Parameter(torch.arange(3, dtype=torch.float32))  # float32: a bucket apart
    extra_r = nn.Parameter(torch.arange(3, dtype=torch.float32))
    named = list(dist.named_parameters()) + [("extra", extra_d)]
    if hvd.rank() % 2:
        named.reverse()
    dopt = hvd.DistributedOptimizer(torch.optim.SGD([p for _, p in named], lr=0.1),
                                    named_parameters=named)
    ropt = torch.optim.SGD(list(ref.parameters()) + [extra_r], lr=0.1)
    for step in range(2):
        x, y = _batch(step)
        dopt.zero_grad()
        (F.cross_entropy(dist(_mine(x)), _mine(y)) + extra_d.pow(2).sum() * (hvd.rank() + 1)).backward()
        assert sorted(b.name for b in dopt._started_buckets) == [
            "allreduce.bucket.0.bias+1", "allreduce.bucket.2.bias+1"], _started(dopt)
        dopt.step()
        ropt.zero_grad()
        (F.cross_entropy(ref(x), y)
         + extra_r.pow(2).sum() * sum(r + 1 for r in range(hvd.size())) / hvd.size()).backward()
        ropt.step()
        for p, q in zip(list(dist.parameters()) + [extra_d], list(ref.parameters()) + [extra_r]):
            torch.testing.assert_close(p, q, **TOL)


@pytest.mark.bucketing_once
@pytest.mark.parametrize("sparse_as_dense", [False, True])
def test_sparse_gradient_in_a_bucket(monkeypatch, sparse_as_dense):
    # A small embedding's sparse gradient shares a bucket's plan with dense
    # ones: without sparse_as_dense it goes to its own sparse allreduce, with
    # it into the bucket and back to sparse. Either way one worker's step.
    monkeypatch.setattr(hora_optimizer, "_bucket_limit", lambda: 32 << 10)
    monkeypatch.setattr(grad_buckets, "BUCKET_CAPACITY", 1 << 20)

    def model():
        torch.manual_seed(0)
        return nn.Sequential(nn.Embedding(10, 3, sparse=True), nn.Linear(3, 2)).double()

    dist, ref = model(), model()
    dopt = hvd.DistributedOptimizer(torch.optim.SGD(dist.parameters(), lr=0.5),
                                    named_parameters=dist.named_parameters(),
                                    sparse_as_dense=sparse_as_dense)
    assert [b.name for b in dopt._buckets] == ["allreduce.bucket.0.weight+2"]
    ropt = torch.optim.SGD(ref.parameters(), lr=0.5)
    for step in range(2):
        idx = (torch.arange(hvd.size() * B) * (step + 1)) % 7
        dopt.zero_grad()
        dist(_mine(idx)).pow(2).mean().backward()
        dopt.step()
        assert dist[0].weight.grad.is_sparse
        ropt.zero_grad()
        ref(idx).pow(2).mean().backward()
        ropt.step()
        for p, q in zip(dist.parameters(), ref.parameters()):
            torch.testing.assert_close(p, q, **TOL)


@pytest.mark.bucketing_once
def test_bucket_follows_the_model_to_another_dtype(monkeypatch):
    # The model turned float32 after the optimizer was made: the bucket's
    # memory is made again in the gradients' dtype.
    monkeypatch.setattr(hora_optimizer, "_bucket_limit", lambda: 32 << 10)
    monkeypatch.setattr(grad_buckets, "BUCKET_CAPACITY", 1 << 20)
    dist, ref = _model(), _model()
    dopt = hvd.DistributedOptimizer(torch.optim.SGD(dist.parameters(), lr=0.1),
                                    named_parameters=dist.named_parameters())
    ropt = torch.optim.SGD(ref.parameters(), lr=0.1)
    for step, dtype in ((0, torch.float64), (1, torch.float32)):
        dist.to(dtype)
        ref.to(dtype)
        x, y = _batch(step)
        dopt.zero_grad()
        F.cross_entropy(dist(_mine(x.to(dtype))), _mine(y)).backward()
        dopt.step()
        assert dopt._buckets[0].flat.dtype == dtype
        ropt.zero_grad()
        F.cross_entropy(ref(x.to(dtype)), y).backward()
        ropt.step()
        for p, q in zip(dist.parameters(), ref.parameters()):
            torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)


def test_a_gradient_replaced_before_the_step_gets_the_reduced_one():
    # p.grad = p.grad * 2 between backward and step(): the allreduce started
    # in backward, and the reduced gradient lands in the tensor p.grad holds
    # at the step, as Horovod's set_ puts it there (buckets copied it into
    # the tensor they had taken in: each rank stepped on its own doubled
    # gradient, and the ranks drifted apart).
    dist, ref = _model(), _model()
    dopt = hvd.DistributedOptimizer(torch.optim.SGD(dist.parameters(), lr=0.1),
                                    named_parameters=dist.named_parameters())
    ropt = torch.optim.SGD(ref.parameters(), lr=0.1)
    for step in range(2):
        x, y = _batch(step)
        dopt.zero_grad()
        F.cross_entropy(dist(_mine(x)), _mine(y)).backward()
        for p in dist.parameters():
            p.grad = p.grad * 2.0
        dopt.step()
        _reference_step(ref, ropt, x, y)
        _assert_same(dist, ref, step)


def test_zero_grad_after_a_backward_is_refused_while_a_bucket_waits():
    # One layer unused: its bucket has not started when backward ends, and
    # zero_grad() must still refuse (it let it pass, and the next backward
    # failed inside autograd).
    torch.manual_seed(0)
    used, unused = nn.Linear(3, 2).double(), nn.Linear(3, 2).double()
    params = list(used.parameters()) + list(unused.parameters())
    dopt = hvd.DistributedOptimizer(torch.optim.SGD(params, lr=0.1), named_parameters=[
        ("used.w", used.weight), ("used.b", used.bias), ("unused.w", unused.weight),
        ("unused.b", unused.bias)])
    used(torch.ones(1, 3, dtype=torch.float64)).sum().backward()
    with pytest.raises(AssertionError, match="zero_grad"):
        dopt.zero_grad()
    dopt.step()
    dopt.zero_grad()


@pytest.mark.bucketing_once
def test_gradients_edited_after_backward_are_the_reduced_ones():
    # The model's gradients all share a bucket. They hold the reduced values
    # when backward() returns, so an edit before step() (GradScaler's
    # unscale_, clipping) applies to them: the bucket's results were copied
    # over it at synchronize() (GradScaler's plain loop took steps 1024x too
    # large).
    dist, ref = _model(), _model()
    dopt = hvd.DistributedOptimizer(torch.optim.SGD(dist.parameters(), lr=0.1),
                                    named_parameters=dist.named_parameters())
    ropt = torch.optim.SGD(ref.parameters(), lr=0.1)
    for step in range(3):
        dopt.zero_grad()
        ropt.zero_grad()
        x, y = _batch(step)
        F.cross_entropy(dist(_mine(x)), _mine(y)).backward()
        F.cross_entropy(ref(x), y).backward()
        assert dopt._started_buckets and all(b.done for b in dopt._started_buckets)
        for p, q in zip(dist.parameters(), ref.parameters()):
            torch.testing.assert_close(p.grad, q.grad, **TOL)
            p.grad.mul_(0.5)
            q.grad.mul_(0.5)
        torch.nn.utils.clip_grad_norm_(dist.parameters(), 0.05)
        torch.nn.utils.clip_grad_norm_(ref.parameters(), 0.05)
        dopt.step()
        ropt.step()
        for p, q in zip(dist.parameters(), ref.parameters()):
            torch.testing.assert_close(p, q, **TOL)


@pytest.mark.bucketing_once
def test_a_job_of_one_registers_no_hooks():
    # As Horovod's: a GAN's two backward passes into one model's gradients,
    # or two backward() calls before one step(), are no error alone.
    out = run_alone("""
        import torch
        import hora.torch as hvd
        hvd.init()
        m = torch.nn.Linear(3, 1, bias=False)
        torch.nn.init.zeros_(m.weight)
        opt = hvd.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=0.25),
                                       named_parameters=m.named_parameters())
        for _ in range(2):
            m(torch.ones(1, 3)).sum().backward()
            m(torch.ones(1, 3)).sum().backward()
            opt.step()
            opt.zero_grad()
        print("weight", m.weight.tolist())
        """)
    assert out.returncode == 0, out.stderr
    assert "weight [[-1.0, -1.0, -1.0]]" in out.stdout, out.stdout


def _layers():
    torch.manual_seed(1)
    return nn.ModuleList(nn.Linear(3, 3) for _ in range(4)).double()


def _uses(rank, step):
    """The layers rank ``rank`` uses at ``step``: all but one, which one
    depending on the rank (LayerDrop, experts a rank did not route to)."""
    return [i for i in range(4) if i != (rank + step) % 4]


def _loss(layers, x, used):
    return sum(layers[i](x).pow(2).mean() for i in used)


def _step_as_horovods(ref, step, ranks):
    """One SGD step on ``ref`` with Horovod's gradients: each parameter's
    averaged over the ranks, zero where a rank did not use it."""
    grads = [torch.zeros_like(p) for p in ref.parameters()]
    for r in ranks:
        ref.zero_grad()
        x = _batch(step)[0][r * B:(r + 1) * B, :3]
        _loss(ref, x, _uses(r, step)).backward()
        for g, p in zip(grads, ref.parameters()):
            if p.grad is not None:
                g += p.grad / len(ranks)
    with torch.no_grad():
        for g, p in zip(grads, ref.parameters()):
            p -= 0.1 * g


@pytest.mark.bucketing_once
def test_ranks_that_use_different_parameters_step_together(monkeypatch):
    # Each rank leaves another layer unused: the bucket of that layer starts
    # on the other ranks in backward() and on this one at its step(), with
    # zeros. No backward waits for a bucket then (one that waited would
    # wait for good: each rank for a bucket another starts at its step());
    # the step is Horovod's.
    monkeypatch.setattr(hora_optimizer, "_bucket_limit", lambda: 32 << 10)
    monkeypatch.setattr(grad_buckets, "BUCKET_CAPACITY", 100)  # (a layer a bucket)
    dist, ref = _layers(), _layers()
    dopt = hvd.DistributedOptimizer(torch.optim.SGD(dist.parameters(), lr=0.1),
                                    named_parameters=dist.named_parameters())
    assert len(dopt._buckets) == 4
    ranks = list(range(hvd.size()))
    for step in range(3):
        dopt.zero_grad()
        x = _mine(_batch(step)[0])[:, :3]
        _loss(dist, x, _uses(hvd.rank(), step)).backward()
        assert not any(b.done for b in dopt._buckets)  # (none finished in backward)
        dopt.step()
        _step_as_horovods(ref, step, ranks)
        for p, q in zip(dist.parameters(), ref.parameters()):
            torch.testing.assert_close(p, q, **TOL)
    # Every layer used: the backward pass finishes its buckets at its end.
    dopt.zero_grad()
    _loss(dist, _mine(_batch(9)[0])[:, :3], range(4)).backward()
    assert all(b.done for b in dopt._buckets)
    dopt.step()


def test_gradscalers_step_without_synchronize_unscales_reduced_gradients():
    # torch's own AMP pattern, scaler.step(optimizer) with no synchronize():
    # GradScaler unscales the gradients before the optimizer's step reduces
    # them. A backward pass that started every allreduce waits for them at
    # its end, so it unscales reduced gradients, and the step is one
    # worker's (a gradient reduced alone was still in flight before; with
    # the scale 1024 its rank trained apart).
    dist, ref = _model(), _model()
    dopt = hvd.DistributedOptimizer(torch.optim.SGD(dist.parameters(), lr=0.1),
                                    named_parameters=dist.named_parameters())
    ropt = torch.optim.SGD(ref.parameters(), lr=0.1)
    # (torch 1.13 has no GradScaler for CPU: what its step does, by hand.)
    cpu_scaler = getattr(getattr(torch, "amp", None), "GradScaler", None)
    scaler = cpu_scaler("cpu", init_scale=1024.0) if cpu_scaler is not None else None
    for step in range(3):
        x, y = _batch(step)
        dopt.zero_grad()
        loss = F.cross_entropy(dist(_mine(x)), _mine(y))
        (scaler.scale(loss) if scaler is not None else loss * 1024.0).backward()
        assert all(h.poll() for h, _ in dopt._handles.values())
        if scaler is not None:
            scaler.step(dopt)
            scaler.update()
        else:
            for p in dist.parameters():
                p.grad.div_(1024.0)
            dopt.step()
        _reference_step(ref, ropt, x, y)
        _assert_same(dist, ref, step)


@pytest.mark.bucketing_once
def test_a_backward_that_waits_for_a_bucket_another_rank_holds_back_stops(monkeypatch):
    # Rank 0 uses every layer, the others leave one unused and run a
    # collective before their step(): rank 0's backward, which started every
    # bucket, waits for one they start only at step(). It stops waiting
    # after BACKWARD_WAIT_S, says so once, and from then on its buckets
    # finish at step(); the steps are Horovod's.
    import warnings
    monkeypatch.setattr(hora_optimizer, "_bucket_limit", lambda: 32 << 10)
    monkeypatch.setattr(grad_buckets, "BUCKET_CAPACITY", 100)
    monkeypatch.setattr(backward_end, "BACKWARD_WAIT_S", 0.5)
    dist, ref = _layers(), _layers()
    dopt = hvd.DistributedOptimizer(torch.optim.SGD(dist.parameters(), lr=0.1),
                                    named_parameters=dist.named_parameters())
    r, n = hvd.rank(), hvd.size()
    for step in range(2):
        dopt.zero_grad()
        x = _mine(_batch(step)[0])[:, :3]
        used = list(range(4)) if r == 0 else _uses(r, step)
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            loss = _loss(dist, x, used)
            loss.backward()
        waited = [str(w.message) for w in said if "waited 0.5 s" in str(w.message)]
        assert len(waited) == (1 if r == 0 and step == 0 else 0), waited
        if waited:
            assert "at the end of backward()" in waited[0] and "synchronize()" in waited[0]
        hvd.allreduce(loss.detach(), name="loss.%d" % step)
        dopt.step()
        grads = [torch.zeros_like(p) for p in ref.parameters()]
        for k in range(n):
            ref.zero_grad()
            xk = _batch(step)[0][k * B:(k + 1) * B, :3]
            _loss(ref, xk, list(range(4)) if k == 0 else _uses(k, step)).backward()
            for g, p in zip(grads, ref.parameters()):
                if p.grad is not None:
                    g += p.grad / n
        with torch.no_grad():
            for g, p in zip(grads, ref.parameters()):
                p -= 0.1 * g
        for p, q in zip(dist.parameters(), ref.parameters()):
            torch.testing.assert_close(p, q, **TOL)
    assert dopt._wait_in_backward is (r != 0)


@pytest.mark.parametrize("case", ["unused", "fp16", "inf"])
def test_gradscalers_loop_reduces_before_it_unscales(case):
    # torch's AMP loop with no synchronize(), where the backward pass cannot
    # finish every allreduce: a parameter no rank uses (its allreduce starts
    # at step()), fp16 compression (results reach p.grad at synchronize()),
    # and a first step whose gradients overflow (skipped on every rank).
    # GradScaler's unscale_ synchronizes first (hora/torch/grad_scaler.py):
    # one worker's steps, and the skipped step skipped everywhere.
    cpu_scaler = getattr(getattr(torch, "amp", None), "GradScaler", None)
    if cpu_scaler is None:
        pytest.skip("torch %s has no GradScaler for CPU tensors" % torch.__version__)
    dist, ref = _model(), _model()
    unused = nn.Parameter(torch.ones(3, dtype=torch.float64))
    named = list(dist.named_parameters()) + [("unused", unused)]
    dopt = hvd.DistributedOptimizer(
        torch.optim.SGD([p for _, p in named], lr=0.1, momentum=0.9), named_parameters=named,
        compression=hvd.Compression.fp16 if case == "fp16" else hvd.Compression.none)
    ropt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    scaler = cpu_scaler("cpu", init_scale=1024.0)
    tol = dict(rtol=1e-3, atol=1e-3) if case == "fp16" else TOL
    for step in range(3):
        x, y = _batch(step)
        dopt.zero_grad()
        blow = float("inf") if case == "inf" and step == 0 else 1.0
        scaler.scale(F.cross_entropy(dist(_mine(x)), _mine(y)) * blow).backward()
        scaler.step(dopt)
        scaler.update()
        if blow == 1.0:
            ropt.zero_grad()
            F.cross_entropy(ref(x), y).backward()
            ropt.step()
        else:
            assert scaler.get_scale() == 512.0  # (skipped, here as on every rank)
        for (name, p), q in zip(dist.named_parameters(), ref.parameters()):
            torch.testing.assert_close(p, q, **tol, msg=lambda m: "step %d %s: %s"
                                       % (step, name, m))
    assert torch.equal(unused.detach(), torch.ones(3, dtype=torch.float64))


def test_zero_grad_after_a_backward_whose_allreduces_are_done_drops_them():
    # A step GradScaler skips (an inf in the reduced gradients, on every
    # rank) calls no step(): the next zero_grad() drops the finished
    # allreduces' results, as torch drops gradients, and training goes on
    # (Horovod's raised there: nothing is in flight to race with).
    dist, ref = _model(), _model()
    dopt = hvd.DistributedOptimizer(torch.optim.SGD(dist.parameters(), lr=0.1),
                                    named_parameters=dist.named_parameters())
    ropt = torch.optim.SGD(ref.parameters(), lr=0.1)
    x, y = _batch(0)
    F.cross_entropy(dist(_mine(x)), _mine(y)).backward()
    dopt.zero_grad()
    assert not dopt._handles and not dopt._started_buckets
    for step in range(1, 3):
        x, y = _batch(step)
        dopt.zero_grad()
        F.cross_entropy(dist(_mine(x)), _mine(y)).backward()
        dopt.step()
        _reference_step(ref, ropt, x, y)
        _assert_same(dist, ref, step)


def test_a_skipped_step_reads_every_layout_check_and_keeps_a_mismatch():
    # Rank 0 reads its bucket's layout check as backward ends; the others
    # leave theirs to synchronize() (as after a late wait). A step skipped
    # by zero_grad() reads them there: with the same layout, later steps
    # ask nothing more (no rank asks again alone); with a layout that
    # differs, zero_grad() raises it on every rank (it was dropped with the
    # step, and rank 0 then asked again alone, a stall), as is a failed
    # allreduce's error.
    r = hvd.rank()
    for same in (True, False):
        shape = (4, 6) if same or r == 0 else (6, 4)
        ps = [nn.Parameter(torch.ones(shape)), nn.Parameter(torch.ones(3))]
        opt = hvd.DistributedOptimizer(torch.optim.SGD(ps, lr=0.1),
                                       named_parameters=[("skip.w", ps[0]), ("skip.b", ps[1])])
        opt._wait_in_backward = r == 0
        sum((p * (r + 1)).sum() for p in ps).backward()
        deadline = time.monotonic() + 30
        while not opt._all_done() and time.monotonic() < deadline:  # (its allreduce)
            time.sleep(0.01)
        if same:
            opt.zero_grad()
            for _ in range(2):
                sum((p * (r + 1)).sum() for p in ps).backward()
                opt.step()
                opt.zero_grad()
            want = 1 - 0.1 * 2 * sum(range(1, hvd.size() + 1)) / hvd.size()
            torch.testing.assert_close(ps[1].detach(), torch.full((3,), want))
        else:
            # (A bucket's layout check, or where the weight goes alone its
            # own allreduce, finds the shapes differ.)
            with pytest.raises(hvd.MismatchError,
                               match=r"other names or shapes on rank|\[6, 4\]"):
                opt.zero_grad()
    torch.testing.assert_close(hvd.allreduce(torch.ones(2), op=hvd.Sum, name="skip.after"),
                               torch.full((2,), float(hvd.size())))


@pytest.mark.parametrize("case", ["unused", "fp16"])
def test_a_gradient_changed_while_its_allreduce_is_in_flight_is_refused(case):
    # The AMP loop without synchronize() where the backward pass cannot wait
    # for every allreduce: a parameter no rank uses (its allreduce starts at
    # step()), or compression (the result reaches p.grad at synchronize()).
    # Unscaling by hand races with the allreduces in flight: step() raises on
    # every rank, naming the gradients, and takes no step; Horovod's pattern
    # then works. (Where none had started, nothing raced: the step is one
    # worker's.)
    dist, ref = _model(), _model()
    ropt = torch.optim.SGD(ref.parameters(), lr=0.1)
    tol = dict(rtol=1e-3, atol=1e-3) if case == "fp16" else TOL
    unused = nn.Parameter(torch.ones(3, dtype=torch.float64))
    named = list(dist.named_parameters()) + ([("unused", unused)] if case == "unused" else [])
    dopt = hvd.DistributedOptimizer(
        torch.optim.SGD([p for _, p in named], lr=0.1), named_parameters=named,
        compression=hvd.Compression.fp16 if case == "fp16" else hvd.Compression.none)
    x, y = _batch(0)
    before = [p.detach().clone() for p in dist.parameters()]
    (F.cross_entropy(dist(_mine(x)), _mine(y)) * 1024.0).backward()
    for p in dist.parameters():
        p.grad.div_(1024.0)
    if case == "fp16" or dopt._handles or any(b.handle is not None for b in dopt._buckets):
        with pytest.raises(RuntimeError, match="rank %d: DistributedOptimizer: the gradients? "
                                               "of .* changed in place while" % hvd.rank()):
            dopt.step()
        assert all(torch.equal(p, b) for p, b in zip(dist.parameters(), before))
    else:  # (every gradient in the one bucket, unused among them: none started)
        dopt.step()
        _reference_step(ref, ropt, x, y)
        _assert_same(dist, ref, 0)
    dopt.zero_grad()
    (F.cross_entropy(dist(_mine(x)), _mine(y)) * 1024.0).backward()
    dopt.synchronize()
    for p in dist.parameters():
        p.grad.div_(1024.0)
    with dopt.skip_synchronize():
        dopt.step()
    _reference_step(ref, ropt, x, y)
    _assert_same(dist, ref, 1, tol)


def test_zero_grad_while_gradients_accumulate_is_refused():
    # backward_passes_per_step=2: a zero_grad() between the two passes would
    # drop the first one's gradient; Horovod's raises, and so does this.
    dist = _model()
    dopt = hvd.DistributedOptimizer(torch.optim.SGD(dist.parameters(), lr=0.1),
                                    named_parameters=dist.named_parameters(),
                                    backward_passes_per_step=2)
    x, y = _batch(0)
    F.cross_entropy(dist(_mine(x)), _mine(y)).backward()
    with pytest.raises(AssertionError, match="zero_grad"):
        dopt.zero_grad()
    F.cross_entropy(dist(_mine(x)), _mine(y)).backward()
    dopt.step()
    dopt.zero_grad()


@pytest.mark.parametrize("named", [True, False])
def test_a_layer_unfrozen_after_the_optimizer_was_made_is_reduced(named):
    # Fine-tuning: the first layer frozen when the optimizer is made, unfrozen
    # after a step. From then its gradients are reduced as the others' (they
    # were not in Horovod's: each rank trained it apart); one worker's steps.
    dist, ref = _model(), _model()
    for m in (dist, ref):
        m[0].requires_grad_(False)
    dopt = hvd.DistributedOptimizer(
        torch.optim.SGD(dist.parameters(), lr=0.1, momentum=0.9),
        named_parameters=dist.named_parameters() if named else None)
    ropt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    for step in range(4):
        if step == 1:
            for m in (dist, ref):
                m[0].requires_grad_(True)
        x, y = _batch(step)
        dopt.zero_grad()
        F.cross_entropy(dist(_mine(x)), _mine(y)).backward()
        dopt.step()
        _reference_step(ref, ropt, x, y)
        _assert_same(dist, ref, step)
    assert not dopt._frozen


@pytest.mark.parametrize("line_search", [None, "strong_wolfe"])
def test_lbfgs_takes_the_same_steps_as_one_worker_on_the_averaged_loss(line_search):
    # LBFGS's line search and early exit branch on the closure's loss: the
    # ranks' own losses made them take different branches with the same
    # averaged gradients (apart by 0.35 after 3 steps); the loss is averaged.
    r, n = hvd.rank(), hvd.size()

    def make():
        torch.manual_seed(0)
        return nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 1))

    def data(k):
        x = torch.randn(8, 6, generator=torch.Generator().manual_seed(k))
        return x, x.sum(1, keepdim=True)

    model, ref = make(), make()
    opt = hvd.DistributedOptimizer(
        torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=4, line_search_fn=line_search),
        named_parameters=model.named_parameters())
    ref_opt = torch.optim.LBFGS(ref.parameters(), lr=0.5, max_iter=4, line_search_fn=line_search)
    x, y = data(r)

    def closure():
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        return loss

    def ref_closure():
        ref_opt.zero_grad()
        loss = sum(((ref(a) - b) ** 2).mean() for a, b in map(data, range(n))) / n
        loss.backward()
        return loss

    for _ in range(3):
        loss = opt.step(closure)
        ref_loss = ref_opt.step(ref_closure)
        assert float(loss) == pytest.approx(float(ref_loss.detach()), rel=1e-5)
    for p, q in zip(model.parameters(), ref.parameters()):
        assert torch.allclose(p, q, atol=1e-5), (p - q).abs().max()
        assert torch.equal(hvd.broadcast(p.detach(), 0), p.detach())  # (every rank alike)


def test_lbfgs_reduces_each_closures_gradients_with_compression_and_unused_layers():
    # LBFGS reads the gradients as its closure returns: they are reduced
    # there (compressed ones, and where a rank leaves a layer unused, which
    # left them local: ranks 1.5 apart, or zero_grad's AssertionError).
    r, n = hvd.rank(), hvd.size()
    torch.manual_seed(0)
    model = nn.ModuleDict({"a": nn.Linear(6, 8), "b": nn.Linear(8, 8), "c": nn.Linear(8, 1)})
    opt = hvd.DistributedOptimizer(
        torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=4, line_search_fn="strong_wolfe"),
        named_parameters=model.named_parameters(), compression=hvd.Compression.fp16)
    x = torch.randn(8, 6, generator=torch.Generator().manual_seed(r))

    def closure():
        opt.zero_grad()
        h = torch.tanh(model["a"](x))
        if r == 0:  # (rank 0 alone uses b)
            h = torch.tanh(model["b"](h))
        loss = ((model["c"](h) - x.sum(1, keepdim=True)) ** 2).mean()
        loss.backward()
        return loss

    for _ in range(3):
        loss = opt.step(closure)
        assert torch.equal(hvd.broadcast(loss, 0), loss)
    for p in model.parameters():
        assert torch.equal(hvd.broadcast(p.detach(), 0), p.detach())
    with pytest.raises(ValueError, match="LBFGS calls its closure several times"):
        hvd.DistributedOptimizer(torch.optim.LBFGS(model.parameters()),
                                 named_parameters=model.named_parameters(),
                                 backward_passes_per_step=2).step(closure)
