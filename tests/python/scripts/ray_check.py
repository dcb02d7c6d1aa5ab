"""hora.ray.RayExecutor on a local Ray cluster on loopback that this script
starts and stops: workers as actors, Hora's rendezvous through them, results
in rank order, executables, a worker's error raised in the driver with a
note naming its rank (and its peers failing at once, naming it, where they
wait for it; or, raised before init(), the workers waiting for it there
ended and started anew), Horovod's arguments checked, workers placed in
the current placement group (a Ray Tune trial's).

    python ray_check.py NUM_WORKERS
"""

import os
import sys
import time
import warnings

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
import numpy as np  # noqa: E402
import ray  # noqa: E402

from hora.ray import ElasticRayExecutor, RayExecutor  # noqa: E402


def train(scale):
    import hora.numpy as hvd

    hvd.init()
    r, n = hvd.rank(), hvd.size()
    total = hvd.allreduce(np.arange(3, dtype=np.float64) * (r + 1) * scale, op=hvd.Sum)
    # (Horovod's scripts read horovodrun's variables: each worker has them.)
    assert [os.environ["HOROVOD_" + k] for k in ("RANK", "SIZE", "LOCAL_RANK")] == \
        [str(r), str(n), str(hvd.local_rank())], dict(os.environ)
    return r, n, hvd.local_rank(), total.tolist()


class Counter:
    def __init__(self, start):
        self.count = start

    def bump(self):
        import hora.numpy as hvd

        self.count += 1
        return int(hvd.allreduce(np.array([self.count]), op=hvd.Sum)[0])


def fail_on_rank_1():
    import hora.numpy as hvd

    if hvd.rank() == 1:
        raise ValueError("rank 1 refuses")
    return hvd.rank()


def fail_then_collective():
    import hora.numpy as hvd

    hvd.init()
    if hvd.rank() == 1:
        raise ValueError("rank 1 refuses")
    hvd.allreduce(np.ones(3), name="after_the_refusal")
    return "rank %d went on without rank 1" % hvd.rank()


class SlowToSend(ValueError):
    """An error that takes a second to pickle: the others' reports that
    its rank went reach the driver first."""

    def __reduce__(self):
        import time

        time.sleep(1.0)
        return (SlowToSend, self.args)


def fail_slowly_then_collective():
    import hora.numpy as hvd

    hvd.init()
    if hvd.rank() == 1:
        raise SlowToSend("rank 1 refuses, slowly")
    hvd.allreduce(np.ones(3), name="after_the_refusal")
    return "rank %d went on without rank 1" % hvd.rank()


def fail_slowly_then_wrapped():
    """As fail_slowly_then_collective, the others' errors re-raised as a
    framework re-raises Hora's (JAX's JaxRuntimeError inside jit)."""
    import hora.numpy as hvd

    hvd.init()
    if hvd.rank() == 1:
        raise SlowToSend("rank 1 refuses, slowly")
    try:
        hvd.allreduce(np.ones(3), name="after_the_refusal")
    except Exception as e:
        raise RuntimeError("INTERNAL: callback failed: %s: %s" % (type(e).__name__, e)) from None
    return "rank %d went on without rank 1" % hvd.rank()


def raise_before_init():
    import hora.numpy as hvd

    if os.environ["HORA_RANK"] == "1":  # (say, its data file missing on its node)
        raise FileNotFoundError("rank 1 has no data")
    hvd.init()
    return hvd.rank()


def raise_while_rank_0_loads(seconds):
    """Rank 1 raises at once; rank 0 works for `seconds` without Hora and
    returns: it is waited for, not ended (nothing waits in init())."""
    import time

    if os.environ["HORA_RANK"] == "1":
        raise ValueError("rank 1 refuses at once")
    time.sleep(seconds)
    return "loaded"


def in_a_placement_group(n, use_it=True):
    """A Ray Tune trial's shape: a task in a placement group that holds
    every CPU of the cluster starts the executor: its workers must go in
    that group (there is no CPU outside it)."""
    executor = RayExecutor(RayExecutor.create_settings(
        timeout_s=60, placement_group_timeout_s=30 if use_it else 3), num_workers=n,
        use_current_placement_group=use_it)
    executor.start()
    try:
        return [r[3] for r in executor.run(train, args=[1.0])]
    finally:
        executor.shutdown()


def notes(e):
    return "\n".join(getattr(e, "__notes__", []))


