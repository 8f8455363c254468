"""What a query sees while ingests run: one snapshot per session, a cache keyed by what
was read, read-only SQL, a warehouse that cannot be written, a path with glob characters."""

from __future__ import annotations

import errno
import logging
import subprocess
import sys
import textwrap
import threading
import time
from concurrent.futures import Future

import duckdb
import pytest
from helpers.cli import invoke, run_cli
from helpers.paths import REPO
from helpers.traces import gpu_trace
from helpers.warehouse import kernel_time_by_trace, query, run_ingest

from cclq.errors import UsageError
from cclq.query.metrics import run_metric
from cclq.query.registry import forget_metric_files, registry, resolve
from cclq.query.session import Session, close_unused, connect, open_database_soon
from cclq.store.warehouse import Warehouse


# ------------------------------------------------------- 2, 3. readers vs writers
def test_a_database_opened_during_an_ingest_reads_what_the_ingest_committed(tmp_path, wh):
    """TraceAnalysis starts its session's DuckDB while the trace is ingested
    (``open_database_soon``): the session made in it afterwards reads the snapshot the
    ingest committed, through the views it attached meanwhile."""
    gpu_trace(tmp_path / "in" / "a" / "rank0.json")
    database = open_database_soon()
    run_ingest([tmp_path / "in"], wh)
    with Session(wh, database=database, cache=False) as session:
        rows = run_metric(session, resolve("total_kernel_time")).to_pylist()
        assert {r["trace"]: r["value"] for r in rows} == {"a": pytest.approx(8e-6)}  # 2 kernels of 4 µs
        assert session.con is database.result()


def test_a_database_opened_for_a_session_that_fails_is_closed(tmp_path):
    """A session that cannot open its snapshot closes the database it was given, and so
    does ``close_unused`` (TraceAnalysis, when the ingest fails); a database whose own
    opening failed adds no second error to the one being raised."""
    database = open_database_soon()
    with pytest.raises(UsageError, match="no warehouse at"):
        Session(Warehouse(tmp_path / "none"), database=database)
    with pytest.raises(duckdb.ConnectionException):
        database.result().execute("SELECT 1")
    unused = open_database_soon()
    close_unused(unused)
    with pytest.raises(duckdb.ConnectionException):
        unused.result().execute("SELECT 1")
    failed: Future[duckdb.DuckDBPyConnection] = Future()
    failed.set_exception(OSError("no space left"))
    close_unused(failed)  # no error of its own


def test_a_connection_reads_one_snapshot_and_caches_what_it_read(tmp_path, wh):
    """A metric computed while an ingest committed could be cached under a key that
    described other inputs than the query read (3 of 40 runs kept a NULL after the
    ingest). A connection reads one snapshot: its result is right for its key."""
    gpu_trace(tmp_path / "in" / "a" / "rank0.json")
    run_ingest([tmp_path / "in"], wh)
    early = connect(wh, cache=True)  # opened before the next ingest
    gpu_trace(tmp_path / "in" / "b" / "rank0.json", kernels=3)
    run_ingest([tmp_path / "in"], wh)
    spec = resolve("total_kernel_time")
    stale = {r["trace"]: r["value"] for r in run_metric(early, spec).to_pylist()}
    assert stale == {"a": pytest.approx(8e-6)}  # exactly its snapshot: no half of the new trace
    fresh = {r["trace"]: r["value"] for r in run_metric(connect(wh, cache=True), spec).to_pylist()}
    assert fresh == {"a": pytest.approx(8e-6), "b": pytest.approx(12e-6)}


def test_an_ingest_that_commits_while_a_connection_is_set_up_changes_nothing_it_reads(tmp_path, wh, monkeypatch):
    """The race behind a wrong cached result: a connection listed the event files, an
    ingest committed, then the connection read the catalog. Its `files` then named a
    trace whose events it had not listed: the metric said NULL for it, and that result
    was cached under the key of the new inputs. Here the ingest lands exactly there."""
    import duckdb

    gpu_trace(tmp_path / "in" / "a" / "rank0.json")
    run_ingest([tmp_path / "in"], wh)
    gpu_trace(tmp_path / "in" / "b" / "rank0.json", kernels=3)
    real_connect = duckdb.connect

    class IngestOnFirstStatement:
        """A DuckDB connection whose first statement runs after another ingest."""

        def __init__(self, *args, **kwargs):
            self._con = real_connect(*args, **kwargs)
            self._first = True

        def execute(self, *args, **kwargs):
            if self._first:
                self._first = False
                run_ingest([tmp_path / "in"], wh)
            return self._con.execute(*args, **kwargs)

        def __getattr__(self, name):
            return getattr(self._con, name)

    monkeypatch.setattr(duckdb, "connect", IngestOnFirstStatement)  # the session's connection
    con = connect(wh, cache=True)
    monkeypatch.undo()
    spec = resolve("total_kernel_time")
    seen = {r["trace"]: r["value"] for r in run_metric(con, spec).to_pylist()}
    assert seen in ({"a": pytest.approx(8e-6)}, {"a": pytest.approx(8e-6), "b": pytest.approx(12e-6)})
    cached = {r["trace"]: r["value"] for r in run_metric(connect(wh, cache=True), spec).to_pylist()}
    assert cached == {"a": pytest.approx(8e-6), "b": pytest.approx(12e-6)}


