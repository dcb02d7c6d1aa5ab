#!/usr/bin/env python3
# Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
"""The collective study: hora-bench sweeps of every collective, Hora against
MPI's own collectives, Gloo and torch.distributed in the same launch.

    /usr/bin/python3 bench/collective_study/run.py [--quick] [--out bench/results]

Each configuration (ranks x transport x MPI library) is one `horarun --mpi`
launch of `hora-bench COLLECTIVE --check --peers mpi,gloo,torch --json ...`.
Writes OUT/collectives.json (every record, with np / transport / mpi added),
OUT/collectives_<collective>.png (busbw against size, one line per
implementation, one panel per configuration) and OUT/collectives.md.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
COLLECTIVES = ["allreduce", "allgather", "broadcast", "alltoall", "reducescatter"]


def configurations(quick):
    """(np, transport, mpirun) triples."""
    if quick:
        return [(2, "shm", "mpirun.openmpi")]
    out = [(np, t, "mpirun.openmpi") for np in (2, 4) for t in ("shm", "tcp")]
    return out + [(2, "shm", "mpirun.mpich")]


def run_one(build, collective, np_, transport, mpirun, sizes, iters, iters_small, peers,
            timeout):
    """One launch; returns (records, error text or None)."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        path = f.name
    # Ten warm-up iterations: on this VM the first message of a size through
    # each of a shared-memory channel's 8 slots is up to 50x slower than
    # later ones (first access to the slot's pages), and a barrier plus the
    # timing allreduce use slots too. Three left half of a 10-iteration
    # sample in that state.
    # Each rank bound to a core of its own where a core is there for each (np
    # 2 here; Open MPI's mpirun binds so by default, horarun --mpi does not):
    # unbound, a socket's wake-up moved the woken rank to its waker's core,
    # and after a peer that sleeps as it waits (Gloo) both ranks' threads
    # shared one core for whole sizes (50-140 us for 4 us at np 2 over TCP).
    # The binding is the process's, so every peer in it runs bound too.
    cmd = [os.path.join(build, "bin", "horarun"), "--mpi", "--mpirun", mpirun, "-np", str(np_),
           "--bind-to", "core", "--timeout", str(timeout),
           os.path.join(build, "bin", "hora-bench"), collective,
           "--sizes", sizes, "--step-factor", "4", "--iters", str(iters),
           "--iters-small", str(iters_small), "--warmup", "10",
           "--check", "--peers", peers, "--json", path]
    env = dict(os.environ, HORA_TRANSPORT=transport, OMP_NUM_THREADS="1")
    if transport == "tcp" and mpirun.endswith("openmpi"):
        env["OMPI_MCA_btl"] = "tcp,self"  # MPI over TCP too, not its shared memory
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
        if p.returncode != 0:
            return [], "exit %d: %s" % (p.returncode, (p.stderr or p.stdout)[-600:])
        with open(path) as f:
            records = json.load(f)
    except subprocess.TimeoutExpired:
        return [], "timed out after %d s" % timeout
    finally:
        if os.path.exists(path):
            os.unlink(path)
    for r in records:
        r.update(np=np_, transport=transport, mpi=mpirun.split(".")[-1])
    return records, None


def p50_busbw(r):
    """busbw from the median time (robust to the outliers of a shared 2-core machine)."""
    return r["busbw_gbps"] * r["avg_us"] / r["p50_us"] if r["p50_us"] > 0 else 0.0


def label(np_, transport, mpi):
    return "np %d, %s, %s" % (np_, transport, mpi)


def fmt_size(b):
    for unit, k in (("M", 1 << 20), ("K", 1 << 10)):
        if b >= k:
            return "%g%s" % (b / k, unit)
    return str(b)


def plot(records, out_dir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    paths = []
    for coll in COLLECTIVES:
        rs = [r for r in records if r["collective"] == coll and "error" not in r]
        configs = sorted({(r["np"], r["transport"], r["mpi"]) for r in rs})
        if not configs:
            continue
        fig, axes = plt.subplots(1, len(configs), figsize=(5 * len(configs), 4), squeeze=False)
        for ax, cfg in zip(axes[0], configs):
            for impl in sorted({r["impl"] for r in rs}):
                pts = sorted((r["size_bytes"], p50_busbw(r)) for r in rs
                             if (r["np"], r["transport"], r["mpi"]) == cfg and r["impl"] == impl)
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=3,
                            label=impl, lw=2.5 if impl == "hora" else 1.2)
            limit = [r for r in rs if (r["np"], r["transport"], r["mpi"]) == cfg]
            if limit and limit[0].get("limit_gbps"):
                ax.axhline(limit[0]["limit_gbps"], color="grey", ls="--", lw=0.8,
                           label="limit (%s)" % limit[0]["limit_kind"])
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("size (bytes)")
            ax.set_ylabel("busbw at the median time (GB/s)")
            ax.set_title("%s, %s" % (coll, label(*cfg)))
            ax.legend(fontsize=7)
        fig.tight_layout()
        path = os.path.join(out_dir, "collectives_%s.png" % coll)
        fig.savefig(path, dpi=90)
        plt.close(fig)
        paths.append(path)
    return paths


