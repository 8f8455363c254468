"""Ingesting into a test's warehouse and reading it back."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pytest

from cclq.ingest.report import IngestReport
from cclq.ingest.run import ingest
from cclq.query.session import connect
from cclq.store.warehouse import Warehouse

if TYPE_CHECKING:
    from cclq.query.metrics import MetricRun
    from cclq.query.session import Session


def run_ingest(paths: list[Path], wh: Warehouse, **kw) -> IngestReport:
    """``ingest`` with one job unless the test asks for more (the machine is shared)."""
    return ingest(paths, wh, jobs=kw.pop("jobs", 1), **kw)


def query(wh: Warehouse, sql: str, params: list | None = None) -> list[tuple]:
    """The rows of one query, on a connection of its own."""
    con = connect(wh)
    try:
        return con.execute(sql, params or []).fetchall()
    finally:
        con.close()


def query_table(wh: Warehouse, sql: str) -> pa.Table:
    """The rows of one query as an Arrow table (a whole trace's events compare in a second
    this way, where Python tuples take half a minute), on a connection of its own."""
    con = connect(wh)
    try:
        return con.arrow(sql)
    finally:
        con.close()


def metric_rows(wh: Warehouse, name: str, trace: str | None = None, version: int | None = None) -> list[dict]:
    """One metric's rows (the latest version unless one is given; every trace or one), on a
    connection of its own."""
    from cclq.query.metrics import run_metric
    from cclq.query.registry import resolve

    con = connect(wh)
    try:
        rows = run_metric(con, resolve(name, version)).to_pylist()
    finally:
        con.close()
    return [r for r in rows if trace is None or r["trace"] == trace]


def warehouse_content(wh: Warehouse) -> dict[str, pa.Table]:
    """Everything a warehouse holds but the data files' names and the ingest times: what
    two ingests of the same traces (local and on a cluster, into a folder and a bucket)
    must agree on."""
    from cclq.schema import TABLE_SCHEMAS

    queries = {
        "files": "SELECT * EXCLUDE (ingested_at, ingest_seconds) FROM files ORDER BY file_id",
        "parts": "SELECT * EXCLUDE (path) FROM parts ORDER BY ALL",
        "ingest_stats": "SELECT * FROM ingest_stats ORDER BY ALL",
        "cards": "SELECT * FROM cards ORDER BY trace",
        **{table: f"SELECT * FROM {table} ORDER BY ALL" for table in TABLE_SCHEMAS},
    }
    con = connect(wh)
    try:
        return {name: con.arrow(sql) for name, sql in queries.items()}
    finally:
        con.close()


def kernel_time_by_trace(wh: Warehouse) -> dict[str, float]:
    """total_kernel_time per trace, through the result cache as `cclq metric` reads it."""
    from cclq.query.metrics import run_metric
    from cclq.query.registry import resolve

    con = connect(wh, cache=True)
    rows = run_metric(con, resolve("total_kernel_time")).to_pylist()
    return {r["trace"]: r["value"] for r in rows}


def run_batch_recording(
    wh: Warehouse, specs: list, monkeypatch: pytest.MonkeyPatch
) -> tuple[dict[str, MetricRun], list[str]]:
    """``run_metrics`` over ``specs`` in one batch, and every statement its sessions ran
    (the shared tables are made on the batch's lanes, other connections of the session's
    class: hence the patch on the class)."""
    from cclq.query.metrics import run_metrics
    from cclq.query.session import Session

    ran: list[str] = []
    real = Session.execute

    def execute(self: Session, sql: str, *args: Any, **kwargs: Any) -> Any:
        ran.append(str(sql))
        return real(self, sql, *args, **kwargs)

    monkeypatch.setattr(Session, "execute", execute)
    con = connect(wh)
    try:
        runs = run_metrics(con, specs)
    finally:
        con.close()
    return runs, ran


def run_every_version(session: Session) -> dict[str, MetricRun]:
    """Every version of every metric, by label (``name vN``), each one query as alone: in
    one batch per version number (a batch holds a name once). 112 versions one by one
    took ~65 s of the slow tier; the batches, a few seconds."""
    from cclq.query.metrics import run_metrics
    from cclq.query.registry import registry

    by_version: dict[int, list] = {}
    for versions in registry().values():
        for version, spec in versions.items():
            by_version.setdefault(version, []).append(spec)
    runs: dict[str, MetricRun] = {}
    for specs in by_version.values():
        batch = run_metrics(session, specs)
        runs.update({spec.label: batch[spec.name] for spec in specs})
    return runs


def approx_rows(rows: list[dict], rel: float = 1e-12) -> list[dict]:
    """Rows with their floats compared to ``rel`` (a batch's parallel sums may round apart)."""
    return [{k: pytest.approx(v, rel=rel) if isinstance(v, float) else v for k, v in row.items()} for row in rows]
