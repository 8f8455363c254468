"""A metric that fails (its SQL does not run) is never shown as "not applicable": report,
diff and board list it as failed with its error, name it on stderr and exit 3, as
`cclq metric` does; the rest of their output is still written."""

from __future__ import annotations

import json

import pytest
from helpers.warehouse import run_ingest
from typer.testing import CliRunner

import cclq.query.metrics as metrics
from cclq.cli.app import app
from cclq.store.warehouse import Warehouse
from cclq.synth.kineto import generate_rank_trace

BROKEN = "total_kernel_time"  # applies to every GPU trace: a failure cannot pass for "n/a"


@pytest.fixture
def two_runs(tmp_path, monkeypatch):
    wh = Warehouse(tmp_path / "wh")
    for name in ("a", "b"):
        for rank in range(2):
            generate_rank_trace(tmp_path / "in" / name / f"rank{rank}.json", rank=rank, world_size=2, steps=2)
    run_ingest([tmp_path / "in"], wh)
    real = metrics._run_query

    def broken(con, spec):  # noqa: ANN001, ANN202
        if spec.name == BROKEN:
            raise metrics.QueryError(f"{spec.label}: it broke")
        return real(con, spec)

    monkeypatch.setattr(metrics, "_run_query", broken)
    return wh


def _run(*args: str):
    return CliRunner().invoke(app, [*args, "--no-cache"])


@pytest.mark.slow
def test_report_lists_a_failed_metric_as_failed_and_exits_3(two_runs):
    table = _run("report", "a", "-w", str(two_runs.root))
    assert table.exit_code == 3
    assert "1 FAILED" in table.stdout and "it broke" in table.stdout
    not_applicable = next(line for line in table.stdout.splitlines() if "not applicable:" in line)
    assert BROKEN not in not_applicable
    assert f"cclq: error: {BROKEN}" in table.stderr
    data = json.loads(_run("report", "a", "-w", str(two_runs.root), "-f", "json").stdout)
    assert [f["metric"] for f in data["metrics_failed"]] == [BROKEN]
    entry = next(e for g in data["categories"] for e in g["metrics"] if e["metric"] == BROKEN)
    assert entry["failed"] and entry["value"] is None
    applied = sum(e["value"] is not None for g in data["categories"] for e in g["metrics"])
    assert data["metrics_applied"] == applied
    assert data["metrics_applied"] + data["metrics_not_applicable"] + 1 == sum(
        len(g["metrics"]) for g in data["categories"]
    )


@pytest.mark.slow
def test_diff_lists_a_failed_metric_and_exits_3(two_runs):
    table = _run("diff", "a", "b", "-w", str(two_runs.root))
    assert table.exit_code == 3
    assert f"failed: {BROKEN}" in table.stdout and f"cclq: error: {BROKEN}" in table.stderr
    data = json.loads(_run("diff", "a", "b", "-w", str(two_runs.root), "-f", "json").stdout)
    assert [f["metric"] for f in data["failed"]] == [BROKEN]
    assert BROKEN not in {m["metric"] for m in data["metrics"]}
    csv = _run("diff", "a", "b", "-w", str(two_runs.root), "-f", "csv")
    assert csv.exit_code == 3 and f"metric,{BROKEN},,,,,,,,,,,,,,failed," in csv.stdout


def test_board_shows_failed_on_the_pages_and_exits_3(two_runs, tmp_path):
    out = tmp_path / "site"
    done = _run("board", str(out), "-w", str(two_runs.root), "--all-metrics")
    assert done.exit_code == 3
    assert f"cclq: error: {BROKEN}" in done.stderr
    page = (out / "w" / "a.html").read_text()
    assert 'class="na failed"' in page and "it broke" in page
    data = json.loads((out / "data" / "a.json").read_text())
    assert [f["metric"] for f in data["metrics_failed"]] == [BROKEN]
