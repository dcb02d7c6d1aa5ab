"""The job layout and the module surface."""

import json
import os
import re
import subprocess
import sys
import time

import pytest
import torch

import hora
import hora.torch as hvd
from helpers import horarun_path, package_parent, run_alone


def test_layout_matches_launcher_and_is_consistent():
    r, n = hvd.rank(), hvd.size()
    assert 0 <= r < n
    if "HORA_RANK" in os.environ:  # horarun: every value as the launcher placed it
        assert r == int(os.environ["HORA_RANK"]) and n == int(os.environ["HORA_SIZE"])
        assert hvd.local_rank() == int(os.environ["HORA_LOCAL_RANK"])
        assert hvd.local_size() == int(os.environ["HORA_LOCAL_SIZE"])
        assert hvd.cross_rank() == int(os.environ["HORA_CROSS_RANK"])
        assert hvd.cross_size() == int(os.environ["HORA_CROSS_SIZE"])
        if hvd.local_size() == n:
            # One host (make test's jobs): every rank is local, one cross rank.
            assert (hvd.local_rank(), hvd.local_size()) == (r, n)
            assert (hvd.cross_rank(), hvd.cross_size()) == (0, 1)
    assert 0 <= hvd.local_rank() < hvd.local_size() <= n
    assert 0 <= hvd.cross_rank() < hvd.cross_size()
    layouts = hvd.allgather_object((r, hvd.local_rank(), hvd.cross_rank()))
    assert [x[0] for x in layouts] == list(range(n))
    assert len({(x[1], x[2]) for x in layouts}) == n  # (local, cross) identifies a rank
    assert hvd.is_homogeneous()


_LAYOUT_PROBE = """
import json
import hora.torch as hvd
hvd.init()
print("LAYOUT " + json.dumps([hvd.rank(), hvd.local_rank(), hvd.local_size(),
                              hvd.cross_rank(), hvd.cross_size(), hvd.is_homogeneous()]))
hvd.shutdown()
"""


