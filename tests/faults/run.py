#!/usr/bin/env python3
"""Fault injection: jobs under horarun hit by a fault at a random moment.

Each trial starts `horarun -np N --transport T python3 worker.py` (2 or 3
ranks, shared memory or TCP) and, once training is under way, does one of:

  kill9          SIGKILL one rank
  sigstop        SIGSTOP one rank (frozen: lost after HORA_PEER_TIMEOUT_S)
  early_exit     one rank leaves with os._exit(0), its Session never closed
  shutdown       one rank calls shutdown() and lingers
  idle_conn      a stranger connects to the rendezvous store and says nothing
  hostile_bytes  strangers send the store random bytes and a forged handshake

and counts what an operator must never see:

  hangs          the job did not end within the bound
  unnamed        a surviving rank failed with an error that does not name the
                 rank at fault (or no rank named it)
  leftovers      a process of the trial, or a /dev/shm segment it made, still
                 there after horarun returned
  wrong          a result differed from the reference, or a job that should
                 have finished did not (benign faults), or horarun's exit code
                 said success after a fault

Usage: run.py --trials 50 [--seed S] [--horarun build/bin/horarun]
Prints one line per trial and the counts; exits 1 if any count is not 0.
"""

import argparse
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
KINDS = ["kill9", "sigstop", "early_exit", "shutdown", "idle_conn", "hostile_bytes"]
BENIGN = {"idle_conn", "hostile_bytes"}
PEER_TIMEOUT_S = 2.0


def shm_entries():
    try:
        return {e for e in os.listdir("/dev/shm") if e.startswith("hora-")}
    except OSError:
        return set()


def tagged_pids(tag):
    out = subprocess.run(["pgrep", "-f", tag], capture_output=True, text=True).stdout.split()
    return [int(p) for p in out if int(p) != os.getpid()]


class Job:
    """One horarun job; its output lines are collected by a reader thread."""

    def __init__(self, horarun, python, np_, transport, worker_args, tag, env):
        cmd = [horarun, "-np", str(np_), "--transport", transport, python,
               os.path.join(HERE, "worker.py"), "--tag", tag] + worker_args
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     env=env, text=True, start_new_session=True)
        self.lines = []
        self.lock = threading.Lock()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            with self.lock:
                self.lines.append(line.rstrip("\n"))

    def snapshot(self):
        with self.lock:
            return list(self.lines)

    def wait_for(self, pattern, count, limit):
        """Waits until `count` lines match `pattern`; returns the matches."""
        rx = re.compile(pattern)
        end = time.time() + limit
        while time.time() < end:
            found = [m for m in (rx.search(l) for l in self.snapshot()) if m]
            if len(found) >= count:
                return found
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        return [m for m in (rx.search(l) for l in self.snapshot()) if m]


def stranger(addr, kind, stop):
    """Connects to the store at `addr` until `stop` is set."""
    host, port = addr.rsplit(":", 1)
    host = host.strip("[]")
    socks = []
    try:
        while not stop.is_set():
            s = socket.create_connection((host, int(port)), timeout=5)
            socks.append(s)
            if kind == "hostile_bytes":
                s.sendall(random.randbytes(200))
                s2 = socket.create_connection((host, int(port)), timeout=5)
                s2.recv(38)  # the server's hello
                s2.sendall(b"HRAU\x00\x01" + random.randbytes(64))  # a response with a forged MAC
                socks.append(s2)
            if len(socks) > 40:
                break
            stop.wait(0.1)
    except OSError:
        pass
    finally:
        stop.wait()
        for s in socks:
            s.close()


