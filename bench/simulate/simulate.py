"""Predicts Hora's step time and scaling efficiency from 2 to 10,000 workers.

    /usr/bin/python3 bench/simulate/simulate.py --params bench/results/calib.json \\
        --model resnet50 --workers 2:10000 --out bench/results [--quick]

For each worker count (log-spaced) and each allreduce algorithm (ring,
recursive doubling, halving-doubling, hierarchical) and for the cost-model
choice (the cheapest algorithm per fused buffer), it runs step.py's
simulation of one training step: the model's gradients (gradients.py) become
ready through backward, are fused up to --fusion-threshold, negotiated
(control.py: bit-vector cycle when cached, coordinator when not) and
allreduced (costs.py) while backward goes on. The choice is also run with
the response cache off, to show what the fast path buys at scale.

Links come from calibrate.py's calib.json: --intra (default shm) between the
--per-host ranks of one host, --inter (default netns, the shaped network)
between hosts. Compute times are the model's measured ones (gradients.json)
unless --forward-ms / --backward-ms say otherwise.

Writes OUT/simulate_<model>[_<tag>].json, .png (efficiency and step time vs
workers, log x) and .md.
"""

import argparse
import math
import os
import sys
import time

import control
import costs
import gradients
import params as params_mod
import simulate_report
import step

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def worker_counts(spec, points):
    lo, hi = (int(x) for x in spec.split(":"))
    if lo < 1 or hi < lo:
        raise ValueError("--workers %r is not LOW:HIGH with 1 <= LOW <= HIGH" % spec)
    vals = {round(math.exp(math.log(lo) + i * (math.log(hi) - math.log(lo)) / (points - 1)))
            for i in range(points)} if points > 1 else {lo}
    return sorted(vals | {lo, hi})


def parse_bytes(s):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    s = str(s).strip().upper().rstrip("B").rstrip("I")
    return int(float(s[:-1]) * units[s[-1]]) if s and s[-1] in units else int(s)


