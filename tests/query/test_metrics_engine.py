"""The metric engine: headers, versions, parameters, scope, output contract, CCL-Bench entry point."""

from __future__ import annotations

import csv
import io
import textwrap
from pathlib import Path

import pytest
from helpers.cli import invoke
from helpers.paths import REPO
from helpers.warehouse import run_every_version, run_ingest

from cclq.errors import UsageError
from cclq.query.metrics import run_metric
from cclq.query.registry import forget_metric_files, parse_metric_file, registry, resolve
from cclq.query.session import connect
from cclq.synth.kineto import KinetoTraceBuilder


def _two_traces(root: Path) -> None:
    """Trace `a`: two ranks; trace `b`: one rank, with a card that says 16 chips."""
    for r in range(2):
        b = KinetoTraceBuilder(rank=r, world_size=2)
        b.kernel("gemm", ts=1_000, dur=4_000)
        b.write(root / "a" / f"rank{r}.json")
    b = KinetoTraceBuilder(rank=0, world_size=1)
    b.kernel("gemm", ts=0, dur=2_000)
    b.write(root / "b" / "rank0.json")
    (root / "b" / "workload_card.yaml").write_text("workload:\n  hardware:\n    xpu_spec:\n      total_count: 16\n")


@pytest.fixture
def two(tmp_path, wh):
    _two_traces(tmp_path / "in")
    run_ingest([tmp_path / "in"], wh)
    return wh


@pytest.mark.slow
def test_every_shipped_metric_file_parses_and_compiles(two):
    assert registry(), "no metrics found"
    for name, versions in registry().items():
        assert sorted(versions) == list(range(1, max(versions) + 1)), f"{name}: versions must be contiguous"
        for spec in versions.values():
            assert spec.description and spec.unit and spec.grain
    # each compiles and runs on a small warehouse
    runs = run_every_version(connect(two))
    assert len(runs) == sum(len(versions) for versions in registry().values())
    for label, run in runs.items():
        assert run.error is None and run.table is not None, (label, run.error)
        assert run.table.column_names[:6] == ["trace", "rank", "step", "value", "unit", "reason"], label


def test_header_and_path_must_agree(tmp_path):
    bad = tmp_path / "my_metric" / "v2.sql"
    bad.parent.mkdir()
    bad.write_text(
        "-- metric: my_metric\n-- version: 1\n-- unit: s\n-- grain: rank\n-- category: compute\n"
        "-- polarity: neutral\n-- description: x\nSELECT 1"
    )
    with pytest.raises(ValueError, match="the path says otherwise"):
        parse_metric_file(bad)


def test_header_values_are_checked(tmp_path):
    """category and polarity are required and must be known values (reports group and sort by them)."""
    path = tmp_path / "m" / "v1.sql"
    path.parent.mkdir()
    base = "-- metric: m\n-- version: 1\n-- unit: s\n-- grain: rank\n-- description: x\n"
    path.write_text(base + "-- polarity: lower\nSELECT 1")
    with pytest.raises(ValueError, match="header lacks category"):
        parse_metric_file(path)
    path.write_text(base + "-- category: speed\n-- polarity: lower\nSELECT 1")
    with pytest.raises(ValueError, match="category must be one of"):
        parse_metric_file(path)
    path.write_text(base + "-- category: compute\n-- polarity: up\nSELECT 1")
    with pytest.raises(ValueError, match="polarity must be one of"):
        parse_metric_file(path)
    path.write_text(base + "-- category: compute\n-- polarity: lower\n-- leaderboard: fun\nSELECT 1")
    with pytest.raises(ValueError, match="leaderboard must be one of"):
        parse_metric_file(path)
    path.write_text(base + "-- category: compute\n-- polarity: lower\n-- leaderboard: memory\nSELECT 1")
    spec = parse_metric_file(path)
    assert (spec.category, spec.polarity, spec.leaderboard) == ("compute", "lower", "memory")


