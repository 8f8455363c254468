"""`cclq bench --large-rank` (issue 42): one generated rank, its ingest, each metric and the
report in processes of their own, with the ratios the targets are stated in."""

from __future__ import annotations

import pytest

from cclq.bench.large_rank import parse_inputs, run_large_rank_bench, same_rows

pytestmark = pytest.mark.slow  # (CONTRIBUTING.md: over ~2 s each)


def test_one_small_rank_every_case_timed(tmp_path):
    rows = run_large_rank_bench(parse_inputs("2", None), tmp_path, ["total_kernel_time"], timeout_s=300, board=True)
    cases = ["ingest", "total_kernel_time", "report", "report --memory-limit 500MB", "board"]
    assert [r["case"] for r in rows] == cases
    # the limited report's JSON was compared with the unlimited one's, and matched
    assert [r["same_rows"] for r in rows] == [None, None, None, True, None]
    events = rows[0]["events"]
    assert events > 1000 and all(r["events"] == events for r in rows)
    for r in rows:
        assert r["exit"] == 0, r["error"]
        assert r["wall_s"] > 0 and r["cpu_s"] > 0 and r["peak_rss_mb"] > 0
        assert r["us_per_event"] == round(r["wall_s"] / events * 1e6, 3)
        assert r["vs_ingest_wall"] == round(r["wall_s"] / rows[0]["wall_s"], 2)
        assert r["per_event_vs_prev"] is None  # one size: nothing to compare with


def test_inputs_sizes_ranks_and_folders():
    assert parse_inputs("32,2000x8", "/a/owl,/b/hta_df:x8") == [
        ("32 MB", 32, 1, None),
        ("8 x 250 MB", 2000, 8, None),
        ("owl", 0, 0, "/a/owl"),
        ("hta_df x8", 0, 8, "/b/hta_df"),
    ]


def test_same_rows_allows_only_the_last_bits_of_floats():
    a = {"metrics": [{"value": 0.1 + 0.2, "n": 3, "name": "x"}]}
    assert same_rows(a, {"metrics": [{"value": 0.3, "n": 3, "name": "x"}]})
    assert not same_rows(a, {"metrics": [{"value": 0.3001, "n": 3, "name": "x"}]})
    assert not same_rows(a, {"metrics": [{"value": 0.3, "n": 4, "name": "x"}]})
    assert not same_rows(a, {"metrics": []})


def test_startup_guard_reads_import_times():
    """`cclq bench --startup` reads `-X importtime`: the import of cclq.cli.app costs
    something, and a module already imported by it costs nothing more."""
    from cclq.bench.startup import import_seconds

    assert import_seconds("cclq.cli.app") > 0
    assert import_seconds("cclq.errors", after="cclq.cli.app") == 0  # cclq.cli.app imports it
