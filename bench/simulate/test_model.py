"""Tests of the simulator's model (no binaries, no torch; a few seconds):

    /usr/bin/python3 -m pytest -q bench/simulate

Cost formulas against hand-computed values, the fit recovering known
parameters from synthetic data, fusion / overlap sanity, the control plane.
"""

import math
import random

import pytest

import control
import costs
import fit
import step
from costs import Link, Topology

A, B, G = 3e-6, 2e-10, 1e-10  # alpha, beta, gamma
L = Link(A, B, G)
M = 1 << 20


def close(x, y):
    return math.isclose(x, y, rel_tol=1e-12, abs_tol=1e-18)


def test_ring_matches_hand_computed():
    # n = 4: 2(n-1) a + 2(n-1)/n m b + (n-1)/n m g
    assert close(costs.ring(4, M, L), 6 * A + 1.5 * M * B + 0.75 * M * G)
    assert costs.ring(1, M, L) == 0.0


def test_recursive_doubling_power_of_two_and_fold():
    assert close(costs.recursive_doubling(8, M, L), 3 * (A + M * B + M * G))
    # n = 6: p = 4, two rounds plus the fold 2(a + m b) + m g
    fold = 2 * (A + M * B) + M * G
    assert close(costs.recursive_doubling(6, M, L), fold + 2 * (A + M * B + M * G))


def test_halving_doubling():
    # n = 8: 2 log2(8) a + 2 (7/8) m b + (7/8) m g
    assert close(costs.halving_doubling(8, M, L), 6 * A + 1.75 * M * B + 0.875 * M * G)


def test_topology_one_rank_per_host_is_the_flat_model():
    topo = Topology(Link(1e-7, 1e-11, G), L, per_host=1)
    for algo, f in costs.FLAT.items():
        for n in (2, 5, 8, 13):
            assert close(costs.allreduce(algo, n, M, topo), f(n, M, L)), (algo, n)


def test_topology_rounds_within_a_host_use_the_intra_link():
    intra, inter = Link(1e-7, 1e-11, G), Link(A, B, G)
    topo = Topology(intra, inter, per_host=4)
    # 8 ranks, 2 hosts: rd rounds at distance 1, 2 stay on the host; the round
    # at distance 4 sends 4 flows out of each host at once.
    want = 2 * (intra.alpha + M * intra.beta + M * G) + (A + M * 4 * B + M * G)
    assert close(costs.allreduce("recursive_doubling", 8, M, topo), want)
    # hierarchical: a ring reduce-scatter and allgather on 4 ranks (3 steps
    # each of M/4), and between them each of the 4 places allreduces its M/4
    # block between the 2 hosts, the 4 sharing each host's link
    within = 6 * intra.alpha + 2 * 0.75 * M * intra.beta + 0.75 * M * G
    across = min(f(2, M / 4, Link(A, 4 * B, G)) for f in costs.FLAT.values())
    assert close(costs.allreduce("hierarchical", 8, M, topo), within + across)
    # with the ring across named: 2 steps of M/8 at a quarter of the link
    ring_across = 2 * (A + M / 8 * 4 * B) + 0.5 * M / 4 * G
    assert close(costs.hierarchical(8, M, topo, across="ring"), within + ring_across)
    # link-bound, each host sends 2(H-1)/H M with it, 2(n-1)/n M flat
    big = 1 << 30
    slow = Topology(Link(0, 0, 0), Link(0, B, 0), per_host=4)
    assert close(costs.hierarchical(8, big, slow, across="ring"), big * B)
    assert close(costs.allreduce("ring", 8, big, slow), 2 * 7 / 8 * big * B)
    # one rank a host crossing: the same reduce-scatter (3 steps of M/4), a
    # gather of 3/4 M in 3 messages, 2 ring steps of M/2 across, the link
    # unshared, half of M reduced, and the cheaper broadcast of M among 4:
    # two binomial rounds of M, or a scatter and a ring allgather of 3/4 M
    reduce_scatter = 3 * intra.alpha + 0.75 * M * intra.beta + 0.75 * M * G
    gather = 3 * intra.alpha + 0.75 * M * intra.beta
    one_across = 2 * (A + M / 2 * B) + 0.5 * M * G
    broadcast = min(2 * (intra.alpha + M * intra.beta), 2 * gather)
    assert close(costs.hierarchical_one(8, M, topo, across="ring"),
                 reduce_scatter + gather + one_across + broadcast)
    # link-bound: the same bytes over each link as every rank crossing
    assert close(costs.hierarchical_one(8, big, slow, across="ring"), big * B)
    # everything on one host: the intra link only
    assert close(costs.allreduce("ring", 4, M, topo), costs.ring(4, M, intra))


