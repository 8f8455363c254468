"""`cclq bench` runs end to end and reports consistent rows (what it measures, not how fast:
timings are for the benchmark itself to report, never for a test to assert)."""

from __future__ import annotations

import csv
import io
import json
import sys

import pytest
from helpers.cli import run_cli

from cclq.synth.kineto import generate_workload

pytestmark = pytest.mark.slow  # (CONTRIBUTING.md: over ~2 s each)


def _tables(stdout: str) -> list[list[dict[str, str]]]:
    """The CSV tables bench printed one after another (each starts with its header)."""
    tables: list[list[str]] = []
    for line in stdout.splitlines():
        if not tables or line.startswith(("input,", "metric,", "case,")):
            tables.append([])
        tables[-1].append(line)
    return [list(csv.DictReader(io.StringIO("\n".join(t)))) for t in tables]


def test_ingest_bench_reports_every_input_against_raw_ijson(tmp_path):
    result = run_cli(
        "bench",
        "--sizes",
        "1",
        "--ranks",
        "2",
        "--workdir",
        str(tmp_path / "gen"),
        "--no-metrics",
        "--repeats",
        "1",
        "-f",
        "csv",
    )
    assert result.returncode == 0, result.stderr
    (rows,) = _tables(result.stdout)
    (row,) = rows
    assert row["input"] == "synthetic 1 MB, 2 ranks" and row["files"] == "2"
    assert 0.8 < float(row["json_mb"]) < 1.2  # the generator hits the size asked for
    # the events counted by the raw parse are the events the generator wrote
    written = sum(
        1 for p in (tmp_path / "gen").rglob("kineto_trace_*.json") for _ in json.loads(p.read_text())["traceEvents"]
    )
    assert int(row["events"]) == written
    for key in (
        "raw_ijson_mb_s",
        "fast_reader_mb_s",
        "ijson_reader_mb_s",
        "scan_mb_s",
        "ingest_j1_mb_s",
        "ingest_j2_mb_s",
        "peak_rss_j1_mb",
        "peak_rss_j2_mb",
    ):
        assert float(row[key]) > 0
    for rate, ratio in (
        ("ingest_j1_mb_s", "j1_vs_raw"),
        ("fast_reader_mb_s", "fast_vs_raw"),
        ("ijson_reader_mb_s", "ijson_reader_vs_raw"),
    ):
        assert abs(float(row[rate]) / float(row["raw_ijson_mb_s"]) - float(row[ratio])) < 0.05


def test_sizes_say_megabytes_and_ranks():
    from cclq.bench.run import parse_sizes

    assert parse_sizes("250, 1000x1,127x2", 8) == [(250, 8, "relative"), (1000, 1, "relative"), (127, 2, "relative")]
    assert parse_sizes("127x1:epoch,127x1:subns", 8) == [(127, 1, "epoch"), (127, 1, "subns")]
    with pytest.raises(ValueError, match="timestamp form"):
        parse_sizes("127x1:local", 8)


def test_metric_bench_runs_one_query_and_the_loop_over_the_same_copies():
    result = run_cli("bench", "--no-ingest", "--copies", "1,2", "--repeats", "1", "-f", "csv")
    assert result.returncode == 0, result.stderr
    (rows,) = _tables(result.stdout)
    assert [(r["case"], r["traces"]) for r in rows] == [
        ("communication_overlap_ratio, 1 x 8-rank trace", "1"),
        ("communication_overlap_ratio, 2 x 8-rank trace", "2"),
    ]
    for r in rows:
        assert float(r["one_query_s"]) > 0 and float(r["loop_s"]) > 0
        assert float(r["cli_all_s"]) > 0 and float(r["cli_loop_s"]) > 0


def test_board_bench_times_the_four_cases_over_the_copies():
    result = run_cli("bench", "--no-ingest", "--no-metrics", "--board", "3", "--repeats", "1", "-f", "csv")
    assert result.returncode == 0, result.stderr
    (rows,) = _tables(result.stdout)
    assert [(r["case"], r["workloads"], r["computed"]) for r in rows] == [
        ("cold: no cache, no site", "3", "3"),
        ("cached metrics, new site", "3", "3"),
        ("no change", "3", "0"),
        ("one card changed", "3", "1"),
    ]
    assert all(float(r["seconds"]) > 0 for r in rows)


