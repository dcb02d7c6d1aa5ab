"""hora_runs against the real binaries (short runs under horarun): the rows
the studies read must parse from what hora-engine-bench prints today.

    /usr/bin/python3 -m pytest -q bench/simulate/test_hora_runs.py
"""

import os

import pytest

import hora_runs


@pytest.mark.skipif(not os.path.exists(os.path.join(hora_runs.BIN, "hora-engine-bench")),
                    reason="hora-engine-bench not built (make)")
def test_engine_bench_rows_parse():
    recs = hora_runs.engine_bench(2, 3, 16, 4, 1, timeout=120)
    assert [r["cache"] for r in recs] == ["on", "off"]
    for r in recs:
        assert r["np"] == 2 and r["tensors"] == 3 and r["bytes"] == 16
        assert r["step_p50_us"] > 0 and r["cycles"] >= 1
        assert 0 <= r["driven_cycles"] <= r["cycles"]
    on, off = recs
    assert on["slow_cycles"] == 0 and on["coord_bytes"] == 0  # cached steady state
    assert off["slow_cycles"] > 0 and off["coord_bytes"] > 0
