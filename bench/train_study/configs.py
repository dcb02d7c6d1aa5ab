"""What the training study runs: launchers and the sweeps (imported by run.py).

A Config is one job: model, mode, np, batch and launcher. The sweeps overlap
(resnet18, batch 32, np 2 over shm is in all four); sweep() returns each
Config once, and report.py finds each table's rows by their field values.

Launchers (how the ranks are started and how Hora's ranks talk):
    shm                    horarun, shared memory between ranks
    tcp                    horarun, TCP over loopback
    openmpi, mpich         horarun --mpi: that mpirun starts the ranks; Hora's
                           own transport (shared memory) between them
    <flavour>+mpi-transport  Hora's algorithms over that MPI's point-to-point
    <flavour>+mpi-backend    that MPI's own collectives (HORA_BACKEND=mpi)
The launcher only changes Hora's communication; ddp and ps always use gloo.
They run under the mpirun launchers too (full study) to show what the
launcher itself costs, separately from the transport.
"""

import collections

import workloads

Config = collections.namedtuple("Config", "model mode np batch launcher")
Launcher = collections.namedtuple("Launcher", "horarun_args env mpi_flavour")

MODES = ("hora", "ddp", "ps")
FLAVOURS = ("openmpi", "mpich")


def launchers(build_dir):
    """label -> Launcher (hora._core finds the MPI plugin beside it)."""
    out = collections.OrderedDict()
    out["shm"] = Launcher(["--transport", "shm"], {}, "none")
    out["tcp"] = Launcher(["--transport", "tcp"], {}, "none")
    for fl in FLAVOURS:
        mpirun = ["--mpirun", "mpirun." + fl]
        out[fl] = Launcher(["--mpi"] + mpirun, {}, fl)
        out[fl + "+mpi-transport"] = Launcher(["--transport", "mpi"] + mpirun, {}, fl)
        out[fl + "+mpi-backend"] = Launcher(["--mpi"] + mpirun, {"HORA_BACKEND": "mpi"}, fl)
    return out


# The fixed settings of the sweeps that do not vary them.
BASE_MODEL, BASE_BATCH, BASE_NP, BASE_LAUNCHER = "resnet18", 32, 2, "shm"

# baseline_nps: the np-1 runs that give the batch and model sweeps their
# efficiency (the quick plan skips them; its tables then show none).
QUICK = dict(nps=(1, 2), batches=(16, 32, 64), models=("resnet18", "mobilenet_v2"),
             baseline_nps=(),
             hora_launchers=("shm", "tcp", "openmpi", "mpich", "openmpi+mpi-transport",
                             "mpich+mpi-backend"),
             control_launchers=(), warmup=2, steps=5, timeout_s=150)
FULL = dict(nps=(1, 2, 4), batches=(16, 32, 64, 128), models=workloads.MODELS, baseline_nps=(1,),
            hora_launchers=("shm", "tcp") + tuple(
                fl + sfx for fl in FLAVOURS for sfx in ("", "+mpi-transport", "+mpi-backend")),
            control_launchers=FLAVOURS, warmup=3, steps=10, timeout_s=300)


def sweep(plan):
    """The configurations of a plan (QUICK or FULL), each once, in run order."""
    seen = collections.OrderedDict()

    def add(model=BASE_MODEL, mode="hora", np=BASE_NP, batch=BASE_BATCH, launcher=BASE_LAUNCHER):
        seen.setdefault(Config(model, mode, np, batch, launcher), None)

    for mode in MODES:  # (a) scaling with np
        for np in plan["nps"]:
            add(mode=mode, np=np)
    for mode in MODES:  # (b) batch size, with np-1 baselines for efficiency
        for batch in plan["batches"]:
            for np in plan["baseline_nps"] + (BASE_NP,):
                add(mode=mode, batch=batch, np=np)
    for launcher in plan["hora_launchers"]:  # (c) launcher and transport
        add(launcher=launcher)
    for launcher in plan["control_launchers"]:
        for mode in ("ddp", "ps"):
            add(mode=mode, launcher=launcher)
    for model in plan["models"]:  # (d) models, with np-1 baselines
        for mode in MODES:
            for np in plan["baseline_nps"] + (BASE_NP,):
                add(model=model, mode=mode, np=np)
    return list(seen)


def config_id(c):
    return "%s-%s-np%d-b%d-%s" % (c.model, c.mode, c.np, c.batch, c.launcher)
