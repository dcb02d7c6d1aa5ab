#!/usr/bin/env python3
# Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
"""The spans of a Hora timeline (HORA_TIMELINE), summarized: for each span
name, how many there are and their median and 90th-percentile durations.

Usage: bench/timeline_summary.py TIMELINE.json [--skip N]
  --skip N   leave out each name's first N spans (warm-up)
"""
import argparse
import json
from collections import defaultdict


def load(path):
    text = open(path).read().rstrip()
    try:
        events = json.loads(text)
    except json.JSONDecodeError:  # (a timeline still being written: no closing bracket)
        events = json.loads(text.rstrip(",") + "]")
    return events.get("traceEvents", []) if isinstance(events, dict) else events


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("path")
    p.add_argument("--skip", type=int, default=0)
    a = p.parse_args()
    spans = defaultdict(list)
    for e in load(a.path):
        if e.get("ph") == "X":
            spans[e["name"]].append(e["dur"])
    print(f"# {a.path}: span, count, median (us), p90 (us)")
    for name, d in spans.items():
        d = sorted(d[a.skip:])
        if d:
            print(f"{name:24s} {len(d):6d} {d[len(d) // 2]:10.1f} {d[int(len(d) * 0.9)]:10.1f}")


if __name__ == "__main__":
    main()
