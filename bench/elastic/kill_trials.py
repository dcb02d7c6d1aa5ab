"""Elastic training under kills at random moments: hangs, lost commits, and
the time from a kill to training resumed, against a whole-job restart.

    /usr/bin/python3 bench/elastic/kill_trials.py [--trials 30] [--seed 1]
        [--transport shm|tcp] [--out bench/results]

Each trial runs tests/python/scripts/elastic_train.py under
`horarun -np 3 --min-np 2 --max-np 3` (60 steps, 30 ms apart), waits a
random 0.3-2.0 s after every worker has its world, and kills a random worker
(rank 0 included) with SIGKILL: at whatever it is doing then (a collective,
a commit, the sync). A trial is
  - a hang when the job has not ended 60 s after the kill (it is then killed);
  - lost commits when a survivor's check fails (each checks that every step
    was committed exactly once, and that its model equals a replay of the
    committed steps), or horarun exits non-zero;
  - otherwise good, with its recovery time: from the kill to the first
    commit a survivor makes in the new world (the earliest survivor's).
The restart baseline: the same script started afresh as a 2-worker job, from
the launch to its first commit on both workers (what a restart from a
checkpoint costs at least, with no checkpoint to load and no failure to
detect: start Python, import torch, init, one step).

Prints the counts and the times; writes OUT/elastic_kill_trials.json and .md
(with the command).
"""

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "tests", "python", "scripts", "elastic_train.py")
HORARUN = os.path.join(ROOT, "build", "bin", "horarun")
PYTHON = "/usr/bin/python3"


def launch(np_, elastic, transport, steps):
    cmd = [HORARUN, "-np", str(np_), "--timeout", "60"]
    if elastic:
        cmd += ["--min-np", "2", "--max-np", str(np_)]
    if transport:
        cmd += ["--transport", transport]
    cmd += [PYTHON, SCRIPT, "--steps", str(steps), "--step-sleep", "0.03"]
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "build", "python"), OMP_NUM_THREADS="1",
               HORA_PEER_TIMEOUT_S="2")
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                            text=True, start_new_session=True)


def read_lines(proc, lines, started):
    for line in proc.stdout:
        lines.append((time.time(), line.rstrip("\n")))
        if "elastic started pid" in line:
            started.append(int(line.split("pid")[1]))


def trial(rng, transport):
    proc = launch(3, True, transport, 60)
    lines, pids = [], []
    reader = threading.Thread(target=read_lines, args=(proc, lines, pids), daemon=True)
    reader.start()
    deadline = time.time() + 60
    while len(pids) < 3 and time.time() < deadline and proc.poll() is None:
        time.sleep(0.01)
    if len(pids) < 3:
        os.killpg(proc.pid, signal.SIGKILL)
        return {"outcome": "no start", "log": [l for _, l in lines][-20:]}
    time.sleep(rng.uniform(0.3, 2.0))
    victim = rng.choice(pids)
    killed_at = time.time()
    try:
        os.kill(victim, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        rc = proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        return {"outcome": "hang", "victim": pids.index(victim),
                "log": [l for _, l in lines][-30:]}
    reader.join(timeout=5)
    text = [l for _, l in lines]
    ok = sum(1 for l in text if "elastic ok:" in l)
    resumed = [float(l.split("elastic resumed")[1]) for l in text if "elastic resumed" in l]
    if rc != 0 or ok != 2:
        return {"outcome": "lost commits or failure", "rc": rc, "ok": ok,
                "victim": pids.index(victim), "log": text[-30:]}
    out = {"outcome": "good", "victim": pids.index(victim)}
    if resumed:
        out["recovery_s"] = min(resumed) - killed_at
    return out


def restart_baseline(transport):
    start = time.time()
    proc = launch(2, False, transport, 3)
    text = proc.communicate(timeout=120)[0].splitlines()
    firsts = [float(l.split("elastic first commit")[1]) for l in text
              if "elastic first commit" in l]
    return {"rc": proc.returncode, "launch_to_first_commit_s": max(firsts) - start
            if len(firsts) == 2 else None}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=30)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--transport", default="")
    p.add_argument("--out", default=os.path.join(ROOT, "bench", "results"))
    args = p.parse_args()
    rng = random.Random(args.seed)
    results = []
    for i in range(args.trials):
        r = trial(rng, args.transport)
        results.append(r)
        print("trial %d: %s%s" % (i + 1, r["outcome"],
                                  " (recovery %.2f s, killed worker %d)" % (r["recovery_s"], r["victim"])
                                  if "recovery_s" in r else ""), flush=True)
        if r["outcome"] != "good":
            print("\n".join(r.get("log", [])), flush=True)
    base = [restart_baseline(args.transport) for _ in range(3)]
    counts = {k: sum(1 for r in results if r["outcome"] == k)
              for k in ("good", "hang", "lost commits or failure", "no start")}
    rec = [r["recovery_s"] for r in results if "recovery_s" in r]
    summary = {
        "command": " ".join([PYTHON] + sys.argv),
        "trials": args.trials,
        "counts": counts,
        "recovery_s": {"median": statistics.median(rec), "max": max(rec)} if rec else None,
        "restart_baseline_s": statistics.median(b["launch_to_first_commit_s"] for b in base
                                                if b["launch_to_first_commit_s"] is not None),
        "results": results,
    }
    print("hangs: %d, lost commits or failures: %d, good: %d of %d"
          % (counts["hang"], counts["lost commits or failure"], counts["good"], args.trials))
    if rec:
        print("recovery (kill to first commit in the new world): median %.2f s, max %.2f s"
              % (statistics.median(rec), max(rec)))
    print("a fresh 2-worker job, launch to its first commit: %.2f s (median of 3)"
          % summary["restart_baseline_s"])
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "elastic_kill_trials.json"), "w") as f:
        json.dump(summary, f, indent=1)
    with open(os.path.join(args.out, "elastic_kill_trials.md"), "w") as f:
        f.write("`%s`\n\n" % summary["command"])
        f.write("| trials | good | hangs | lost commits or failures | recovery median | "
                "recovery max | fresh job |\n|---|---|---|---|---|---|---|\n")
        f.write("| %d | %d | %d | %d | %s | %s | %.2f s |\n" % (
            args.trials, counts["good"], counts["hang"], counts["lost commits or failure"],
            "%.2f s" % statistics.median(rec) if rec else "-",
            "%.2f s" % max(rec) if rec else "-", summary["restart_baseline_s"]))
    return 0 if counts["good"] == args.trials else 1


if __name__ == "__main__":
    sys.exit(main())
