"""Elastic training's state and loop (hora.torch.elastic), at a fixed world.

Every rank fails at the same point here (a HorovodInternalError raised by
the test), so the reset's shutdown and init re-form the same world: what is
tested is the roll back to the last commit, the reset, the sync from rank
0, the host-update check and the sampler's resharding. Worlds re-formed
with fewer workers, under horarun's elastic mode: tests/mp/elastic_kill_test.sh.
"""

import random

import pytest
import torch
import torch.nn as nn

import hora.torch as hvd
from hora.common import basics
from hora.common.elastic import HostUpdateResult, ObjectState, notify_hosts_updated


def _same_everywhere(t):
    every = hvd.allgather(t.detach().reshape(1, -1).double())
    return all(torch.equal(every[q], every[0]) for q in range(hvd.size()))


def _flat(model):
    return torch.cat([t.detach().reshape(-1).double() for _, t in sorted(model.state_dict().items())])


def _bcast(obj):
    return hvd.broadcast_object(obj, 0, name="test.elastic")


def test_object_state_saves_references_restores_and_syncs_rank_0s_commit():
    state = ObjectState(_bcast, hvd.rank, epoch=hvd.rank(), seen=[])
    state.sync()  # rank 0's saved values everywhere
    assert state.epoch == 0 and state.seen == []
    state.epoch = 5
    state.commit()
    state.epoch = 9
    state.seen.append("in place")  # (a reference: the saved copy sees it, as Horovod's)
    state.restore()
    assert state.epoch == 5 and state.seen == ["in place"]
    # A value changed on rank 0 only, uncommitted: sync sends the commit.
    if hvd.rank() == 0:
        state.epoch = 77
    state.sync()
    assert state.epoch == 5


def _model(seed):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))


def _batch(step):
    g = torch.Generator().manual_seed(1000 + step)
    return torch.randn(8, 3, generator=g), torch.randn(8, 1, generator=g)


def _train_step(model, opt, step):
    x, y = _batch(step)
    opt.zero_grad()
    nn.functional.mse_loss(model(x), y).backward()
    opt.step()


def test_torch_state_keeps_deep_copies_and_syncs_from_rank_0():
    model = _model(seed=10 + hvd.rank())
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    state = hvd.elastic.TorchState(model, opt, epoch=0)
    state.sync()
    assert _same_everywhere(_flat(model))
    _train_step(model, opt, 0)
    state.commit()
    committed = _flat(model).clone()
    committed_momentum = opt.state_dict()["state"][0]["momentum_buffer"].clone()
    _train_step(model, opt, 1)
    assert not torch.equal(_flat(model), committed)
    state.restore()
    assert torch.equal(_flat(model), committed)
    assert torch.equal(opt.state_dict()["state"][0]["momentum_buffer"], committed_momentum)
    # A new model assigned is handled and saved at once.
    other = _model(seed=99)
    state.model = other
    with torch.no_grad():
        for p in other.parameters():
            p.add_(1.0)
    state.restore()
    assert state.model is other and torch.equal(_flat(other), _flat(_model(seed=99)))