def test_clone_traces_gives_each_copy_its_own_file_ids(tmp_path):
    """Copies must not share file ids: HTA's views join on the file id alone."""
    from helpers.warehouse import query

    from cclq.bench.run import board_warehouse
    from cclq.store.warehouse import Warehouse

    wh = Warehouse(board_warehouse(tmp_path, 3))
    rows = query(wh, "SELECT trace, count(DISTINCT file_id), count(*) FROM files GROUP BY trace ORDER BY trace")
    assert rows == [("synthetic_8rank", 8, 8), ("synthetic_8rank_c001", 8, 8), ("synthetic_8rank_c002", 8, 8)]
    assert query(wh, "SELECT count(DISTINCT file_id) FROM files") == [(24,)]
    per_trace = query(wh, "SELECT trace, count(*) FROM events GROUP BY trace ORDER BY trace")
    assert len({n for _, n in per_trace}) == 1  # every copy has all the events
    assert query(wh, "SELECT count(*) FROM events e JOIN files f USING (trace, rank, file_id)") == [
        (sum(n for _, n in per_trace),)
    ]


def test_scale_bench_ingests_copies_and_checks_the_limited_run(tmp_path):
    from cclq.bench.scale import run_scale_bench

    generate_workload(tmp_path / "src", ranks=2, steps=2, layers=1, seed=9)
    rows = run_scale_bench(
        tmp_path / "src", [1, 3], metrics=("total_kernel_time",), memory_limit="100MB", scratch=tmp_path / "scratch"
    )
    assert [(r["copies"], r["case"]) for r in rows] == [
        (1, "ingest"),
        (1, "total_kernel_time"),
        (3, "ingest"),
        (3, "total_kernel_time"),
        (3, "total_kernel_time --memory-limit 100MB"),
    ]
    assert rows[-1]["same"] is True and all(r["peak_rss_mb"] > 0 for r in rows)
    # three workloads of hard links, each its own trace, all of them ingested
    assert sorted(p.name for p in (tmp_path / "scratch" / "in3").iterdir()) == ["src_c0000", "src_c0001", "src_c0002"]
    from cclq.store.warehouse import Warehouse

    with Warehouse(tmp_path / "scratch" / "wh3").open_snapshot() as snapshot:
        assert snapshot.trace_ids() == ["src_c0000", "src_c0001", "src_c0002"]
        assert snapshot.tables["files"].num_rows == 3 * 2


def test_main_loop_bench_runs_every_call_both_ways(tmp_path):
    from cclq.bench.scale import run_main_loop_bench

    for i in range(2):
        generate_workload(tmp_path / "traces" / f"w{i}", ranks=2, steps=2, layers=1, seed=i)
    rows = run_main_loop_bench(tmp_path / "traces", metrics=("total_kernel_time",))
    assert [r["case"] for r in rows] == [
        "fresh warehouse, warm daemon: first loop",
        "fresh warehouse, warm daemon: repeat loop",
        "fresh warehouse, a process per call: first loop",
        "fresh warehouse, a process per call: repeat loop",
        "ingested, a process per call, results computed",
        "ingested, a process per call, results cached",
        "ingested, warm daemon, results computed",
        "ingested, warm daemon, results cached",
    ]
    assert all(r["calls"] == 2 and r["failed"] == 0 for r in rows)


def test_the_ccl_bench_case_prepares_folders_both_tools_read(tmp_path):
    """`cclq bench --ccl-bench`: the workloads laid out as CCL-Bench's tools read them (JSON
    decompressed, a card with trace types where there is none), and a folder that is not a
    CCL-Bench checkout refused before anything runs."""
    from helpers.paths import require_shared

    from cclq.bench.ccl_bench import SHARED_FOLDERS, prepare_folders, run_ccl_bench_bench
    from cclq.errors import UsageError

    with pytest.raises(UsageError, match="not a CCL-Bench checkout"):
        run_ccl_bench_bench(tmp_path, sys.executable)
    folders = prepare_folders(tmp_path / "folders", require_shared())
    assert [f.name for f in folders] == ["synthetic_mlp_dp4", *SHARED_FOLDERS]
    assert sorted(p.name for p in (tmp_path / "folders" / "synthetic_mlp_dp4").iterdir()) == [
        "kineto_trace_0.json",
        "kineto_trace_1.json",
        "kineto_trace_2.json",
        "kineto_trace_3.json",
        "workload_card.yaml",
    ]
    assert "traces: [nsys]" in (tmp_path / "folders" / "nsys_pipit_hpc" / "workload_card.yaml").read_text()
    assert not list((tmp_path / "folders").rglob("*.gz"))
