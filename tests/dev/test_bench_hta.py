"""The HTA comparison benchmark (cclq/bench/hta.py): the shape of its rows on a tiny trace.

The cclq side always runs. The HTA side runs only when ``CCLQ_HTA_PYTHON`` names an
interpreter that has HolisticTraceAnalysis 0.5.0 (it is not a cclq dependency).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cclq.bench.hta import (
    ALL_ANALYSES,
    HTA_METRICS,
    format_table,
    hta_metric_names,
    run_hta_all_bench,
    run_hta_bench,
)
from cclq.query.registry import registry
from cclq.synth.kineto import KinetoTraceBuilder

COLUMNS = {
    "case",
    "seconds",
    "wall_s",
    "peak_rss_mb",
    "speedup_vs_hta",
    "wall_speedup_vs_hta",
    "memory_ratio_vs_hta",
    "detail",
    "errors",
}


def tiny_workload(root: Path) -> Path:
    """One rank: a step holding a GEMM launch and an all-reduce on a second stream."""
    folder = root / "tiny_bench"
    b = KinetoTraceBuilder(rank=0, world_size=1)
    b.profiler_step(1, ts=0, dur=10_000)
    b.cpu_op("aten::mm", ts=100, dur=800)
    b.kernel("gemm", ts=1_000, dur=3_000, stream=7, launch_ts=200)
    b.nccl_kernel("allreduce", 2_000, 4_000, stream=20, nelems=1024, dtype="Float", group_size=1, seq=0)
    b.write(folder / "rank0.json")
    return folder


def test_default_metrics_are_the_hta_parity_ones_that_exist() -> None:
    have = registry()
    assert hta_metric_names() == [m for m in HTA_METRICS if m in have]


def test_cclq_side_rows(tmp_path: Path) -> None:
    folder = tiny_workload(tmp_path)
    # a metric outside the HTA set, so this test does not depend on those being finished
    rows = run_hta_bench([folder], hta_python=None, repeats=1, metrics=["wall_time_s"])
    assert [r["case"] for r in rows] == [
        "cclq first run: ingest + metrics",
        "cclq repeat run: built warehouse, metrics computed",
        "cclq repeat run: built warehouse, cached results",
    ]
    first, repeat, cached = rows
    for r in rows:
        assert set(r) == COLUMNS
        assert r["errors"] == ""
        assert 0 < r["seconds"] <= r["wall_s"]  # work is timed inside the child
        assert r["peak_rss_mb"] > 10  # a Python process with duckdb loaded
        assert r["speedup_vs_hta"] is None and r["memory_ratio_vs_hta"] is None  # no HTA side
        assert "wall_time_s" in r["detail"]
    assert "1 ingested" in first["detail"]
    assert "1 unchanged" in repeat["detail"]  # the second run reuses the warehouse
    table = format_table(rows)
    assert table.splitlines()[0].split()[:4] == ["case", "seconds", "wall_s", "peak_rss_mb"]


def test_reports_a_failing_metric_instead_of_crashing(tmp_path: Path) -> None:
    folder = tiny_workload(tmp_path)
    first, _, _ = run_hta_bench([folder], hta_python=None, repeats=1, metrics=["no_such_metric"])
    assert "no_such_metric" in first["errors"]


def test_a_missing_hta_interpreter_is_an_error_row(tmp_path: Path) -> None:
    folder = tiny_workload(tmp_path)
    rows = run_hta_bench([folder], hta_python=str(tmp_path / "no-python"), repeats=1, metrics=["wall_time_s"])
    total, first, _repeat, _cached, per_folder = rows
    assert total["case"].startswith("HTA ")
    assert "tiny_bench" in total["errors"] and per_folder["errors"]
    assert first["errors"] == ""


@pytest.mark.skipif(not os.environ.get("CCLQ_HTA_PYTHON"), reason="set CCLQ_HTA_PYTHON to an interpreter with HTA")
def test_hta_side(tmp_path: Path) -> None:
    folder = tiny_workload(tmp_path)
    rows = run_hta_bench([folder], hta_python=os.environ["CCLQ_HTA_PYTHON"], repeats=1, metrics=["wall_time_s"])
    total, first, repeat, _cached, per_folder = rows
    assert total["case"].startswith("HTA 0.5.0")
    assert per_folder["case"].strip() == "HTA tiny_bench"
    assert "load" in per_folder["detail"]
    assert total["speedup_vs_hta"] == 1.0
    assert first["speedup_vs_hta"] == round(total["seconds"] / first["seconds"], 2)
    assert repeat["memory_ratio_vs_hta"] == round(repeat["peak_rss_mb"] / total["peak_rss_mb"], 2)


def test_rank_copies_make_a_multi_rank_set(tmp_path: Path) -> None:
    """N copies of one trace, each saying its own rank (what the 430 MB comparison uses)."""
    import gzip
    import json

    from cclq.bench.hta import rank_copies

    src = tmp_path / "t.json.gz"
    src.write_bytes(
        gzip.compress(
            json.dumps(
                {
                    "distributedInfo": {"backend": "nccl", "rank": 1, "world_size": 2},
                    "traceEvents": [{"ph": "X", "ts": 1}],
                }
            ).encode()
        )
    )
    folder = rank_copies(src, 3, tmp_path / "sets")
    docs = [json.loads(gzip.decompress((folder / f"rank{r}.json.gz").read_bytes())) for r in range(3)]
    assert [d["distributedInfo"] for d in docs] == [{"backend": "nccl", "rank": r, "world_size": 3} for r in range(3)]
    assert all(d["traceEvents"] == [{"ph": "X", "ts": 1}] for d in docs)
    assert rank_copies(src, 3, tmp_path / "sets") == folder  # made once


def two_rank_workload(root: Path) -> Path:
    """Two ranks, three steps each (HTA analyses the first two): in each step an aten::mm
    that launches a GEMM, and an all-reduce whose kernel (``ncclKernel...``, the names HTA's
    straggler analysis looks for) starts later on rank 1: every analysis has an answer."""
    folder = root / "two_rank_bench"
    for rank in (0, 1):
        b = KinetoTraceBuilder(rank=rank, world_size=2)
        for step in range(3):
            start = step * 10_000
            b.profiler_step(step + 1, ts=start, dur=10_000)
            b.cpu_op("aten::mm", ts=start + 100, dur=800)
            b.kernel("gemm", ts=start + 1_000, dur=3_000, stream=7, launch_ts=start + 200, launch_dur=300)
            b.nccl_kernel(
                "allreduce",
                start + 2_000 + 500 * rank,
                4_000,
                stream=20,
                launch_ts=start + 950,
                kernel_name="ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)",
            )
        b.write(folder / f"rank{rank}.json")
    return folder


def test_every_shared_analysis_rows_without_hta(tmp_path: Path) -> None:
    """--hta-all's rows on a small trace with no HTA interpreter: the HTA row says why,
    the three cclq.TraceAnalysis rows time every analysis of ALL_ANALYSES without error.
    cclq.TraceAnalysis answers in pandas and its analyses import plotly: the hta extra."""
    pytest.importorskip("pandas", reason="the hta extra is not installed (pip install -e '.[hta]')")
    pytest.importorskip("plotly", reason="the hta extra is not installed (pip install -e '.[hta]')")
    folder = two_rank_workload(tmp_path)
    hta, first, again, cached = run_hta_all_bench(folder, str(tmp_path / "no-python"), repeats=1)
    assert hta["case"].startswith("HTA ") and "cannot start" in hta["errors"]
    for row in (first, again, cached):
        assert row["errors"] == "", row["errors"]
        assert all(f"{name} " in row["detail"] for name in ("load", *ALL_ANALYSES)), row["detail"]
        assert row["cpu_s"] > 0 and row["peak_rss_mb"] > 10
        assert row["cpu_speedup_vs_hta"] is None  # no HTA figure to compare with
    assert "cached" in cached["case"] and "cache=False" in again["case"]