def test_elastic_sampler_keeps_horovods_order_and_reshards_the_rest(monkeypatch):
    data = list(range(23))
    sampler = hvd.elastic.ElasticSampler(data, shuffle=True, seed=4)
    sampler.set_epoch(2)
    order = list(range(23))
    random.Random(4 + 2).shuffle(order)  # Horovod's order: Python's random, seed + epoch
    n, r = hvd.size(), hvd.rank()
    per_rank = -(-23 // n)
    padded = order + order[:per_rank * n - 23]
    assert list(sampler) == padded[r::n] and len(sampler) == per_rank
    # Two batches of 2 done on every rank, then the world changes to 3 ranks:
    # what is left of the epoch is shared out again, none of it lost or done
    # twice, and nothing already processed comes back.
    sampler.record_batch(0, 2)
    sampler.record_batch(1, 2)
    done = 4 * n
    assert sampler.state_dict() == {"epoch": 2, "processed_num": done}
    shards = []
    for q in range(3):
        monkeypatch.setattr(basics, "size", lambda: 3)
        monkeypatch.setattr(basics, "rank", lambda q=q: q)
        sampler.reset()
        shards.append(list(sampler))
    monkeypatch.undo()
    sampler.reset()
    left = order[done:]
    got = [i for shard in shards for i in shard]
    assert sorted(set(got)) == sorted(left) and len(got) == 3 * -(-len(left) // 3)
    assert not set(got) & set(order[:done])
    # state_dict round trip.
    other = hvd.elastic.ElasticSampler(data, shuffle=True, seed=4)
    other.load_state_dict(sampler.state_dict())
    assert list(other) == list(sampler)


class _CountingState(hvd.elastic.TorchState):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        object.__setattr__(self, "syncs", 0)

    def sync(self):
        object.__setattr__(self, "syncs", self.syncs + 1)
        super().sync()


def test_a_worker_without_optimizer_state_syncs_to_rank_0s_weights():
    # A worker that just joined has no optimizer state; its sync takes a
    # local step to make one, which weight decay turns into a change of its
    # weights: they must still be rank 0's after the sync.
    model = _model(seed=30 + hvd.rank())
    opt = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9, weight_decay=0.5)
    if hvd.rank() == 0:
        _train_step(model, opt, 0)  # (state: momentum buffers)
    state = hvd.elastic.TorchState(model, opt, epoch=0)
    state.sync()
    assert _same_everywhere(_flat(model))
    assert len(opt.state_dict()["state"]) == len(list(model.parameters()))
    # The same with a handler of one's own for optimizers (the registry's).
    from hora.torch.elastic import state as state_module

    class MyOptimizerHandler(state_module.OptimizerStateHandler.__base__):
        def sync(self):
            hvd.broadcast_optimizer_state(self.value, root_rank=0)

    saved = state_module.get_handler_registry()
    state_module.set_handler_registry([(torch.optim.Optimizer, MyOptimizerHandler)] + saved)
    try:
        model = _model(seed=40 + hvd.rank())
        opt = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9, weight_decay=0.5)
        if hvd.rank() == 0:
            _train_step(model, opt, 0)
        state = hvd.elastic.TorchState(model, opt, epoch=0)
        assert isinstance(state._handlers["optimizer"], MyOptimizerHandler)
        state.sync()
        assert _same_everywhere(_flat(model))
    finally:
        state_module.set_handler_registry(saved)


def test_run_rolls_back_to_the_last_commit_resets_and_finishes():
    # 8 steps, each committed; every rank fails after step 5's update (before
    # its commit). The run must redo step 5 from step 4's commit and end with
    # the model of 8 steps without a failure, each step committed once.
    model = _model(seed=20 + hvd.rank())
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    state = _CountingState(model, opt, step=0, committed=())
    calls = []
    state.register_reset_callbacks([lambda: calls.append("first"), lambda: calls.append("second")])
    failed = []

    @hvd.elastic.run
    def train(state):
        while state.step < 8:
            _train_step(state.model, state.optimizer, state.step)
            if state.step == 5 and not failed:
                failed.append(True)
                raise hvd.HorovodInternalError("simulated: a peer was lost")
            state.committed = state.committed + (state.step,)
            state.step += 1
            state.commit()
        return "done"

    assert train(state) == "done"
    assert state.committed == tuple(range(8))
    assert calls == ["first", "second"] and state.syncs == 2
    assert hvd.is_initialized()
    # The reference: rank 0's initial model, 8 steps, no failure.
    ref = _model(seed=20)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.05, momentum=0.9)
    for step in range(8):
        _train_step(ref, ref_opt, step)
    assert torch.allclose(_flat(model), _flat(ref), rtol=1e-6, atol=1e-7)
    assert _same_everywhere(_flat(model))


