"""Shared-memory segments that killed jobs left in /dev/shm (their creator's
process gone) are swept by any later job on the host, a TCP one too, and by
horarun itself, not only by the next shared-memory job. Runs jobs of its own
from rank 0 of this one."""

import os
import subprocess
import sys

import hora.torch as hvd

from helpers import horarun_path, package_parent

CHECK = ("import os, sys, hora.numpy as hvd; hvd.init(); "
         "print('left', os.path.exists(sys.argv[1]), flush=True)")


def _dead_segment(tag):
    """A segment named as Hora names them, made by a process now gone."""
    dead = subprocess.Popen(["true"])
    dead.wait()
    ns = os.stat("/proc/self/ns/pid").st_ino
    path = "/dev/shm/hora-sweeptest%s-%d-s1-r0-p%d-n%d" % (tag, os.getpid(), dead.pid, ns)
    with open(path, "wb") as f:
        f.write(b"\0" * 64)
    os.chmod(path, 0o600)
    return path


def _env():
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("HORA_") and not k.startswith("HOROVOD_")}
    env["PYTHONPATH"] = package_parent()
    return env


def test_a_tcp_job_and_horarun_sweep_dead_jobs_segments():
    if hvd.rank() != 0:
        return
    path = _dead_segment("tcp")
    try:
        res = subprocess.run([horarun_path(), "-np", "2", "--transport", "tcp", sys.executable,
                              "-c", CHECK, path], env=_env(), capture_output=True, text=True,
                             timeout=60)
        out = res.stdout + res.stderr
        assert res.returncode == 0, out
        assert out.count("left False") == 2, out  # gone once the ranks started
        path = _dead_segment("launcher")
        res = subprocess.run([horarun_path(), "-np", "1", "true"], env=_env(),
                             capture_output=True, text=True, timeout=60)
        assert res.returncode == 0, res.stdout + res.stderr
        assert not os.path.exists(path)
    finally:
        if os.path.exists(path):
            os.unlink(path)
