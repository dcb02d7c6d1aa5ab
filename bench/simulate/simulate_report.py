"""Writes simulate.py's results: JSON, a PNG (scaling efficiency and step
time against workers, log x, one line per algorithm) and a markdown table
with the exact command at the top. Called by simulate.py.
"""

import json
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

LABELS = {"ring": "ring", "recursive_doubling": "recursive doubling",
          "halving_doubling": "halving-doubling", "hierarchical": "hierarchical",
          "choice": "cost-model choice", "choice_cache_off": "choice, response cache off"}
STYLE = {"choice": dict(color="black", linewidth=5, alpha=0.3, zorder=1),
         "choice_cache_off": dict(color="black", linestyle="--", linewidth=1.4)}


def _plot(path, res):
    m = res["meta"]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4.6))
    for algo, pts in res["series"].items():
        xs = [p["n"] for p in pts]
        kw = STYLE.get(algo, dict(linewidth=1.2))
        a1.plot(xs, [p["efficiency"] for p in pts], label=LABELS.get(algo, algo), **kw)
        a2.plot(xs, [p["step_ms"] for p in pts], label=LABELS.get(algo, algo), **kw)
    for ax in (a1, a2):
        ax.set_xscale("log")
        ax.set_xlabel("workers")
        ax.grid(True, which="both", alpha=0.3)
    a1.set_ylabel("scaling efficiency  t(1) / t(n)")
    a1.set_ylim(0, 1.05)
    a2.set_yscale("log")
    a2.set_ylabel("step time (ms)")
    a1.legend(fontsize=8, loc="lower left")
    fig.suptitle("%s: %d gradients, %.0f MB; compute %.0f + %.0f ms; %d ranks/host; inter %s, "
                 "intra %s (simulated)" % (m["model"], m["tensors"], m["gradient_bytes"] / 1e6,
                                           m["forward_ms"], m["backward_ms"], m["per_host"],
                                           m["links"]["inter"]["kind"],
                                           m["links"]["intra"]["kind"]), fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _link(d):
    bw = "%.3g GB/s" % d["beta_gbps"] if d["beta_gbps"] else "inf"
    red = "%.3g GB/s" % d["gamma_gbps"] if d["gamma_gbps"] else "inf"
    return "%s: alpha %.1f us, bandwidth %s, reduction %s" % (d["kind"], d["alpha_us"], bw, red)


def _markdown(path, res, png):
    m = res["meta"]
    algos = list(res["series"])
    lines = ["# Simulated scaling: %s" % m["model"], "", "```", m["command"], "```", "",
             "Parameters: %s." % m["params"], "",
             "- inter-host link %s" % _link(m["links"]["inter"]),
             "- intra-host link %s" % _link(m["links"]["intra"]),
             "- %d gradient tensors, %.1f MB; forward %.1f ms, backward %.1f ms per step; "
             "%d ranks per host; fusion threshold %d MiB; overlap %s; response cache %d entries"
             % (m["tensors"], m["gradient_bytes"] / 1e6, m["forward_ms"], m["backward_ms"],
                m["per_host"], m["fusion_threshold"] >> 20, "on" if m["overlap"] else "off",
                m["cache_capacity"]),
             "- control plane (control.py): request %.0f B, response %.0f B per tensor; "
             "coordinator %.1f us per message received and %.2f us per request; %.2f us per "
             "negotiated tensor on each rank; engine bookkeeping %.2f us per tensor"
             % (m["control"]["request_bytes"], m["control"]["response_bytes"],
                m["control"]["message_overhead_s"] * 1e6, m["control"]["per_request_s"] * 1e6,
                m["control"]["per_tensor_s"] * 1e6, m["control"]["engine_per_tensor_s"] * 1e6),
             "", "Scaling efficiency (step time of 1 worker / step time of n; weak scaling):", "",
             "| workers | " + " | ".join(LABELS.get(a, a) for a in algos) +
             " | step (ms), choice | cycles / buffers | choice picks (per buffer) |",
             "|---:|" + "---:|" * len(algos) + "---:|---:|---|"]
    for i, n in enumerate(m["workers"]):
        c = res["series"]["choice"][i]
        picks = ", ".join("%s %d" % kv for kv in sorted(c["chosen"].items()))
        lines.append("| %d | " % n + " | ".join("%.3f" % res["series"][a][i]["efficiency"]
                                               for a in algos) +
                     " | %.1f | %d / %d | %s |" % (c["step_ms"], c["cycles"], c["buffers"],
                                                   picks))
    lines += ["", "![scaling](%s)" % os.path.basename(png), "",
              "A model, not a measurement: bench/simulate/validate.py says how close it came "
              "to measured allreduce times on this machine.", ""]
    with open(path, "w") as f:
        f.write("\n".join(lines))


def write(out_dir, stem, res):
    os.makedirs(out_dir, exist_ok=True)
    base = os.path.join(out_dir, stem)
    with open(base + ".json", "w") as f:
        json.dump(res, f, indent=1)
    _plot(base + ".png", res)
    _markdown(base + ".md", res, base + ".png")
    return [base + ".json", base + ".png", base + ".md"]
