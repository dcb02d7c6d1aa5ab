"""Autotuning a training job across hosts against a grid search (issue 50).

    /usr/bin/python3 bench/autotune/train_across_hosts.py [--hosts 2] [--per-host 2]
        [--rate 1gbit] [--batch-size 16] [--steps 20] [--rounds 3] [--out bench/results]

Root only (network namespaces: bench/simulate/on_netns.py, the testbed of
"Hierarchical allreduce across hosts" in docs/benchmarks.md). The job is
examples/torch_synthetic_benchmark.py (resnet18 on random images,
hora.torch's DistributedOptimizer) under /usr/bin/python3; its score is
the step time at the mean images/s a worker it prints.
1. Grid: the settings that move a job across hosts, each run once for
   --steps steps: HORA_HIERARCHICAL_ALLREDUCE auto/1/one/0 x HORA_ALLREDUCE_ALGO
   the cost model's / the ring above 16 KiB (the tuner's first algorithm
   range) x fusion threshold 4 / 64 MiB (cycle time 1 ms, cache on).
2. Tuned: one job of 300 steps with HORA_AUTOTUNE=1 (1 warm-up sample, 10
   steps a sample), which searches every setting it tunes (fusion, cycle
   time, cache, algorithm ranges, hierarchy); its CSV log's last line is
   its choice.
3. Side by side: the grid's best, the tuned choice and the defaults run
   alternately --rounds times; the median of each.
Prints a Markdown table and writes OUT/autotune_train_hosts.md.
"""

import argparse
import csv
import os
import shlex
import statistics
import subprocess
import sys
import tempfile

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
HIERARCHY = ("auto", "1", "one", "0")
ALGOS = ("", "rd:0-16K,ring:16K-")
FUSION_MIB = (4, 64)


def step_ms(args, settings, steps):
    """The step time (ms) of one job with these HORA_* settings."""
    env = dict(os.environ)
    env.update(settings)
    env["PYTHONPATH"] = os.path.join(REPO, "build", "python")
    cmd = ["/usr/bin/python3", os.path.join(REPO, "bench", "simulate", "on_netns.py"),
           "--hosts", str(args.hosts), "--per-host", str(args.per_host), "--rate", args.rate,
           "--timeout", "600", "--", "/usr/bin/python3",
           os.path.join(REPO, "examples", "torch_synthetic_benchmark.py"), "--model", "resnet18",
           "--batch-size", str(args.batch_size), "--num-warmup-batches", "5",
           "--num-batches-per-iter", "5", "--num-iters", str(max(1, (steps + 4) // 5))]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=3600, cwd=REPO)
    if out.returncode != 0:
        sys.exit("failed: %s\n%s%s" % (" ".join(cmd), out.stdout[-2000:], out.stderr[-2000:]))
    for line in out.stdout.splitlines():
        if "Img/sec per worker:" in line:
            return args.batch_size / float(line.split(":")[-1].split()[0]) * 1e3
    sys.exit("no result line from: " + " ".join(cmd) + "\n" + out.stdout[-2000:])


def settings_of(hierarchy, algo, fusion_bytes, cycle_ms=1.0, cache=True):
    return {"HORA_HIERARCHICAL_ALLREDUCE": hierarchy, "HORA_ALLREDUCE_ALGO": algo,
            "HORA_FUSION_THRESHOLD_BYTES": str(fusion_bytes), "HORA_CYCLE_TIME_MS": "%g" % cycle_ms,
            "HORA_CACHE_CAPACITY": "1024" if cache else "0"}


def describe(s):
    return "%s, algorithm %s, %d MiB, %s ms, cache %s" % (
        s["HORA_HIERARCHICAL_ALLREDUCE"], s["HORA_ALLREDUCE_ALGO"] or "the cost model's",
        int(s["HORA_FUSION_THRESHOLD_BYTES"]) >> 20, s["HORA_CYCLE_TIME_MS"],
        "on" if s["HORA_CACHE_CAPACITY"] != "0" else "off")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hosts", type=int, default=2)
    p.add_argument("--per-host", type=int, default=2)
    p.add_argument("--rate", default="1gbit", help="each host's link (tc tbf)")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--steps", type=int, default=20, help="a grid or side-by-side job's steps")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--out", default=os.path.join(REPO, "bench", "results"))
    args = p.parse_args()
    command = ("/usr/bin/python3 bench/autotune/train_across_hosts.py " +
               " ".join(map(shlex.quote, sys.argv[1:])))

    grid = []
    for h in HIERARCHY:
        for a in ALGOS:
            for f in FUSION_MIB:
                s = settings_of(h, a, f << 20)
                ms = step_ms(args, s, args.steps)
                grid.append((s, ms))
                print("grid %s: %.1f ms" % (describe(s), ms), flush=True)
    best, _ = min(grid, key=lambda g: g[1])

    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "autotune.csv")
        os.chmod(tmp, 0o755)
        step_ms(args, {"HORA_AUTOTUNE": "1", "HORA_AUTOTUNE_LOG": log,
                       "HORA_AUTOTUNE_WARMUP_SAMPLES": "1",
                       "HORA_AUTOTUNE_STEPS_PER_SAMPLE": "10"}, 300)
        rows = list(csv.DictReader(open(log)))
    chosen = rows[-1]
    if chosen["phase"] != "chosen":
        sys.exit("the tuner did not finish in 300 steps")
    samples = int(chosen["sample"])
    tuned = settings_of(chosen["hierarchical_allreduce"], chosen["allreduce_algo"],
                        int(chosen["fusion_threshold_bytes"]), float(chosen["cycle_time_ms"]),
                        int(chosen["cache_capacity"]) > 0)
    side = {"grid's best": best, "tuned": tuned, "defaults": settings_of("auto", "", 64 << 20)}
    times = {k: [] for k in side}
    for _ in range(args.rounds):
        for name, s in side.items():
            times[name].append(step_ms(args, s, args.steps))
    med = {k: statistics.median(v) for k, v in times.items()}

    lines = ["Command: `%s`" % command, "",
             "%d hosts x %d ranks, links of %s; resnet18, batch %d a worker; step time at the "
             "mean images/s, median of %d alternating runs (min-max)." % (
                 args.hosts, args.per_host, args.rate, args.batch_size, args.rounds), "",
             "| settings | hierarchical, algorithm, fusion, cycle, cache | step (ms) | min-max | "
             "vs grid's best |", "|---|---|---|---|---|"]
    for name, s in side.items():
        lines.append("| %s | %s | %.1f | %.1f-%.1f | %.3f |" % (
            name, describe(s), med[name], min(times[name]), max(times[name]),
            med["grid's best"] / med[name]))
    lines += ["", "Trial steps: tuned %d samples x 11 = %d; grid %d settings x %d = %d." % (
        samples, samples * 11, len(grid), args.steps, len(grid) * args.steps)]
    lines += ["", "The grid (step, ms):", ""] + ["- %s: %.1f" % (describe(s), ms)
                                                  for s, ms in grid]
    lines += ["", "The tuner's log:", "", "```"] + [",".join(r.values()) for r in rows] + ["```"]
    text = "\n".join(lines) + "\n"
    print(text)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "autotune_train_hosts.md"), "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
