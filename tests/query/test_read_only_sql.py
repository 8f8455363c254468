"""`cclq sql` is read-only by construction: every statement type DuckDB's parser knows, in
every wrapper, is refused or leaves every byte of the warehouse as it was; and text from a
path (the warehouse's own) never becomes SQL or a shell command."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import duckdb
import pytest
from helpers.cli import invoke, run_cli
from helpers.traces import write_trace
from helpers.warehouse import run_ingest

from cclq.errors import QueryError
from cclq.query.session import connect
from cclq.store.warehouse import Warehouse

EVENTS = [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10, "dur": 5, "args": {"stream": 7}}]


def _warehouse_bytes(root: Path) -> dict[str, str]:
    """Every file of the warehouse but the scratch folders, by content hash."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in ("spill", "tmp", "cache")]
        for name in filenames:
            path = Path(dirpath) / name
            out[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Warehouse:
    root = tmp_path_factory.mktemp("ro")
    write_trace(root / "in" / "work" / "rank0.json", EVENTS)
    wh = Warehouse(root / "wh")
    run_ingest([root / "in"], wh)
    return wh


def _hostile(wh: Warehouse) -> dict[str, str]:
    """One or more statements of each kind, aimed at the warehouse's own files."""
    current = wh.root / "CURRENT"
    data = next((wh.root / "events").rglob("*.parquet"))
    catalog = next((wh.root / "catalog").rglob("files.parquet"))
    return {
        "SELECT": "SELECT count(*) FROM events",
        "SELECT from a file elsewhere": "SELECT * FROM read_text('/etc/hostname')",
        "COPY": f"COPY (SELECT 1 AS x) TO '{data}' (FORMAT parquet)",
        "COPY catalog": f"COPY (SELECT 1 AS x) TO '{catalog}' (FORMAT parquet, USE_TMP_FILE false)",
        "COPY_DATABASE": "ATTACH ':memory:' AS a; COPY FROM DATABASE memory TO a",
        "EXPLAIN COPY": f"EXPLAIN COPY (SELECT 1) TO '{data}' (FORMAT parquet)",
        "EXPLAIN ANALYZE COPY": (
            f"EXPLAIN ANALYZE COPY (SELECT 2.0 AS dur_ns) TO '{data}' (FORMAT parquet, USE_TMP_FILE false)"
        ),
        "EXPLAIN (FORMAT) ANALYZE COPY": f"EXPLAIN (ANALYZE, FORMAT json) COPY (SELECT 1) TO '{data}'",
        "comment then EXPLAIN ANALYZE": f"/* x */ -- y\nEXPLAIN ANALYZE COPY (SELECT 1) TO '{current}'",
        "EXPLAIN EXPLAIN": f"EXPLAIN EXPLAIN ANALYZE COPY (SELECT 1) TO '{current}'",
        "CTE then COPY": f"WITH x AS (SELECT 1) SELECT * FROM x; COPY (SELECT 1) TO '{current}'",
        "CREATE": "CREATE TABLE t AS SELECT 1",
        "CREATE_FUNC": "CREATE MACRO m(x) AS x + 1",
        "PIVOT (creates an enum)": "PIVOT events ON name",
        "INSERT": "INSERT INTO files SELECT * FROM files",
        "UPDATE": "UPDATE files SET rank = 3",
        "DELETE": "DELETE FROM files",
        "MERGE_INTO": "MERGE INTO files USING files AS s ON false WHEN NOT MATCHED THEN INSERT *",
        "ALTER": "ALTER TABLE files RENAME TO f2",
        "DROP": "DROP VIEW events",
        "ATTACH": f"ATTACH '{wh.root / 'x.duckdb'}' AS x",
        "DETACH": "DETACH memory",
        "SET": "SET enable_external_access = true",
        "RESET": "RESET allowed_paths",
        "VARIABLE_SET": "SET VARIABLE v = 1",
        "PRAGMA": "PRAGMA enable_profiling",
        "PRAGMA as SELECT": "PRAGMA version",
        "CALL": "CALL pragma_version()",
        "CHECKPOINT": "CHECKPOINT",
        "LOAD": "LOAD httpfs",
        "INSTALL": "INSTALL httpfs",
        "EXPORT": f"EXPORT DATABASE '{wh.root / 'exported'}'",
        "VACUUM": "VACUUM",
        "ANALYZE": "ANALYZE",
        "TRANSACTION": "BEGIN TRANSACTION",
        "PREPARE": "PREPARE p AS SELECT 1",
        "EXECUTE": "PREPARE p AS SELECT 1; EXECUTE p",
        "USE": "USE memory",
        "SUMMARIZE": "SUMMARIZE files",
        "DESCRIBE": "DESCRIBE events",
        "multiple statements": f"SELECT 1; COPY (SELECT 1) TO '{current}'",
    }


# DuckDB's statement types that have no text form a user can type (the parser never
# returns them), with why
_NO_TEXT = {
    "INVALID": "an error marker",
    "RELATION": "Python relational API only",
    "LOGICAL_PLAN": "internal",
    "MULTI": "internal (several statements at once)",
    "EXTENSION": "a parser extension's own statements (none loaded: extensions cannot load)",
    # types the parser of this DuckDB folds into others (the statements are tried above)
    "CREATE_FUNC": "CREATE MACRO / FUNCTION parse as CREATE",
    "ANALYZE": "ANALYZE parses as VACUUM",
    "VARIABLE_SET": "SET VARIABLE parses as SET",
    # DuckDB 2.0 parses COPY FROM DATABASE as PRAGMA (1.5 as COPY_DATABASE)
    "COPY_DATABASE": "COPY FROM DATABASE parses as PRAGMA in DuckDB 2.0",
}


def test_every_statement_type_is_refused_or_changes_no_byte(small: Warehouse) -> None:
    before = _warehouse_bytes(small.root)
    seen_types = set()
    probe = duckdb.connect()
    for what, sql in _hostile(small).items():
        try:
            seen_types |= {str(st.type).rsplit(".", 1)[-1] for st in probe.extract_statements(sql)}
        except duckdb.Error:
            pass
        session = connect(small)
        try:
            session.run_user_query(sql)
        except QueryError:
            pass  # refused (or failed to read something it may not read)
        finally:
            session.close()
        assert _warehouse_bytes(small.root) == before, f"{what} changed the warehouse"
    every = {m for m in dir(duckdb.StatementType) if m.isupper()}
    assert every - seen_types - set(_NO_TEXT) == set(), "a statement type without a case here"


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT count(*) AS n FROM kernels",
        "FROM files SELECT count(*) AS n",
        "WITH k AS (FROM kernels) SELECT count(*) AS n FROM k",
        "SELECT count(*) AS n FROM (DESCRIBE events)",
        "EXPLAIN SELECT 1",
        "EXPLAIN ANALYZE SELECT count(*) FROM events",
        "SUMMARIZE files",
        "SELECT count(*) AS n FROM (PIVOT kernels ON stream IN (7) USING count(*))",
    ],
)
def test_queries_still_run(small: Warehouse, sql: str) -> None:
    with connect(small) as session:
        assert session.run_user_query(sql).num_rows >= 1


