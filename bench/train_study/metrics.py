"""Pure computations of the training study: step statistics and scaling.

Imported by worker.py (step statistics), report.py and plots.py (scaling
efficiency, record selection); tested by test_train_study.py. No torch here.
"""

import statistics


def step_stats(elapsed_s, step_s, batch):
    """Throughput of one run from every rank's timings.

    elapsed_s: per rank, wall seconds of the whole timed loop.
    step_s: per rank, the list of per-step seconds (same length on every rank).
    The slowest rank counts: the run took max(elapsed_s), and a step took the
    longest any rank spent on it.
    """
    if not elapsed_s or len(elapsed_s) != len(step_s):
        raise ValueError("need one elapsed time and one step list per rank")
    steps = len(step_s[0])
    if steps == 0 or any(len(s) != steps for s in step_s):
        raise ValueError("every rank needs the same, non-zero number of steps")
    ranks = len(elapsed_s)
    slowest = max(elapsed_s)
    per_step = [max(s[i] for s in step_s) for i in range(steps)]
    return {
        "steps": steps,
        "elapsed_s": slowest,
        "images_per_s": ranks * batch * steps / slowest,
        "images_per_s_per_rank": batch * steps / slowest,
        "rank_images_per_s": [batch * steps / e for e in elapsed_s],
        "step_ms_mean": 1000.0 * slowest / steps,
        "step_ms_p50": 1000.0 * statistics.median(per_step),
    }


def ok(records):
    return [r for r in records if r.get("status") == "ok"]


def select(records, **fields):
    """The records whose fields equal all of `fields`."""
    return [r for r in records if all(r.get(k) == v for k, v in fields.items())]


def baseline(records, record):
    """The np=1 run that `record`'s efficiency is measured against.

    Same model, mode and batch; the same launcher when there is such a run,
    else the horarun shm one (at np 1 no transport is used).
    """
    key = dict(model=record["model"], mode=record["mode"], batch=record["batch"], np=1)
    for launcher in (record.get("launcher"), "shm"):
        found = select(ok(records), launcher=launcher, **key)
        if found:
            return found[0]
    return None


def scaling_efficiency(records, record):
    """throughput(np) / (np * throughput(1)), or None without a baseline."""
    if record.get("status") != "ok":
        return None
    base = baseline(records, record)
    if base is None or base["images_per_s"] <= 0:
        return None
    return record["images_per_s"] / (record["np"] * base["images_per_s"])


def with_efficiency(records):
    """Copies of the records with "scaling_efficiency" filled in."""
    return [dict(r, scaling_efficiency=scaling_efficiency(records, r)) for r in records]


def config_key(r):
    return (r["model"], r["mode"], r["np"], r["batch"], r["launcher"])


def aggregate(trials):
    """One record per configuration from repeated runs (run.py --repeat).

    A configuration with any failed trial is reported by its first failure;
    otherwise by its median trial by images/s (the lower one of the middle
    two for an even count). Either way "trials_images_per_s" lists the
    throughput of every successful trial, in run order.
    """
    groups = {}
    for t in trials:
        groups.setdefault(config_key(t), []).append(t)
    out = []
    for group in groups.values():
        rates = [t["images_per_s"] for t in group if t.get("status") == "ok"]
        failed = [t for t in group if t.get("status") != "ok"]
        if failed:
            chosen = failed[0]
        else:
            chosen = sorted(group, key=lambda t: t["images_per_s"])[(len(group) - 1) // 2]
        out.append(dict(chosen, trials_images_per_s=rates))
    return out
