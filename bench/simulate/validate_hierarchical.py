"""Validates the simulator's hierarchical allreduce against Hora's, on
namespaced hosts with several ranks each.

    /usr/bin/python3 bench/simulate/validate_hierarchical.py --params OUT/calib.json \\
        [--hosts 2,4] [--per-host 2] [--sizes 1M,4M,16M,64M] [--out bench/results]

Root only (network namespaces). calib.json must hold a "shm" link (within a
host) and a "netns" link (between hosts), both from calibrate.py, the netns
one at the rate used here (calib.json's). Per hosts x per-host and size, one
allreduce a step through the engine (hora-engine-bench, cache on; the
engine is the path HORA_HIERARCHICAL_ALLREDUCE takes), p50 of the steps:

- flat ring: HORA_HIERARCHICAL_ALLREDUCE=0, HORA_ALLREDUCE_ALGO=ring;
  predicted by costs.allreduce("ring") on the two-link topology;
- hierarchical: HORA_HIERARCHICAL_ALLREDUCE=1 with the ring across hosts;
  predicted by costs.hierarchical(..., across="ring");
- one rank a host: HORA_HIERARCHICAL_ALLREDUCE=one with the ring across
  hosts; predicted by costs.hierarchical_one(..., across="ring").

Neither was fitted to these runs: calibrate.py fits one rank a host and
shared memory alone. Reports each point's relative error (predicted -
measured) / measured and the mean of |error| per algorithm; the target is
20%. Writes OUT/simulate_hierarchical.json and .md.
"""

import argparse
import json
import os
import sys
import time

import costs
import hora_runs
import netns
import params as params_mod

TARGET = 0.20
CASES = (("flat ring", {"HORA_HIERARCHICAL_ALLREDUCE": "0", "HORA_ALLREDUCE_ALGO": "ring"}),
         ("hierarchical, ring across",
          {"HORA_HIERARCHICAL_ALLREDUCE": "1", "HORA_ALLREDUCE_ALGO": "ring"}),
         ("one rank a host, ring across",
          {"HORA_HIERARCHICAL_ALLREDUCE": "one", "HORA_ALLREDUCE_ALGO": "ring"}))


def parse_size(s):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * units[s[-1]] if s[-1] in units else int(s)


def engine_p50_us(np_, nbytes, steps, hosts, env, timeout):
    cmd = [os.path.join(hora_runs.BIN, "hora-engine-bench"), "--tensors", "1", "--bytes",
           str(nbytes), "--steps", str(steps), "--warmup", "1", "--cache", "on"]
    out = hora_runs.run(hora_runs.horarun(np_, cmd, hosts=hosts), timeout, env)
    for line in out.splitlines():
        toks = line.split()
        # np tensors bytes(value unit) cache avg p50 cycles slow coord driven carried
        if len(toks) == 12 and toks[0].isdigit() and toks[4] == "on":
            return float(toks[6])
    raise hora_runs.RunError("no cache-on row from hora-engine-bench:\n" + out[-2000:])


def predict_s(label, n, m, topo):
    if label == "flat ring":
        return costs.allreduce("ring", n, m, topo)
    if label.startswith("one rank"):
        return costs.hierarchical_one(n, m, topo, across="ring")
    return costs.hierarchical(n, m, topo, across="ring")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--params", required=True, help="calib.json with shm and netns links")
    ap.add_argument("--hosts", default="2,4")
    ap.add_argument("--per-host", type=int, default=2)
    ap.add_argument("--sizes", default="1M,4M,16M,64M")
    ap.add_argument("--out", default=os.path.join(hora_runs.REPO, "bench", "results"))
    a = ap.parse_args()
    netns.install_signal_exit()
    t0 = time.time()
    try:
        prm = params_mod.load(a.params, intra="shm", inter="netns")
        with open(a.params) as f:
            rate = json.load(f)["links"]["netns"]["rate"]
    except (params_mod.ParamsError, KeyError) as e:
        sys.exit("validate_hierarchical.py: %s" % e)
    topo = costs.Topology(prm["intra"], prm["inter"], a.per_host)
    sizes = [parse_size(s) for s in a.sizes.split(",")]
    pts = []
    try:
        for h in (int(x) for x in a.hosts.split(",")):
            n = h * a.per_host
            with netns.NamespacedHosts(h, rate=rate) as hosts:
                for label, env in CASES:
                    for m in sizes:
                        steps = 3 if m >= (16 << 20) else 8
                        measured = engine_p50_us(n, m, steps, hosts, env, timeout=900)
                        pred = predict_s(label, n, m, topo) * 1e6
                        pts.append({"algo": label, "hosts": h, "per_host": a.per_host,
                                    "bytes": m, "measured_us": measured,
                                    "predicted_us": pred,
                                    "rel_err": (pred - measured) / measured})
                        print("  %d x %d, %-26s %9d B: measured %12.0f us, model %12.0f us,"
                              " %+.1f%%" % (h, a.per_host, label, m, measured, pred,
                                             100 * pts[-1]["rel_err"]), flush=True)
    except (hora_runs.RunError, netns.NetnsError) as e:
        sys.exit("validate_hierarchical.py: %s" % e)
    summary = {}
    for label, _ in CASES:
        errs = [abs(p["rel_err"]) for p in pts if p["algo"] == label]
        summary[label] = {"points": len(errs), "mean_abs_rel_err": sum(errs) / len(errs),
                          "max_abs_rel_err": max(errs)}
    meta = {"command": " ".join(["/usr/bin/python3"] + sys.argv),
            "date": time.strftime("%Y-%m-%d %H:%M"), "rate": rate, "params": prm["source"],
            "wall_s": time.time() - t0, "target": TARGET}
    os.makedirs(a.out, exist_ok=True)
    base = os.path.join(a.out, "simulate_hierarchical")
    with open(base + ".json", "w") as f:
        json.dump({"meta": meta, "summary": summary, "points": pts}, f, indent=1)
    with open(base + ".md", "w") as f:
        f.write("# Hierarchical allreduce: the simulator against netns\n\n")
        f.write("`%s` (%s, links %s, %.0f s). Predicted with %s.\n\n"
                % (meta["command"], meta["date"], rate, meta["wall_s"], meta["params"]))
        f.write("| hosts x ranks | algorithm | bytes | measured (ms) | model (ms) | error |\n")
        f.write("|---|---|---:|---:|---:|---:|\n")
        for p in pts:
            f.write("| %d x %d | %s | %d | %.1f | %.1f | %+.1f%% |\n"
                    % (p["hosts"], p["per_host"], p["algo"], p["bytes"], p["measured_us"] / 1e3,
                       p["predicted_us"] / 1e3, 100 * p["rel_err"]))
        f.write("\n")
        for label, s in summary.items():
            f.write("- %s: mean |error| %.1f%%, max %.1f%% over %d points (target %d%%)\n"
                    % (label, 100 * s["mean_abs_rel_err"], 100 * s["max_abs_rel_err"],
                       s["points"], 100 * TARGET))
    for label, s in summary.items():
        print("%s: mean |error| %.1f%%, max %.1f%% (%d points)"
              % (label, 100 * s["mean_abs_rel_err"], 100 * s["max_abs_rel_err"], s["points"]))
    print("wrote %s.{json,md} (%.0f s)" % (base, meta["wall_s"]))


if __name__ == "__main__":
    main()