def test_unknown_algorithm_is_an_error_naming_it():
    with pytest.raises(ValueError, match="bogus"):
        costs.allreduce("bogus", 4, M, Topology(L, L, 1))


def test_choice_is_the_cheapest():
    topo = Topology(Link(1e-7, 1e-11, G), L, per_host=8)
    for n in (2, 16, 100, 1000):
        for m in (8, 64 << 10, 64 << 20):
            algo, t = costs.choose(n, m, topo)
            assert t == min(costs.allreduce(a, n, m, topo) for a in costs.ALGORITHMS)
    assert costs.choose(64, 8, Topology(L, L, 1))[0] == "recursive_doubling"  # latency-bound
    assert costs.choose(64, 256 << 20, Topology(L, L, 1))[0] in ("ring", "halving_doubling")


def test_fit_recovers_known_parameters():
    rng = random.Random(1)
    pts = []
    for algo in ("ring", "recursive_doubling", "halving_doubling"):
        for n in (2, 3, 4, 8):
            for k in range(2, 24, 2):
                m = 1 << k
                t = costs.FLAT[algo](n, m, L) * (1 + rng.uniform(-0.02, 0.02))
                pts.append({"algo": algo, "n": n, "m": m, "t": t})
    got = fit.fit(pts, gamma=G)
    assert got["alpha"] == pytest.approx(A, rel=0.05)
    assert got["beta"] == pytest.approx(B, rel=0.05)
    assert got["max_abs_rel_err"] < 0.05
    free = fit.fit([dict(p, t=costs.FLAT[p["algo"]](p["n"], p["m"], L)) for p in pts])
    assert free["alpha"] == pytest.approx(A, rel=1e-3)
    assert free["beta"] == pytest.approx(B, rel=1e-3)
    assert free["gamma"] == pytest.approx(G, rel=1e-3)


def _step(n_grads=50, overlap=True, fusion=64 << 20, bw=1e-10, fwd=0.01, bwd=0.02):
    sizes = [1 << 20] * n_grads
    fracs = [(i + 1) / n_grads for i in range(n_grads)]
    return step.simulate_step(sizes, fracs, fwd, bwd, lambda m: 1e-5 + m * bw,
                              lambda k: 1e-6, fusion_threshold=fusion, overlap=overlap)


def test_step_never_faster_than_compute_and_efficiency_at_most_one():
    for bw in (0.0, 1e-12, 1e-10, 1e-8):
        for overlap in (True, False):
            r = _step(bw=bw, overlap=overlap)
            assert r.step_s >= r.compute_s
            assert 0 < r.efficiency <= 1.0


def test_gradients_ready_early_and_fast_links_cost_nothing():
    # all gradients ready by half of backward, instant links: the step is compute
    r = step.simulate_step([1 << 20] * 10, [0.05 * (i + 1) for i in range(10)], 0.01, 0.02,
                           lambda m: 0.0, lambda k: 0.0)
    assert r.step_s == pytest.approx(0.03) and r.efficiency == pytest.approx(1.0)
    assert r.exposed_s == pytest.approx(0.0)


def test_overlap_hides_communication_and_fusion_cuts_cycles():
    with_overlap, without = _step(overlap=True), _step(overlap=False)
    assert with_overlap.step_s < without.step_s
    # without overlap everything is ready at once: one cycle, one buffer (64 MiB fits 50 MiB)
    assert (without.cycles, without.buffers) == (1, 1)
    assert _step(overlap=False, fusion=0).buffers == 50  # fusion off: one per gradient
    assert _step(overlap=False, fusion=8 << 20).buffers == math.ceil(50 / 8)
    assert _step(overlap=False, fusion=8 << 20).cycles == 1
    # with overlap, gradients that arrive while the engine is busy are fused
    # (1 ms per gradient on this link, one arriving every 0.4 ms); on a fast
    # link each goes alone as it arrives
    busy = _step(bw=1e-9)
    assert 1 < busy.buffers < 50 and busy.buffers == busy.cycles
    assert with_overlap.buffers == 50
    # slow links: no overlap can hide it, the step is compute + most of the transfer
    slow = _step(bw=1e-8)
    assert slow.step_s > 0.01 + 50 * (1 << 20) * 1e-8 * 0.9


def test_step_rejects_bad_input():
    with pytest.raises(ValueError):
        step.simulate_step([1, 2], [0.5], 0, 1, lambda m: 0, lambda k: 0)
    with pytest.raises(ValueError):
        step.simulate_step([1, 2], [0.5, 0.2], 0, 1, lambda m: 0, lambda k: 0)