@pytest.mark.parametrize("name", ["new\nline", "quo'te", "semi;colon", "dot\n.shell touch PWNED\n", "runs[1]"])
def test_a_warehouse_path_never_becomes_sql_or_shell(tmp_path: Path, name: str) -> None:
    folder = tmp_path / name / "wh"
    write_trace(tmp_path / "in" / "work" / "rank0.json", EVENTS)
    assert invoke("ingest", str(tmp_path / "in"), "-w", str(folder), "-q").returncode == 0
    # the shell reads the same set-up SQL as an init file, where a line `.shell ...` outside
    # a string literal would run a command (a process: the DuckDB CLI writes to its stdout)
    shell = run_cli("shell", "-w", str(folder), "-csv", "-c", "SELECT count(*) AS n FROM kernels", cwd=tmp_path)
    if "duckdb CLI is not installed" not in shell.stderr:
        assert shell.returncode == 0, shell.stderr
        assert shell.stdout.splitlines() == ["n", "1"]
    done = invoke("sql", "SELECT count(*) AS n FROM kernels", "-w", str(folder), "-f", "csv", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["n", "1"]
    assert not (tmp_path / "PWNED").exists()
    metric = invoke("metric", "total_kernel_time", "--all", "-w", str(folder), "-f", "csv", cwd=tmp_path)
    assert metric.returncode == 0, metric.stderr


def test_report_diff_and_board_compute_on_a_warehouse_that_cannot_be_written(
    small: Warehouse, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Their cached queries (op statistics, step durations) fall back as metrics do."""
    import errno

    import pyarrow.parquet as pq  # what cclq.query.cache.store_result writes with

    def refuse(*args: object, **kwargs: object) -> None:
        raise PermissionError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(pq, "write_table", refuse)
    from cclq.present.board.build import build_board
    from cclq.present.report import collect_reports
    from cclq.query.registry import latest_specs

    with connect(small, cache=True) as session:
        reports = collect_reports(session, latest_specs())
    assert list(reports) == ["work"]
    result = build_board(small, tmp_path / "site", force=True)
    assert result.workloads == 1 and (tmp_path / "site" / "index.html").exists()


def test_queries_spill_where_the_settings_say(small: Warehouse, tmp_path: Path) -> None:
    from cclq.query.settings import QuerySettings

    with connect(small, settings=QuerySettings("100MB", tmp_path / "elsewhere")) as session:
        spill = session.execute("SELECT current_setting('temp_directory')").fetchone()[0]
        assert Path(spill).parent == tmp_path / "elsewhere"
        # a disk that is full while spilling is named as such, with where
        error = session.query_error(duckdb.OutOfMemoryException("Out of Memory Error: failed to offload data block"))
        assert "disk full" in error.message and str(tmp_path / "elsewhere") in error.message
    assert not Path(spill).exists()  # the session's own folder goes with it
