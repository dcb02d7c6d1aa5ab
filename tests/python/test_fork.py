"""A process forked after init() (a DataLoader worker, a user's os.fork())
shares its parent's connections but none of its threads: it must neither use
the Session nor tear it down. Its queries work; its collectives raise at once,
saying why; its shutdown() and a normal exit (atexit) return at once; and the
parent's job goes on. Runs a job of its own (from rank 0 of this one), over
shared memory and over TCP."""

import os
import subprocess
import sys

import pytest

import hora.torch as hvd

from helpers import horarun_path, package_parent

CHILD = r"""
import os, sys, time
import numpy as np
import hora.numpy as hvd

hvd.init()
r, n = hvd.rank(), hvd.size()
pid = os.fork()
if pid == 0:
    assert (hvd.rank(), hvd.size()) == (r, n)
    try:
        hvd.allreduce(np.ones(3, np.float32), name="in.child")
        print("child: allreduce ran", flush=True)
        os._exit(3)
    except ValueError as e:
        assert "forked" in str(e) and "pid %d" % os.getpid() in str(e), str(e)
    import torch
    import hora.torch as ht
    for call in (ht.allreduce_, ht.allreduce):  # (each one call into the core, waited there)
        try:
            call(torch.ones(3), op=ht.Sum, name="in.child.torch")
            print("child: %s ran" % call.__name__, flush=True)
            os._exit(4)
        except ValueError as e:
            assert "forked" in str(e) and "pid %d" % os.getpid() in str(e), str(e)
    start = time.monotonic()
    hvd.shutdown()
    assert time.monotonic() - start < 1.0
    sys.exit(0)  # a normal exit: atexit runs, and must not touch the parent's Session
_, status = os.waitpid(pid, 0)
assert os.waitstatus_to_exitcode(status) == 0, status
out = hvd.allreduce(np.full(3, r + 1, np.float32), op=hvd.Sum, name="after.fork")
assert out.tolist() == [n * (n + 1) / 2] * 3, out
pid = os.fork()
if pid == 0:
    os._exit(0)  # (no atexit)
os.waitpid(pid, 0)
hvd.barrier()
print("parent %d done" % r, flush=True)
"""


@pytest.mark.parametrize("transport", ["shm", "tcp"])
def test_a_forked_child_leaves_the_session_to_its_parent(transport):
    if hvd.rank() != 0:
        return
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("HORA_") and not k.startswith("HOROVOD_")}
    env.update({"PYTHONPATH": package_parent(), "HORA_TRANSPORT": transport})
    res = subprocess.run([horarun_path(), "-np", "2", sys.executable, "-c", CHILD], env=env,
                         capture_output=True, text=True, timeout=60)
    out = res.stdout + res.stderr
    assert res.returncode == 0, out
    assert "parent 0 done" in out and "parent 1 done" in out, out
