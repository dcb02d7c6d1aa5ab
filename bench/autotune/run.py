"""Autotuning against a grid search, side by side (issue 50).

    /usr/bin/python3 bench/autotune/run.py [--np 2] [--tensors 200] [--bytes 4096]
        [--steps 60] [--rounds 5] [--out bench/results]
    /usr/bin/python3 bench/autotune/run.py --workload train [--model resnet18]
        [--batch-size 16] [--steps 20] ...

Two workloads, each under horarun:
- engine (the default): hora-engine-bench, each step --tensors allreduces
  of --bytes (the control plane's: many small tensors); the score is the
  p50 step time;
- train: examples/torch_synthetic_benchmark.py (Horovod's synthetic
  benchmark: --model on random images, hora.torch's DistributedOptimizer),
  run by --python, its steps in iterations of 5 (--steps rounded up); the
  score is the step time at the mean images/s a worker it prints (batch
  size over it).
1. Grid: every combination of the tuner's space on one host (fusion
   threshold 1/4/16/64/128 MiB x cycle time 0.5/1/2.5/5/10 ms x response
   cache on/off: 50 settings), each run once for --steps steps; the
   fastest is the grid's best.
2. Tuned: one run with HORA_AUTOTUNE=1 (1 warm-up sample, 10 steps a
   sample) and its CSV log; the last line is its choice.
3. Side by side: the grid's best and the tuned choice (and the defaults)
   run alternately --rounds times; the median of each.

Prints a Markdown table (the command on top) and writes
OUT/autotune[_train].md. Trial steps: the tuner's samples x 11 steps,
against the grid's 50 x --steps.
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
BIN = os.path.join(REPO, "build", "bin")
FUSION_MIB = (1, 4, 16, 64, 128)
CYCLE_MS = (0.5, 1, 2.5, 5, 10)


def run(cmd, env):
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1200, cwd=REPO)
    if out.returncode != 0:
        sys.exit("failed: %s\n%s%s" % (" ".join(cmd), out.stdout[-2000:], out.stderr[-2000:]))
    return out.stdout


def bench(args, settings, cache, steps, extra_env=None):
    """The step time (us) of one job with these settings."""
    env = dict(os.environ)
    env.update({k: str(v) for k, v in settings.items()})
    env.update(extra_env or {})
    horarun = [os.path.join(BIN, "horarun"), "-np", str(args.np)]
    if args.workload == "train":
        if cache == "off":
            env["HORA_CACHE_CAPACITY"] = "0"
        env["PYTHONPATH"] = os.path.join(REPO, "build", "python")
        # (Warm-up: 5 steps, as many as the engine's 3 take time for.)
        cmd = horarun + [args.python, os.path.join(REPO, "examples", "torch_synthetic_benchmark.py"),
                         "--model", args.model, "--batch-size", str(args.batch_size),
                         "--num-warmup-batches", "5", "--num-batches-per-iter", "5",
                         "--num-iters", str(max(1, (steps + 4) // 5))]
        stdout = run(cmd, env)
        for line in stdout.splitlines():
            if "Img/sec per worker:" in line:
                return args.batch_size / float(line.split(":")[-1].split()[0]) * 1e6
        sys.exit("no result line from: " + " ".join(cmd) + "\n" + stdout[-2000:])
    cmd = horarun + [os.path.join(BIN, "hora-engine-bench"), "--tensors", str(args.tensors),
                     "--bytes", str(args.bytes), "--steps", str(steps), "--warmup", "3",
                     "--cache", cache]
    stdout = run(cmd, env)
    for line in stdout.splitlines():
        toks = line.replace("[0]:", "").split()
        if len(toks) == 12 and toks[0].isdigit() and toks[4] in ("on", "off"):
            return float(toks[6])  # step p50, us
    sys.exit("no result row from: " + " ".join(cmd) + "\n" + stdout[-2000:])


def settings_of(fusion_bytes, cycle_ms):
    return {"HORA_FUSION_THRESHOLD_BYTES": fusion_bytes, "HORA_CYCLE_TIME_MS": cycle_ms}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workload", choices=("engine", "train"), default="engine")
    p.add_argument("--np", type=int, default=2)
    p.add_argument("--tensors", type=int, default=200, help="engine: allreduces a step")
    p.add_argument("--bytes", type=int, default=4096, help="engine: bytes each")
    p.add_argument("--model", default="resnet18", help="train: the synthetic benchmark's")
    p.add_argument("--batch-size", type=int, default=16, help="train: per worker")
    p.add_argument("--python", default="/usr/bin/python3", help="train: the ranks' interpreter")
    p.add_argument("--steps", type=int, help="a job's measured steps (engine 60, train 20)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--out", default=os.path.join(REPO, "bench", "results"))
    args = p.parse_args()
    if args.steps is None:
        args.steps = 20 if args.workload == "train" else 60
    command = "/usr/bin/python3 bench/autotune/run.py " + " ".join(map(shlex.quote, sys.argv[1:]))

    grid = []
    for f in FUSION_MIB:
        for c in CYCLE_MS:
            for cache in ("on", "off"):
                us = bench(args, settings_of(f << 20, c), cache, args.steps)
                grid.append(((f << 20, c, cache), us))
                print("grid %3d MiB %4g ms cache %-3s: %.1f us" % (f, c, cache, us), flush=True)
    best, best_us = min(grid, key=lambda g: g[1])

    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "autotune.csv")
        # (Enough steps for the search: about 15 samples of 11.)
        tuning_steps = 600 if args.workload == "engine" else 300
        bench(args, {}, "on", tuning_steps, {"HORA_AUTOTUNE": "1", "HORA_AUTOTUNE_LOG": log,
                                    "HORA_AUTOTUNE_WARMUP_SAMPLES": "1",
                                    "HORA_AUTOTUNE_STEPS_PER_SAMPLE": "10"})
        rows = list(csv.DictReader(open(log)))
    chosen = rows[-1]
    if chosen["phase"] != "chosen":
        sys.exit("the tuner did not finish in %d steps" % tuning_steps)
    samples = int(chosen["sample"])
    tuned = (int(chosen["fusion_threshold_bytes"]), float(chosen["cycle_time_ms"]),
             "on" if int(chosen["cache_capacity"]) > 0 else "off")
    default = (64 << 20, 1.0, "on")

    side = {"grid's best": best, "tuned": tuned, "defaults": default}
    times = {k: [] for k in side}
    for _ in range(args.rounds):
        for name, (f, c, cache) in side.items():
            times[name].append(bench(args, settings_of(f, c), cache, args.steps))
    med = {k: statistics.median(v) for k, v in times.items()}

    if args.workload == "train":
        what = ("np %d, %s, batch %d a worker (torch_synthetic_benchmark.py); step time at "
                "the mean images/s, "
                "median of %d alternating runs (min-max)." % (args.np, args.model,
                                                              args.batch_size, args.rounds))
    else:
        what = ("np %d, %d tensors of %d bytes a step; p50 step time, median of %d alternating "
                "runs (min-max)." % (args.np, args.tensors, args.bytes, args.rounds))
    lines = ["Command: `%s`" % command, "", what, "",
             "| settings | fusion | cycle | cache | step (us) | min-max | vs grid's best |",
             "|---|---|---|---|---|---|---|"]
    for name, (f, c, cache) in side.items():
        lines.append("| %s | %d MiB | %g ms | %s | %.1f | %.1f-%.1f | %.3f |" % (
            name, f >> 20, c, cache, med[name], min(times[name]), max(times[name]),
            med["grid's best"] / med[name]))
    lines += ["", "Trial steps: tuned %d samples x 11 = %d; grid 50 settings x %d = %d." % (
        samples, samples * 11, args.steps, 50 * args.steps)]
    lines += ["", "The grid (step, us):", "", "| fusion | cycle | cache on | cache off |",
              "|---|---|---|---|"]
    by = {k: us for k, us in grid}
    for f in FUSION_MIB:
        for c in CYCLE_MS:
            lines.append("| %d MiB | %g ms | %.1f | %.1f |" % (
                f, c, by[(f << 20, c, "on")], by[(f << 20, c, "off")]))
    text = "\n".join(lines) + "\n"
    print(text)
    os.makedirs(args.out, exist_ok=True)
    name = "autotune.md" if args.workload == "engine" else "autotune_train.md"
    with open(os.path.join(args.out, name), "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
