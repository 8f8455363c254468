"""`cclq bench` runs end to end and reports consistent rows (what it measures, not how fast:
timings are for the benchmark itself to report, never for a test to assert)."""

from __future__ import annotations

import csv
import io
import json

from conftest import run_cli


def _tables(stdout: str) -> list[list[dict[str, str]]]:
    """The CSV tables bench printed one after another (each starts with its header)."""
    tables: list[list[str]] = []
    for line in stdout.splitlines():
        if not tables or line.startswith(("input,", "metric,", "case,")):
            tables.append([])
        tables[-1].append(line)
    return [list(csv.DictReader(io.StringIO("\n".join(t)))) for t in tables]


def test_ingest_bench_reports_every_input_against_raw_ijson(tmp_path):
    result = run_cli("bench", "--sizes", "1", "--ranks", "2", "--workdir", str(tmp_path / "gen"),
                     "--no-metrics", "--repeats", "1", "-f", "csv")
    assert result.returncode == 0, result.stderr
    (rows,) = _tables(result.stdout)
    (row,) = rows
    assert row["input"] == "synthetic 1 MB, 2 ranks" and row["files"] == "2"
    assert 0.8 < float(row["json_mb"]) < 1.2  # the generator hits the size asked for
    # the events counted by the raw parse are the events the generator wrote
    written = sum(1 for p in (tmp_path / "gen").rglob("kineto_trace_*.json")
                  for _ in json.loads(p.read_text())["traceEvents"])
    assert int(row["events"]) == written
    for key in ("raw_ijson_mb_s", "fast_reader_mb_s", "ijson_reader_mb_s", "scan_mb_s", "ingest_j1_mb_s",
                "ingest_j2_mb_s", "peak_rss_j1_mb", "peak_rss_j2_mb"):
        assert float(row[key]) > 0
    for rate, ratio in (("ingest_j1_mb_s", "j1_vs_raw"), ("fast_reader_mb_s", "fast_vs_raw"),
                        ("ijson_reader_mb_s", "ijson_reader_vs_raw")):
        assert abs(float(row[rate]) / float(row["raw_ijson_mb_s"]) - float(row[ratio])) < 0.05


def test_sizes_say_megabytes_and_ranks():
    from cclq.bench import parse_sizes

    assert parse_sizes("250, 1000x1,127x2", 8) == [(250, 8), (1000, 1), (127, 2)]


def test_metric_bench_runs_one_query_and_the_loop_over_the_same_copies():
    result = run_cli("bench", "--no-ingest", "--copies", "1,3", "-f", "csv")
    assert result.returncode == 0, result.stderr
    (rows,) = _tables(result.stdout)
    assert [(r["case"], r["traces"]) for r in rows] == [
        ("communication_overlap_ratio, 1 x 8-rank trace", "1"),
        ("communication_overlap_ratio, 3 x 8-rank trace", "3"),
    ]
    for r in rows:
        assert float(r["one_query_s"]) > 0 and float(r["loop_s"]) > 0
        assert float(r["cli_all_s"]) > 0 and float(r["cli_loop_s"]) > 0