def summary(records):
    """benchmarks.md's table: per collective and configuration, Hora's median
    against the best peer's at the smallest size, the one nearest 64 KiB and
    the largest, and Hora's busbw at the largest."""
    lines = ["| collective | np, transport, MPI | smallest: Hora / best peer (us) | "
             "~64 KiB: Hora / best peer (us) | largest: Hora / best peer (us) | "
             "Hora busbw at largest (GB/s) |", "|---|---|---|---|---|---|"]
    ok = [r for r in records if "error" not in r]
    for coll in COLLECTIVES:
        rs = [r for r in ok if r["collective"] == coll]
        for cfg in sorted({(r["np"], r["transport"], r["mpi"]) for r in rs}):
            by_size = {}
            for r in rs:
                if (r["np"], r["transport"], r["mpi"]) == cfg:
                    by_size.setdefault(r["size_bytes"], {})[r["impl"]] = r
            sizes = sorted(s for s, by in by_size.items()
                           if "hora" in by and len(by) > 1)
            if not sizes:
                continue
            picks = [sizes[0], min(sizes, key=lambda s: abs(s - 65536)), sizes[-1]]
            cells = []
            for size in picks:
                by = by_size[size]
                hora = by["hora"]["p50_us"]
                peer = min((i for i in by if i != "hora"), key=lambda i: by[i]["p50_us"])
                best = by[peer]["p50_us"]
                cells.append("%d B: %.1f / %.1f %s (%.2f)" % (size, hora, best, peer, best / hora))
            busbw = p50_busbw(by_size[sizes[-1]]["hora"])
            lines.append("| %s | %d, %s, %s | %s | %.2f |" % (coll, cfg[0], cfg[1], cfg[2],
                                                           " | ".join(cells), busbw))
    return lines


def markdown(records, failures, command, wall_s):
    lines = ["# Collective study", "", "Produced by `%s` in %.0f s." % (command, wall_s), "",
             "Cells: median time in microseconds over the timed iterations (each iteration's "
             "time is the slowest rank's); the plots show busbw (nccl-tests' definition) at "
             "that median. `ratio` = best peer's time / Hora's time (> 1: Hora faster). "
             "`transport` is Hora's; Gloo and torch.distributed always use TCP, MPI its "
             "shared memory, except that OpenMPI is held to TCP (btl tcp,self) in tcp rows. "
             "`#wrong` was 0 for every row shown unless marked.", "", "## Summary", ""]
    lines += summary(records) + [""]
    for coll in COLLECTIVES:
        rs = [r for r in records if r["collective"] == coll]
        for cfg in sorted({(r["np"], r["transport"], r["mpi"]) for r in rs}):
            sub = [r for r in rs if (r["np"], r["transport"], r["mpi"]) == cfg]
            impls = sorted({r["impl"] for r in sub if "error" not in r},
                           key=lambda i: (i != "hora", i))
            if not impls:
                continue
            lines += ["## %s, %s" % (coll, label(*cfg)), "",
                      "| size | " + " | ".join(impls) + " | ratio |",
                      "|---:|" + "---:|" * (len(impls) + 1)]
            for size in sorted({r["size_bytes"] for r in sub if "error" not in r}):
                by = {r["impl"]: r for r in sub if r["size_bytes"] == size and "error" not in r}
                cells = []
                for i in impls:
                    r = by.get(i)
                    cells.append("" if r is None else "%.1f%s" % (
                        r["p50_us"], "" if not r.get("wrong") else " (%d wrong)" % r["wrong"]))
                peers = [r for i, r in by.items() if i != "hora"]
                ratio = ""
                if "hora" in by and peers:
                    best = min(p["p50_us"] for p in peers)
                    ratio = "%.2f" % (best / by["hora"]["p50_us"])
                lines.append("| %s | %s | %s |" % (fmt_size(size), " | ".join(cells), ratio))
            errs = sorted({"%s: %s" % (r["impl"], r["error"]) for r in sub if "error" in r})
            lines += [""] + ["Not measured: " + e for e in errs] + ([""] if errs else [])
    if failures:
        lines += ["## Failed launches", ""] + ["- %s" % f for f in failures] + [""]
    return "\n".join(lines) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="np 2, shared memory, sizes to 1 MiB "
                   "(full: np 2 and 4, shm and tcp, OpenMPI and MPICH, to 16 MiB)")
    p.add_argument("--out", default=os.path.join(ROOT, "bench", "results"))
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--collectives", default=",".join(COLLECTIVES))
    p.add_argument("--peers", default="mpi,gloo,torch")
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    # Small messages get more iterations (--iters-small, up to 64 KiB): with
    # 10, a disturbance of a millisecond moved a size's median by 20x here.
    sizes, iters, iters_small = ("4:1M", 5, 50) if args.quick else ("4:16M", 10, 200)
    command = "/usr/bin/python3 bench/collective_study/run.py" + (" --quick" if args.quick else "")
    t0 = time.time()
    records, failures = [], []
    for np_, transport, mpirun in configurations(args.quick):
        for coll in args.collectives.split(","):
            print("collective study: %s %s" % (coll, label(np_, transport, mpirun)), flush=True)
            rs, err = run_one(args.build, coll, np_, transport, mpirun, sizes, iters,
                              iters_small, args.peers, timeout=900)
            records += rs
            if err:
                failures.append("%s %s: %s" % (coll, label(np_, transport, mpirun), err))
                print("  failed: " + err, file=sys.stderr)
    wall = time.time() - t0
    with open(os.path.join(args.out, "collectives.json"), "w") as f:
        json.dump(records, f, indent=1)
    plots = plot(records, args.out)
    with open(os.path.join(args.out, "collectives.md"), "w") as f:
        f.write(markdown(records, failures, command, wall))
    print("collective study: %d records, %d plots, %d failed launches, %.0f s -> %s" % (
        len(records), len(plots), len(failures), wall, args.out))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
