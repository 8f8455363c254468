"""The metric result cache: a result is stored under a key of everything it depends on
(its SQL, every view's SQL, the parameters, the cards, the content of every input file),
so a cached result is never stale; a repeat run reads it back without DuckDB."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

from cclq.query.registry import MetricSpec

if TYPE_CHECKING:
    from cclq.query.session import Session
    from cclq.store.warehouse import Snapshot, Warehouse

log = logging.getLogger("cclq")


def cache_key(session: Session, spec: MetricSpec, params: dict[str, str]) -> str:
    """What a metric's result depends on: its SQL, every view's SQL, the parameters, the
    cards, and the content of every input file (hash and ingest version). Equal keys mean
    equal results, so a cached result is never stale."""
    return metric_key(session.snapshot, session.traces, spec, params)


def metric_key(snapshot: Snapshot, traces: list[str] | None, spec: MetricSpec, params: dict[str, str]) -> str:
    """``cache_key`` from a catalog snapshot and a trace selection, without DuckDB: what
    a repeat ``cclq metric`` computes to find its stored result."""
    # the whole file, header included: a new unit or description is a new result table
    return inputs_key(snapshot, traces, (spec.label, spec.text, json.dumps(params, sort_keys=True), ROW_ORDER))


def inputs_key(snapshot: Snapshot, traces: list[str] | None, parts: tuple[str, ...]) -> str:
    """A key of ``parts``, the cclq version, every view's SQL and every input of the
    selection (its files by content hash and ingest version, and its cards), read from
    the catalog snapshot the query reads: the key describes exactly what it read."""
    from cclq.query.sqlfiles import view_modules
    from cclq.version import __version__

    h = hashlib.blake2b(digest_size=16)
    for part in (__version__, *parts):
        h.update(part.encode())
        h.update(b"\0")
    for module in view_modules():
        h.update(module.sql.encode())
    wanted = None if traces is None else set(traces)
    files, cards = snapshot.tables["files"], snapshot.tables["cards"]
    inputs = sorted(
        row
        for row in zip(
            *(files.column(c).to_pylist() for c in ("trace", "rank", "file_id", "content_hash", "ingest_version"))
        )
        if wanted is None or row[0] in wanted
    )
    card_rows = sorted(
        row
        for row in zip(cards.column("trace").to_pylist(), cards.column("card_json").to_pylist())
        if wanted is None or row[0] in wanted
    )
    h.update(repr((inputs, card_rows)).encode())
    return h.hexdigest()


def result_file(
    cache_dir: Path, snapshot: Snapshot, traces: list[str] | None, spec: MetricSpec, params: dict[str, str]
) -> Path:
    """The one name of a metric's stored result over ``traces`` of ``snapshot``: a session,
    a repeat call without DuckDB and the daemon's batch all look it up here."""
    return cache_dir / f"{spec.name}.v{spec.version}.{metric_key(snapshot, traces, spec, params)}.parquet"


def cached_result(wh: Warehouse, spec: MetricSpec, params: dict[str, str], traces: list[str] | None) -> pa.Table | None:
    """A stored result of ``spec`` for the current snapshot, if there is one: read without
    DuckDB (a repeat call needs neither the engine nor the views)."""
    with wh.open_snapshot() as snapshot:
        path = result_file(wh.cache_dir, snapshot, traces, spec, params)
    try:
        return pq.ParquetFile(path).read() if path.exists() else None
    except (OSError, pa.ArrowException):
        return None


def read_cached(path: Path) -> pa.Table | None:
    """A stored result, or None when there is none or it cannot be read (disk trouble,
    a killed writer): then it is computed again."""
    try:
        return pq.read_table(path) if path.exists() else None
    except (OSError, pa.ArrowException):
        return None


def result_path(session: Session, spec: MetricSpec, params: dict[str, str]) -> Path | None:
    """Where the cached result of ``spec`` over the session's traces is (or would be);
    None for a session without a cache."""
    if session.cache_dir is None:
        return None
    return result_file(session.cache_dir, session.snapshot, session.traces, spec, params)


def columns_path(result: Path) -> Path:
    """Where the columns of a metric that applies to none of the traces are kept (an empty
    table), beside where its result would be: binding its stack of views for them took
    0.24 s a metric when no shared table was built (a report whose results are cached)."""
    return result.with_name(result.name.removesuffix(".parquet") + ".columns.parquet")


def store_result(table: pa.Table, cached: Path) -> None:
    """Writes a result to the cache; a cache that cannot be written (a read-only
    warehouse, a full disk) costs a note (logged once), never the result."""
    tmp = cached.with_suffix(f".tmp{os.getpid()}-{threading.get_ident()}")  # threads of a daemon too
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, tmp)
        os.replace(tmp, cached)
    except OSError as e:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        _note_once(f"results are not cached ({cached.parent}: {e.strerror or e}); computed without the cache")


_noted: set[str] = set()


def _note_once(message: str) -> None:
    """A note for the log, once per process: the same trouble repeats for every result."""
    if message not in _noted:
        _noted.add(message)
        log.info(message)


def is_cached(session: Session, spec: MetricSpec, params: dict[str, str]) -> bool:
    path = result_path(session, spec, params)
    return path is not None and path.exists()


# A result's rows come in one total order: trace, rank, step, then the detail columns,
# value and reason. Rows that tie on (trace, rank, step) (one per stream, per collective,
# per kernel type) would otherwise come in whatever order DuckDB's parallel sort leaves
# them, which changes from run to run. The total order makes a result the same bytes each
# time it is computed, and lets results computed in parts (``--dask``) be put together
# in exactly the order of one query (``combine_results``). Part of the cache key.
ROW_ORDER = "rows: trace, rank, step, details, value, reason"