def test_unknown_metric_and_version_are_usage_errors():
    with pytest.raises(UsageError, match="unknown metric"):
        resolve("no_such_metric")
    with pytest.raises(UsageError, match="has no version 99"):
        resolve("total_kernel_time", 99)


def test_latest_version_runs_unless_pinned(tmp_path, monkeypatch, two):
    # a private metrics folder with v1 and v2 of one metric
    sql = tmp_path / "sql"
    sql.mkdir()
    (sql / "views").symlink_to(REPO / "sql" / "views")
    d = sql / "metrics" / "demo"
    d.mkdir(parents=True)
    header = (
        "-- metric: demo\n-- version: {v}\n-- unit: count\n-- grain: trace\n-- category: compute\n"
        "-- polarity: neutral\n-- description: demo\n"
    )
    (d / "v1.sql").write_text(header.format(v=1) + "SELECT trace, 1 AS value FROM metric_scope GROUP BY trace")
    (d / "v2.sql").write_text(header.format(v=2) + "SELECT trace, 2 AS value FROM metric_scope GROUP BY trace")
    monkeypatch.setattr("cclq.query.registry.sql_root", lambda: sql)
    forget_metric_files()
    try:
        con = connect(two)
        assert {r["value"] for r in run_metric(con, resolve("demo")).to_pylist()} == {2.0}
        assert {r["value"] for r in run_metric(con, resolve("demo", 1)).to_pylist()} == {1.0}
    finally:
        forget_metric_files()


def test_params_come_from_the_command_line_then_the_card_then_the_default(tmp_path, monkeypatch, two):
    sql = tmp_path / "sql"
    sql.mkdir()
    (sql / "views").symlink_to(REPO / "sql" / "views")
    d = sql / "metrics" / "chips"
    d.mkdir(parents=True)
    d.joinpath("v1.sql").write_text(
        textwrap.dedent("""\
        -- metric: chips
        -- version: 1
        -- unit: count
        -- grain: trace
        -- category: compute
        -- polarity: neutral
        -- description: echo n_chips
        -- params: n_chips = card.total_count, scale default 3
        SELECT trace, n_chips * scale AS value,
               CASE WHEN n_chips IS NULL THEN 'needs n_chips' END AS reason
        FROM metric_params
    """)
    )
    monkeypatch.setattr("cclq.query.registry.sql_root", lambda: sql)
    forget_metric_files()
    try:
        con = connect(two)
        rows = {r["trace"]: (r["value"], r["reason"]) for r in run_metric(con, resolve("chips")).to_pylist()}
        assert rows == {"a": (None, "needs n_chips"), "b": (48.0, None)}  # b: card 16 x default 3
        rows = {r["trace"]: r["value"] for r in run_metric(con, resolve("chips"), {"n_chips": "2"}).to_pylist()}
        assert rows == {"a": 6.0, "b": 6.0}  # --param wins over the card
        with pytest.raises(UsageError, match="takes no parameter"):
            run_metric(con, resolve("chips"), {"bogus": "1"})
    finally:
        forget_metric_files()


def test_a_param_that_is_not_a_number_is_a_usage_error(two):
    """`--param n_chips=abc` must not quietly fall back to the card or the default."""
    con = connect(two)
    for bad in ("abc", "", "nan", "inf", "1e999"):
        with pytest.raises(UsageError, match=rf"--param n_chips={bad!r}: hockney_alpha_s v1 needs a finite number"):
            run_metric(con, resolve("hockney_alpha_s"), {"n_chips": bad})
    # a number in any float spelling is taken as given (trace b's card says 16)
    table = run_metric(con, resolve("hockney_alpha_s"), {"n_chips": "8.0"})
    rows = {r["trace"]: r["n_chips"] for r in table.to_pylist()}
    assert rows == {"a": 8.0, "b": 8.0}
    rows = {
        r["trace"]: r["value"]
        for r in run_metric(con, resolve("flops_per_token_used"), {"model_params": "7e9"}).to_pylist()
    }
    assert set(rows) == {"a", "b"}  # not XLA traces: no value, but the parameter was accepted
    # the CLI: exit code 2 and the parameter named, before any work
    result = invoke("metric", "flops_per_token_used", "--all", "-w", str(two.root), "--param", "model_params=abc")
    assert result.returncode == 2
    assert "--param model_params='abc'" in result.stderr and "needs a finite number" in result.stderr
    assert not list(two.cache_dir.glob("flops_per_token_used.*")) if two.cache_dir.exists() else True


