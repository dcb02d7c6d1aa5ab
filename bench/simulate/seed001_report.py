"""Writes seed001.py's results: JSON, a markdown report (also printed) with
the command at the top and the paper's numbers beside the model's, and a PNG
of scaling efficiency with and without the response cache (log x).
"""

import json
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402



def _paper_cell(row, paper):
    if row["n"] == paper["speedup_gpus"]:
        return "speedup %.0fx (model and batch not given)" % paper["speedup"]
    if row["n"] == paper["stemdl_gpus"]:
        return "efficiency %.2f, STEMDL (another model)" % paper["stemdl_efficiency"]
    return ""


def text(res):
    m, p, s = res["meta"], res["paper"], res["sensitivity"]
    c = m["control"]
    by_n = {r["n"]: r for r in res["rows"]}
    at = by_n[p["speedup_gpus"]]
    lines = [
        "# Seed 001's scale: ResNet-50 on %s, simulated" % m["system"], "",
        "```", m["command"], "```", "",
        "- %d GPUs per node; intra-node alpha %.1f us, %.0f GB/s; inter-node alpha %.1f us, "
        "%.0f GB/s per node (shared by the flows leaving it); reduction %.0f GB/s"
        % (m["per_host"], m["intra"]["alpha"] * 1e6, 1e-9 / m["intra"]["beta"],
           m["inter"]["alpha"] * 1e6, 1e-9 / m["inter"]["beta"], 1e-9 / m["inter"]["gamma"]),
        "- ResNet-50: %d fp32 gradients, %.1f MB; batch %d per GPU; forward %.1f ms, "
        "backward %.1f ms; fusion 64 MiB; overlap on"
        % (m["tensors"], m["gradient_bytes"] / 1e6, m["batch"], m["forward_ms"],
           m["backward_ms"]),
        "- coordinator (cache off): %.1f us per message received, %.3g us per request, "
        "%.0f / %.0f B per request / response; response cache %d entries"
        % (c["message_overhead_s"] * 1e6, c["per_request_s"] * 1e6, c["request_bytes"],
           c["response_bytes"], c["cache_capacity"]),
        "",
        "| GPUs | nodes | efficiency, cache on | cache off | speedup on/off | step on / off (ms) "
        "| paper (abstract) |",
        "|---:|---:|---:|---:|---:|---:|---|"]
    for r in res["rows"]:
        lines.append("| %d | %d | %.3f | %.3f | %.2fx | %.1f / %.1f | %s |"
                     % (r["n"], r["nodes"], r["eff_cached"], r["eff_uncached"], r["speedup"],
                        r["step_cached_ms"], r["step_uncached_ms"], _paper_cell(r, p)))
    first2 = next((r["n"] for r in res["rows"] if r["speedup"] >= p["speedup"]), None)
    lines += [
        "", "Paper: %s." % p["source"],
        "- at %d GPUs the model gives %.2fx (paper: %.0fx)%s"
        % (p["speedup_gpus"], at["speedup"], p["speedup"],
           "; it first reaches %.0fx at %d GPUs" % (p["speedup"], first2) if first2 else ""),
        "- at %d GPUs, efficiency with the cache %.3f (paper, STEMDL: %.2f)"
        % (p["stemdl_gpus"], by_n[p["stemdl_gpus"]]["eff_cached"], p["stemdl_efficiency"]),
        "", "Speedup at %d GPUs against the coordinator's constants (no source gives them):"
        % p["speedup_gpus"], ""]
    msgs = sorted({g["message_us"] for g in s["grid"]})
    lines += ["| per request (us) | " + " | ".join("%.1f us per message" % o for o in msgs) + " |",
              "|---:|" + "---:|" * len(msgs)]
    for cu in sorted({g["per_request_us"] for g in s["grid"]}):
        row = {g["message_us"]: g["speedup"] for g in s["grid"] if g["per_request_us"] == cu}
        lines.append("| %.3g | " % cu + " | ".join("%.2fx" % row[o] for o in msgs) + " |")
    imp = s["implied_per_request_us"]
    lines += ["", "Per-request cost that gives %.0fx at %d GPUs, all else as above: %s"
              % (p["speedup"], p["speedup_gpus"],
                 "%.3f us" % imp if imp is not None else "none in 0-20 us"), "",
              "Speedup at %d GPUs against compute per step:" % p["speedup_gpus"], "",
              "| compute | step (ms) | speedup |", "|---|---:|---:|"]
    for b in s["compute"]:
        lines.append("| %s | %.1f | %.2fx |" % (b["label"], b["step_ms"], b["speedup"]))
    lines += ["", "A model fed published figures and this repository's measured coordinator "
              "costs, not a measurement on Summit.", ""]
    return "\n".join(lines)


def _plot(path, res):
    rows, p = res["rows"], res["paper"]
    xs = [r["n"] for r in rows]
    fig, ax = plt.subplots(figsize=(7, 4.2))
    ax.plot(xs, [r["eff_cached"] for r in rows], "o-", label="model: response cache on")
    ax.plot(xs, [r["eff_uncached"] for r in rows], "s--", label="model: cache off (coordinator)")
    ax.plot([p["stemdl_gpus"]], [p["stemdl_efficiency"]], "k*", markersize=11,
            label="paper: STEMDL, %.2f (another model)" % p["stemdl_efficiency"])
    ax.set_xscale("log")
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("GPUs (6 per node)")
    ax.set_ylabel("scaling efficiency")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="lower left")
    ax.set_title("ResNet-50 on %s, simulated (batch %d per GPU)"
                 % (res["meta"]["system"], res["meta"]["batch"]), fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write(out_dir, stem, res):
    os.makedirs(out_dir, exist_ok=True)
    base = os.path.join(out_dir, stem)
    with open(base + ".json", "w") as f:
        json.dump(res, f, indent=1)
    with open(base + ".md", "w") as f:
        f.write(text(res))
    _plot(base + ".png", res)
    return [base + ".json", base + ".md", base + ".png"]
