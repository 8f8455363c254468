"""The metric result cache: a result is stored under a key of everything it depends on
(its SQL, every view's SQL, the parameters, the cards, the content of every input file),
so a cached result is never stale; a repeat run reads it back without DuckDB.

Beside each result's Parquet file its rows are kept as JSON (``rows_file``) when every
value survives JSON unchanged (numbers, text, booleans, NULLs, lists and structs of
them): a repeat ``cclq metric`` then reads the catalog's kept facts
(``cclq.store.summary_cache``) and that file and prints, without importing pyarrow
(0.2 s of a 0.6 s command). The Parquet file stays the result every other reader reads.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cclq.query.registry import MetricSpec
from cclq.store.catalog_summary import CatalogSummary
from cclq.store.durable import replace_with_text
from cclq.store.summary_cache import read_summary

if TYPE_CHECKING:
    import pyarrow as pa

    from cclq.query.session import Session
    from cclq.store.warehouse import Warehouse

log = logging.getLogger("cclq")


def cache_key(session: Session, spec: MetricSpec, params: dict[str, str]) -> str:
    """What a metric's result depends on: its SQL, every view's SQL, the parameters, the
    cards, and the content of every input file (hash and ingest version). Equal keys mean
    equal results, so a cached result is never stale."""
    return metric_key(session.snapshot.summary, session.traces, spec, params)


def metric_key(catalog: CatalogSummary, traces: list[str] | None, spec: MetricSpec, params: dict[str, str]) -> str:
    """``cache_key`` from a catalog snapshot's facts and a trace selection, without
    DuckDB: what a repeat ``cclq metric`` computes to find its stored result."""
    # the whole file, header included: a new unit or description is a new result table
    return inputs_key(catalog, traces, (spec.label, spec.text, json.dumps(params, sort_keys=True), ROW_ORDER))


def inputs_key(catalog: CatalogSummary, traces: list[str] | None, parts: tuple[str, ...]) -> str:
    """A key of ``parts``, the cclq version, every view's SQL and every input of the
    selection (its files by content hash and ingest version, and its cards), read from
    the facts of the catalog snapshot the query reads: the key describes exactly what it
    read."""
    from cclq.query.sqlfiles import view_modules
    from cclq.version import __version__

    h = hashlib.blake2b(digest_size=16)
    for part in (__version__, *parts):
        h.update(part.encode())
        h.update(b"\0")
    for module in view_modules():
        h.update(module.sql.encode())
    wanted = None if traces is None else set(traces)
    inputs = sorted(row for row in catalog.inputs if wanted is None or row[0] in wanted)
    card_rows = sorted(row for row in catalog.cards if wanted is None or row[0] in wanted)
    h.update(repr((inputs, card_rows)).encode())
    return h.hexdigest()


def result_file(
    cache_dir: Path, catalog: CatalogSummary, traces: list[str] | None, spec: MetricSpec, params: dict[str, str]
) -> Path:
    """The one name of a metric's stored result over ``traces`` of a snapshot (its
    facts, ``Snapshot.summary``): a session, a repeat call without DuckDB and the
    daemon's batch all look it up here."""
    return cache_dir / f"{spec.name}.v{spec.version}.{metric_key(catalog, traces, spec, params)}.parquet"


def cached_result(wh: Warehouse, spec: MetricSpec, params: dict[str, str], traces: list[str] | None) -> pa.Table | None:
    """A stored result of ``spec`` for the current snapshot, if there is one: read without
    DuckDB (a repeat call needs neither the engine nor the views)."""
    return read_cached(result_file(wh.cache_dir, read_summary(wh), traces, spec, params))


def cached_rows(
    wh: Warehouse, spec: MetricSpec, params: dict[str, str], traces: list[str] | None
) -> tuple[list[str], list[dict[str, Any]]] | None:
    """``cached_result`` as column names and rows (``Table.to_pylist``'s), read from the
    JSON beside the result without pyarrow; a result without that file is read from its
    Parquet (and the file written, when its values allow). None: nothing stored."""
    path = result_file(wh.cache_dir, read_summary(wh), traces, spec, params)
    kept = read_rows(path)
    if kept is not None:
        return kept
    table = read_cached(path)  # none kept, or unreadable: the Parquet file, which keeps them again
    if table is None:
        return None
    store_rows(table, path)
    return table.column_names, table.to_pylist()


def read_rows(result: Path) -> tuple[list[str], list[dict[str, Any]]] | None:
    """The rows ``store_rows`` kept beside ``result``, or None (none, or unreadable)."""
    try:
        data = json.loads(rows_file(result).read_text())
        columns, rows = data["columns"], data["rows"]
        for i in (columns.index(n) for n in data["decimal_columns"]):
            for row in rows:
                row[i] = None if row[i] is None else Decimal(row[i])
        return columns, [dict(zip(columns, row)) for row in rows]
    except (OSError, ValueError, KeyError, TypeError, ArithmeticError):
        return None


def read_cached(path: Path) -> pa.Table | None:
    """A stored result, or None when there is none or it cannot be read (disk trouble,
    a killed writer): then it is computed again."""
    if not path.exists():
        return None
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(path).read()  # not read_table: its dataset layer costs 30 ms to import
    except (OSError, pa.ArrowException):
        return None


def result_path(session: Session, spec: MetricSpec, params: dict[str, str]) -> Path | None:
    """Where the cached result of ``spec`` over the session's traces is (or would be);
    None for a session without a cache."""
    if session.cache_dir is None:
        return None
    return result_file(session.cache_dir, session.snapshot.summary, session.traces, spec, params)


def rows_file(result: Path) -> Path:
    """Where a result's rows are kept as JSON, beside its Parquet file."""
    return result.with_name(result.name.removesuffix(".parquet") + ".rows.json")


def columns_path(result: Path) -> Path:
    """Where the columns of a metric that applies to none of the traces are kept (an empty
    table), beside where its result would be: binding its stack of views for them took
    0.24 s a metric when no shared table was built (a report whose results are cached)."""
    return result.with_name(result.name.removesuffix(".parquet") + ".columns.parquet")


def store_result(table: pa.Table, cached: Path) -> None:
    """Writes a result to the cache; a cache that cannot be written (a read-only
    warehouse, a full disk) costs a note (logged once), never the result."""
    import pyarrow.parquet as pq

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
        return
    store_rows(table, cached)


def store_rows(table: pa.Table, cached: Path) -> None:
    """Keeps the rows of the result stored at ``cached`` as JSON beside it, when JSON
    gives every value back as it is (``_json_exact``; a decimal column's numbers as
    text, DuckDB's sum of integers is one); otherwise, or when it cannot be written, a
    repeat reads the Parquet file."""
    import pyarrow as pa

    names = table.column_names
    decimals = [n for n in names if pa.types.is_decimal(table.schema.field(n).type)]
    rows = [
        [str(row[n]) if n in decimals and row[n] is not None else row[n] for n in names] for row in table.to_pylist()
    ]
    if not all(_json_exact(v) for row in rows for v in row):
        return
    replace_with_text(rows_file(cached), json.dumps({"columns": names, "decimal_columns": decimals, "rows": rows}))


def _json_exact(value: Any) -> bool:
    """Whether ``json.loads(json.dumps(value)) == value`` with the same types: not for
    dates, decimals, bytes or a map's (key, value) tuples. NaN and infinities are kept
    (Python's json writes and reads them)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    if isinstance(value, list):
        return all(_json_exact(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _json_exact(v) for k, v in value.items())
    return False


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
