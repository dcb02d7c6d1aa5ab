"""Control-plane study: what negotiation costs per step, with Hora's response
cache on and off, as the number of ranks grows.

    /usr/bin/python3 bench/control_plane/run.py [--quick] [--out bench/results]
        [--np 1,2,4,8] [--tensors 200] [--bytes 4096] [--steps 50] [--repeats 3]
        [--transport shm|tcp] [--params bench/results/calib.json]

Runs build/bin/hora-engine-bench under horarun at each np: every step
submits --tensors allreduces of --bytes (a model with many small layers)
through the engine; the binary runs with the cache on, then off
(HORA_CACHE_CAPACITY=0), and reports per step: time (p50 and mean over
steps of the slowest rank), engine cycles, slow-path cycles and rank 0's
coordinator bytes. Each np is run --repeats times; the median is kept.
--quick: np 2 and 4, 100 tensors, 10 steps, one repeat.

It also fits the control plane's constants (bench/simulate/fit.py
fit_control: bytes per request and per response from the coordinator bytes,
the per-request cost from the time the cache saves) and, with the links of
calib.json from bench/simulate/calibrate.py, adds the model's cost of a
cached and of a negotiated cycle up to 10,000 ranks.

Writes OUT/control_plane[_TAG].json, .png, .md (the exact command at the
top). `--tensors 1000 --bytes 4 --tag tiny` isolates the control plane (the
data moved is then negligible).
"""

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "simulate"))

import control  # noqa: E402
import fit  # noqa: E402
import hora_runs  # noqa: E402
import params as params_mod  # noqa: E402

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

KEYS = ("step_p50_us", "step_avg_us", "cycles", "slow_cycles", "coord_bytes")


def measure(nps, tensors, nbytes, steps, repeats, transport):
    rows = []
    for n in nps:
        runs = {"on": [], "off": []}
        for rep in range(repeats):
            print("  np %d, repeat %d ..." % (n, rep + 1), flush=True)
            for r in hora_runs.engine_bench(n, tensors, nbytes, steps, 3, transport=transport,
                                            timeout=120 + 10 * n):
                runs[r["cache"]].append(r)
        for cache, rs in runs.items():
            row = {"np": n, "cache": cache, "tensors": tensors, "bytes": nbytes,
                   "repeats": len(rs)}
            for k in KEYS:
                row[k] = statistics.median(r[k] for r in rs)
                row[k + "_all"] = [r[k] for r in rs]
            rows.append(row)
    return rows


def model_curves(params_path, tensors, fitted):
    try:
        prm = params_mod.load(params_path, intra="shm", inter="shm")
    except params_mod.ParamsError as e:
        print("  (no model curves: %s)" % e)
        return None
    cp = prm["control"].with_(request_bytes=fitted["request_bytes"],
                              response_bytes=fitted["response_bytes"],
                              per_request_s=fitted["per_request_s"] or 0.0,
                              per_tensor_s=fitted["per_tensor_s"] or 0.0,
                              engine_per_tensor_s=fitted["engine_per_tensor_s"] or 0.0)
    ns = sorted({int(round(x)) for x in np.logspace(np.log10(2), 4, 30)})
    link = prm["intra"]
    return {"link": prm["names"]["intra"], "source": prm["source"], "n": ns,
            "cached_us": [1e6 * control.cycle(n, tensors, link, cp, True) for n in ns],
            "negotiated_us": [1e6 * control.cycle(n, tensors, link, cp, False) for n in ns]}


