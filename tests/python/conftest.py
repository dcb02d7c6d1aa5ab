"""pytest setup for Hora's Python tests.

Run every rank as a pytest process, e.g.
    build/bin/horarun -np 2 /usr/bin/python3 -m pytest -q tests/python
Every test makes the same collective calls on every rank (tests never skip
on one rank only). Without a launcher the suite runs as a job of one rank.
The package is taken from build/python (the build copies python/hora there)
unless HORA_TEST_INSTALLED=1, which tests the hora that Python finds (a pip
install).

No test may hang: one that runs longer than HORA_TEST_HANG_S (default 120 s),
or whose file's tests together run longer than HORA_TEST_FILE_HANG_S (300 s),
prints "HANG: <test> ..." with every thread's stack and ends its rank, which
ends the job (horarun stops the others at once).
"""

import faulthandler
import os
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_BUILD = os.path.join(ROOT, "build", "python")
if os.environ.get("HORA_TEST_INSTALLED") != "1" and _BUILD not in sys.path:
    sys.path.insert(0, _BUILD)

import pytest  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)

# GPU tensors through DLPack run on Hora's host device (test_gpu_dlpack.py):
# set before init, which reads it.
os.environ.setdefault("HORA_DEVICE", "host")

import hora  # noqa: E402
import hora.torch as hvd  # noqa: E402

if os.environ.get("HORA_TEST_INSTALLED") == "1":
    assert not hora.__file__.startswith(_BUILD), "HORA_TEST_INSTALLED=1, yet hora is %s" % hora.__file__

hvd.init()


@pytest.fixture
def hvd_mod():
    return hvd


HANG_S = float(os.environ.get("HORA_TEST_HANG_S", "120"))
FILE_HANG_S = float(os.environ.get("HORA_TEST_FILE_HANG_S", "300"))
_file = {"path": None, "start": 0.0}


def _hung(nodeid, what, limit):
    sys.stderr.write("\nHANG: %s ran over %g s (%s) on rank %d of %d; every thread's "
                     "stack follows, then this rank exits\n"
                     % (nodeid, limit, what, hvd.rank(), hvd.size()))
    faulthandler.dump_traceback(all_threads=True)
    sys.stderr.flush()
    os._exit(3)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    # Each test, and each file's tests together, are bounded in time.
    now = time.monotonic()
    if item.fspath != _file["path"]:
        _file.update(path=item.fspath, start=now)
    file_left = FILE_HANG_S - (now - _file["start"])
    if file_left < HANG_S:
        timer = threading.Timer(max(file_left, 0.0), _hung,
                                args=(item.nodeid, "HORA_TEST_FILE_HANG_S, its file's tests together",
                                      FILE_HANG_S))
    else:
        timer = threading.Timer(HANG_S, _hung, args=(item.nodeid, "HORA_TEST_HANG_S", HANG_S))
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