@pytest.mark.slow
def test_queries_during_ingests_see_consistent_snapshots(tmp_path, wh):
    """While ingests commit (and collect old files), every query runs and every answer
    is one snapshot's: the events counted equal the events the catalog says it holds
    (queries failed with `IO Error: Cannot open file ...catalog/files/...` and counts
    disagreed)."""
    for name in ("a", "b", "c", "d"):
        for r in range(4):
            gpu_trace(tmp_path / "in" / name / f"rank{r}.json", rank=r, world=4, kernels=3 + r)
    run_ingest([tmp_path / "in"], wh)
    stop = threading.Event()
    errors: list[str] = []
    ingests = [0]

    def writer() -> None:
        i = 0
        while not stop.is_set():
            i += 1
            name = "abcd"[i % 4]
            for r in range(4):  # a new version of one trace: other sizes, same names
                gpu_trace(tmp_path / "in" / name / f"rank{r}.json", rank=r, world=4, kernels=1 + (i + r) % 5)
            done = subprocess.run(
                [
                    sys.executable,
                    "-c",
                    "from cclq.cli.app import main; main()",
                    "ingest",
                    str(tmp_path / "in" / name),
                    "-w",
                    str(wh.root),
                    "-q",
                    "-j",
                    "1",
                ],
                capture_output=True,
                text=True,
            )
            if done.returncode != 0:
                errors.append(done.stderr)
            ingests[0] += 1

    check = (
        "SELECT (SELECT count(*) FROM events) = (SELECT sum(events_written) FROM files), "
        "(SELECT count(*) FROM files), (SELECT count(DISTINCT file_id) FROM events)"
    )
    thread = threading.Thread(target=writer)
    thread.start()
    checks = 0
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline or ingests[0] < 3:
            con = connect(wh, cache=True)
            assert con.execute(check).fetchall() == [(True, 16, 16)]
            checks += 1
    finally:
        stop.set()
        thread.join()
    assert checks >= 5 and not errors, errors
    result = run_cli("sql", check, "-w", str(wh.root), "-f", "csv")
    assert result.returncode == 0 and result.stdout.splitlines()[1] == "True,16,16"


# ----------------------------------------------------------- 7. cclq sql writes
def test_ad_hoc_sql_is_read_only(tmp_path, wh):
    """`COPY ... TO` a path in the warehouse changed total_kernel_time from 0.0027 s to
    2.69 s; ATTACH and COPY created files anywhere."""
    gpu_trace(tmp_path / "in" / "work" / "rank0.json")
    run_ingest([tmp_path / "in"], wh)
    before = kernel_time_by_trace(wh)
    (data,) = query(wh, "SELECT path FROM parts")
    target = wh.root / data[0]
    elsewhere = tmp_path / "out.csv"
    for sql in (
        f"COPY (SELECT * FROM events) TO '{target}' (FORMAT parquet)",
        f"COPY (SELECT 1) TO '{elsewhere}'",
        f"ATTACH '{tmp_path / 'x.db'}' AS x",
        "SELECT * FROM read_csv('/etc/hostname')",
        "SET enable_external_access = true",
        "SELECT 1; CREATE TABLE t AS SELECT 1",
    ):
        result = invoke("sql", sql, "-w", str(wh.root))
        assert result.returncode == 3, (sql, result.stderr)
        assert result.stderr.startswith("cclq: error:") and "Traceback" not in result.stderr
    assert not elsewhere.exists() and not (tmp_path / "x.db").exists()
    assert kernel_time_by_trace(wh) == before
    ok = invoke("sql", "SELECT count(*) AS n FROM kernels", "-w", str(wh.root), "-f", "csv")
    assert ok.returncode == 0 and ok.stdout.splitlines() == ["n", "2"]
    rw = invoke("sql", f"COPY (SELECT 1 AS x) TO '{elsewhere}'", "--read-write", "-w", str(wh.root))
    assert rw.returncode == 0 and elsewhere.exists()


