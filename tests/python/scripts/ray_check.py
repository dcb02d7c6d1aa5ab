"""hora.ray.RayExecutor on a local Ray cluster on loopback that this script
starts and stops: workers as actors, Hora's rendezvous through them, results
in rank order, executables, a worker's error raised in the driver (and its
peers failing at once, naming it, where they wait for it).

    python ray_check.py NUM_WORKERS
"""

import os
import sys
import time

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
        except ray.exceptions.RayActorError:
            took = time.monotonic() - started
        assert took < 30, "run() raised %.0f s after rank 1 died" % took
        assert not executor.workers
        executor.start()
        results = executor.run(train, args=[2.0])
        assert all(r[1] == n and r[3] == want_sum for r in results), results
        executor.shutdown()
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
