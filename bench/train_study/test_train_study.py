"""Tests of the training study (well under a minute):

    /usr/bin/python3 -m pytest -q bench/train_study

- metrics and report: step statistics, scaling efficiency, the median of
  repeated runs, DDP ratio, row selection and the failed-run section, against
  hand-computed values;
- the sweep: every requested axis is covered, each configuration once;
- alexnet's documented smallest input (63 runs, 62 does not);
- training correctness: ps, hora and ddp each run 3 steps at np 2 under
  horarun on the tiny model; every rank's final parameters must equal a
  reference computed here, independently (per-rank gradients by autograd,
  averaged by hand, momentum SGD by hand). A control checks that the
  reference really depends on the averaging (rank 0's gradient alone differs).
"""

import json
import os
import subprocess
import sys
import tempfile

import pytest
import torch
import torch.nn.functional as F

import configs
import launch
import metrics
import report
import workloads

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.environ.get("HORA_BUILD_DIR",
                       os.path.join(os.path.dirname(os.path.dirname(HERE)), "build"))
HORARUN = os.path.join(BUILD, "bin", "horarun")


def rec(mode, np, ips, model="resnet18", batch=32, launcher="shm", status="ok"):
    return dict(status=status, mode=mode, np=np, images_per_s=ips, model=model, batch=batch,
                launcher=launcher, images_per_s_per_rank=ips / np, step_ms_mean=100.0,
                step_ms_p50=90.0, params=1000, gradient_bytes=4000, transport="shm",
                backend="x")


# --- metrics ----------------------------------------------------------------
def test_step_stats_counts_the_slowest_rank():
    s = metrics.step_stats([2.0, 4.0], [[0.5, 1.5], [1.0, 3.0]], batch=10)
    assert s["elapsed_s"] == 4.0
    assert s["images_per_s"] == pytest.approx(2 * 10 * 2 / 4.0)  # 10
    assert s["images_per_s_per_rank"] == pytest.approx(5.0)
    assert s["rank_images_per_s"] == pytest.approx([10.0, 5.0])
    assert s["step_ms_mean"] == pytest.approx(2000.0)
    assert s["step_ms_p50"] == pytest.approx(2000.0)  # median of per-step maxima 1.0, 3.0


def test_step_stats_rejects_ragged_input():
    with pytest.raises(ValueError):
        metrics.step_stats([1.0, 1.0], [[0.5], [0.5, 0.5]], batch=1)
    with pytest.raises(ValueError):
        metrics.step_stats([1.0], [[0.5], [0.5]], batch=1)


def test_scaling_efficiency_by_hand():
    rs = [rec("hora", 1, 100.0), rec("hora", 2, 180.0), rec("hora", 4, 200.0),
          rec("ddp", 1, 50.0), rec("ddp", 2, 100.0), rec("hora", 2, 150.0, launcher="tcp"),
          rec("hora", 2, 999.0, batch=64), rec("ps", 2, 10.0, status="failed")]
    eff = [metrics.scaling_efficiency(rs, r) for r in rs]
    # 180/(2*100), 200/(4*100), ddp 100/(2*50), tcp falls back to shm np 1: 150/200;
    # batch 64 has no np-1 run; failed has none.
    assert eff[:6] == pytest.approx([1.0, 0.9, 0.5, 1.0, 1.0, 0.75])
    assert eff[6] is None and eff[7] is None
    assert [r["scaling_efficiency"] for r in metrics.with_efficiency(rs)][:3] == \
        pytest.approx([1.0, 0.9, 0.5])


def test_aggregate_keeps_the_median_run_or_the_failure():
    runs = [rec("hora", 2, 30.0), rec("hora", 2, 10.0), rec("hora", 2, 20.0),
            rec("ddp", 2, 5.0), rec("ddp", 2, 7.0),
            rec("ps", 2, 9.0), dict(rec("ps", 2, 0.0, status="failed"), error="boom")]
    got = {r["mode"]: r for r in metrics.aggregate(runs)}
    assert got["hora"]["images_per_s"] == 20.0
    assert got["hora"]["trials_images_per_s"] == [30.0, 10.0, 20.0]
    assert got["ddp"]["images_per_s"] == 5.0  # lower middle of an even count
    assert got["ps"]["status"] == "failed" and got["ps"]["error"] == "boom"
    assert got["ps"]["trials_images_per_s"] == [9.0]


def test_vs_ddp_and_tables():
    rs = [rec("hora", 2, 150.0), rec("ddp", 2, 100.0), rec("ps", 2, 50.0),
          rec("hora", 2, 120.0, launcher="tcp"), rec("ps", 1, 30.0)]
    assert report.vs_ddp(rs, rs[0]) == pytest.approx(1.5)
    assert report.vs_ddp(rs, rs[3]) == pytest.approx(1.2)  # DDP under shm stands in
    rows = report.scaling_rows(rs)
    assert [r[:3] for r in rows] == [["hora", 2, "150.0"], ["ddp", 2, "100.0"],
                                     ["ps", 1, "30.0"], ["ps", 2, "50.0"]]
    assert rows[3][5:] == ["0.83", "0.50"]  # efficiency 50/(2*30), vs DDP 50/100
    assert [r[0] for r in report.transport_rows(rs)] == ["shm", "shm", "shm", "tcp"]