# ------------------------------------------------------------- 12. glob chars
def test_a_warehouse_path_with_glob_characters_reads_back(tmp_path):
    wh = Warehouse(tmp_path / "we[ir]d*?")
    gpu_trace(tmp_path / "in" / "work" / "rank0.json")
    run_ingest([tmp_path / "in"], wh)
    assert kernel_time_by_trace(wh) == {"work": pytest.approx(8e-6)}
    result = invoke("metric", "total_kernel_time", "--all", "-w", str(wh.root), "-f", "csv")
    assert result.returncode == 0, result.stderr


# ---------------------------------------------------- 15. read-only warehouse
def test_a_read_only_warehouse_still_computes_metrics(tmp_path, wh, monkeypatch, caplog):
    import pyarrow.parquet as pq

    import cclq.query.cache as metrics_module

    gpu_trace(tmp_path / "in" / "work" / "rank0.json")
    run_ingest([tmp_path / "in"], wh)

    def refuse(*args, **kwargs):
        raise PermissionError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(pq, "write_table", refuse)  # what cache.store_result writes with
    monkeypatch.setattr(metrics_module, "_noted", set())
    con = connect(wh, cache=True)
    with caplog.at_level(logging.INFO, logger="cclq"):
        rows = run_metric(con, resolve("total_kernel_time")).to_pylist()
    assert [r["value"] for r in rows] == [pytest.approx(8e-6)]
    assert "results are not cached" in caplog.text


# ----------------------------------------------------- 17. metric header edits
def test_a_changed_metric_header_is_not_served_from_the_cache(tmp_path, wh, monkeypatch):
    gpu_trace(tmp_path / "in" / "work" / "rank0.json")
    run_ingest([tmp_path / "in"], wh)
    sql = tmp_path / "sql"
    (sql / "metrics" / "demo").mkdir(parents=True)
    (sql / "views").symlink_to(REPO / "sql" / "views")
    text = textwrap.dedent("""\
        -- metric: demo
        -- version: 1
        -- unit: {unit}
        -- grain: trace
        -- category: compute
        -- polarity: neutral
        -- description: kernels
        SELECT trace, count(*) AS value FROM kernels GROUP BY trace
    """)
    monkeypatch.setattr("cclq.query.registry.sql_root", lambda: sql)
    units = []
    for unit in ("count", "kernels"):
        (sql / "metrics" / "demo" / "v1.sql").write_text(text.format(unit=unit))
        forget_metric_files()
        units.append(run_metric(connect(wh, cache=True), resolve("demo")).column("unit").to_pylist())
    forget_metric_files()
    assert units == [["count"], ["kernels"]]


def test_the_columns_of_a_metric_that_applies_nowhere_are_cached(tmp_path, wh):
    """A batch whose results were all cached built no shared table, so each metric the
    catalog rules out bound its whole stack of views again for its columns (a cached
    report of a one-rank trace: 8.0 s, against 2.5 s without the cache, when a report
    still bound them; `cclq metric` over every metric does). They are kept beside the
    results: the same columns next time; a garbled file is computed again."""
    from cclq.query.metrics import run_metrics

    gpu_trace(tmp_path / "in" / "work" / "rank0.json")
    run_ingest([tmp_path / "in"], wh)
    specs = [resolve(name) for name in sorted(registry())]
    con = connect(wh, cache=True)
    first = run_metrics(con, specs, plan_first=True, empty_columns=True)
    nowhere = {n: r.empty.schema for n, r in first.items() if r.table is None and r.empty is not None}
    assert len(nowhere) > 5, sorted(first)  # a one-rank GPU trace: no collectives, no tokens
    assert con.cache_dir is not None
    files = sorted(con.cache_dir.glob("*.columns.parquet"))
    assert sorted(f.name.split(".v")[0] for f in files) == sorted(nowhere)
    files[0].write_bytes(b"not parquet")
    for _ in range(2):  # the garbled one computed again, then read back like the others
        again = run_metrics(connect(wh, cache=True), specs, plan_first=True, empty_columns=True)
        assert {n: r.empty.schema for n, r in again.items() if n in nowhere} == nowhere
