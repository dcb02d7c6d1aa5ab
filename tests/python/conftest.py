"""pytest setup for Hora's Python tests.

Run every rank as a pytest process, e.g.
    build/bin/horarun -np 2 /usr/bin/python3 -m pytest -q tests/python
Every test makes the same collective calls on every rank (tests never skip
on one rank only). Without a launcher the suite runs as a job of one rank.
The package is taken from build/python (the build copies python/hora there).
"""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_BUILD = os.path.join(ROOT, "build", "python")
if _BUILD not in sys.path:
    sys.path.insert(0, _BUILD)

import pytest  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)

# GPU tensors through DLPack run on Hora's host device (test_gpu_dlpack.py):
# set before init, which reads it.
os.environ.setdefault("HORA_DEVICE", "host")

import hora.torch as hvd  # noqa: E402

hvd.init()


@pytest.fixture
def hvd_mod():
    return hvd
