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


def _job(args, code, extra_env=None):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("HORA_") and not k.startswith("HOROVOD_")}
    env["PYTHONPATH"] = package_parent()
    env.update(extra_env or {})
    res = subprocess.run([horarun_path()] + args + [sys.executable, "-c", code], env=env,
                         capture_output=True, text=True, timeout=60)
    return res.returncode, res.stdout + res.stderr


def test_horarun_names_the_rank_that_raised_not_its_victim():
    if hvd.rank() != 0:
        return
    for _ in range(2):
        code, out = _job(["-np", "2"], CODE)
        assert code != 0, out
        said = [line for line in out.splitlines() if "failed first" in line]
        assert said == ["horarun: rank 1 failed first: ValueError: bad batch 7 on rank 1"], out


KILLED = r"""
import os, signal, time, numpy as np, hora.numpy as hvd
hvd.init()
hvd.allreduce(np.ones(2, np.float32), name="warm")
if hvd.rank() == 1:
    time.sleep(0.3)
    os.kill(os.getpid(), signal.SIGKILL)  # (reports nothing)
while True:  # rank 0 loses its connection to rank 1, and raises
    hvd.allreduce(np.ones(2, np.float32), name="loop")
"""


def test_a_rank_that_lost_its_peer_is_not_named_first():
    # Over TCP the survivor sees the lost connection (and reports it) before
    # horarun sees rank 1 end: a failure caused by a peer is never the first.
    if hvd.rank() != 0:
        return
    for transport in ("tcp", "shm"):
        code, out = _job(["-np", "2", "--transport", transport], KILLED)
        assert code == 128 + 9, out
        assert "failed first" not in out, out
        assert "horarun: rank 1 (pid " in out and "was killed by signal 9" in out, out


OWN_UNAVAILABLE = r"""
import time, numpy as np, hora.numpy as hvd
hvd.init()
hvd.allreduce(np.ones(2, np.float32), name="warm")
if hvd.rank() == 1:
    time.sleep(0.2)
    # (A peer's kind of error, with no peer gone: a device out of memory.)
    raise hvd.UnavailableError("device out of memory on rank 1")
hvd.allreduce(np.ones(2, np.float32), name="never")
"""


def test_an_error_of_a_peers_kind_with_no_peer_gone_is_named_first():
    if hvd.rank() != 0:
        return
    code, out = _job(["-np", "2"], OWN_UNAVAILABLE)
    assert code != 0, out
    said = [line for line in out.splitlines() if "failed first" in line]
    assert len(said) == 1 and said[0].startswith("horarun: rank 1 failed first: ") and \
        "device out of memory on rank 1" in said[0], out


TIMELINE_CODE = r"""
import numpy as np, hora.numpy as hvd
hvd.init()
hvd.allreduce(np.ones(2, np.float32), name="after")
"""


def test_init_that_fails_on_one_rank_after_the_others_connected_names_it():
    # Rank 0 alone writes the timeline: its init() fails after every rank
    # connected, and the others fail because its Session ended.
    if hvd.rank() != 0:
        return
    code, out = _job(["-np", "2"], TIMELINE_CODE,
                     {"HORA_TIMELINE": "/nonexistent/hora-test/t.json"})
    assert code != 0, out
    said = [line for line in out.splitlines() if "failed first" in line]
    assert len(said) == 1 and said[0].startswith(
        "horarun: rank 0 failed first: InvalidArgument: HORA_TIMELINE="), out


EARLY_EXIT = r"""
import os, sys, time
if os.environ["HORA_RANK"] == "1":
    sys.exit(0)  # (a rank that leaves before init(): a script's early return)
import hora.numpy as hvd
start = time.monotonic()
try:
    hvd.init()
except hvd.HoraError as e:
    print("init failed after %.1f s: %s" % (time.monotonic() - start, e))
    sys.exit(3)
"""


def test_a_rank_that_exits_before_init_ends_the_others_wait():
    # horarun tells the ranks still connecting (the job's store) that rank 1
    # exited: they fail at once naming it, instead of waiting out the start
    # timeout (120 s) and blaming its settings.
    if hvd.rank() != 0:
        return
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("HORA_") and not k.startswith("HOROVOD_")}
    env["PYTHONPATH"] = package_parent()
    res = subprocess.run([horarun_path(), "-np", "3", sys.executable, "-c", EARLY_EXIT],
                         env=env, capture_output=True, text=True, timeout=60)
    out = res.stdout + res.stderr
    assert res.returncode == 3, out
    # horarun's own words name it too, not only the ranks' errors.
    assert "had ended with exit code 0 while the others still ran" in out, out
    failed = [line for line in out.splitlines() if "init failed after" in line]
    assert len(failed) == 2, out
    for line in failed:
        seconds = float(line.split("init failed after ")[1].split(" s")[0])
        assert seconds < 30, line
        assert "rank 1 (pid " in line and "exited with code 0, while this rank was " \
            "connecting to it" in line, line
