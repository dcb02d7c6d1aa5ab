#!/usr/bin/env python3
"""Fault injection in elastic training: workers lost at a random moment.

Each trial runs tests/python/scripts/elastic_train.py (40 steps, 30 ms
apart) under

  horarun -np 3 --min-np M --max-np 3 [--host-discovery-script S] python ...

with HORA_PEER_TIMEOUT_S=2, and has the script hurt itself at a step drawn
uniformly from [3, 25] (--kill-at; the worker of that first rank, on its
first launch only):

  kill9    --min-np 2: a random worker (rank 0, 1 or 2) SIGKILLs itself.
           Expected: horarun exits 0, two "elastic ok" lines of size 2.
  sigstop  --min-np 2: a random worker SIGSTOPs itself; once the others wait
           for it in init(), horarun kills it. Expected as kill9.
  second   --min-np 1: a random worker SIGKILLs itself, and another one
           0.02-0.5 s later (--second-kill-rank/--second-kill-delay), while
           the last one re-forms. Expected: exit 0, one "elastic ok" of size 1.
  exit0    --min-np 2: a random worker leaves with exit code 0 (Horovod's
           rule: a worker's success ends an elastic job). Expected: horarun
           exits non-zero and says "... ended with 0 (its work completed)
           while worker ... the job fails".
  arrive   -np 3 --min-np 2 --max-np 4 with a discovery script (no -H) that
           prints "localhost:N", N read from a file (3 at first), and
           --blacklist-cooldown-range 0.1 0.2 (without it the host of a failed
           worker never gets a new one). Worker 0 or 1 SIGKILLs itself; once
           horarun says "the others go on without it", and a random 0-0.3 s
           later, the file says 4 (written aside and renamed). horarun starts
           workers on the free slots, which join a following world.
           Expected: exit 0; every worker of the final world (at least 2)
           printed "elastic ok". (Not rank 2: an arriving worker takes rank
           2 in a world of 4 at the lost step, and elastic_train.py's
           first-launch test, worker index < world size, would make it kill
           itself too.)

Counted per trial (a trial is BAD if any is set):

  hang          horarun did not end within 120 s (its process group is then
                SIGKILLed, and the trial's processes with it).
  leftover      0.5 s after horarun returned: a process still carrying the
                trial's HORA_TEST_TAG=<uuid> (found in /proc/*/environ, as
                tests/mp/lib.sh does; they are then SIGKILLed), or a
                /dev/shm entry "hora-<job>-..." new since the trial began,
                <job> being the HORA_JOB_ID read from the workers' environ.
                (Other new "hora-" entries are only noted: other jobs may
                run on this host meanwhile. If no worker's job id was read,
                every new "hora-" entry counts.)
  unnamed       an error line of a worker: a line "[label]: X: message" with
                X a Python exception name ending in Error or Exception
                (possibly dotted, e.g. hora.common.exceptions.AbortedError),
                the last line of a traceback; AssertionError is left to
                `inconsistent`. It counts when the message contains none of
                  - "localhost/W" for a lost worker W (its id),
                  - "rank N" for a rank a lost worker had: its first rank,
                    and for the second loss also its rank in the next world
                    (worlds keep the survivors' order, elastic_planner.h),
                  - the job's end reasons: "completed its work", "the job is
                    finishing", "fewer than --min-np".
  inconsistent  fewer "elastic ok" lines than expected (or of another world
                size), any "AssertionError" line, or a horarun exit code
                other than the kind's (above).

Usage: elastic.py [--kinds kill9,sigstop,second,exit0,arrive]
                  [--trials-per-kind 30] [--seed S] [--build DIR]
                  [--horarun PATH] [--python PATH] [--json PATH] [--show-output]
Prints one line per trial and the counts; exits 1 if any count is not 0.
"""

import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SCRIPT = os.path.join(ROOT, "tests", "python", "scripts", "elastic_train.py")
KINDS = ["kill9", "sigstop", "second", "exit0", "arrive"]
COUNTS = ["hang", "leftover", "unnamed", "inconsistent"]
STEPS = 40
sys.path.insert(0, HERE)
from run import shm_entries  # noqa: E402  (the fault script beside this one)

