"""Runs one training-study configuration as a horarun job (imported by run.py).

run_config() starts `horarun -np N <launcher args> python worker.py ...` with
a wall-clock limit, keeps the job's whole output in a log file, and returns
the record rank 0 wrote, or a failed record naming the configuration, the exit
status and the tail of the output. It never raises for a failed job.

Nothing hangs: the driver's limit (SIGTERM to horarun, which stops its ranks;
SIGKILL to its process group 10 s later), horarun's --timeout on every Hora
wait, gloo's timeout, and the worker's own --deadline-s (a tenth and 10 s before
the driver's limit, so that its stack is printed) each bound the job.
"""

import json
import os
import shlex
import signal
import socket
import subprocess
import time

import configs

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "worker.py")
TAIL_LINES = 25


def free_port():
    """A TCP port free on loopback now (for torch.distributed's rendezvous)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def command(cfg, launcher, plan, paths, result_path):
    """The argv of one job."""
    return ([paths["horarun"], "-np", str(cfg.np), "--timeout", "60"] + launcher.horarun_args
            + [paths["python"], WORKER, "--mode", cfg.mode, "--model", cfg.model,
               "--batch", str(cfg.batch), "--warmup", str(plan["warmup"]),
               "--steps", str(plan["steps"]), "--launcher", cfg.launcher,
               "--mpi-flavour", launcher.mpi_flavour,
               "--deadline-s", str(deadline_s(plan["timeout_s"])), "--result", result_path])


def deadline_s(timeout_s):
    """The worker's own limit: well inside the driver's (start-up takes seconds),
    so a stuck rank prints its Python stack before the driver kills the job."""
    return max(5, int(timeout_s * 0.9) - 10)


def environment(launcher, paths):
    """The job's environment: the caller's, plus these (returned apart for the log)."""
    extra = {"PYTHONPATH": os.path.join(paths["build"], "python"), "OMP_NUM_THREADS": "1",
             "MKL_NUM_THREADS": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())}
    extra.update(launcher.env)
    return dict(os.environ, **extra), extra


def _stop(proc):
    """SIGTERM horarun (it stops its ranks), then SIGKILL its group."""
    for sig, grace in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            pass


def run_job(argv, env, timeout_s, log_path):
    """Runs argv; returns (exit status or None when it timed out, seconds)."""
    start = time.monotonic()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            rc = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _stop(proc)
            rc = None
    return rc, time.monotonic() - start


def tail(path, lines=TAIL_LINES):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError as e:
        return "(no log: %s)" % e


def run_config(cfg, launcher, plan, paths, log_dir):
    """One job; returns its record (status "ok" or "failed")."""
    cid = configs.config_id(cfg)
    log_path = os.path.join(log_dir, cid + ".log")
    result_path = os.path.join(log_dir, cid + ".json")
    if os.path.exists(result_path):
        os.remove(result_path)
    argv = command(cfg, launcher, plan, paths, result_path)
    env, extra = environment(launcher, paths)
    shown = " ".join("%s=%s" % (k, shlex.quote(v)) for k, v in sorted(extra.items()))
    rc, wall = run_job(argv, env, plan["timeout_s"], log_path)
    base = dict(cfg._asdict(), mpi_flavour=launcher.mpi_flavour, wall_s=round(wall, 2),
                log=log_path, command=shown + " " + " ".join(shlex.quote(a) for a in argv))
    if rc == 0 and os.path.exists(result_path):
        with open(result_path) as f:
            return dict(json.load(f), **base)
    if rc is None:
        why = "timed out after %d s" % plan["timeout_s"]
        if os.path.exists(result_path):
            why += " (rank 0 had written its result: a rank hung after training)"
    elif rc == 0:
        why = "exited 0 but rank 0 wrote no result"
    else:
        why = "exited with status %d" % rc
    return dict(base, status="failed", returncode=rc, error=why, stderr_tail=tail(log_path))