def test_a_host_change_interrupts_at_commit_on_every_rank():
    # Rank 0 hears of an added host: every rank's commit raises, the run
    # resets without rolling back and syncs again. A removal only: no sync.
    for update, syncs in ((HostUpdateResult.added, 2), (HostUpdateResult.removed, 1)):
        state = _CountingState(None, None, step=0)
        seen = []

        @hvd.elastic.run
        def train(state):
            seen.append(state.step)
            if state.step == 0:
                state.step = 1
                if hvd.rank() == 0:
                    notify_hosts_updated(1, update)
                state.commit()  # raises HostsUpdatedInterrupt on every rank
                pytest.fail("commit did not raise")
            return state.step

        assert train(state) == 1
        assert seen == [0, 1] and state.syncs == syncs, (update, seen, state.syncs)


def test_a_rank_that_must_sync_makes_every_rank_sync():
    # A worker that joined a world the others re-formed after a removal
    # only: it must sync, they need not; all sync (else its sync would meet
    # their first collective).
    state = _CountingState(None, None, step=0)

    @hvd.elastic.run
    def train(state):
        if state.step == 0:
            state.step = 1
            state.save()
            raise hvd.HostsUpdatedInterrupt(hvd.rank() != 0)  # rank 0 "joined"
        return hvd.allreduce(torch.ones(2), name="elastic.after_join")

    assert torch.equal(train(state), torch.ones(2))
    assert state.syncs == 2, state.syncs


def test_a_hora_error_a_framework_re_raised_is_handled_as_itself():
    # A compiled step (tf.function, jax.jit) re-raises Hora's error as its
    # own type: the loop takes it for the Hora error it carries.
    state = _CountingState(None, None, step=0)
    raised = []

    @hvd.elastic.run
    def train(state):
        seen = state.step
        state.step = 1
        if not raised:
            raised.append(1)
            lost = hvd.UnavailableError("rank 9 (pid 1) is gone (simulated)")
            basics.note_callback_error(lost)
            raise RuntimeError("Graph execution error: UnavailableError: %s" % lost)
        return seen

    assert train(state) == 0, "rolled back to the last commit (step 0)"
    assert state.syncs == 2

    @hvd.elastic.run
    def not_hora(state):
        basics.note_callback_error(hvd.UnavailableError("an old error"))
        raise RuntimeError("a bug of the script's own")

    with pytest.raises(RuntimeError, match="a bug of the script's own"):
        not_hora(_CountingState(None, None, step=0))


def test_a_reset_reshards_the_sampler_without_a_sync():
    # Hosts only removed: no sync, yet the sampler shards over the new world.
    dataset = list(range(60))  # (divides by every world size here: no padding)
    sampler = hvd.elastic.ElasticSampler(dataset, shuffle=False)
    state = hvd.elastic.TorchState(sampler=sampler)
    sampler.num_replicas, sampler.rank = 99, 98  # the last world's (simulated)
    state.on_reset()
    assert (sampler.num_replicas, sampler.rank) == (hvd.size(), hvd.rank())
    assert list(sampler) == dataset[hvd.rank()::hvd.size()]


def test_a_mismatch_is_not_retried():
    # Ranks that call a collective differently have a bug a reset would repeat.
    state = _CountingState(None, None)
    runs = []

    @hvd.elastic.run
    def train(state):
        runs.append(1)
        hvd.allreduce(torch.ones(hvd.rank() + 2), name="elastic.mismatch")

    if hvd.size() == 1:
        pytest.skip("a mismatch needs two ranks")
    with pytest.raises(hvd.MismatchError):
        train(state)
    assert runs == [1]


def test_a_reset_keeps_the_settings_init_was_given():
    # @hvd.elastic.run's reset (shutdown, init) makes the new world's Session
    # with the settings the script gave init(), not the environment's alone.
    from hora.torch import elastic

    hvd.shutdown()
    hvd.init(settings={"HORA_CYCLE_TIME_MS": "3"})
    try:
        assert basics._setting("HORA_CYCLE_TIME_MS") == "3"
        elastic._reset()
        assert basics._setting("HORA_CYCLE_TIME_MS") == "3", basics.session().describe_config()
    finally:
        hvd.shutdown()
        hvd.init()
    assert basics._setting("HORA_CYCLE_TIME_MS") != "3"