def series(model, prm, workers, per_host, algo, cached, fusion, overlap, fwd_s, bwd_s):
    """[{n, step_ms, efficiency, cycles, exposed_ms, comm_ms}] for one algorithm
    ("choice": the cheapest per buffer)."""
    sizes = [t["bytes"] for t in model["tensors"]]
    fracs = [t["ready_frac"] for t in model["tensors"]]
    topo = costs.Topology(prm["intra"], prm["inter"], per_host)
    cp = prm["control"]
    out = []
    for n in workers:
        ctrl_link = topo.intra if topo.hosts(n) == 1 else topo.inter
        chosen = {}
        if algo == "choice":
            def allreduce_s(m, n=n, chosen=chosen):
                a, t = costs.choose(n, m, topo)
                chosen[costs.SHORT[a]] = chosen.get(costs.SHORT[a], 0) + 1
                return t
        else:
            def allreduce_s(m, n=n):
                return costs.allreduce(algo, n, m, topo)

        def control_s(k, n=n):
            return control.cycle(n, k, ctrl_link, cp, cached, tensors_per_step=len(sizes))
        r = step.simulate_step(sizes, fracs, fwd_s, bwd_s, allreduce_s, control_s,
                               fusion_threshold=fusion, overlap=overlap)
        out.append({"n": n, "step_ms": 1e3 * r.step_s, "efficiency": r.efficiency,
                    "cycles": r.cycles, "buffers": r.buffers, "exposed_ms": 1e3 * r.exposed_s,
                    "comm_ms": 1e3 * r.comm_s, "chosen": chosen})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--params", default=os.path.join(REPO, "bench", "results", "calib.json"),
                    help="calib.json from calibrate.py, or 'builtin'")
    ap.add_argument("--model", default="resnet50",
                    help="a model in gradients.json, or a JSON file (see gradients.py)")
    ap.add_argument("--workers", default="2:10000")
    ap.add_argument("--points", type=int, default=25, help="worker counts, log-spaced")
    ap.add_argument("--per-host", type=int, default=8, help="ranks per host")
    ap.add_argument("--intra", default="shm", help="link kind within a host")
    ap.add_argument("--inter", default="netns", help="link kind between hosts")
    ap.add_argument("--fusion-threshold", default="64M", help="HORA_FUSION_THRESHOLD_BYTES")
    ap.add_argument("--cache-capacity", type=int, default=None, help="HORA_CACHE_CAPACITY")
    ap.add_argument("--no-overlap", action="store_true",
                    help="communicate only after backward ends")
    ap.add_argument("--forward-ms", type=float, default=None)
    ap.add_argument("--backward-ms", type=float, default=None)
    ap.add_argument("--out", default=os.path.join(REPO, "bench", "results"))
    ap.add_argument("--tag", default="", help="suffix of the output names (scenarios)")
    ap.add_argument("--quick", action="store_true", help="fewer worker counts")
    args = ap.parse_args()
    t0 = time.time()
    try:
        prm = params_mod.load(args.params, args.intra, args.inter)
        model = gradients.load(args.model)
        workers = worker_counts(args.workers, 10 if args.quick else args.points)
        fusion = parse_bytes(args.fusion_threshold)
    except (params_mod.ParamsError, gradients.GradientsError, ValueError, KeyError) as e:
        sys.exit("simulate.py: %s" % e)
    if args.cache_capacity is not None:
        prm["control"] = prm["control"].with_(cache_capacity=args.cache_capacity)
    fwd_ms = args.forward_ms if args.forward_ms is not None else model.get("forward_ms")
    bwd_ms = args.backward_ms if args.backward_ms is not None else model.get("backward_ms")
    if fwd_ms is None or bwd_ms is None:
        sys.exit("simulate.py: %s has no compute times; pass --forward-ms and --backward-ms"
                 % args.model)
    common = dict(model=model, prm=prm, workers=workers, per_host=args.per_host,
                  fusion=fusion, overlap=not args.no_overlap, fwd_s=fwd_ms / 1e3,
                  bwd_s=bwd_ms / 1e3)
    res = {"series": {}}
    for algo in costs.ALGORITHMS + ("choice",):
        res["series"][algo] = series(algo=algo, cached=True, **common)
    res["series"]["choice_cache_off"] = series(algo="choice", cached=False, **common)
    name = os.path.splitext(os.path.basename(args.model))[0]
    res["meta"] = {
        "command": " ".join(["/usr/bin/python3"] + sys.argv), "model": name,
        "tensors": len(model["tensors"]),
        "gradient_bytes": sum(t["bytes"] for t in model["tensors"]),
        "forward_ms": fwd_ms, "backward_ms": bwd_ms, "per_host": args.per_host,
        "fusion_threshold": fusion, "overlap": not args.no_overlap,
        "cache_capacity": prm["control"].cache_capacity, "params": prm["source"],
        "links": {role: {"kind": prm["names"][role], "alpha_us": prm[role].alpha * 1e6,
                         "beta_gbps": (1e-9 / prm[role].beta) if prm[role].beta else None,
                         "gamma_gbps": (1e-9 / prm[role].gamma) if prm[role].gamma else None}
                  for role in ("intra", "inter")},
        "control": vars(prm["control"]), "workers": workers,
    }
    stem = "simulate_%s%s" % (name, "_" + args.tag if args.tag else "")
    paths = simulate_report.write(args.out, stem, res)
    print("simulated %s on %d..%d workers (%d points) in %.1f s; wrote %s"
          % (name, workers[0], workers[-1], len(workers), time.time() - t0, ", ".join(paths)))
    last = {a: s[-1]["efficiency"] for a, s in res["series"].items()}
    print("efficiency at %d workers: %s" % (workers[-1], ", ".join(
        "%s %.3f" % (a, e) for a, e in last.items())))


if __name__ == "__main__":
    main()