STEP_SLEEP = 0.03
PEER_TIMEOUT_S = 2
HANG_S = 120.0
END_REASONS = ("completed its work", "the job is finishing", "fewer than --min-np")
ERROR_LINE = re.compile(r"^\[[^\]]+\]: ((?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception)): ?(.*)$")
OK_LINE = re.compile(r"elastic ok: worker (\S+) rank (\d+) of (\d+), sizes")


def environ_of(pid):
    try:
        with open("/proc/%d/environ" % pid, "rb") as f:
            return f.read().split(b"\0")
    except OSError:
        return []


def tagged_pids(tag):
    """Processes whose environment holds HORA_TEST_TAG=tag."""
    want = ("HORA_TEST_TAG=" + tag).encode()
    pids = []
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != os.getpid() and want in environ_of(int(name)):
            pids.append(int(name))
    return pids


def default_python():
    env_script = os.path.join(ROOT, "scripts", "python-env")
    if os.access(env_script, os.X_OK):
        r = subprocess.run([env_script, "--print"], capture_output=True, text=True)
        path = r.stdout.strip()
        if r.returncode == 0 and path and os.access(path, os.X_OK):
            return path
    return sys.executable


class Job:
    """One horarun job; a reader thread collects its output lines and the
    job ids (HORA_JOB_ID) of the workers that say "elastic started pid P"."""

    def __init__(self, cmd, env):
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     env=env, text=True, errors="replace",
                                     start_new_session=True)
        self.lines = []
        self.job_ids = set()
        self.lock = threading.Lock()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        started = re.compile(r"elastic started pid (\d+)")
        for line in self.proc.stdout:
            line = line.rstrip("\n")
            m = started.search(line)
            if m:
                for var in environ_of(int(m.group(1))):
                    if var.startswith(b"HORA_JOB_ID="):
                        with self.lock:
                            self.job_ids.add(var.split(b"=", 1)[1].decode())
            with self.lock:
                self.lines.append(line)

    def snapshot(self):
        with self.lock:
            return list(self.lines)

    def wait_for(self, needle, limit):
        """Waits until a line contains `needle`; True if one did."""
        end = time.time() + limit
        while time.time() < end:
            if any(needle in l for l in self.snapshot()):
                return True
            if self.proc.poll() is not None:
                return any(needle in l for l in self.snapshot())
            time.sleep(0.02)
        return False


def plan(kind, rng):
    p = {"kind": kind, "kill_at": rng.randint(3, 25), "min_np": 2, "max_np": 3,
         "how": "KILL", "second": None, "delay": None}
    if kind == "arrive":
        p["victim"] = rng.choice([0, 1])
        p["max_np"] = 4
        p["raise_after"] = round(rng.uniform(0.0, 0.3), 3)
    else:
        p["victim"] = rng.choice([0, 1, 2])
    if kind == "sigstop":
        p["how"] = "STOP"
    elif kind == "exit0":
        p["how"] = "exit0"
    elif kind == "second":
        p["min_np"] = 1
        p["second"] = rng.choice([r for r in (0, 1, 2) if r != p["victim"]])
        p["delay"] = round(rng.uniform(0.02, 0.5), 3)
    return p


def names_allowed(p):
    """What a survivor's error may name: the lost workers (ids, ranks)."""
    lost = [p["victim"]] + ([p["second"]] if p["second"] is not None else [])
    names = ["localhost/%d" % w for w in lost] + list(END_REASONS)
    ranks = set(lost)
    if p["second"] is not None:  # its rank in the world re-formed without the first
        ranks.add(p["second"] - (1 if p["victim"] < p["second"] else 0))
    return names, [re.compile(r"\brank %d\b" % r) for r in sorted(ranks)]