def plot(path, res):
    rows, meta = res["rows"], res["meta"]
    fig, axes = plt.subplots(1, 4 if res.get("model") else 3, figsize=(17, 4.2))
    for cache, style in (("on", "o-"), ("off", "s--")):
        rs = [r for r in rows if r["cache"] == cache]
        xs = [r["np"] for r in rs]
        axes[0].plot(xs, [r["step_p50_us"] / 1e3 for r in rs], style, label="cache " + cache)
        axes[1].plot(xs, [r["cycles"] for r in rs], style, label="cycles, cache " + cache)
        axes[1].plot(xs, [r["slow_cycles"] for r in rs], style, alpha=0.5,
                     label="slow-path cycles, cache " + cache)
        axes[2].plot(xs, [r["coord_bytes"] / 1e3 for r in rs], style, label="cache " + cache)
    axes[0].set_ylabel("step time, p50 (ms)")
    axes[1].set_ylabel("per step")
    axes[2].set_ylabel("coordinator kB per step (rank 0)")
    for ax in axes[:3]:
        ax.set_xlabel("ranks (np)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    if res.get("model"):
        m = res["model"]
        axes[3].loglog(m["n"], m["cached_us"], label="cached cycle (bit-vector AND + e k)")
        axes[3].loglog(m["n"], m["negotiated_us"], "--",
                       label="negotiated cycle (%d tensors)" % meta["tensors"])
        axes[3].set_xlabel("ranks (model, %s link)" % m["link"])
        axes[3].set_ylabel("control cost per cycle (us)")
        axes[3].grid(True, which="both", alpha=0.3)
        axes[3].legend(fontsize=8)
    fig.suptitle("hora-engine-bench: %d tensors x %d B per step, %s, %d steps (measured; "
                 "right: model)" % (meta["tensors"], meta["bytes"], meta["transport"],
                                    meta["steps"]), fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def markdown(path, res, png):
    meta, rows = res["meta"], res["rows"]
    out = ["# Control plane: response cache on and off", "", "```", meta["command"], "```", "",
           "%s; %d tensors of %d B per step, %d steps after 3 warm-up, median of %d "
           "repeat(s); %s. Wall time %.0f s." % (meta["date"], meta["tensors"], meta["bytes"],
                                                  meta["steps"], meta["repeats"],
                                                  meta["transport"], meta["wall_s"]),
           "", "| np | cache | step p50 (ms) | step mean (ms) | cycles/step | slow cycles/step "
           "| coordinator B/step | off / on (p50) |", "|---:|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        on = next(x for x in rows if x["np"] == r["np"] and x["cache"] == "on")
        ratio = "%.2f" % (r["step_p50_us"] / on["step_p50_us"]) if r["cache"] == "off" else ""
        out.append("| %d | %s | %.2f | %.2f | %.2f | %.2f | %.0f | %s |"
                   % (r["np"], r["cache"], r["step_p50_us"] / 1e3, r["step_avg_us"] / 1e3,
                      r["cycles"], r["slow_cycles"], r["coord_bytes"], ratio))
    f = res["fit"]
    out += ["", "Fitted (bench/simulate/fit.py fit_control): request %.1f B and response "
            "%.1f B per tensor (from the coordinator bytes); from the time the cache saves "
            "per step (np: ms = %s), fitted on np %s as tensors x r + np x tensors x c: "
            "r = %.2f us per tensor on every rank, c = %.2f us per request at the coordinator; "
            "engine bookkeeping e = %.2f us per tensor (cached step time per tensor at the "
            "smallest np)."
            % (f["request_bytes"], f["response_bytes"],
               ", ".join("%s: %.2f" % (n, 1e3 * v) for n, v in f["saved_s_by_np"].items()),
               ",".join(map(str, f.get("fitted_on_np", []))),
               1e6 * (f["per_tensor_s"] or 0), 1e6 * (f["per_request_s"] or 0),
               1e6 * (f["engine_per_tensor_s"] or 0))]
    if res.get("model"):
        m = res["model"]
        pick = sorted({min(range(len(m["n"])), key=lambda i: abs(m["n"][i] - t))
                       for t in (2, 8, 64, 1000, 10000)})
        out += ["", "Model (bench/simulate/control.py with the constants above, %s link from "
                "%s), control cost of one cycle releasing all %d tensors:"
                % (m["link"], m["source"], meta["tensors"]), "",
                "| ranks | cached (us) | negotiated (us) |",
                "|---:|---:|---:|"]
        out += ["| %d | %.1f | %.1f |" % (m["n"][i], m["cached_us"][i], m["negotiated_us"][i])
                for i in pick]
    out += ["", "![control plane](%s)" % os.path.basename(png), ""]
    with open(path, "w") as f:
        f.write("\n".join(out))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=os.path.join(hora_runs.REPO, "bench", "results"))
    ap.add_argument("--np", default=None, help="comma-separated (default 1,2,4,8)")
    ap.add_argument("--tensors", type=int, default=None)
    ap.add_argument("--bytes", type=int, default=4096)
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--repeats", type=int, default=None)
    ap.add_argument("--transport", default="shm", choices=("shm", "tcp"))
    ap.add_argument("--params", default=os.path.join(hora_runs.REPO, "bench", "results",
                                                     "calib.json"))
    ap.add_argument("--tag", default="", help="suffix of the output names")
    a = ap.parse_args()
    nps = [int(x) for x in (a.np or ("2,4" if a.quick else "1,2,4,8")).split(",")]
    tensors = a.tensors or (100 if a.quick else 200)
    steps = a.steps or (10 if a.quick else 50)
    repeats = a.repeats or (1 if a.quick else 3)
    t0 = time.time()
    try:
        rows = measure(nps, tensors, a.bytes, steps, repeats, a.transport)
    except hora_runs.RunError as e:
        sys.exit("control_plane/run.py: %s" % e)
    fitted = fit.fit_control(rows)
    res = {"meta": {"command": " ".join(["/usr/bin/python3"] + sys.argv),
                    "date": time.strftime("%Y-%m-%d %H:%M"), "tensors": tensors,
                    "bytes": a.bytes, "steps": steps, "repeats": repeats,
                    "transport": a.transport, "wall_s": time.time() - t0},
           "rows": rows, "fit": fitted, "model": model_curves(a.params, tensors, fitted)}
    os.makedirs(a.out, exist_ok=True)
    base = os.path.join(a.out, "control_plane" + ("_" + a.tag if a.tag else ""))
    with open(base + ".json", "w") as f:
        json.dump(res, f, indent=1)
    plot(base + ".png", res)
    markdown(base + ".md", res, base + ".png")
    for r in rows:
        print("  np %d cache %-3s step p50 %8.2f ms  cycles %.2f  slow %.2f  coord %6.0f B"
              % (r["np"], r["cache"], r["step_p50_us"] / 1e3, r["cycles"], r["slow_cycles"],
                 r["coord_bytes"]))
    print("wrote %s.{json,png,md} in %.0f s" % (base, time.time() - t0))


if __name__ == "__main__":
    main()
