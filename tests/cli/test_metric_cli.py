"""`cclq metric` with several metrics, and a repeat answered from the cache without DuckDB."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import pytest
from helpers.cli import invoke, run_cli
from helpers.warehouse import run_ingest

from cclq.query.cache import cache_key, cached_result, metric_key
from cclq.query.metrics import run_metric
from cclq.query.registry import latest_specs, resolve
from cclq.query.session import connect
from cclq.store.warehouse import Warehouse
from cclq.synth.kineto import generate_workload


@pytest.fixture(scope="module")
def two_workloads(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("multi")
    generate_workload(root / "in" / "a", ranks=2, steps=3, layers=2, seed=1)
    generate_workload(root / "in" / "b", ranks=4, steps=3, layers=2, seed=2)
    run_ingest([root / "in"], Warehouse(root / "wh"))
    return root / "wh"


def _csv(text: str) -> list[dict]:
    return list(csv.DictReader(io.StringIO(text)))


def _one(wh: Path, name: str) -> list[dict]:
    result = invoke("metric", name, "--all", "-w", str(wh), "-f", "csv", "--no-cache")
    assert result.returncode == 0, result.stderr
    return _csv(result.stdout)


@pytest.mark.slow
def test_several_metrics_print_one_long_table_of_each_metrics_rows(two_workloads):
    result = invoke("metric", "total_kernel_time", "avg_step_time", "--all", "-w", str(two_workloads), "-f", "csv")
    assert result.returncode == 0, result.stderr
    rows = _csv(result.stdout)
    assert list(rows[0]) == ["metric", "version", "trace", "rank", "step", "value", "unit", "reason", "details"]
    for name in ("total_kernel_time", "avg_step_time"):
        alone = _one(two_workloads, name)
        mine = [r for r in rows if r["metric"] == name]
        assert [(r["trace"], r["rank"], r["value"]) for r in mine] == [
            (r["trace"], r["rank"], r["value"]) for r in alone
        ]
        # the metric's own columns, folded into details
        own = [k for k in alone[0] if k not in ("trace", "rank", "step", "value", "unit", "reason")]
        for r, a in zip(mine, alone):
            details = json.loads(r["details"]) if r["details"] else {}
            assert sorted(details) == sorted(own)
            assert all(str(details[k]) == a[k] or (details[k] is None and a[k] == "") for k in own)
    # total_kernel_time has a row per rank: 2 + 4
    assert sum(r["metric"] == "total_kernel_time" for r in rows) == 6


@pytest.mark.slow
def test_a_category_writes_one_file_per_metric(two_workloads, tmp_path):
    out = tmp_path / "results"
    result = invoke("metric", "--category", "memory", "--all", "-w", str(two_workloads), "-f", "csv", "-o", str(out))
    assert result.returncode == 0, result.stderr
    expected = sorted(s.name for s in latest_specs() if s.category == "memory")
    assert expected and sorted(p.stem for p in out.iterdir()) == expected
    for name in expected:
        assert (out / f"{name}.csv").read_text() == invoke(
            "metric", name, "--all", "-w", str(two_workloads), "-f", "csv"
        ).stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (["--category", "speed"], "no category speed"),
        ([], "say which metrics"),
        (["total_kernel_time", "avg_step_time", "--version", "1"], "--version pins one metric"),
        (["total_kernel_time", "avg_step_time", "-p", "nonsense=1"], "parameter nonsense"),
    ],
)
def test_metric_usage_errors_are_one_line(two_workloads, args, message):
    result = invoke("metric", *args, "--all", "-w", str(two_workloads))
    assert result.returncode == 2
    assert message in result.stderr and "Traceback" not in result.stderr


def test_a_failing_metric_among_several_exits_3_and_the_others_print(two_workloads, monkeypatch):
    from typer.testing import CliRunner

    import cclq.query.metrics as metrics
    from cclq.cli.app import app

    real = metrics._run_query

    def broken(con, spec):  # noqa: ANN001, ANN202
        if spec.name == "avg_step_time":
            raise metrics.QueryError("avg_step_time: it broke")
        return real(con, spec)

    monkeypatch.setattr(metrics, "_run_query", broken)
    result = CliRunner().invoke(
        app,
        ["metric", "total_kernel_time", "avg_step_time", "--all", "--no-cache", "-w", str(two_workloads), "-f", "csv"],
    )
    assert result.exit_code == 3
    rows = _csv(result.stdout.split("cclq: error")[0])
    assert {r["metric"] for r in rows} == {"total_kernel_time"}
    assert "avg_step_time: it broke" in result.output


def test_a_repeat_is_read_back_with_the_key_duckdb_would_compute(two_workloads):
    wh = Warehouse(two_workloads)
    spec = resolve("total_kernel_time")
    for traces in (None, ["b"]):
        con = connect(wh, traces=traces, cache=True)
        computed = run_metric(con, spec)
        with wh.open_snapshot() as snapshot:
            assert metric_key(snapshot.summary, traces, spec, {}) == cache_key(con, spec, {})
        con.close()
        assert cached_result(wh, spec, {}, traces) == computed
    assert cached_result(wh, spec, {"x": "1"}, None) is None  # other parameters: another key


def test_a_repeat_cclq_metric_does_not_start_duckdb(two_workloads):
    """The cached answer comes from Parquet alone: the process never imports duckdb."""
    first = run_cli("metric", "total_kernel_time", "--all", "-w", str(two_workloads), "-f", "csv")
    probe = (
        "import sys; from cclq.cli.app import main\n"
        "try:\n    main()\nexcept SystemExit as e:\n    code = e.code\nelse:\n    code = 0\n"
        "print('duckdb imported' if 'duckdb' in sys.modules else 'no duckdb', file=sys.stderr)\n"
        "sys.exit(code)"
    )
    import subprocess
    import sys

    repeat = subprocess.run(
        [sys.executable, "-c", probe, "metric", "total_kernel_time", "--all", "-w", str(two_workloads), "-f", "csv"],
        capture_output=True,
        text=True,
    )
    assert repeat.returncode == 0, repeat.stderr
    assert repeat.stdout == first.stdout
    assert "no duckdb" in repeat.stderr


def test_metric_rows_come_in_a_total_order(two_workloads):
    """Rows tied on trace/rank/step are ordered by their detail columns, then value: the
    same inputs print the same rows in the same order."""
    con = connect(Warehouse(two_workloads))
    rows = run_metric(con, resolve("hta_kernel_type_breakdown")).to_pylist()
    keys = [(r["trace"], r["kernel_type"] or "", -math.inf if r["value"] is None else r["value"]) for r in rows]
    assert keys == sorted(keys) and len({r["kernel_type"] for r in rows}) > 1
