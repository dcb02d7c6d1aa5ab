"""hora_runs against the real binaries (short runs under horarun): the rows
the studies read must parse from what hora-engine-bench prints today.

    /usr/bin/python3 -m pytest -q bench/simulate/test_hora_runs.py
"""

import os

import pytest

import hora_runs


@pytest.mark.skipif(hora_runs.UNBUILT_SKIPS and
                    not os.path.exists(os.path.join(hora_runs.BIN, "hora-engine-bench")),
                    reason="hora-engine-bench not built (make)")
def test_engine_bench_rows_parse():
    recs = hora_runs.engine_bench(2, 3, 16, 4, 1, timeout=120)
    assert [r["cache"] for r in recs] == ["on", "off"]
    for r in recs:
        assert r["np"] == 2 and r["tensors"] == 3 and r["bytes"] == 16
        assert r["step_p50_us"] > 0 and r["cycles"] >= 1
        assert 0 <= r["driven_cycles"] <= r["cycles"]
        assert 0 <= r["carried"] <= r["cycles"]
    on, off = recs
    assert on["slow_cycles"] == 0 and on["coord_bytes"] == 0  # cached steady state
    assert off["slow_cycles"] > 0 and off["coord_bytes"] > 0
    assert off["carried"] == 0  # nothing cached: no allreduce goes with the bits


def test_shaped_sweep_gives_small_sizes_their_warm_up(monkeypatch):
    calls = []

    def fake_sweep(np_, lo, hi, iters, warmup, algo=None, hosts=None, timeout=300):
        calls.append((lo, hi, iters, warmup))
        sizes, m = [], lo
        while m <= hi:
            sizes.append({"size_bytes": m})
            m *= 2
        return sizes

    monkeypatch.setattr(hora_runs, "allreduce_sweep", fake_sweep)
    recs = hora_runs.allreduce_sweep_shaped(4, 3 << 10, 1536 << 10, 6, 1)
    small = (3 << 10, hora_runs.SMALL_BYTES - 1, hora_runs.SMALL_ITERS, hora_runs.SMALL_WARMUP)
    assert calls == [small, (96 << 10, 1536 << 10, 6, 1)]
    # Every size of the plain doubling sweep, once each, in order.
    assert [r["size_bytes"] for r in recs] == [3 << (10 + k) for k in range(10)]
    calls.clear()
    hora_runs.allreduce_sweep_shaped(2, 4, 32, 30, 12)
    assert calls == [(4, 32, 30, 12)]  # more than the minimum is kept
    calls.clear()
    hora_runs.allreduce_sweep_shaped(2, 128 << 10, 1 << 20, 6, 1)
    assert calls == [(128 << 10, 1 << 20, 6, 1)]  # nothing small: one plain sweep
    with pytest.raises(ValueError):
        hora_runs.allreduce_sweep_shaped(2, 0, 64, 6, 1)