def test_trace_selection_restricts_every_relation(two):
    con = connect(two, traces=["b"])
    table = run_metric(con, resolve("total_kernel_time"))
    assert [(r["trace"], r["rank"], r["value"]) for r in table.to_pylist()] == [("b", 0, 2e-06)]


def test_cli_metric_csv_is_exactly_the_documented_columns(two):
    result = invoke("metric", "total_kernel_time", "--all", "-w", str(two.root), "-f", "csv")
    assert result.returncode == 0, result.stderr
    rows = list(csv.reader(io.StringIO(result.stdout)))
    assert rows[0] == ["trace", "rank", "step", "value", "unit", "reason", "kernels"]
    # 4 us of kernel on each rank of `a`, 2 us on `b`
    assert rows[1:] == [
        ["a", "0", "", "4e-06", "s", "", "1"],
        ["a", "1", "", "4e-06", "s", "", "1"],
        ["b", "0", "", "2e-06", "s", "", "1"],
    ]


def test_cli_metric_needs_a_selection_and_known_traces(two):
    assert invoke("metric", "total_kernel_time", "-w", str(two.root)).returncode == 2
    result = invoke("metric", "total_kernel_time", "--trace", "zzz", "-w", str(two.root))
    assert result.returncode == 2 and "no trace 'zzz'" in result.stderr
    result = invoke("metric", "nope", "--all", "-w", str(two.root))
    assert result.returncode == 2 and "unknown metric 'nope'" in result.stderr


def test_cli_metrics_lists_every_metric():
    result = invoke("metrics", "-f", "csv")
    names = [r["metric"] for r in csv.DictReader(io.StringIO(result.stdout))]
    assert names == sorted(registry())


def test_cclbench_entry_point_prints_the_number_last(tmp_path):
    _two_traces(tmp_path / "in")
    env = {"CCLQ_WAREHOUSE": str(tmp_path / "wh")}
    import subprocess
    import sys

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "cclq.main", *args],
            capture_output=True,
            text=True,
            env={**__import__("os").environ, **env},
        )

    result = run("--trace", str(tmp_path / "in" / "a"), "--metric", "total_kernel_time")
    assert result.returncode == 0, result.stderr
    assert float(result.stdout.strip().splitlines()[-1]) == pytest.approx(8e-06)  # summary: sum of 2 ranks
    result = run("--trace", str(tmp_path / "in" / "a"), "--metric", "avg_step_time")
    assert result.stdout.strip().splitlines()[-1] == "nan"
    assert "no steps (no ProfilerStep#N annotations, no inference engine iterations, no XLA steps)" in result.stderr
    result = run("--trace", str(tmp_path / "in"), "--metric", "total_kernel_time")  # two workloads
    assert result.returncode == 2 and "holds 2 workloads" in result.stderr


def test_cached_results_are_reused_and_never_stale(tmp_path, wh):
    _two_traces(tmp_path / "in")
    run_ingest([tmp_path / "in"], wh)
    spec = resolve("total_kernel_time")
    first = run_metric(connect(wh, cache=True), spec)
    (entry,) = wh.cache_dir.glob("total_kernel_time.v1.*.parquet")
    # a hit returns the stored table: prove it by planting a marker in the stored file
    import pyarrow as pa
    import pyarrow.parquet as pq

    marked = first.set_column(3, "value", pa.array([42.0] * first.num_rows))
    pq.write_table(marked, entry)
    assert {r["value"] for r in run_metric(connect(wh, cache=True), spec).to_pylist()} == {42.0}
    # a changed input re-ingests, which clears the cache, and the key changes anyway
    b = KinetoTraceBuilder(rank=0, world_size=1)
    b.kernel("gemm", ts=0, dur=7_000)
    b.write(tmp_path / "in" / "b" / "rank0.json")
    run_ingest([tmp_path / "in"], wh)
    rows = {(r["trace"], r["rank"]): r["value"] for r in run_metric(connect(wh, cache=True), spec).to_pylist()}
    assert rows == {("a", 0): 4e-06, ("a", 1): 4e-06, ("b", 0): 7e-06}


