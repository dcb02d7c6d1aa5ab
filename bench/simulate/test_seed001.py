"""Tests of the Summit preset (systems.py) and seed001.py (a few seconds):

    /usr/bin/python3 -m pytest -q bench/simulate/test_seed001.py

The preset's constants against the published figures they cite; the shape
of the result (the coordinator's cost grows with the workers, the cache wins
more the more GPUs there are); seed001's wiring against a direct call of
step.py, costs.py and control.py; the command end to end.
"""

import dataclasses
import json
import os
import subprocess
import sys

import pytest

import control
import costs
import gradients
import seed001
import step
import systems

S = systems.get("summit")
HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="module")
def model():
    return gradients.load("resnet50")


@pytest.fixture(scope="module")
def rows(model):
    return seed001.scaling(S, model, [k * S.per_host for k in seed001.NODES])


def test_summit_constants_are_the_published_ones():
    assert S.per_host == 6 and S.nodes == 4608 and S.per_host * S.nodes == 27648
    # dual-rail EDR: 2 x 100 Gb/s of data per node
    assert 1 / S.inter.beta == pytest.approx(2 * 100e9 / 8)
    assert 1e-6 <= S.inter.alpha <= 2e-6
    # within a node: the X Bus, 64 GB/s both ways; NVLink: two 25 GB/s bricks
    assert 1 / S.intra.beta == pytest.approx(64e9 / 2)
    assert systems.SUMMIT_NVLINK_BW == pytest.approx(2 * 25e9)
    # reduction: 3 bytes of HBM2 traffic (900 GB/s) per byte reduced
    assert 1 / S.inter.gamma == pytest.approx(900e9 / 3) and S.intra.gamma == S.inter.gamma
    fwd, bwd = S.compute_ms()
    assert fwd + bwd == pytest.approx(1e3 * 256 / 1200) and bwd == pytest.approx(2 * fwd)
    assert S.control.cache_capacity >= 161  # ResNet-50's gradients fit the cache
    with pytest.raises(KeyError, match="known: summit"):
        systems.get("frontier")


def test_without_the_cache_efficiency_falls_with_scale(rows):
    effs = [r["eff_uncached"] for r in rows]
    assert all(b <= a + 1e-12 for a, b in zip(effs, effs[1:])), effs
    assert effs[-1] < 0.5 * effs[0]


def test_the_cache_wins_more_the_more_gpus(rows):
    for r in rows:
        assert r["eff_cached"] >= r["eff_uncached"] - 1e-12, r["n"]
        assert r["speedup"] >= 1.0 - 1e-12
        if r["n"] >= 3072:  # (below, the coordinator's work hides behind backward)
            assert r["speedup"] > 1.2, r["n"]
    speedups = [r["speedup"] for r in rows]
    assert all(b >= a - 1e-12 for a, b in zip(speedups, speedups[1:])), speedups
    # with the cache, the control plane is a bit-vector allreduce: still near
    # linear at the whole machine for this batch
    assert rows[-1]["n"] == 27600 and rows[-1]["eff_cached"] > 0.95


def test_the_coordinators_cost_is_linear_in_workers(rows):
    # Where it no longer hides behind backward, the time it adds to a step
    # grows by the same amount per worker.
    by_n = {r["n"]: r for r in rows}
    compute = sum(S.compute_ms())
    extra = {n: by_n[n]["step_uncached_ms"] - compute for n in (12288, 24576, 27600)}
    slope = (extra[24576] - extra[12288]) / (24576 - 12288)
    assert slope > 0
    assert (extra[27600] - extra[24576]) / (27600 - 24576) == pytest.approx(slope, rel=0.05)


def test_seed001_wiring_matches_a_direct_simulation(model, rows):
    sizes = [t["bytes"] for t in model["tensors"]]
    fracs = [t["ready_frac"] for t in model["tensors"]]
    topo = costs.Topology(S.intra, S.inter, S.per_host)
    fwd, bwd = S.compute_ms()
    by_n = {r["n"]: r for r in rows}
    for n in (6, 6000):
        link = S.intra if n <= S.per_host else S.inter
        for cached, key in ((True, "step_cached_ms"), (False, "step_uncached_ms")):
            r = step.simulate_step(
                sizes, fracs, fwd / 1e3, bwd / 1e3, lambda m: costs.choose(n, m, topo)[1],
                lambda k: control.cycle(n, k, link, S.control, cached, len(sizes)))
            assert 1e3 * r.step_s == pytest.approx(by_n[n][key], rel=1e-12), (n, cached)


def test_speedup_grows_with_the_per_request_cost_and_the_implied_cost_gives_2x(model):
    sp = [seed001.speedup_at(S, model, 6000, per_request_s=c) for c in (0.2e-6, 0.5e-6, 1e-6)]
    assert sp[0] < sp[1] < sp[2]
    c = seed001.implied_per_request(S, model, 6000, 2.0)
    assert c is not None and 0 < c < 2e-6
    assert seed001.speedup_at(S, model, 6000, per_request_s=c) == pytest.approx(2.0, abs=1e-3)
    assert seed001.implied_per_request(S, model, 6000, 1000.0) is None


def test_nvlink_instead_of_the_x_bus_changes_little_at_batch_256(model, rows):
    nv = dataclasses.replace(S, intra=costs.Link(S.intra.alpha, 1 / systems.SUMMIT_NVLINK_BW,
                                                 S.intra.gamma))
    other = seed001.scaling(nv, model, [r["n"] for r in rows])
    for a, b in zip(rows, other):
        assert abs(a["eff_cached"] - b["eff_cached"]) < 0.01
        assert abs(a["eff_uncached"] - b["eff_uncached"]) < 0.02


def test_the_command_writes_its_report(tmp_path):
    out = subprocess.run([sys.executable, os.path.join(HERE, "seed001.py"), "--out",
                          str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "| 27600 | 4600 |" in out.stdout and "0.93" in out.stdout and "2x" in out.stdout
    res = json.loads((tmp_path / "seed001_summit.json").read_text())
    assert [r["n"] for r in res["rows"]][0] == 6 and res["rows"][-1]["n"] == 27600
    assert (tmp_path / "seed001_summit.png").stat().st_size > 0
    assert res["meta"]["command"].endswith("--out %s" % tmp_path)
