"""horarun names the rank whose own failure came first: a rank that raises
tells horarun (through the job's store) before it tears down, so a peer that
failed because it went, and may end first, is not blamed. Runs jobs of its
own from rank 0 of this one."""

import os
import subprocess
import sys

import hora.torch as hvd

from helpers import horarun_path, package_parent

CODE = r"""
import time, numpy as np, hora.numpy as hvd
hvd.init()
hvd.allreduce(np.ones(2, np.float32), name="warm")
if hvd.rank() == 1:
    time.sleep(0.2)
    e = ValueError("bad batch 7 on rank 1")
    if hasattr(e, "add_note"):  # (JAX adds one to errors from jit: the error is named, not it)
        e.add_note("a note that is not the error")
    raise e
hvd.allreduce(np.ones(2, np.float32), name="never")  # rank 0 waits: rank 1 is gone
"""


def test_horarun_names_the_rank_that_raised_not_its_victim():
    if hvd.rank() != 0:
        return
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("HORA_") and not k.startswith("HOROVOD_")}
    env["PYTHONPATH"] = package_parent()
    for _ in range(2):
        res = subprocess.run([horarun_path(), "-np", "2", sys.executable, "-c", CODE], env=env,
                             capture_output=True, text=True, timeout=60)
        out = res.stdout + res.stderr
        assert res.returncode != 0, out
        said = [line for line in out.splitlines() if "failed first" in line]
        assert said == ["horarun: rank 1 failed first: ValueError: bad batch 7 on rank 1"], out
