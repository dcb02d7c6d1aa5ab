"""PNG plots of the training study (imported by run.py; matplotlib, Agg).

render(records, out_dir) writes, from the successful runs only:
    train_scaling.png    images/s and efficiency against np, per mode
    train_batch.png      images/s against batch per rank, per mode
    train_models.png     images/s per model and mode, relative to DDP
    train_transport.png  hora's images/s per launcher, ddp and ps as lines
and returns the paths written (a plot without data is skipped).
"""

import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import configs  # noqa: E402
import metrics  # noqa: E402
import workloads  # noqa: E402

COLOURS = {"hora": "tab:blue", "ddp": "tab:orange", "ps": "tab:green"}


def _base(records, **fixed):
    keys = dict(model=configs.BASE_MODEL, batch=configs.BASE_BATCH, np=configs.BASE_NP,
                launcher=configs.BASE_LAUNCHER)
    keys.update(fixed)
    keys = {k: v for k, v in keys.items() if v is not None}
    return metrics.select(metrics.ok(records), **keys)


def _save(fig, out_dir, name):
    path = os.path.join(out_dir, name)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def scaling(records, out_dir):
    sel = _base(records, np=None)
    if not sel:
        return None
    fig, (ax, ax_eff) = plt.subplots(1, 2, figsize=(10, 4))
    for mode in configs.MODES:
        pts = sorted((r["np"], r["images_per_s"], metrics.scaling_efficiency(records, r))
                     for r in sel if r["mode"] == mode)
        if not pts:
            continue
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", color=COLOURS[mode], label=mode)
        eff = [(p[0], p[2]) for p in pts if p[2] is not None]
        ax_eff.plot([e[0] for e in eff], [e[1] for e in eff], "o-", color=COLOURS[mode],
                    label=mode)
    ax.set(xlabel="ranks (np)", ylabel="images/s, all ranks",
           title="%s, batch %d per rank" % (configs.BASE_MODEL, configs.BASE_BATCH))
    ax_eff.axhline(1.0, color="grey", ls=":")
    ax_eff.set(xlabel="ranks (np)", ylabel="scaling efficiency", ylim=(0, 1.2),
               title="images/s(np) / (np * images/s(1))")
    nps = sorted({r["np"] for r in sel})
    for a in (ax, ax_eff):
        a.set_xticks(nps)
        if a.get_legend_handles_labels()[1]:
            a.legend()
        a.grid(alpha=0.3)
    return _save(fig, out_dir, "train_scaling.png")


def batch(records, out_dir):
    sel = _base(records, batch=None)
    if not sel:
        return None
    fig, ax = plt.subplots(figsize=(6, 4))
    for mode in configs.MODES:
        pts = sorted((r["batch"], r["images_per_s"]) for r in sel if r["mode"] == mode)
        if pts:
            ax.plot(*zip(*pts), marker="o", color=COLOURS[mode], label=mode)
    ax.set_xscale("log", base=2)
    ax.set(xlabel="batch per rank", ylabel="images/s, all ranks",
           title="%s, np %d" % (configs.BASE_MODEL, configs.BASE_NP))
    ax.legend()
    ax.grid(alpha=0.3)
    return _save(fig, out_dir, "train_batch.png")


def models(records, out_dir):
    """Bars: images/s relative to DDP for the same model (DDP = 1), each bar
    labelled with its absolute images/s; models without a DDP run are left out."""
    sel = _base(records, model=None)
    ddp = {r["model"]: r["images_per_s"] for r in sel if r["mode"] == "ddp"}
    names = [m for m in workloads.MODELS if m in ddp]
    if not names:
        return None
    fig, ax = plt.subplots(figsize=(7, 4))
    width = 0.8 / len(configs.MODES)
    for i, mode in enumerate(configs.MODES):
        pts = [(j, r["images_per_s"]) for j, name in enumerate(names)
               for r in sel if r["model"] == name and r["mode"] == mode]
        if not pts:
            continue
        xs = [j + i * width for j, _ in pts]
        ys = [v / ddp[names[j]] for j, v in pts]
        ax.bar(xs, ys, width, color=COLOURS[mode], label=mode)
        for x, y, (_, v) in zip(xs, ys, pts):
            ax.annotate("%.0f" % v, (x, y), ha="center", va="bottom", fontsize=8)
    ax.set_xticks([j + width * (len(configs.MODES) - 1) / 2 for j in range(len(names))])
    ax.set_xticklabels(names)
    ax.axhline(1.0, color="grey", ls=":")
    ax.set(ylabel="images/s relative to DDP (labels: images/s)",
           title="np %d, batch %d per rank" % (configs.BASE_NP, configs.BASE_BATCH))
    ax.legend()
    ax.grid(alpha=0.3, axis="y")
    return _save(fig, out_dir, "train_models.png")


def transport(records, out_dir):
    sel = _base(records, launcher=None)
    hora = [r for r in sel if r["mode"] == "hora"]
    if not hora:
        return None
    order = list(configs.launchers("").keys())
    hora.sort(key=lambda r: order.index(r["launcher"]) if r["launcher"] in order else 99)
    fig, ax = plt.subplots(figsize=(7, 0.45 * len(hora) + 2.2))
    ax.barh(range(len(hora)), [r["images_per_s"] for r in hora], color=COLOURS["hora"])
    ax.set_yticks(range(len(hora)))
    ax.set_yticklabels(["hora, " + r["launcher"] for r in hora])
    ax.invert_yaxis()
    for mode, style in (("ddp", "--"), ("ps", ":")):
        ref = [r for r in sel if r["mode"] == mode and r["launcher"] == configs.BASE_LAUNCHER]
        if ref:
            ax.axvline(ref[0]["images_per_s"], color=COLOURS[mode], ls=style,
                       label="%s (horarun %s)" % (mode, configs.BASE_LAUNCHER))
    ax.set(xlabel="images/s, all ranks", title="%s, np %d, batch %d" % (
        configs.BASE_MODEL, configs.BASE_NP, configs.BASE_BATCH))
    if ax.get_legend_handles_labels()[1]:
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=2)
    ax.grid(alpha=0.3, axis="x")
    return _save(fig, out_dir, "train_transport.png")


def render(records, out_dir):
    paths = [f(records, out_dir) for f in (scaling, batch, models, transport)]
    return [p for p in paths if p]