def die_before_init():
    import signal

    import hora.numpy as hvd

    if os.environ["HORA_RANK"] == "1":  # (say, killed for memory as it loads its data)
        os.kill(os.getpid(), signal.SIGKILL)
    hvd.init()
    return hvd.rank()


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    ray.init(num_cpus=n, _node_ip_address="127.0.0.1", include_dashboard=False,
             log_to_driver=True, runtime_env={"env_vars": {
                 "PYTHONPATH": os.environ.get("PYTHONPATH", ""), "OMP_NUM_THREADS": "1"}})
    try:
        executor = RayExecutor(RayExecutor.create_settings(timeout_s=60), num_workers=n)
        executor.start(executable_cls=Counter, executable_args=[10])
        results = executor.run(train, args=[2.0])
        want_sum = (np.arange(3) * 2.0 * sum(range(1, n + 1))).tolist()
        assert [r[0] for r in results] == list(range(n)), results
        assert all(r[1] == n and r[3] == want_sum for r in results), results
        assert sorted(r[2] for r in results) == list(range(n)), results  # one host
        assert executor.execute(lambda c: c.bump()) == [11 * n] * n
        assert executor.execute_single(lambda c: c.count) == 11
        refs = executor.run_remote(train, kwargs={"scale": 1.0})
        assert [r[0] for r in ray.get(refs)] == list(range(n))
        try:
            executor.run(fail_on_rank_1)
            raise AssertionError("a worker's exception did not reach the driver")
        except ray.exceptions.RayTaskError as e:
            assert "rank 1 refuses" in str(e), e
            assert "hora.ray: by rank 1 of %d (on " % n in notes(e), notes(e)
        # Rank 1 raises before init(), where rank 0 waits for it in its own
        # (60 s here): run() raises rank 1's error within seconds, its note
        # says the others were ended and started anew, and they work.
        started = time.monotonic()
        try:
            executor.run(raise_before_init)
            raise AssertionError("run() of raise_before_init returned")
        except ray.exceptions.RayTaskError as e:
            took = time.monotonic() - started
            assert "rank 1 has no data" in str(e), str(e)[-2000:]
            assert "rank 1 of %d" % n in notes(e) and "new ones started" in notes(e), notes(e)
        assert took < 30, "run() raised %.0f s after rank 1 did" % took
        results = executor.run(train, args=[2.0])
        assert all(r[1] == n and r[3] == want_sum for r in results), results
        assert executor.execute_single(lambda c: c.count) == 10  # (made anew)
        executor.execute(lambda c: c.bump())  # 11 everywhere
        started = time.monotonic()
        try:
            executor.run(raise_while_rank_0_loads, args=[4])
            raise AssertionError("run() of raise_while_rank_0_loads returned")
        except ray.exceptions.RayTaskError as e:
            took = time.monotonic() - started
            assert "rank 1 refuses at once" in str(e) and "new ones" not in notes(e), notes(e)
        assert took >= 3.5, "rank 0 was not waited for: %.1f s" % took
        assert executor.execute_single(lambda c: c.count) == 11  # (not made anew)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert executor.run(train, args=[2.0],
                                callbacks=[print])[0][3] == want_sum
        assert any("callbacks are not called" in str(w.message) for w in caught), caught
        # Rank 1 raises where the others wait for it in an allreduce: they
        # fail at once naming it (its Session is shut down with the
        # exception), and the workers take the next function afresh.
        refs = executor.run_remote(fail_then_collective)
        done, pending = ray.wait(refs, num_returns=n, timeout=60)
        assert not pending, "ranks still waiting 60 s after rank 1 raised: %s" % pending
        for rank, ref in enumerate(refs):
            try:
                raise AssertionError("rank %d returned %r" % (rank, ray.get(ref)))
            except ray.exceptions.RayTaskError as e:
                want = "rank 1 refuses" if rank == 1 else "rank 1 shut its Session down"
                assert want in str(e), (rank, str(e)[-2000:])
        ray.get([w.end_session.remote() for w in executor.workers])  # (run_remote's caller's)
        # run() raises rank 1's own error, never another rank's report that
        # rank 1 went, whichever Ray hears of first (SlowToSend: the others').
        for fn in (fail_then_collective, fail_slowly_then_collective, fail_slowly_then_wrapped):
            try:
                executor.run(fn)
                raise AssertionError("run() of %s returned" % fn.__name__)
            except ray.exceptions.RayTaskError as e:
                assert "rank 1 refuses" in str(e), str(e)[-2000:]
        results = executor.run(train, args=[2.0])
        assert all(r[1] == n and r[3] == want_sum for r in results), results
        # A worker that dies before init(): run() raises Ray's error at once
        # (not after the others' 60 s wait for it in init()) and ends them;
        # start() makes new workers.
        started = time.monotonic()
        try:
            executor.run(die_before_init)
            raise AssertionError("a dead worker's run returned")
        except ray.exceptions.RayActorError as e:
            took = time.monotonic() - started
            assert "hora.ray: the worker of rank 1 of %d (on " % n in notes(e), notes(e)
            assert notes(e).endswith(") died"), notes(e)
        assert took < 30, "run() raised %.0f s after rank 1 died" % took
        assert not executor.workers
        executor.start()
        results = executor.run(train, args=[2.0])
        assert all(r[1] == n and r[3] == want_sum for r in results), results
        executor.shutdown()
        # Horovod's arguments, checked as Horovod's are (and more).
        for kwargs, text in (({"num_workers": "2"}, "num_workers must be a whole number"),
                             ({"num_workers": True}, "num_workers must be a whole number"),
                             ({"num_workers": 2.0}, "num_workers must be a whole number"),
                             ({"num_workers": 2, "gpus_per_worker": 2}, "needs use_gpu=True"),
                             ({"num_workers": 2, "use_gpu": True, "gpus_per_worker": 0},
                              "gpus_per_worker must be at least 1")):
            try:
                RayExecutor(**kwargs)
                raise AssertionError("RayExecutor(%r) was taken" % kwargs)
            except ValueError as e:
                assert text in str(e), (kwargs, e)
        for bad in (lambda: RayExecutor(num_worker=2, num_workers=1),
                    lambda: RayExecutor.create_settings(timeout=5)):
            try:
                bad()
                raise AssertionError("a misspelt argument was taken")
            except TypeError:
                pass
        try:
            RayExecutor.create_settings(timeout_s=-5)
            raise AssertionError("timeout_s=-5 was taken")
        except ValueError as e:
            assert "timeout_s must be a number of seconds above 0, got -5" in str(e), e
        assert RayExecutor(num_hosts=1, num_workers_per_host=None).num_workers == 1
        # In the current placement group (a Ray Tune trial's).
        from ray.util.placement_group import placement_group, remove_placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy
        group = placement_group([{"CPU": 1}] * n)
        ray.get(group.ready(), timeout=60)
        trial = ray.remote(in_a_placement_group).options(
            num_cpus=0, scheduling_strategy=PlacementGroupSchedulingStrategy(
                group, placement_group_capture_child_tasks=True))
        sums = ray.get(trial.remote(n), timeout=120)
        assert sums == [(np.arange(3) * sum(range(1, n + 1))).tolist()] * n, sums
        # use_current_placement_group=False: out of the group, even where it
        # captures child tasks (no CPU outside it: start() times out).
        try:
            ray.get(trial.remote(n, False), timeout=120)
            raise AssertionError("use_current_placement_group=False placed in the group")
        except ray.exceptions.RayTaskError as e:
            assert "did not start %d workers" % n in str(e), str(e)[-1000:]
        remove_placement_group(group)
        # Horovod's elastic executor, and elastic keywords: refused, saying so.
        for make in (lambda: RayExecutor(num_workers=n, min_workers=1, max_workers=n),
                     lambda: ElasticRayExecutor(ElasticRayExecutor.create_settings())):
            try:
                make()
                raise AssertionError("elastic under Ray was not refused")
            except NotImplementedError as e:
                assert "elastic training under Ray is not supported" in str(e), e
        # Placed as hosts: one host of n workers (Ray's placement group).
        # Two hosts asked of a cluster of one: start() gives up after the
        # placement timeout, naming what it asked, and leaves no placement
        # group pending (it would take the cluster's CPUs once free).
        executor = RayExecutor(RayExecutor.create_settings(placement_group_timeout_s=2),
                               num_hosts=2, num_workers_per_host=1)
        try:
            executor.start()
            raise AssertionError("two hosts were placed on a cluster of one")
        except TimeoutError as e:
            assert "could not place 2 hosts" in str(e), e
        # More workers than the cluster's CPUs: start() gives up after the
        # placement timeout, not 10 s later (it waited to end them).
        executor = RayExecutor(RayExecutor.create_settings(placement_group_timeout_s=2),
                               num_workers=n + 1)
        started = time.monotonic()
        try:
            executor.start()
            raise AssertionError("%d workers started on %d CPUs" % (n + 1, n))
        except TimeoutError as e:
            assert "did not start %d workers" % (n + 1) in str(e), e
        assert time.monotonic() - started < 8, time.monotonic() - started
        pending = [g for g in ray.util.placement_group_table().values()
                   if g["state"] not in ("REMOVED",)]
        assert not pending, pending
        executor = RayExecutor(num_hosts=1, num_workers_per_host=n)
        executor.start()
        results = executor.run(train, args=[1.0])
        assert [(r[0], r[1], r[2]) for r in results] == [(q, n, q) for q in range(n)], results
        executor.shutdown()
        try:
            executor.run(train, args=[1.0])
            raise AssertionError("run after shutdown did not raise")
        except RuntimeError as e:
            assert "call start() first" in str(e)
        print("RayExecutor: %d workers OK" % n)
    finally:
        ray.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
