"""Driver of the training study: Hora against DDP and a parameter server.

    /usr/bin/python3 bench/train_study/run.py --quick     # ~3-4 minutes, for `make bench`
    /usr/bin/python3 bench/train_study/run.py             # the full study
    /usr/bin/python3 bench/train_study/run.py --report-only --out DIR   # re-render

Runs every configuration of the plan (configs.py: np 1/2/4, batch 16..128,
launchers shm/tcp/OpenMPI/MPICH with Hora's and MPI's transports, four
torchvision models; hora, ddp and ps at identical settings), one horarun job
each (launch.py, worker.py), using the binaries already in --build. Writes to
--out (default bench/results): train_study.json (every record, failed ones
with their error and output tail), train_study.md (tables, the command at the
top), train_*.png and logs/ (each job's full output). A failed job is
reported and recorded, and the study goes on; the exit status is 1 when any
job failed. --only SUBSTRING runs the configurations whose id contains it
(e.g. --only mobilenet_v2-hora). --repeat N runs the plan N times, round after
round, and keeps each configuration's median run (all runs' images/s are in
the JSON).
"""

import argparse
import datetime
import json
import os
import platform
import shlex
import sys
import time

import configs
import launch
import metrics
import plots
import report

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="the short plan (a few minutes)")
    p.add_argument("--out", default=os.path.join(REPO, "bench", "results"))
    p.add_argument("--build", default=os.path.join(REPO, "build"), help="Hora's build folder")
    p.add_argument("--python", default="/usr/bin/python3", help="interpreter of the ranks")
    p.add_argument("--only", help="run only configurations whose id contains this")
    p.add_argument("--timeout", type=float, help="seconds per job (default: the plan's)")
    p.add_argument("--repeat", type=int, default=1,
                   help="run the whole plan this many times; each configuration reports its "
                        "median run (the machine is noisy)")
    p.add_argument("--report-only", action="store_true",
                   help="re-render the summary and plots from OUT/train_study.json")
    return p.parse_args(argv)


def _check_paths(paths):
    for key in ("horarun", "python"):
        if not os.access(paths[key], os.X_OK):
            sys.exit("run.py: %s not found or not executable: %s (build Hora first, or pass "
                     "--build / --python)" % (key, paths[key]))


def _line(rec):
    if rec["status"] == "ok":
        return "%8.1f images/s  step %5.0f ms  (%.0f s)" % (
            rec["images_per_s"], rec["step_ms_mean"], rec["wall_s"])
    last = [ln for ln in rec.get("stderr_tail", "").splitlines() if ln.strip()]
    return "FAILED: %s; %s (log: %s)" % (rec["error"], last[-1][:160] if last else "", rec["log"])


def run_study(args, plan, study, json_path):
    paths = {"build": os.path.abspath(args.build), "python": args.python,
             "horarun": os.path.join(os.path.abspath(args.build), "bin", "horarun")}
    _check_paths(paths)
    table = configs.launchers(paths["build"])
    todo = [c for c in configs.sweep(plan) if not args.only or args.only in configs.config_id(c)]
    if not todo:
        sys.exit("run.py: no configuration matches --only %r" % args.only)
    log_dir = os.path.join(args.out, "logs")
    os.makedirs(log_dir, exist_ok=True)
    start, trials, n = time.monotonic(), [], len(todo) * args.repeat
    for rnd in range(args.repeat):  # rounds: a slow spell of the machine hits every config
        for cfg in todo:
            print("[%2d/%d] %-44s" % (len(trials) + 1, n, configs.config_id(cfg)), end=" ",
                  flush=True)
            rec = launch.run_config(cfg, table[cfg.launcher], plan, paths, log_dir)
            print(_line(rec), flush=True)
            trials.append(dict(rec, round=rnd))
            study["records"] = metrics.aggregate(trials)
            study["wall_s"] = round(time.monotonic() - start, 1)
            _write_json(study, json_path)  # after every job: a partial study survives


def _write_json(study, path):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(study, f, indent=1)
    os.replace(tmp, path)


def main(argv=None):
    args = parse_args(argv)
    if args.repeat < 1:
        sys.exit("run.py: --repeat must be at least 1")
    os.makedirs(args.out, exist_ok=True)
    json_path = os.path.join(args.out, "train_study.json")
    if args.report_only:
        with open(json_path) as f:
            study = json.load(f)
    else:
        plan = dict(configs.QUICK if args.quick else configs.FULL)
        if args.timeout:
            plan["timeout_s"] = args.timeout
        study = {
            "command": "cd %s && %s %s" % (shlex.quote(os.getcwd()), sys.executable,
                                          " ".join(shlex.quote(a) for a in sys.argv)),
            "date": datetime.datetime.now().isoformat(timespec="seconds"),
            "host": "%s, %d CPUs, Python %s" % (platform.node(), os.cpu_count(),
                                                 platform.python_version()),
            "plan": "quick" if args.quick else "full",
            "plan_note": "Plan: %s (%d warm-up + %d timed steps per run, median of %d run%s)."
                         % ("quick" if args.quick else "full", plan["warmup"], plan["steps"],
                            args.repeat, "" if args.repeat == 1 else "s"),
            "records": [],
        }
        run_study(args, plan, study, json_path)
    study["records"] = metrics.with_efficiency(study["records"])
    _write_json(study, json_path)
    md_path = os.path.join(args.out, "train_study.md")
    with open(md_path, "w") as f:
        f.write(report.markdown(study))
    written = plots.render(study["records"], args.out)
    failed = [r for r in study["records"] if r.get("status") != "ok"]
    print("wrote %s, %s and %s; %d of %d runs failed" % (
        json_path, md_path, ", ".join(os.path.basename(p) for p in written) or "no plots",
        len(failed), len(study["records"])))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
