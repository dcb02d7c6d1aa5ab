"""on_netns.py: its usage error, and a real run on two namespaced hosts.

    /usr/bin/python3 -m pytest -q bench/simulate/test_on_netns.py
"""

import os
import subprocess
import sys

import pytest

import hora_runs

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "on_netns.py")


def test_no_command_is_a_usage_error():
    p = subprocess.run([sys.executable, SCRIPT, "--hosts", "2", "--"], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 2
    assert "no command given" in p.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="namespaced hosts need root")
@pytest.mark.skipif(hora_runs.UNBUILT_SKIPS and
                    not os.path.exists(os.path.join(hora_runs.BIN, "hora-bench")),
                    reason="hora-bench not built (make)")
def test_runs_a_checked_allreduce_on_two_hosts():
    p = subprocess.run([sys.executable, SCRIPT, "--hosts", "2", "--rate", "", "--",
                        os.path.join(hora_runs.BIN, "hora-bench"), "allreduce", "--sizes",
                        "4:64", "--iters", "2", "--warmup", "1", "--check"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    rows = [line.split() for line in p.stdout.splitlines()
            if line.strip()[:1].isdigit()]
    assert [int(r[0]) for r in rows] == [4, 8, 16, 32, 64], p.stdout
    assert all(r[-1] == "0" for r in rows), p.stdout  # #wrong: every element checked