def test_markdown_reports_failures_with_their_output():
    failed = dict(rec("hora", 2, 0.0, launcher="mpich+mpi-transport", status="failed"),
                  error="exited with status 1", command="horarun -np 2 ...",
                  stderr_tail="Traceback\nUnavailableError: no Hora MPI plugin found\n")
    md = report.markdown({"command": "run.py --quick", "records": [rec("hora", 2, 10.0), failed]})
    assert md.startswith("# Hora training study\n\nProduced by:\n\n    run.py --quick\n")
    assert "1 failed" in md
    assert "### resnet18-hora-np2-b32-mpich+mpi-transport" in md
    assert "no Hora MPI plugin found" in md
    assert "| mpich+mpi-transport | hora | shm | x | FAILED |" in md


# --- the plan -----------------------------------------------------------------
@pytest.mark.parametrize("plan", [configs.QUICK, configs.FULL], ids=["quick", "full"])
def test_sweep_covers_every_axis_once(plan):
    cs = configs.sweep(plan)
    assert len(cs) == len(set(cs))
    for mode in configs.MODES:
        assert {c.np for c in cs if c.mode == mode and c.launcher == "shm"
                and c.model == configs.BASE_MODEL and c.batch == configs.BASE_BATCH} \
            == set(plan["nps"])
        assert set(plan["batches"]) <= {c.batch for c in cs if c.mode == mode}
        assert set(plan["models"]) <= {c.model for c in cs if c.mode == mode}
    assert set(plan["hora_launchers"]) == {c.launcher for c in cs if c.mode == "hora"}
    assert set(c.launcher for c in cs) <= set(configs.launchers("/b"))


def test_mpi_launchers():
    ls = configs.launchers("/b")
    assert ls["mpich+mpi-backend"].env == {"HORA_BACKEND": "mpi"}
    assert ls["openmpi+mpi-transport"].horarun_args[:2] == ["--transport", "mpi"]
    assert ls["shm"].mpi_flavour == "none" and ls["openmpi"].mpi_flavour == "openmpi"


# --- workloads ----------------------------------------------------------------
def test_alexnet_smallest_input_is_63():
    model = workloads.build_model("alexnet").eval()
    assert workloads.INPUT_SIZE["alexnet"] == 63
    with torch.no_grad():
        assert model(torch.zeros(1, 3, 63, 63)).shape == (1, workloads.NUM_CLASSES)
        with pytest.raises(RuntimeError):
            model(torch.zeros(1, 3, 62, 62))


# --- training correctness under horarun ---------------------------------------
LR, MOMENTUM, STEPS, BATCH, SEED, NP = 0.5, 0.9, 3, 4, 7, 2


def reference(initial, ranks_used):
    """Momentum SGD on the mean of the gradients of `ranks_used`, by hand."""
    model = workloads.build_model("tiny")
    params = workloads.trainable(model)
    with torch.no_grad():
        for p, v in zip(params, initial):
            p.copy_(v)
    size = workloads.INPUT_SIZE["tiny"]
    data = [workloads.synthetic_batch(r, BATCH, size, seed=SEED) for r in ranks_used]
    bufs = None
    for _ in range(STEPS):
        total = [torch.zeros_like(p) for p in params]
        for x, y in data:
            grads = torch.autograd.grad(F.cross_entropy(model(x), y), params)
            total = [t + g for t, g in zip(total, grads)]
        mean = [t / len(data) for t in total]
        bufs = mean if bufs is None else [MOMENTUM * b + g for b, g in zip(bufs, mean)]
        with torch.no_grad():
            for p, b in zip(params, bufs):
                p.sub_(LR * b)
    return [p.detach().clone() for p in params]


@pytest.mark.skipif(not os.access(HORARUN, os.X_OK), reason="build/bin/horarun not built")
@pytest.mark.parametrize("mode", ["ps", "hora", "ddp"])
def test_mode_matches_sgd_on_averaged_gradients(mode):
    with tempfile.TemporaryDirectory() as tmp:
        result = os.path.join(tmp, "r.json")
        env = dict(os.environ, PYTHONPATH=os.path.join(BUILD, "python"), OMP_NUM_THREADS="1",
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(launch.free_port()))
        argv = [HORARUN, "-np", str(NP), "--timeout", "30", sys.executable,
                os.path.join(HERE, "worker.py"), "--mode", mode, "--model", "tiny",
                "--batch", str(BATCH), "--warmup", "0", "--steps", str(STEPS), "--lr", str(LR),
                "--momentum", str(MOMENTUM), "--seed", str(SEED), "--deadline-s", "40",
                "--dump", tmp, "--result", result]
        proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=90)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        dumps = [torch.load(os.path.join(tmp, "rank%d.pt" % r)) for r in range(NP)]
        with open(result) as f:
            record = json.load(f)
    assert record["mode"] == mode and record["np"] == NP and record["steps"] == STEPS
    initial = dumps[0]["initial"]
    for d in dumps:  # every rank started from the same weights
        for a, b in zip(d["initial"], initial):
            assert torch.equal(a, b)
    want = reference(initial, range(NP))
    alone = reference(initial, [0])  # control: without averaging the answer differs
    assert not all(torch.allclose(a, b, atol=1e-4) for a, b in zip(want, alone))
    for r, d in enumerate(dumps):
        for i, (got, exp) in enumerate(zip(d["final"], want)):
            assert torch.allclose(got, exp, rtol=1e-5, atol=1e-6), \
                "%s: rank %d parameter %d differs from the reference by %g" % (
                    mode, r, i, float((got - exp).abs().max()))