def trial(i, p, args):
    kind = p["kind"]
    tag = uuid.uuid4().hex
    tmp = None
    cmd = [args.horarun, "-np", "3", "--min-np", str(p["min_np"]), "--max-np", str(p["max_np"])]
    if kind == "arrive":
        tmp = tempfile.mkdtemp(prefix="hora-elastic-arrive-")
        hosts = os.path.join(tmp, "hosts")
        with open(hosts, "w") as f:
            f.write("localhost:3\n")
        script = os.path.join(tmp, "discover.sh")
        with open(script, "w") as f:
            f.write("#!/bin/sh\nexec cat '%s'\n" % hosts)
        os.chmod(script, 0o755)
        cmd += ["--host-discovery-script", script, "--blacklist-cooldown-range", "0.1", "0.2"]
    cmd += [args.python, SCRIPT, "--steps", str(STEPS), "--step-sleep", str(STEP_SLEEP),
            "--kill-at", str(p["kill_at"]), "--kill-rank", str(p["victim"]),
            "--kill-how", p["how"]]
    if p["second"] is not None:
        cmd += ["--second-kill-rank", str(p["second"]), "--second-kill-delay", str(p["delay"])]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(args.build, "python")
    env["HORA_PEER_TIMEOUT_S"] = str(PEER_TIMEOUT_S)
    env["OMP_NUM_THREADS"] = "1"
    env["HORA_TEST_TAG"] = tag
    verdict = dict(p, trial=i, tag=tag, rc=None, seconds=None, notes="",
                   **{k: False for k in COUNTS})
    before = shm_entries()
    start = time.time()
    job = Job(cmd, env)
    if kind == "arrive":
        if job.wait_for("the others go on without it", HANG_S):
            time.sleep(p["raise_after"])
            with open(hosts + ".new", "w") as f:
                f.write("localhost:4\n")
            os.replace(hosts + ".new", hosts)
            verdict["raised_at"] = round(time.time() - start, 2)
        else:
            verdict["notes"] += "no 'go on without it' line; slots not raised; "
    try:
        rc = job.proc.wait(timeout=max(0.0, start + HANG_S - time.time()))
    except subprocess.TimeoutExpired:
        verdict["hang"] = True
        verdict["notes"] += "hang: killed after %d s; " % HANG_S
        try:
            os.killpg(job.proc.pid, signal.SIGKILL)
        except OSError:
            pass
        rc = job.proc.wait()
    elapsed = time.time() - start
    job.reader.join(10)
    lines = job.snapshot()
    time.sleep(0.5)

    # Leftovers: the trial's processes, its job's shared-memory segments.
    left = tagged_pids(tag)
    new_shm = sorted(shm_entries() - before)
    with job.lock:
        job_ids = sorted(job.job_ids)
    if job_ids:
        ours = [e for e in new_shm if any(e.startswith("hora-%s-" % j) for j in job_ids)]
    else:
        ours = new_shm
    foreign = [e for e in new_shm if e not in ours]
    if left or ours:
        verdict["leftover"] = True
        verdict["notes"] += "left: pids %s shm %s; " % (left, ours[:3])
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    if foreign:
        verdict["notes"] += "(other jobs' new shm, not counted: %d); " % len(foreign)

    # Unnamed errors.
    names, rank_rx = names_allowed(p)
    errors = [m for m in (ERROR_LINE.match(l) for l in lines) if m]
    unnamed = [m.group(0) for m in errors if m.group(1).rsplit(".", 1)[-1] != "AssertionError"
               and not any(n in m.group(2) for n in names)
               and not any(rx.search(m.group(2)) for rx in rank_rx)]
    verdict["errors"] = [m.group(0)[:300] for m in errors[:5]]  # (for --json)
    if unnamed:
        verdict["unnamed"] = True
        verdict["notes"] += "unnamed: %s; " % unnamed[0][:200]

    # Consistency.
    oks = [m for m in (OK_LINE.search(l) for l in lines) if m]
    sizes = sorted(int(m.group(3)) for m in oks)
    bad = []
    if any("AssertionError" in l for l in lines):
        bad.append("AssertionError")
    if kind in ("kill9", "sigstop"):
        if rc != 0:
            bad.append("rc %d, not 0" % rc)
        if sizes != [2, 2]:
            bad.append("elastic ok of sizes %s, not [2, 2]" % sizes)
    elif kind == "second":
        if rc != 0:
            bad.append("rc %d, not 0" % rc)
        if sizes != [1]:
            bad.append("elastic ok of sizes %s, not [1]" % sizes)
    elif kind == "exit0":
        if rc == 0:
            bad.append("rc 0 after a worker left with 0 mid-training")
        said = re.compile(r"^horarun: elastic: worker localhost/%d ended with 0 \(its work "
                          r"completed\) while worker \S+ had not finished; the job fails"
                          % p["victim"])
        if not any(said.search(l) for l in lines):
            bad.append("no 'ended with 0 ... the job fails' line")
    elif kind == "arrive":
        if rc != 0:
            bad.append("rc %d, not 0" % rc)
        n = sizes[0] if sizes else 0
        ranks = sorted(int(m.group(2)) for m in oks)
        if n < 2 or sizes != [n] * n or ranks != list(range(n)):
            bad.append("elastic ok of sizes %s ranks %s: not every worker of a final world "
                       "of at least 2" % (sizes, ranks))
        started = sum(1 for l in lines if "has a free slot; started worker" in l)
        formed = sorted({int(m.group(1)) for m in (
            re.search(r"world \d+ formed with (\d+) worker", l) for l in lines) if m})
        verdict["arrivals"] = started
        verdict["notes"] += "arrivals %d, worlds of %s, final %d; " % (started, formed, n)
    if bad:
        verdict["inconsistent"] = True
        verdict["notes"] += "; ".join(bad) + "; "
    verdict["rc"] = rc
    verdict["seconds"] = round(elapsed, 1)
    if tmp:
        shutil.rmtree(tmp, ignore_errors=True)
    return verdict, lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kinds", default=",".join(KINDS),
                    help="comma-separated, of %s (default all)" % ", ".join(KINDS))
    ap.add_argument("--trials-per-kind", type=int, default=30)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--horarun", default=None, help="default BUILD/bin/horarun")
    ap.add_argument("--python", default=None,
                    help="the workers' interpreter (default: scripts/python-env --print, "
                         "else this one)")
    ap.add_argument("--json", default=None, help="write every trial's verdict here")
    ap.add_argument("--show-output", action="store_true",
                    help="print the last 40 lines of a BAD trial's output")
    args = ap.parse_args()
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    unknown = [k for k in kinds if k not in KINDS]
    if unknown or not kinds:
        ap.error("unknown kind(s) %s; known: %s" % (unknown, ", ".join(KINDS)))
    args.build = os.path.abspath(args.build)
    args.horarun = args.horarun or os.path.join(args.build, "bin", "horarun")
    args.python = args.python or default_python()
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    print("elastic fault injection: %s x %d trials, seed %d, python %s" % (
        ",".join(kinds), args.trials_per_kind, seed, args.python), flush=True)
    verdicts = []
    i = 0
    for _ in range(args.trials_per_kind):
        for kind in kinds:
            p = plan(kind, rng)
            v, lines = trial(i, p, args)
            verdicts.append(v)
            is_bad = any(v[k] for k in COUNTS)
            who = "victim %d" % v["victim"]
            if v["second"] is not None:
                who += "+%d after %.2f s" % (v["second"], v["delay"])
            print("%3d %-7s %-24s kill-at %2d rc %3d %5.1f s %s %s" % (
                i, kind, who, v["kill_at"], v["rc"], v["seconds"],
                "BAD" if is_bad else "ok", v["notes"]), flush=True)
            if is_bad and args.show_output:
                print("\n".join("    " + l for l in lines[-40:]), flush=True)
            i += 1
    counts = {k: sum(1 for v in verdicts if v[k]) for k in COUNTS}
    by_kind = {k: sum(1 for v in verdicts if v["kind"] == k) for k in kinds}
    print("trials %d (%s): hangs %d, leftovers %d, unnamed errors %d, inconsistent %d" % (
        len(verdicts), ", ".join("%s %d" % kv for kv in by_kind.items()), counts["hang"],
        counts["leftover"], counts["unnamed"], counts["inconsistent"]), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"seed": seed, "counts": counts, "trials": verdicts}, f, indent=1)
    return 1 if any(counts.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