def test_cli_no_cache_computes_again(two):
    invoke("metric", "total_kernel_time", "--all", "-w", str(two.root), "-f", "csv")
    assert list(two.cache_dir.glob("total_kernel_time.v1.*.parquet"))
    assert list(two.cache_dir.glob("total_kernel_time.v1.*.rows.json"))
    for entry in two.cache_dir.glob("*.*"):  # the result and its rows as JSON
        entry.write_bytes(b"corrupt")  # a hit would fail to read this
    result = invoke("metric", "total_kernel_time", "--all", "-w", str(two.root), "-f", "csv", "--no-cache")
    assert result.returncode == 0, result.stderr
    assert all(e.read_bytes() == b"corrupt" for e in two.cache_dir.glob("*.*"))  # not even read
    # and an unreadable entry is recomputed, not a crash
    result = invoke("metric", "total_kernel_time", "--all", "-w", str(two.root), "-f", "csv")
    assert result.returncode == 0 and result.stdout.splitlines()[1] == "a,0,,4e-06,s,,1"


def test_connections_and_the_shell_read_the_files_of_one_snapshot(tmp_path, wh):
    """A connection and the shell's script name exactly the data files of the current
    snapshot (no directory listing, no glob): both read the same rows, for all traces
    and for a selection, and a connection keeps reading its snapshot after more ingests."""
    import duckdb

    from cclq.query.engine import setup_script

    _two_traces(tmp_path / "in")
    run_ingest([tmp_path / "in"], wh)
    count = "SELECT trace, rank, count(*) FROM events GROUP BY ALL ORDER BY ALL"
    for traces in (None, ["a"]):
        with wh.open_snapshot() as snap:
            script = setup_script(snap, traces)
            events = next(line for line in script.splitlines() if "VIEW events" in line)
            assert "*" not in events.split("read_parquet")[1]
            # every events data file of the selected traces, once (small files of one trace
            # may share one data file: see cclq/ingest/run.py, groups)
            parts = snap.tables["parts"].to_pylist()
            files = {
                p["path"] for p in parts if p["table_name"] == "events" and (traces is None or p["trace"] in traces)
            }
            assert events.count(".parquet'") == len(files) >= (2 if traces is None else 1)
            rows = duckdb.connect().execute(script).execute(count).fetchall()
        assert connect(wh, traces=traces).execute(count).fetchall() == rows
        assert {r[0] for r in rows} == ({"a", "b"} if traces is None else {"a"})
    old = connect(wh)
    before = old.execute(count).fetchall()
    b = KinetoTraceBuilder(rank=0, world_size=1)
    for i in range(5):
        b.kernel("gemm", ts=i * 3_000, dur=1_000)
    b.write(tmp_path / "in" / "b" / "rank0.json")
    run_ingest([tmp_path / "in"], wh)
    assert old.execute(count).fetchall() == before  # its snapshot's files are still there
    assert connect(wh).execute(count).fetchall() != before


def test_connections_draw_no_progress_bar_on_stdout(two):
    """DuckDB's bar goes to stdout for queries past 2 s, into CSV a user redirects; the
    slow query that shows it is too slow for a test, so the setting is checked."""
    from cclq.query.session import connect

    con = connect(two)
    try:
        assert con.execute("SELECT current_setting('enable_progress_bar')").fetchone() == (False,)
    finally:
        con.close()