def test_control_plane_cached_vs_negotiated():
    cp = control.ControlParams(cache_capacity=1024, request_bytes=60, response_bytes=40,
                               message_overhead_s=2e-6, per_request_s=1e-6, per_tensor_s=3e-6)
    assert control.bitvector_words(1024) == 33 and control.bitvector_words(100) == 5
    # cached: one recursive-doubling AND allreduce of 33 words (n = 8: 3 rounds)
    assert close(control.fast_cycle(8, L, cp), 3 * (A + 264 * B))
    # slow: + gather (linear in n) + coordinator work + two binomial broadcasts
    k, n = 10, 8
    gather = A + 7 * (2 * 2e-6 + (8 + 600) * B)
    bcast = 2 * 3 * A + 3 * (16 + 400) * B
    assert close(control.slow_cycle(n, k, L, cp), control.fast_cycle(n, L, cp) + gather +
                 n * k * 1e-6 + k * 3e-6 + bcast)
    assert control.cycle(n, k, L, cp, cached=True) == control.fast_cycle(n, L, cp)
    e = cp.with_(engine_per_tensor_s=5e-6)  # engine bookkeeping: every tensor, every path
    assert close(control.cycle(n, k, L, e, cached=True), control.fast_cycle(n, L, cp) + k * 5e-6)
    assert close(control.cycle(n, k, L, e, cached=False),
                 control.slow_cycle(n, k, L, cp) + k * 5e-6)
    # more tensors than cache entries: LRU misses every time
    assert control.cycle(n, k, L, cp, cached=True, tensors_per_step=2000) == \
        control.slow_cycle(n, k, L, cp)
    off = cp.with_(cache_capacity=0)  # cache off: still the 1-word status allreduce
    assert control.bitvector_words(0) == 1
    assert control.cycle(n, k, L, off, cached=True) == control.slow_cycle(n, k, L, off)
    # negotiation grows linearly with workers, the cached path logarithmically
    assert control.slow_cycle(10000, k, L, cp) / control.slow_cycle(100, k, L, cp) > 50
    assert control.fast_cycle(10000, L, cp) / control.fast_cycle(100, L, cp) < 3
    assert control.coordinator_bytes(4, 10, cp) == 3 * (8 + 600) + 8 + 400


def test_fit_shrugs_off_a_few_disturbed_points():
    pts = []
    for algo in ("ring", "recursive_doubling"):
        for n in (2, 4):
            for k in range(2, 24, 2):
                m = 1 << k
                pts.append({"algo": algo, "n": n, "m": m, "t": costs.FLAT[algo](n, m, L)})
    for p in pts[::8]:  # one point in eight slowed down threefold
        p["t"] *= 3
    got = fit.fit(pts, gamma=G)  # plain least squares is off by about 3% and 6% here
    assert got["alpha"] == pytest.approx(A, rel=0.02)
    assert got["beta"] == pytest.approx(B, rel=0.02)


def test_fit_control_recovers_bytes_and_costs():
    q, s, c, r, T = 61.0, 69.0, 0.7e-6, 2.5e-6, 200
    rows = []
    for n in (1, 2, 4, 8):
        S = 1.5
        rows.append({"np": n, "tensors": T, "cache": "on", "step_p50_us": 500.0 * n,
                     "slow_cycles": 0.0, "coord_bytes": 0.0})
        rows.append({"np": n, "tensors": T, "cache": "off", "slow_cycles": S,
                     "step_p50_us": 500.0 * n + 1e6 * (T * r + n * T * c),
                     "coord_bytes": (n - 1) * (8 * S + T * q) + 8 * S + T * s})
    got = fit.fit_control(rows)
    assert got["request_bytes"] == pytest.approx(q) and got["response_bytes"] == pytest.approx(s)
    assert got["per_request_s"] == pytest.approx(c, rel=1e-6)
    assert got["per_tensor_s"] == pytest.approx(r, rel=1e-6)
    assert got["engine_per_tensor_s"] == pytest.approx(500e-6 / T)  # np 1, cache on


def test_calibration_keeps_each_control_constants_median_and_the_fits():
    import calibrate  # (imports nothing that runs)
    fits = [dict(per_request_s=c * 1e-7, per_tensor_s=(9 - c) * 1e-8, engine_per_tensor_s=c * 1e-8,
                 request_bytes=64.9, response_bytes=68.9, tensors=1000, tensor_bytes=4,
                 runs=[], saved_s_by_np={})
            for c in (3, 9, 1, 4, 2)]
    got = calibrate.median_control(fits)
    assert got["per_request_s"] == pytest.approx(3e-7)
    assert got["per_tensor_s"] == pytest.approx(6e-8)  # (the median of 6, 0, 8, 5, 7)
    assert got["engine_per_tensor_s"] == pytest.approx(3e-8)
    assert got["request_bytes"] == pytest.approx(64.9) and got["tensors"] == 1000
    assert [f["per_request_s"] for f in got["fits"]] == [f["per_request_s"] for f in fits]
    assert "runs" not in got["fits"][0]
