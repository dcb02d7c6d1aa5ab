# Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
"""The collective study's report: ratios, tables and plots from known records.

    /usr/bin/python3 -m pytest -q bench/collective_study
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402


def record(impl, size, avg_us, busbw=1.0, **kw):
    r = dict(impl=impl, collective="allreduce", size_bytes=size, avg_us=avg_us, p50_us=avg_us,
             busbw_gbps=busbw, wrong=0, np=2, transport="shm", mpi="openmpi",
             limit_kind="memcpy", limit_gbps=10.0)
    r.update(kw)
    return r


def table_rows(md):
    return [l for l in md.splitlines() if l.startswith("| ") and not l.startswith("| size")]


def test_ratio_is_best_peer_time_over_hora_time():
    records = [record("hora", 4, 10.0), record("mpi", 4, 30.0), record("gloo_ring", 4, 25.0),
               record("hora", 1024, 40.0), record("mpi", 1024, 20.0)]
    rows = table_rows(run.markdown(records, [], "cmd", 1.0))
    assert rows[0].split("|")[-2].strip() == "2.50"  # 25 / 10
    assert rows[1].split("|")[-2].strip() == "0.50"  # 20 / 40
    assert rows[1].split("|")[1].strip() == "1K"


def test_wrong_elements_and_errors_are_shown():
    records = [record("hora", 4, 10.0, wrong=3),
               dict(impl="torch", collective="allreduce", error="no average", np=2,
                    transport="shm", mpi="openmpi", size_bytes=0)]
    md = run.markdown(records, ["allgather np 4: timed out"], "cmd", 1.0)
    assert "(3 wrong)" in md
    assert "Not measured: torch: no average" in md
    assert "allgather np 4: timed out" in md


def test_plots_render(tmp_path):
    records = [record(i, s, 1.0, busbw=s / 1e6) for i in ("hora", "mpi") for s in (4, 64, 1024)]
    paths = run.plot(records, str(tmp_path))
    assert [os.path.basename(p) for p in paths] == ["collectives_allreduce.png"]
    with open(paths[0], "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
