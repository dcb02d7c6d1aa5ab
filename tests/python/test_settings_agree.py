"""Ranks whose settings differ where they must agree (the algorithm, the
transport, the response cache) fail at once when the Session starts, on every
rank, naming the setting and each rank's value, instead of deadlocking in the
first collective. Runs jobs of its own (from rank 0 of this one); rank 1 of
each gets a setting of its own through a shell wrapper."""

import os
import subprocess
import sys
import time

import pytest

import hora.torch as hvd

from helpers import horarun_path, package_parent

CODE = ("import numpy as np, hora.numpy as hvd; hvd.init(); "
        "print('sum', hvd.allreduce(np.ones(3, np.float32), op=hvd.Sum).tolist(), flush=True)")


def _job(rank1_setting, common=None):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("HORA_") and not k.startswith("HOROVOD_")}
    env.update({"PYTHONPATH": package_parent(), "HORA_STALL_WARNING_S": "2"})
    env.update(common or {})
    wrapper = ('if [ "$HORA_RANK" = 1 ]; then export %s; fi; exec "$0" -c "$1"' % rank1_setting)
    start = time.monotonic()
    res = subprocess.run([horarun_path(), "-np", "2", "sh", "-c", wrapper, sys.executable, CODE],
                         env=env, capture_output=True, text=True, timeout=90)
    return res, time.monotonic() - start


@pytest.mark.parametrize("rank1, named", [
    ("HORA_ALLREDUCE_ALGO=ring", "HORA_ALLREDUCE_ALGO is '' on rank 0 and 'ring' on rank 1"),
    ("HORA_TRANSPORT=tcp", "HORA_TRANSPORT is 'shm' on rank 0 and 'tcp' on rank 1"),
    ("HORA_CACHE_CAPACITY=16", "HORA_CACHE_CAPACITY is '1024' on rank 0 and '16' on rank 1"),
])
def test_ranks_whose_settings_differ_fail_at_the_start_naming_them(rank1, named):
    if hvd.rank() != 0:
        return
    res, took = _job(rank1)
    out = res.stdout + res.stderr
    assert res.returncode != 0, out
    assert "sum" not in out, out
    for r in (0, 1):
        assert "rank %d: ranks disagree on settings every rank must share: %s" % (r, named) \
            in out, out
    assert took < 30, (took, out)


def test_ranks_that_agree_run():
    if hvd.rank() != 0:
        return
    res, _ = _job("HORA_TIMEOUT_S=30", {"HORA_ALLREDUCE_ALGO": "ring"})
    out = res.stdout + res.stderr
    assert res.returncode == 0, out
    assert out.count("sum [2.0, 2.0, 2.0]") == 2, out
