"""Runs Hora's benchmark binaries under horarun, each with a timeout, and
parses what they print. Used by calibrate.py, validate.py and
bench/control_plane/run.py; not a command of its own.

- allreduce_sweep(): `hora-bench allreduce`, one record per size:
  {impl, collective, size_bytes, count, ranks, algo, avg_us, p50_us, p99_us,
  algbw_gbps, busbw_gbps, wrong}. It passes `--json FILE` when the binary
  accepts it (records with impl "hora" are kept) and parses the text table
  otherwise (columns found by the header's names).
- engine_bench(): `hora-engine-bench`, one record per cache setting (on, off).
- allreduce_via_engine(): the same records from `hora-engine-bench --tensors 1`,
  one launch per size: a lone allreduce through the engine, so each time also
  holds one engine cycle (fit.py models it as control.fast_cycle). For when
  hora-bench cannot run (calibrate.py / validate.py --source engine).
- kernel_gamma(): `hora-kernel-bench` BM_SumF32, seconds per byte reduced.

A failed or timed-out run raises RunError naming the command, the exit code
and the tail of its output; the process group is killed on timeout. A run
that could not start its binary (exit 126/127, "Permission denied": the
binaries may be being rebuilt) is retried twice, after 5 and 10 s.
"""

import json
import os
import re
import subprocess
import sys
import tempfile
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
# The build CTest runs (HORA_BUILD_DIR), else the repository's build/.
BIN = os.path.join(os.environ.get("HORA_BUILD_DIR") or os.path.join(REPO, "build"), "bin")
# Under CTest the binaries must be there: the tests that need them fail
# rather than skip (by hand, without a build, they skip).
UNBUILT_SKIPS = "HORA_BUILD_DIR" not in os.environ


class RunError(RuntimeError):
    pass


def run(argv, timeout, env=None, retries=2):
    """Runs argv (own process group); returns stdout. Raises RunError."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    for attempt in range(retries + 1):
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=full_env, start_new_session=True, cwd=REPO)
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, 9)
            out, err = p.communicate()
            raise RunError("timed out after %ds: %s\n%s" % (timeout, " ".join(argv),
                                                           (out + err)[-2000:]))
        if p.returncode == 0:
            return out
        why = "exit %d: %s\n%s" % (p.returncode, " ".join(argv), (out + err)[-2000:])
        replaced = p.returncode in (126, 127) or any(
            m in err for m in ("Permission denied", "Text file busy", "cannot run"))
        if attempt == retries or not replaced:
            break
        print("  retrying in %ds: could not start (%s)" % (5 * (attempt + 1),
                                                         why.splitlines()[0]), file=sys.stderr)
        time.sleep(5 * (attempt + 1))
    raise RunError(why)


def horarun(np_, command, transport=None, hosts=None, wait_s=60):
    """horarun argv; hosts is a NamespacedHosts (one rank per host) or None."""
    argv = [os.path.join(BIN, "horarun"), "-np", str(np_), "--no-prefix", "--timeout",
            str(wait_s)]
    if transport:
        argv += ["--transport", transport]
    if hosts is not None:
        argv += hosts.horarun_flags(per_host=max(1, np_ // hosts.n))
    return argv + ["--"] + command


_json_support = {}


def bench_supports_json():
    """True when hora-bench accepts --json (asked once, without horarun)."""
    exe = os.path.join(BIN, "hora-bench")
    if exe not in _json_support:
        env = {k: v for k, v in os.environ.items() if not k.startswith("HORA_")}
        with tempfile.TemporaryDirectory() as d:
            argv = [exe, "allreduce", "--sizes", "4:4", "--iters", "1", "--warmup", "0",
                    "--json", os.path.join(d, "probe.json")]
            try:
                p = subprocess.run(argv, capture_output=True, text=True, timeout=30, cwd=d,
                                   env=env)
            except (subprocess.TimeoutExpired, OSError) as e:
                raise RunError("probing %s for --json failed: %s" % (exe, e))
        _json_support[exe] = "unknown flag '--json'" not in p.stderr
    return _json_support[exe]


_NAMES = {"size(b)": "size_bytes", "count": "count", "avg(us)": "avg_us", "p50(us)": "p50_us",
          "p99(us)": "p99_us", "algbw": "algbw_gbps", "busbw": "busbw_gbps", "#wrong": "wrong",
          "impl": "impl", "algo": "algo"}
_DEFAULT_COLS = ["size_bytes", "count", "avg_us", "p50_us", "p99_us", "algbw_gbps",
                 "busbw_gbps", "wrong"]


def parse_table(text):
    """Records from hora-bench's text table (header names pick the columns)."""
    cols, recs, ranks = list(_DEFAULT_COLS), [], None
    for line in text.splitlines():
        s = line.strip()
        m = re.search(r"(\d+) ranks", s)
        if s.startswith("#") and m:
            ranks = int(m.group(1))
        if s.startswith("#") and "size(B)" in s:
            cols = [_NAMES.get(t.lower(), t.lower()) for t in s.lstrip("#").split()]
            continue
        if not s or s.startswith("#"):
            continue
        toks = s.split()
        if len(toks) < len(cols) or not toks[0].isdigit():
            continue
        rec = {"impl": "hora", "collective": "allreduce", "ranks": ranks}
        for name, tok in zip(cols, toks):
            try:
                rec[name] = int(tok) if name in ("size_bytes", "count") else float(tok)
            except ValueError:
                rec[name] = None if tok == "-" else tok
        recs.append(rec)
    if not recs:
        raise RunError("no result rows in hora-bench output:\n" + text[-2000:])
    return recs


