"""Markdown summary of the training study (imported by run.py; tested).

markdown(study) turns the study dict that run.py writes to train_study.json
(command, wall time, records) into train_study.md: one table per sweep, rows
selected from the records by field values (configs.BASE_* fixes the settings a
sweep does not vary), then every failed run with the tail of its output.
"""

import configs
import metrics
import workloads

MODE_ORDER = {m: i for i, m in enumerate(configs.MODES)}

METHOD = """\
Synthetic data (one fixed batch per rank, 10 classes), SGD (lr 0.01, momentum
0.9), one torch thread per rank. images/s = np * batch * timed steps / the
slowest rank's timed-loop time; "per rank" is that divided by np; step ms is
the mean over timed steps (and the median of each step's slowest rank).
Efficiency = images/s(np) / (np * images/s(np 1)) for the same mode, model
and batch. "vs DDP" = images/s / DDP's images/s at the same settings. hora =
hora.torch DistributedOptimizer; ddp = DistributedDataParallel (gloo); ps =
parameter server on rank 0 over gloo send/recv, rank 0 also trains (ps.py).
Inputs 32x32 (alexnet 63x63, the smallest it accepts). np above the core
count oversubscribes the CPUs. On a small shared machine identical runs can
differ by a factor of two (an efficiency above 1 is such noise): run.py
--repeat N reports each configuration's median of N runs."""


def _num(x, fmt="%.1f"):
    return "—" if x is None else fmt % x


def _table(headers, rows):
    if not rows:
        return ["(no runs)"]
    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return out


def vs_ddp(records, rec):
    """images/s relative to DDP at the same model, np and batch (shm DDP when
    DDP did not run under this launcher)."""
    if rec.get("status") != "ok":
        return None
    key = dict(model=rec["model"], np=rec["np"], batch=rec["batch"], mode="ddp")
    for launcher in (rec["launcher"], configs.BASE_LAUNCHER):
        found = metrics.select(metrics.ok(records), launcher=launcher, **key)
        if found:
            return rec["images_per_s"] / found[0]["images_per_s"]
    return None


def _measure(records, rec):
    """The measurement columns shared by every table."""
    if rec.get("status") != "ok":
        return ["FAILED", "", "", "", ""]
    return [_num(rec["images_per_s"]), _num(rec["images_per_s_per_rank"]),
            "%.0f / %.0f" % (rec["step_ms_mean"], rec["step_ms_p50"]),
            _num(metrics.scaling_efficiency(records, rec), "%.2f"),
            _num(vs_ddp(records, rec), "%.2f")]


MEASURE = ["images/s", "per rank", "step ms (mean / p50)", "efficiency", "vs DDP"]


def _sorted(records, *fields):
    return sorted(records, key=lambda r: tuple(
        MODE_ORDER.get(r[f], 9) if f == "mode" else r[f] for f in fields))


def scaling_rows(records):
    sel = metrics.select(records, model=configs.BASE_MODEL, batch=configs.BASE_BATCH,
                         launcher=configs.BASE_LAUNCHER)
    return [[r["mode"], r["np"]] + _measure(records, r) for r in _sorted(sel, "mode", "np")]


def batch_rows(records):
    sel = metrics.select(records, model=configs.BASE_MODEL, np=configs.BASE_NP,
                         launcher=configs.BASE_LAUNCHER)
    return [[r["mode"], r["batch"]] + _measure(records, r) for r in _sorted(sel, "mode", "batch")]


def transport_rows(records):
    sel = metrics.select(records, model=configs.BASE_MODEL, np=configs.BASE_NP,
                         batch=configs.BASE_BATCH)
    order = {label: i for i, label in enumerate(configs.launchers("").keys())}
    sel = sorted(sel, key=lambda r: (order.get(r["launcher"], 99), MODE_ORDER.get(r["mode"], 9)))
    return [[r["launcher"], r["mode"], r.get("transport", "—"), r.get("backend", "—")]
            + _measure(records, r) for r in sel]


def model_rows(records):
    sel = metrics.select(records, np=configs.BASE_NP, batch=configs.BASE_BATCH,
                         launcher=configs.BASE_LAUNCHER)
    order = {m: i for i, m in enumerate(workloads.MODELS)}
    sel = sorted(sel, key=lambda r: (order.get(r["model"], 99), MODE_ORDER.get(r["mode"], 9)))
    rows = []
    for r in sel:
        size = "%dx%d" % ((workloads.INPUT_SIZE[r["model"]],) * 2)
        params = _num(r["params"] / 1e6, "%.1f M") if "params" in r else "—"
        grad = _num(r["gradient_bytes"] / 2**20, "%.0f") if "gradient_bytes" in r else "—"
        rows.append([r["model"], size, params, grad, r["mode"]] + _measure(records, r))
    return rows


def failed_section(records):
    failed = [r for r in records if r.get("status") != "ok"]
    if not failed:
        return ["No run failed."]
    out = []
    for r in failed:
        out += ["### %s" % configs.config_id(configs.Config(
                    r["model"], r["mode"], r["np"], r["batch"], r["launcher"])),
                "", "%s. Command:" % r.get("error", "failed"), "",
                "    " + r.get("command", "?"), "", "Last lines of its output:", "", "```",
                r.get("stderr_tail", "").rstrip(), "```", ""]
    return out


def markdown(study):
    records = study["records"]
    failed = sum(1 for r in records if r.get("status") != "ok")
    b = (configs.BASE_MODEL, configs.BASE_BATCH, configs.BASE_NP, configs.BASE_LAUNCHER)
    lines = [
        "# Hora training study", "",
        "Produced by:", "", "    " + study["command"], "",
        "%s; %s; %d runs, %d failed; %.0f s in all. %s" % (
            study.get("date", "?"), study.get("host", "?"), len(records), failed,
            study.get("wall_s", 0), study.get("plan_note", "")), "",
        METHOD, "",
        "## Scaling with the number of ranks (%s, batch %d, horarun %s)" % (b[0], b[1], b[3]), ""]
    lines += _table(["mode", "np"] + MEASURE, scaling_rows(records))
    lines += ["", "## Batch size per rank (%s, np %d, horarun %s)" % (b[0], b[2], b[3]), ""]
    lines += _table(["mode", "batch"] + MEASURE, batch_rows(records))
    lines += ["", "## Launcher and transport (%s, batch %d, np %d)" % (b[0], b[1], b[2]), ""]
    lines += _table(["launcher", "mode", "HORA_TRANSPORT", "backend"] + MEASURE,
                    transport_rows(records))
    lines += ["", "## Models (batch %d, np %d, horarun %s)" % (b[1], b[2], b[3]), ""]
    lines += _table(["model", "input", "params", "grad MiB", "mode"] + MEASURE,
                    model_rows(records))
    lines += ["", "## Failed runs", ""] + failed_section(records)
    return "\n".join(lines).rstrip() + "\n"