def trial(i, args, rng):
    kind = KINDS[i % len(KINDS)] if args.cycle else rng.choice(KINDS)
    np_ = rng.choice([2, 3])
    transport = rng.choice(["shm", "tcp"])
    victim = rng.randrange(1, np_) if rng.random() < 0.7 else 0
    tag = "hora-fault-" + uuid.uuid4().hex[:12]
    worker_args = ["--steps", "400" if kind in BENIGN else "100000"]
    if kind in ("early_exit", "shutdown"):
        worker_args += ["--fault", kind, "--fault-rank", str(victim),
                        "--fault-step", str(rng.randrange(20, 120))]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(args.build, "python")
    env["HORA_PEER_TIMEOUT_S"] = str(PEER_TIMEOUT_S)
    env["OMP_NUM_THREADS"] = "1"
    before = shm_entries()
    start = time.time()
    job = Job(args.horarun, args.python, np_, transport, worker_args, tag, env)
    verdict = {"trial": i, "kind": kind, "np": np_, "transport": transport, "victim": victim,
               "hang": False, "unnamed": False, "leftover": False, "wrong": False, "notes": ""}
    pids = {}
    job_id = None
    for m in job.wait_for(r"^\[(\d+)\]: PID (\d+) STORE (\S*) JOB (\S*)", np_, 60):
        pids[int(m.group(1))] = (int(m.group(2)), m.group(3))
        job_id = m.group(4)
    stop = threading.Event()
    helper = None
    if len(pids) == np_ and job.wait_for(r"^\[\d+\]: STEP 10\b", 1, 60):
        time.sleep(rng.uniform(0, 1.0))
        pid, store = pids[victim]
        if kind == "kill9":
            os.kill(pid, signal.SIGKILL)
        elif kind == "sigstop":
            os.kill(pid, signal.SIGSTOP)
        elif kind in BENIGN:
            helper = threading.Thread(target=stranger, args=(store, kind, stop), daemon=True)
            helper.start()
    elif kind not in ("early_exit", "shutdown"):
        # (No fault was injected: a trial that proves nothing fails.)
        verdict["wrong"] = True
        verdict["notes"] += "job did not start: no fault injected; "
    bound = 120 if kind in BENIGN else PEER_TIMEOUT_S + 60
    try:
        rc = job.proc.wait(timeout=bound)
    except subprocess.TimeoutExpired:
        verdict["hang"] = True
        os.killpg(job.proc.pid, signal.SIGKILL)
        rc = job.proc.wait()
    stop.set()
    if helper:
        helper.join(10)
    job.reader.join(10)
    lines = job.snapshot()
    elapsed = time.time() - start
    time.sleep(0.5)
    left = tagged_pids(tag)
    # (Only this job's: other jobs may run on the host meanwhile.)
    new_shm = sorted(e for e in shm_entries() - before
                     if job_id is None or e.startswith("hora-%s-" % job_id))
    if left or new_shm:
        verdict["leftover"] = True
        verdict["notes"] += "left: pids %s shm %s; " % (left, new_shm[:3])
        for p in left:
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
    if any(re.search(r"^\[\d+\]: WRONG", l) for l in lines):
        verdict["wrong"] = True
    if kind in BENIGN:
        done = sum(1 for l in lines if re.search(r"^\[\d+\]: DONE$", l))
        if rc != 0 or done != np_:
            verdict["wrong"] = True
            verdict["notes"] += "benign fault broke the job (rc %d, %d DONE); " % (rc, done)
    else:
        if rc == 0:
            verdict["wrong"] = True
            verdict["notes"] += "horarun exited 0 after a fault; "
        name = re.compile(r"\brank %d\b" % victim)
        failed = [l for l in lines if re.search(r"^\[(\d+)\]: FAILED", l)
                  and not l.startswith("[%d]:" % victim)]
        bad = [l for l in failed if not name.search(l)]
        horarun_named = any(l.startswith("horarun:") and name.search(l) for l in lines)
        if bad or (not failed and not horarun_named):
            verdict["unnamed"] = True
            verdict["notes"] += "unnamed: %s; " % (bad[:1] or "nobody named it")
    verdict["rc"] = rc
    verdict["seconds"] = round(elapsed, 1)
    return verdict, lines


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=50)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--horarun", default=None)
    p.add_argument("--python", default="/usr/bin/python3")
    p.add_argument("--cycle", action="store_true",
                   help="take the fault kinds in turn instead of at random")
    p.add_argument("--json", default=None, help="write every trial's verdict here")
    p.add_argument("--show-output", action="store_true", help="print a failed trial's output")
    args = p.parse_args()
    args.horarun = args.horarun or os.path.join(args.build, "bin", "horarun")
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    random.seed(seed + 1)
    print("fault injection: %d trials, seed %d" % (args.trials, seed), flush=True)
    verdicts = []
    for i in range(args.trials):
        v, lines = trial(i, args, rng)
        verdicts.append(v)
        bad = v["hang"] or v["unnamed"] or v["leftover"] or v["wrong"]
        print("%3d %-13s np %d %-3s victim %d rc %3d %5.1f s %s %s" % (
            i, v["kind"], v["np"], v["transport"], v["victim"], v["rc"], v["seconds"],
            "BAD" if bad else "ok", v["notes"]), flush=True)
        if bad and args.show_output:
            print("\n".join("    " + l for l in lines[-40:]), flush=True)
    counts = {k: sum(1 for v in verdicts if v[k]) for k in ("hang", "unnamed", "leftover", "wrong")}
    by_kind = {k: sum(1 for v in verdicts if v["kind"] == k) for k in KINDS}
    print("trials %d (%s): hangs %d, unnamed errors %d, leftovers %d, wrong results %d" % (
        len(verdicts), ", ".join("%s %d" % kv for kv in by_kind.items()), counts["hang"],
        counts["unnamed"], counts["leftover"], counts["wrong"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"seed": seed, "counts": counts, "trials": verdicts}, f, indent=1)
    return 1 if any(counts.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