def allreduce_sweep(np_, lo, hi, iters, warmup, algo=None, transport=None, hosts=None,
                    timeout=300):
    """One hora-bench allreduce sweep (sizes lo..hi bytes, doubling)."""
    env = {"HORA_ALLREDUCE_ALGO": algo} if algo else {}
    cmd = [os.path.join(BIN, "hora-bench"), "allreduce", "--sizes", "%d:%d" % (lo, hi),
           "--iters", str(iters), "--warmup", str(warmup)]
    use_json = bench_supports_json()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "out.json")
        if use_json:
            cmd += ["--json", path]
        out = run(horarun(np_, cmd, transport, hosts), timeout, env)
        if use_json:
            with open(path) as f:
                recs = [r for r in json.load(f) if r.get("impl", "hora") == "hora"]
        else:
            recs = parse_table(out)
    for r in recs:
        r["ranks"] = r.get("ranks") or np_
        r["algo"] = algo or r.get("algo") or "auto"
        r["transport"] = "netns" if hosts is not None else (transport or "shm")
        r["via"] = "bench"
    return recs


# Below this size a shaped link's token bucket (netns.NamespacedHosts.BURST)
# lets the first messages through at veth speed. Warm-up iterations spend it
# before the timed ones; it refills while a link idles between messages, so
# this reduces the effect but does not remove it (a small bucket does).
SMALL_BYTES = 64 << 10
SMALL_WARMUP = 10
SMALL_ITERS = 20


def allreduce_sweep_shaped(np_, lo, hi, iters, warmup, algo=None, hosts=None, timeout=300):
    """allreduce_sweep on shaped links: sizes below SMALL_BYTES with at least
    SMALL_WARMUP warm-up and SMALL_ITERS timed iterations (they are cheap),
    the rest with `iters` and `warmup`."""
    if lo <= 0 or hi < lo:
        raise ValueError("allreduce_sweep_shaped: sizes %d..%d (need 0 < lo <= hi)" % (lo, hi))
    recs = []
    if lo < SMALL_BYTES:
        small_hi = min(hi, SMALL_BYTES - 1)
        recs += allreduce_sweep(np_, lo, small_hi, max(iters, SMALL_ITERS),
                                max(warmup, SMALL_WARMUP), algo=algo, hosts=hosts,
                                timeout=timeout)
        while lo <= small_hi:
            lo *= 2
    if lo <= hi:
        recs += allreduce_sweep(np_, lo, hi, iters, warmup, algo=algo, hosts=hosts,
                                timeout=timeout)
    return recs


def engine_bench(np_, tensors, nbytes, steps, warmup, transport=None, hosts=None,
                 timeout=300, env=None):
    """hora-engine-bench: [{np, tensors, bytes, cache, step_avg_us, step_p50_us,
    cycles, slow_cycles, coord_bytes, driven_cycles, carried}] for cache on and off."""
    cmd = [os.path.join(BIN, "hora-engine-bench"), "--tensors", str(tensors), "--bytes",
           str(nbytes), "--steps", str(steps), "--warmup", str(warmup)]
    out = run(horarun(np_, cmd, transport, hosts), timeout, env)
    recs = []
    for line in out.splitlines():
        toks = line.split()
        # np tensors bytes(value unit) cache avg p50 cycles slow coord driven carried
        if len(toks) == 12 and toks[0].isdigit() and toks[4] in ("on", "off"):
            recs.append({"np": int(toks[0]), "tensors": int(toks[1]), "bytes": nbytes,
                         "cache": toks[4], "step_avg_us": float(toks[5]),
                         "step_p50_us": float(toks[6]), "cycles": float(toks[7]),
                         "slow_cycles": float(toks[8]), "coord_bytes": float(toks[9]),
                         "driven_cycles": float(toks[10]), "carried": float(toks[11])})
    if len(recs) != 2:
        raise RunError("expected cache on/off rows from hora-engine-bench, got:\n" + out[-2000:])
    return recs


def allreduce_via_engine(np_, sizes, steps, warmup, algo=None, transport=None, hosts=None,
                         timeout=300):
    env = {"HORA_ALLREDUCE_ALGO": algo} if algo else {}
    recs = []
    for m in sizes:
        k = steps if m > (128 << 10) else max(steps, 20)  # small ones are cheap: more steps
        on = next(r for r in engine_bench(np_, 1, m, k, warmup, transport, hosts, timeout,
                                          env) if r["cache"] == "on")
        recs.append({"impl": "hora", "collective": "allreduce", "size_bytes": m,
                     "count": m // 4, "ranks": np_, "algo": algo or "auto",
                     "avg_us": on["step_avg_us"], "p50_us": on["step_p50_us"], "p99_us": None,
                     "transport": "netns" if hosts is not None else (transport or "shm"),
                     "via": "engine"})
    return recs


def kernel_gamma(min_time=0.2, timeout=120):
    """{size_bytes: seconds per byte} for the f32 sum kernel (BM_SumF32)."""
    out = run([os.path.join(BIN, "hora-kernel-bench"), "--benchmark_filter=^BM_SumF32/",
               "--benchmark_format=json", "--benchmark_min_time=%g" % min_time], timeout)
    data = json.loads(out[out.index("{"):])
    res = {}
    for b in data["benchmarks"]:
        size = int(b["name"].split("/")[1])
        scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[b.get("time_unit", "ns")]
        res[size] = b["real_time"] * scale / size
    if not res:
        raise RunError("hora-kernel-bench printed no BM_SumF32 results")
    return res
