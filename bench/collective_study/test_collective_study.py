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
    """The rows of the per-configuration tables (after the summary)."""
    body = md.split("## allreduce", 1)[1] if "## allreduce" in md else md
    return [l for l in body.splitlines() if l.startswith("| ") and not l.startswith("| size")]


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


def test_summary_picks_smallest_nearest_64k_and_largest():
    records = [record(i, s, t, busbw=2.0) for i, s, t in (
        ("hora", 4, 1.0), ("mpi", 4, 2.0), ("gloo_ring", 4, 3.0),
        ("hora", 16384, 4.0), ("mpi", 16384, 2.0),
        ("hora", 65536, 10.0), ("gloo_ring", 65536, 5.0), ("mpi", 65536, 40.0),
        ("hora", 1 << 20, 100.0), ("mpi", 1 << 20, 150.0))]
    records.append(dict(record("hora", 4, 1.0), np=4))  # no peer at np 4: no row
    lines = run.summary(records)
    assert len(lines) == 3
    cells = [c.strip() for c in lines[2].split("|")[1:-1]]
    assert cells[:2] == ["allreduce", "2, shm, openmpi"]
    assert cells[2] == "4 B: 1.0 / 2.0 mpi (2.00)"
    assert cells[3] == "65536 B: 10.0 / 5.0 gloo_ring (0.50)"
    assert cells[4] == "1048576 B: 100.0 / 150.0 mpi (1.50)"
    assert cells[5] == "2.00"
    assert "## Summary" in run.markdown(records, [], "cmd", 1.0)
