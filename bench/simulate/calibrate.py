"""Calibrates the simulator: measures alpha, beta, gamma of each kind of link
and the control plane's message sizes, and writes calib.json.

    /usr/bin/python3 bench/simulate/calibrate.py [--quick] [--out bench/results]
        [--links shm,tcp,netns] [--rate 30mbit] [--source bench|engine]
        [--control-repeats N]

- gamma: hora-kernel-bench BM_SumF32 (the f32 sum kernel), seconds per byte
  reduced, at 1 MiB (the ring reduces segments of 256 KiB).
- links: hora-bench allreduce sweeps (powers of two from 4 B), each of ring,
  recursive doubling and halving-doubling forced with HORA_ALLREDUCE_ALGO, at
  a few np, on
    shm   -- horarun on this host (shared memory),
    tcp   -- horarun --transport tcp on this host,
    netns -- one rank per network namespace, links shaped by tc tbf to --rate
             (bandwidth only: no netem in this kernel, so no added delay).
             30 Mbit/s by default: at 100 Mbit/s, 8 namespaced hosts on 2 cores
             were bound by the kernel's own work (veth, bridge, tbf), not by
             their links, so a link model could not describe them. Sizes
             below 64 KiB get 10 warm-up iterations, which spend tbf's
             bucket (4 KiB; hora_runs.allreduce_sweep_shaped; --source engine
             runs have no such warm-up);
  alpha and beta are fitted to the p50 times by least squares on relative
  error (fit.py), with gamma fixed; the per-point residuals are kept.
- control: hora-engine-bench (cache on and off; 1000 tensors of 4 bytes, so
  the data path is negligible) at np 1, 2 and 4 gives the
  coordinator bytes per step, from which the bytes of one request and one
  response are fitted (control.coordinator_bytes), and the time the cache
  saves, from which the per-request cost is estimated (fit.fit_control).
  --control-repeats N fits it N times and keeps each constant's median
  (one fit's per-request cost varies by 1.5x from run to run here); the
  fits are kept too. `--links ''` calibrates the control plane (and gamma)
  alone.

--source engine times lone allreduces through hora-engine-bench instead of
hora-bench (one launch per size; each time then also holds one engine cycle,
which fit.py models). The default, auto, uses hora-bench and falls back to
the engine for a link kind where hora-bench fails, printing the error and
recording it in calib.json (links.KIND.source_note).

Writes OUT/calib.json: {"gamma", "links": {kind: {alpha, beta, gamma,
mean_abs_rel_err, max_abs_rel_err, points, ...}}, "control": {...}}.
validate.py checks the fit on runs it was not fitted to.
"""

import argparse
import contextlib
import json
import os
import platform
import sys
import time


import numpy as np

import fit
import hora_runs
import netns

ALGOS = ("ring", "recursive_doubling", "halving_doubling")
# --source engine: one launch per size, so fewer sizes (powers of two still).
ENGINE_SIZES = (4, 64, 1 << 10, 16 << 10, 128 << 10, 1 << 20, 4 << 20)


def sweep_points(np_, lo, hi, iters, warmup, algos, source, transport=None, hosts=None):
    pts = []
    for algo in algos:
        if source == "engine":
            sizes = [m for m in ENGINE_SIZES if lo <= m <= hi]
            recs = hora_runs.allreduce_via_engine(np_, sizes, iters, warmup, algo=algo,
                                                  transport=transport, hosts=hosts)
        elif hosts is not None:
            recs = hora_runs.allreduce_sweep_shaped(np_, lo, hi, iters, warmup, algo=algo,
                                                    hosts=hosts)
        else:
            recs = hora_runs.allreduce_sweep(np_, lo, hi, iters, warmup, algo=algo,
                                             transport=transport, hosts=hosts)
        for r in recs:
            pts.append({"algo": algo, "n": np_, "m": r["size_bytes"], "via": r["via"],
                        "t": r["p50_us"] * 1e-6, "avg_us": r["avg_us"], "p99_us": r["p99_us"]})
    return pts


def measure_link(kind, nps, lo, hi, iters, warmup, rate, source, algos=ALGOS):
    """Points for one link kind; source "auto" tries hora-bench and falls back
    to the engine (saying so) when hora-bench fails. Returns (points, source,
    note)."""
    pts, note = [], None
    for n in nps:
        print("  %s np %d ..." % (kind, n), flush=True)
        hosts = netns.NamespacedHosts(n, rate=rate) if kind == "netns" else None
        transport = None if hosts else ("tcp" if kind == "tcp" else "shm")
        with hosts if hosts else contextlib.nullcontext():
            try:
                pts += sweep_points(n, lo, hi, iters, warmup, algos,
                                    "bench" if source == "auto" else source, transport, hosts)
            except hora_runs.RunError as e:
                if source != "auto":
                    raise
                note = "hora-bench failed, so lone allreduces through hora-engine-bench: " + \
                    " / ".join(ln for ln in str(e).splitlines()[1:3])
                print("  WARNING %s: %s" % (kind, note), flush=True)
                source = "engine"
                pts = [p for p in pts if p["n"] != n]
                pts += sweep_points(n, lo, hi, iters, warmup, algos, source, transport, hosts)
        if source == "auto":
            source = "bench"
    return pts, source, note  # points keep their own "via": fit.py models each


def calibrate_control(nps, tensors, nbytes, steps):
    """Request/response bytes per tensor and the per-request cost, from
    hora-engine-bench with the cache on and off (fit.fit_control)."""
    runs = []
    for n in nps:
        print("  control np %d ..." % n, flush=True)
        runs += hora_runs.engine_bench(n, tensors, nbytes, steps, 2)
    out = fit.fit_control(runs)
    out.update({"runs": runs, "tensors": tensors, "tensor_bytes": nbytes})
    return out


