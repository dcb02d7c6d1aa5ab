"""Seed 001's scale in the simulator: ResNet-50 on a Summit-like system
(systems.py) with and without the response cache, from 6 to 27,600 GPUs
(6 per node), next to what the paper reports.

    /usr/bin/python3 bench/simulate/seed001.py [--batch 256] [--out bench/results]

The paper is Romero et al., "Accelerating Collective Communication in Data
Parallel Training across Deep Learning Frameworks", NSDI 2022 (seed 001).
Only its abstract was read; its figures' values were not reachable, so the
comparison is with the abstract's two numbers (PAPER below): the cache and
bit vector against Horovod's original coordinator, 2x at 6000 GPUs (the
abstract does not name the model or the batch), and 0.93 scaling efficiency
for STEMDL, a different model, at 27,600 GPUs.

Per GPU count, simulate.series runs one step of ResNet-50 (gradients.json:
161 fp32 gradients, 102 MB, and when backward produces each) with the
cost-model choice of allreduce per fused buffer, once with the response
cache (bit-vector cycle) and once without (every cycle through the
coordinator). Efficiency is compute / step time (weak scaling); the speedup
is the step time without the cache over the step time with it. Then, at
6000 GPUs, how the speedup moves with the control-plane constants no source
gives (systems.SUMMIT_CONTROL), the per-request coordinator cost that would
give the paper's 2x with everything else kept, and the speedup with less
compute per step (smaller batches) or more (FP32). Writes
OUT/seed001_summit.json, .md and .png (seed001_report.py).
"""

import argparse
import os
import sys
import time

import gradients
import seed001_report
import simulate
import systems

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

PAPER = {
    "source": "Romero et al., NSDI 2022, abstract (seed 001; "
              "https://xiexbing.github.io/publication/2022-04-acodl-nsdi22)",
    "speedup_gpus": 6000,
    "speedup": 2.0,       # cache + bit vector over Horovod's original design
    "stemdl_gpus": 27600,
    "stemdl_efficiency": 0.93,
}
NODES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1000, 2048, 4096, 4600)
# The per-request costs of 36 fits (least, median, most: systems.py) and
# session 12's calibration of that day's code.
PER_REQUEST_US = (0.24, 0.325, 0.43, 1.34)
MESSAGE_US = (0.5, 1.0, 2.0)
BATCHES = (256, 128, 64, 32)              # mixed precision, compute scaled from batch 256


def _steps(system, model, workers, batch, cached, compute_ms=None, **cp):
    fwd, bwd = compute_ms or system.compute_ms(batch)
    return simulate.series(model=model, prm=system.params(**cp), workers=workers,
                           per_host=system.per_host, algo="choice", cached=cached,
                           fusion=64 << 20, overlap=True, fwd_s=fwd / 1e3, bwd_s=bwd / 1e3)


def scaling(system, model, workers, batch=None):
    """[{n, nodes, cached, uncached, speedup, ...}] over `workers`."""
    on = _steps(system, model, workers, batch, cached=True)
    off = _steps(system, model, workers, batch, cached=False)
    return [{"n": a["n"], "nodes": a["n"] // system.per_host,
             "eff_cached": a["efficiency"], "eff_uncached": b["efficiency"],
             "step_cached_ms": a["step_ms"], "step_uncached_ms": b["step_ms"],
             "speedup": b["step_ms"] / a["step_ms"],
             "cycles_cached": a["cycles"], "cycles_uncached": b["cycles"],
             "picks": a["chosen"]}
            for a, b in zip(on, off)]


def speedup_at(system, model, n, batch=None, compute_ms=None, **cp):
    on = _steps(system, model, [n], batch, True, compute_ms, **cp)[0]
    off = _steps(system, model, [n], batch, False, compute_ms, **cp)[0]
    return off["step_ms"] / on["step_ms"]


def implied_per_request(system, model, n, target, batch=None, lo=0.0, hi=20e-6, iters=40):
    """The coordinator's per-request cost c (seconds) at which the speedup at n
    GPUs is `target`, the other constants kept; None if not within [lo, hi].
    The speedup grows with c (only the uncached step pays it)."""
    f = lambda c: speedup_at(system, model, n, batch, per_request_s=c) - target  # noqa: E731
    if f(lo) > 0 or f(hi) < 0:
        return None
    for _ in range(iters):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if f(mid) < 0 else (lo, mid)
    return (lo + hi) / 2


def sensitivity(system, model, n, batch=None):
    grid = [{"per_request_us": c, "message_us": o,
             "speedup": speedup_at(system, model, n, batch, per_request_s=c * 1e-6,
                                   message_overhead_s=o * 1e-6)}
            for c in PER_REQUEST_US for o in MESSAGE_US]
    compute = [{"label": "mixed precision, batch %d" % b, "step_ms": sum(system.compute_ms(b)),
                "speedup": speedup_at(system, model, n, b)} for b in BATCHES]
    fp32_b, fp32_rate = systems.V100_RN50_FP32
    fp32_ms = 1e3 * fp32_b / fp32_rate
    fp32 = (fp32_ms * (1 - system.backward_frac), fp32_ms * system.backward_frac)
    compute.append({"label": "FP32, batch %d (%.0f images/s)" % (fp32_b, fp32_rate),
                    "step_ms": fp32_ms, "speedup": speedup_at(system, model, n, compute_ms=fp32)})
    implied = implied_per_request(system, model, n, PAPER["speedup"], batch)
    return {"grid": grid, "compute": compute,
            "implied_per_request_us": None if implied is None else implied * 1e6}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--system", default="summit", choices=sorted(systems.SYSTEMS))
    ap.add_argument("--batch", type=int, default=None,
                    help="images per GPU (default: the published throughput's batch)")
    ap.add_argument("--out", default=os.path.join(REPO, "bench", "results"))
    ap.add_argument("--quick", action="store_true",
                    help="accepted as by the other studies; the full run takes about a second")
    args = ap.parse_args()
    t0 = time.time()
    system = systems.get(args.system)
    try:
        model = gradients.load("resnet50")
    except gradients.GradientsError as e:
        sys.exit("seed001.py: %s" % e)
    workers = [k * system.per_host for k in NODES]
    rows = scaling(system, model, workers, args.batch)
    at = PAPER["speedup_gpus"]
    sens = sensitivity(system, model, at, args.batch)
    batch = args.batch or system.batch
    fwd, bwd = system.compute_ms(batch)
    res = {"meta": {"command": " ".join(["/usr/bin/python3"] + sys.argv),
                    "system": system.name, "per_host": system.per_host, "batch": batch,
                    "forward_ms": fwd, "backward_ms": bwd,
                    "gradient_bytes": sum(t["bytes"] for t in model["tensors"]),
                    "tensors": len(model["tensors"]),
                    "intra": vars(system.intra), "inter": vars(system.inter),
                    "control": vars(system.control)},
           "paper": PAPER, "rows": rows, "sensitivity": sens}
    paths = seed001_report.write(args.out, "seed001_" + system.name, res)
    print(seed001_report.text(res))
    print("\n%.1f s; wrote %s" % (time.time() - t0, ", ".join(paths)))


if __name__ == "__main__":
    main()
