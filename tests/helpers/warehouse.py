"""Ingesting into a test's warehouse and reading it back."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from cclq.ingest.report import IngestReport
from cclq.ingest.run import ingest
from cclq.query.session import connect
from cclq.store.warehouse import Warehouse


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


def kernel_time_by_trace(wh: Warehouse) -> dict[str, float]:
    """total_kernel_time per trace, through the result cache as `cclq metric` reads it."""
    from cclq.query.metrics import run_metric
    from cclq.query.registry import resolve

    con = connect(wh, cache=True)
    rows = run_metric(con, resolve("total_kernel_time")).to_pylist()
    return {r["trace"]: r["value"] for r in rows}