CONTROL_CONSTANTS = ("per_request_s", "per_tensor_s", "engine_per_tensor_s", "request_bytes",
                     "response_bytes")


def median_control(fits):
    """The median of each control constant over `fits` (calibrate_control's),
    with the fits' constants kept under "fits"."""
    out = {k: float(np.median([f[k] for f in fits])) for k in CONTROL_CONSTANTS}
    out["fits"] = [{k: f[k] for k in CONTROL_CONSTANTS} for f in fits]
    out.update({k: fits[0][k] for k in ("tensors", "tensor_bytes")})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="np 2 only, fewer sizes and iterations")
    ap.add_argument("--out", default=os.path.join(hora_runs.REPO, "bench", "results"))
    ap.add_argument("--links", default="shm,tcp,netns")
    ap.add_argument("--rate", default="30mbit", help="tbf rate of each namespaced host's link")
    ap.add_argument("--nps", default=None, help="np / hosts to calibrate on (default 2,4)")
    ap.add_argument("--control-repeats", type=int, default=1,
                    help="fit the control plane N times, keeping each constant's median")
    ap.add_argument("--max-bytes", type=int, default=None)
    ap.add_argument("--source", choices=("auto", "bench", "engine"), default="auto",
                    help="hora-bench sweeps, or lone allreduces through hora-engine-bench "
                    "(the engine cycle is then modelled too); auto: hora-bench, and the "
                    "engine for a link kind where hora-bench fails (said and recorded)")
    args = ap.parse_args()
    netns.install_signal_exit()
    t_start = time.time()
    nps = [int(x) for x in (args.nps or ("2" if args.quick else "2,4")).split(",")]
    hi = args.max_bytes or ((1 << 20) if args.quick else (4 << 20))
    iters, warmup = (5, 1) if args.quick else (15, 3)
    out = {"created": time.strftime("%Y-%m-%d %H:%M:%S"), "host": platform.node(),
           "cpus": os.cpu_count(), "command": " ".join([sys.executable] + sys.argv),
           "quick": args.quick, "links": {}}

    print("gamma (hora-kernel-bench BM_SumF32) ...", flush=True)
    g = hora_runs.kernel_gamma(min_time=0.05 if args.quick else 0.2)
    gamma = g.get(1 << 20, min(g.values()))
    out["gamma"] = {"s_per_byte": gamma, "by_size": {str(k): v for k, v in g.items()}}

    for kind in [k for k in args.links.split(",") if k]:
        if kind not in ("shm", "tcp", "netns"):
            sys.exit("calibrate.py: unknown link kind %r (shm, tcp, netns)" % kind)
        ks = nps if kind != "netns" or not args.quick else [2, 4]
        pts, source, note = measure_link(kind, ks, 4, hi,
                                         iters if kind != "netns" else max(3, iters // 2),
                                         warmup, args.rate, args.source)
        res = fit.fit(pts, gamma=gamma)
        # Diagnostic: the same fit per np (more ranks than cores inflates alpha).
        res["by_np"] = {str(n): {k: v for k, v in fit.fit([p for p in pts if p["n"] == n],
                                                           gamma=gamma).items()
                                 if k != "points"} for n in ks}
        res.update({"nps": ks, "sizes": [4, hi], "iters": iters, "statistic": "p50",
                    "source": source})
        if note:
            res["source_note"] = note
        if kind == "netns":
            res["rate"] = args.rate
            res["burst"] = netns.NamespacedHosts.BURST
        out["links"][kind] = res
        for n, f in res["by_np"].items():
            print("    np %s alone: alpha %.1f us, %.3f GB/s, |rel err| mean %.0f%%"
                  % (n, f["alpha"] * 1e6, 1e-9 / f["beta"] if f["beta"] else float("inf"),
                     100 * f["mean_abs_rel_err"]))
        print("  %-5s alpha %.1f us, beta %.3g s/B (%.3f GB/s); |rel err| mean %.0f%%, max %.0f%%"
              % (kind, res["alpha"] * 1e6, res["beta"], 1e-9 / res["beta"] if res["beta"] else
                 float("inf"), 100 * res["mean_abs_rel_err"], 100 * res["max_abs_rel_err"]))

    # Tiny tensors, so that the step time is the control plane's.
    fits = [calibrate_control([1, 2] if args.quick else [1, 2, 4], 300 if args.quick else 1000,
                              4, 10 if args.quick else 30)
            for _ in range(max(1, args.control_repeats))]
    for f in fits:
        print("  control fit: %.3f us per request, %.3f us per tensor (engine %.3f)"
              % (1e6 * (f["per_request_s"] or 0), 1e6 * (f["per_tensor_s"] or 0),
                 1e6 * (f["engine_per_tensor_s"] or 0)))
    out["control"] = fits[0] if len(fits) == 1 else median_control(fits)
    print("  control: request %.1f B, response %.1f B per tensor, %.3f us per request, "
          "%.3f us per tensor in the engine%s"
          % (out["control"]["request_bytes"], out["control"]["response_bytes"],
             1e6 * (out["control"]["per_request_s"] or 0),
             1e6 * (out["control"]["engine_per_tensor_s"] or 0),
             " (medians of %d fits)" % len(fits) if len(fits) > 1 else ""))
    out["wall_s"] = round(time.time() - t_start, 1)
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "calib.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
    print("wrote %s (%.0f s)" % (path, out["wall_s"]))


if __name__ == "__main__":
    try:
        main()
    except (hora_runs.RunError, netns.NetnsError) as e:
        sys.exit("calibrate.py: %s" % e)
