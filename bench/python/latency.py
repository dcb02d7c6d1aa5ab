"""What the bench/python latency scripts share: the timing loop and the
command line of iterations, warm-up and rounds."""

import argparse
import statistics
import time


def timed(fn, iters, warmup):
    """avg and p50 in microseconds of ``iters`` calls of ``fn`` after ``warmup``."""
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1e6)
    return statistics.mean(out), statistics.median(out)


def parser(doc, iters, warmup, rounds, rows=None):
    """An ArgumentParser described by ``doc``'s first paragraph, with --iters,
    --warmup, --rounds and (where ``rows`` is given) --rows, those the defaults."""
    p = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    if rows is not None:
        p.add_argument("--rows", type=int, default=rows)
    p.add_argument("--iters", type=int, default=iters)
    p.add_argument("--warmup", type=int, default=warmup)
    p.add_argument("--rounds", type=int, default=rounds)
    return p


def run_rounds(calls, args, printing):
    """Times each of ``calls`` (``(label, fn)``, or ``(label, fn, iters)`` for a
    count of its own) for ``args.iters`` calls after ``args.warmup``, in
    ``args.rounds`` rounds; where ``printing``, prints one line per (call,
    round): "round R  label  avg A  p50 P" (microseconds)."""
    width = max(len(c[0]) for c in calls)
    for r in range(args.rounds):
        for call in calls:
            label, fn = call[0], call[1]
            avg, p50 = timed(fn, call[2] if len(call) > 2 else args.iters, args.warmup)
            if printing:
                print("round %d  %-*s avg %8.1f  p50 %8.1f" % (r + 1, width, label, avg, p50))