def _layouts_under_openmpi_variables(places):
    """Starts one process a rank, each given only Open MPI's variables for
    its place (local rank, local size): no cross values, as mpirun gives."""
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    drop = ("HORA_", "HOROVOD_", "OMPI_", "PMI_", "PMIX_", "SLURM_", "MPI_LOCAL")
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(drop) and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK",
                                                    "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                                                    "MASTER_PORT")}
    base.update(PYTHONPATH=package_parent(), HORA_TRANSPORT="tcp", HORA_TIMEOUT_S="60",
                HORA_STORE_ADDR="127.0.0.1:%d" % port, HORA_SECRET="layout-%d" % port)
    procs = []
    for r, (local_rank, local_size) in enumerate(places):
        env = dict(base, OMPI_COMM_WORLD_RANK=str(r), OMPI_COMM_WORLD_SIZE=str(len(places)),
                   OMPI_COMM_WORLD_LOCAL_RANK=str(local_rank),
                   OMPI_COMM_WORLD_LOCAL_SIZE=str(local_size))
        procs.append(subprocess.Popen([sys.executable, "-c", _LAYOUT_PROBE], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    got = []
    for p in procs:
        out, _ = p.communicate(timeout=120)
        assert p.returncode == 0, out
        line = [l for l in out.splitlines() if l.startswith("LAYOUT ")]
        assert len(line) == 1, out
        got.append(tuple(json.loads(line[0][len("LAYOUT "):])))
    return got


def test_cross_ranks_are_gathered_where_the_launcher_gives_none():
    # Horovod's values (its cross communicator splits by local rank, in rank
    # order), where guessing from this rank's own variables (rank / local
    # size) goes wrong: ranks placed round-robin on two hosts (ranks 0 and 2
    # on one, 1 and 3 on the other), and hosts of 2 and 1 ranks.
    if hvd.rank() != 0:
        return  # (one sub-job is enough; rank 0 runs it)
    # (rank, local_rank, local_size, cross_rank, cross_size, is_homogeneous)
    assert _layouts_under_openmpi_variables([(0, 2), (0, 2), (1, 2), (1, 2)]) == [
        (0, 0, 2, 0, 2, True), (1, 0, 2, 1, 2, True), (2, 1, 2, 0, 2, True),
        (3, 1, 2, 1, 2, True)]
    assert _layouts_under_openmpi_variables([(0, 2), (1, 2), (0, 1)]) == [
        (0, 0, 2, 0, 2, False), (1, 1, 2, 0, 1, False), (2, 0, 1, 1, 2, False)]


def test_init_is_idempotent_and_names_exist():
    hvd.init()
    hvd.init(None, None)  # Horovod's positional order: comm, process_sets
    assert hvd.is_initialized()
    import inspect
    assert list(inspect.signature(hvd.init).parameters)[:2] == ["comm", "process_sets"]
    assert hvd.Average != hvd.Sum and len({hvd.Sum, hvd.Average, hvd.Min, hvd.Max,
                                           hvd.Product, hvd.Adasum}) == 6
    assert hvd.global_process_set.size() == hvd.size()
    assert hvd.global_process_set.rank() == hvd.rank()
    # cuda_built() and nccl_built() say what the build found, as horarun
    # --check-build does; hora.cuda_built() is the same.
    built = subprocess.run([horarun_path(), "--check-build"], capture_output=True, text=True,
                           check=True).stdout
    assert type(hvd.cuda_built()) is bool
    assert hvd.cuda_built() == ("[X] CUDA" in built), built
    # Every framework module this package holds is listed as available.
    for line in ("[X] PyTorch (hora.torch)", "[X] TensorFlow and Keras (hora.tensorflow, hora.keras)",
                 "[X] JAX (hora.jax)", "[X] NumPy (hora.numpy)", "[X] Ray (hora.ray)"):
        assert line in built, built
    assert hora.cuda_built() is hvd.cuda_built() and hora.nccl_built() == hvd.nccl_built()
    assert type(hvd.nccl_built()) is int
    assert (hvd.nccl_built() > 0) == ("[X] NCCL" in built), built
    if hvd.nccl_built() >= 10000:  # (NCCL 2.9 on: major * 10000 + minor * 100 + patch)
        v = hvd.nccl_built()
        assert f"NCCL {v // 10000}.{v // 100 % 100}.{v % 100} " in built, built
    # This build has MPI plugins (OpenMPI and MPICH were found); the job runs
    # on Hora's own transports, not MPI (tests/python/mpi_transport_check.py
    # checks the other side).
    assert hvd.mpi_built()
    assert not hvd.mpi_enabled()
    with pytest.raises(ValueError, match="MPI is not enabled"):
        hvd.mpi_threads_supported()
    assert issubclass(hvd.MismatchError, hora.HoraError)
    assert issubclass(hora.HoraError, RuntimeError)
    assert hora.__version__
    for name in ("allreduce", "allreduce_", "allreduce_async", "allreduce_async_",
                 "grouped_allreduce", "grouped_allreduce_", "grouped_allreduce_async",
                 "grouped_allreduce_async_", "allgather", "allgather_async", "broadcast",
                 "broadcast_", "broadcast_async", "broadcast_async_", "alltoall",
                 "alltoall_async", "reducescatter", "reducescatter_async", "barrier", "join",
                 "poll", "synchronize", "broadcast_parameters", "broadcast_optimizer_state",
                 "broadcast_object", "allgather_object", "DistributedOptimizer", "Compression",
                 "SyncBatchNorm", "ProcessSet", "start_timeline", "stop_timeline"):
        assert callable(getattr(hvd, name)), name


def test_engine_counters_and_timeline(tmp_path):
    before = hvd.engine_counters()
    hvd.allreduce(torch.ones(4), name="counted")
    after = hvd.engine_counters()
    assert after["tensors"] > before["tensors"]
    # Every rank writes its own file ({rank}) under its own temporary directory.
    path = str(tmp_path / "timeline.{rank}.json")
    # (Horovod's mark_cycles is not done: said, not silently dropped.)
    with pytest.warns(UserWarning, match=r"mark_cycles=True\): Hora's timeline has no cycle"):
        hvd.start_timeline(path, mark_cycles=True)
    hvd.allreduce(torch.ones(4), name="timed")
    hvd.stop_timeline()
    written = tmp_path / ("timeline.%d.json" % hvd.rank())
    # stop_timeline() returns before the writer thread has flushed: allow it
    # a moment. The file is a complete JSON array after every write, but a
    # read while the writer appends sees the old end and the new part at
    # once (seen once in some hundred runs): read until it parses.
    deadline = time.monotonic() + 5
    while True:
        text = written.read_text()
        try:
            json.loads(text)
            parsed = True
        except ValueError:
            parsed = False
        if (parsed and "timed" in text) or time.monotonic() > deadline:
            break
        time.sleep(0.01)
    assert "timed" in text, text
    json.loads(text)  # a complete JSON array


def test_horovod_settings_are_honoured_and_named():
    # A Horovod user's HOROVOD_* settings: the ones Hora has are taken (a
    # HORA_* setting wins), the others named as ignored; rank 0 says which.
    res = run_alone("""
        import hora.torch as hvd
        from hora.common import basics
        hvd.init()
        conf = basics.session().describe_config()
        for want in ("HORA_CYCLE_TIME_MS=7 ", "HORA_FUSION_THRESHOLD_BYTES=1048576 ",
                     "HORA_STALL_WARNING_S=0 ", "HORA_CACHE_CAPACITY=16 ",
                     "HORA_HIERARCHICAL_ALLREDUCE=1 "):
            assert want in conf, want
        print("OK")
    """, {"HOROVOD_CYCLE_TIME": "7", "HOROVOD_FUSION_THRESHOLD": "1048576",
          "HOROVOD_STALL_CHECK_DISABLE": "1", "HOROVOD_CACHE_CAPACITY": "64",
          "HORA_CACHE_CAPACITY": "16", "HOROVOD_HIERARCHICAL_ALLREDUCE": "1",
          "HOROVOD_HIERARCHICAL_ALLGATHER": "1", "HORA_LOG_LEVEL": "info"})
    assert res.returncode == 0 and "OK" in res.stdout, res.stdout + res.stderr
    # What was taken: one info line; what was not: a warning each.
    assert ("INFO: Horovod's settings: HOROVOD_CACHE_CAPACITY=64 is ignored"
            not in res.stderr), res.stderr
    assert "INFO: Horovod's settings: " in res.stderr, res.stderr
    assert "HOROVOD_CYCLE_TIME=7 is taken as HORA_CYCLE_TIME_MS=7" in res.stderr, res.stderr
    assert ("WARNING: HOROVOD_CACHE_CAPACITY=64 is ignored: HORA_CACHE_CAPACITY is set"
            in res.stderr)
    assert ("HOROVOD_HIERARCHICAL_ALLREDUCE=1 is taken as HORA_HIERARCHICAL_ALLREDUCE=1"
            in res.stderr), res.stderr
    assert "HOROVOD_HIERARCHICAL_ALLGATHER is ignored: Hora has no equivalent" in res.stderr


def test_horovod_settings_through_horarun_are_said_taken():
    # horarun translates HOROVOD_* settings for its ranks; rank 0 must say the
    # setting was taken, not that it was ignored. (No collectives: rank 0 only.)
    if hvd.rank() != 0:
        return
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("HORA_") and not k.startswith("HOROVOD_")}
    env.update({"PYTHONPATH": package_parent(), "HOROVOD_CYCLE_TIME": "2",
                "HORA_LOG_LEVEL": "info"})
    code = "import hora.torch as hvd; hvd.init(); print('cycle', hvd.rank())"
    res = subprocess.run([horarun_path(), "-np", "2",
                          sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120)
    out = res.stdout + res.stderr
    assert res.returncode == 0, out
    # One info line (rank 0's), not a warning on every run.
    said = [line for line in out.splitlines() if "HOROVOD_CYCLE_TIME" in line]
    assert said == ["[0]: [hora rank 0] INFO: Horovod's settings: HOROVOD_CYCLE_TIME=2 is taken "
                    "as HORA_CYCLE_TIME_MS=2"], out
    assert "ignored" not in out and "WARNING" not in out, out


def test_an_uncaught_exception_fails_the_others_despite_a_lingering_thread():
    # Rank 1's main thread raises while a thread of its own (not a daemon)
    # keeps its process alive: Python waits for that thread before atexit,
    # so the exception hook shuts Hora down, and rank 0, waiting for rank 1
    # in an allreduce, fails at once naming it. (No collectives here: rank 0.)
    if hvd.rank() != 0:
        return
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("HORA_") and not k.startswith("HOROVOD_")}
    env.update({"PYTHONPATH": package_parent()})
    code = """if True:
        import threading, time, torch
        import hora.torch as hvd
        hvd.init()
        if hvd.rank() == 1:
            threading.Thread(target=time.sleep, args=(300,)).start()
            raise ValueError("rank 1 gives up")
        start = time.monotonic()
        try:
            hvd.allreduce(torch.ones(3), name="waits_for_rank_1")
        except Exception as e:
            print("rank 0 failed after %.0f s: %s" % (time.monotonic() - start, e))
            raise SystemExit(3)
    """
    start = time.monotonic()
    res = subprocess.run([horarun_path(), "-np", "2", sys.executable, "-c", code], env=env,
                         capture_output=True, text=True, timeout=240)
    out = res.stdout + res.stderr
    assert res.returncode != 0, out
    assert "rank 1 gives up" in out, out
    assert "rank 0 failed after" in out and "rank 1 shut its Session down" in out, out
    assert time.monotonic() - start < 120, out  # (not the thread's 300 s)


def test_an_error_at_an_interactive_prompt_leaves_hora_up():
    # At a prompt the exception hook sees every error typed: it must not
    # shut Hora down there (it does when the error ends the program).
    res = run_alone("""
        import sys
        import hora.torch as hvd
        hvd.init()
        sys.ps1 = ">>> "  # (as the interactive interpreter sets it)
        try:
            raise NameError("a typo")
        except NameError as e:
            sys.excepthook(type(e), e, e.__traceback__)
        assert hvd.is_initialized()
        del sys.ps1
        try:
            raise ValueError("the end")
        except ValueError as e:
            sys.excepthook(type(e), e, e.__traceback__)
        assert not hvd.is_initialized()
        print("OK")
    """)
    assert res.returncode == 0 and "OK" in res.stdout, res.stdout + res.stderr


def test_each_session_deletes_its_rendezvous_keys():
    # horarun's store outlives the Sessions of its job (every init(), every
    # elastic reset): each rank deletes the keys it set once every rank has
    # connected, and says how many it found there (only keys still in the
    # store count), Session after Session, on both transports.
    if hvd.rank() != 0:
        return
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("HORA_") and not k.startswith("HOROVOD_")}
    env.update({"PYTHONPATH": package_parent(), "HORA_LOG_LEVEL": "debug"})
    code = "import hora.torch as hvd\nfor _ in range(2):\n    hvd.init(); hvd.shutdown()\n"
    for transport in ("shm", "tcp"):
        res = subprocess.run([horarun_path(), "-np", "2", "--transport", transport,
                              sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, timeout=120)
        out = res.stdout + res.stderr
        assert res.returncode == 0, out
        counts = [int(m) for m in re.findall(r"rank [01]: deleted the (\d+) rendezvous keys", out)]
        assert len(counts) == 4 and min(counts) >= 3, (transport, out)


def test_horarun_exports_horovods_layout_variables():
    if os.environ.get("HORA_RANK") is None:
        pytest.skip("not under horarun (skipped on every rank alike)")
    for k in ("RANK", "SIZE", "LOCAL_RANK", "LOCAL_SIZE", "CROSS_RANK", "CROSS_SIZE"):
        assert os.environ["HOROVOD_" + k] == os.environ["HORA_" + k], k
    assert int(os.environ["HOROVOD_RANK"]) == hvd.rank()
    assert int(os.environ["HOROVOD_SIZE"]) == hvd.size()
