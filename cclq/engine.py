"""Opening the warehouse in DuckDB with every view defined.

A connection reads ONE catalog snapshot (``Warehouse.open_snapshot``): the catalog
tables (``files``, ``ingest_stats``, ``cards``, ``parts``) are loaded from that
snapshot's Parquet files, and each data table (``events``, ...) is a view over exactly
the data files the snapshot names. An ingest running meanwhile changes nothing the
connection sees, and data a killed ingest left uncommitted is never visible. The
snapshot stays locked against garbage collection for as long as the connection lives.

``setup_script`` produces that SQL, then every module of ``sql/views`` in dependency
order, each followed by the ``COMMENT ON`` statements of its documented views, and
those of the base relations (so ``duckdb_views().comment`` and
``duckdb_columns().comment`` describe them; ``cclq.sqlfiles.comment_statements``).
The same script serves ``connect`` (Python, in-memory DuckDB) and ``cclq shell``
(the DuckDB CLI's ``-init`` file), so what a user sees in the shell is exactly what
metrics see.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import socket
import tempfile
import weakref
from pathlib import Path

import duckdb
import pyarrow as pa

from cclq.errors import QueryError, UsageError
from cclq.schema import TABLE_SCHEMAS, data_file_schema
from cclq.sqlfiles import comment_statements, defined_names, module_script, modules_for, view_modules
from cclq.warehouse import CATALOG_SCHEMAS, Snapshot, Warehouse

_DUCK_TYPES = {
    pa.string(): "VARCHAR",
    pa.int64(): "BIGINT",
    pa.int32(): "INTEGER",
    pa.float64(): "DOUBLE",
    pa.bool_(): "BOOLEAN",
    pa.list_(pa.int64()): "BIGINT[]",
    pa.timestamp("us", tz="UTC"): "TIMESTAMPTZ",
}
# catalog table -> the name it has in SQL
CATALOG_RELATIONS = {"files": "files", "stats": "ingest_stats", "cards": "cards", "parts": "parts"}
# Statements `cclq sql` runs when read-only (the default): queries, and EXPLAIN of them.
_READ_ONLY_STATEMENTS = {duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN}
# connection -> (the snapshot it reads, the traces it selected; None: all)
_SNAPSHOTS: weakref.WeakKeyDictionary[duckdb.DuckDBPyConnection, tuple[Snapshot, list[str] | None]] = (
    weakref.WeakKeyDictionary())


def _quote(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def _path_literal(path: Path) -> str:
    """A file path as DuckDB's readers take it: glob characters escaped (a warehouse in
    ``wh/we[ir]d`` must not be read as a pattern), then quoted."""
    return _quote(glob.escape(str(path)))


def _empty(name: str, schema: pa.Schema) -> str:
    cols = [f'"{f.name}" {_DUCK_TYPES[f.type]}' for f in schema]
    return f"CREATE OR REPLACE TABLE {name} ({', '.join(cols)});"


def _trace_filter(traces: list[str] | None) -> str:
    if traces is None:
        return ""
    return " WHERE trace IN (" + ", ".join(_quote(t) for t in traces) + ")" if traces else " WHERE false"


def _data_placeholder(table: str) -> str:
    """A data table with no rows and exactly the columns and types of its files."""
    return _empty(table, data_file_schema(TABLE_SCHEMAS[table]))


def base_relations(snapshot: Snapshot, traces: list[str] | None = None) -> list[str]:
    """The relations read straight from the snapshot, optionally for some traces only.

    Data tables stay views (they can be gigabytes) over the listed files: DuckDB opens
    only those, and lists no directories. The catalog tables are tiny and become
    in-memory tables filtered to the selected traces.
    """
    where = _trace_filter(traces)
    stmts: list[str] = []
    for table in TABLE_SCHEMAS:
        files = snapshot.data_files(table, traces)
        if files:
            stmts.append(
                f"CREATE OR REPLACE VIEW {table} AS SELECT * FROM read_parquet("
                f"[{', '.join(_path_literal(p) for p in files)}], hive_partitioning = false);"
            )
        else:
            stmts.append(_data_placeholder(table))
    for name, relation in CATALOG_RELATIONS.items():
        path = snapshot.catalog_file(name)
        stmts.append(f"CREATE OR REPLACE TABLE {relation} AS SELECT * FROM read_parquet({_path_literal(path)}){where};")
    return stmts


def _base_comments(kinds: dict[str, str]) -> list[str]:
    """COMMENT ON statements for the base relations (their documentation is in
    sql/relations.sql); ``kinds``: relation -> VIEW or TABLE, as the connection has it."""
    names = [*TABLE_SCHEMAS, *CATALOG_RELATIONS.values()]
    return [s for name in names if name in kinds for s in comment_statements(name, kinds[name])]


def _modules_bound_on_placeholder(module_sql: list[str], views: list[str]) -> list[str]:
    """Statements that create view modules while the data tables are empty tables.

    DuckDB binds a view when it is created, and binding a view over ``events`` binds
    ``read_parquet`` over every event file: on a warehouse of 800 files that was ~15 ms
    per view, most of a connection's set-up. Views are bound again when a query uses
    them, against whatever ``events`` is then, so they are created against an empty
    table of the same columns and types, and the Parquet views are put back afterwards.
    """
    if not module_sql or not views:
        return module_sql
    before = [s for t in views for s in (f"ALTER VIEW {t} RENAME TO _cclq_{t}_parquet;", _data_placeholder(t))]
    after = [s for t in views for s in (f"DROP TABLE {t};", f"ALTER VIEW _cclq_{t}_parquet RENAME TO {t};")]
    return before + module_sql + after


def setup_script(snapshot: Snapshot, traces: list[str] | None = None, for_sql: str | None = None) -> str:
    relations = base_relations(snapshot, traces)
    # the catalog tables are read once: cache Parquet footers for the queries after them
    parts = [f"-- cclq: snapshot {snapshot.id} of {snapshot.warehouse.root}",
             "SET parquet_metadata_cache = true;"] + relations
    modules = [f"-- module {m.name}\n{module_script(m).strip()}"
               for m in (view_modules() if for_sql is None else modules_for(for_sql))]
    parquet_views = _parquet_views(snapshot, traces)
    parts += _modules_bound_on_placeholder(modules, parquet_views)
    kinds = {t: "VIEW" if t in parquet_views else "TABLE" for t in TABLE_SCHEMAS}
    parts += _base_comments({**kinds, **{r: "TABLE" for r in CATALOG_RELATIONS.values()}})
    return "\n".join(parts) + "\n"


def _parquet_views(snapshot: Snapshot, traces: list[str] | None) -> list[str]:
    return [t for t in TABLE_SCHEMAS if snapshot.data_files(t, traces)]


MEMORY_ENV = "CCLQ_MEMORY_LIMIT"
# Without --memory-limit / CCLQ_MEMORY_LIMIT: this share of the machine's memory (DuckDB's
# own default is 80%, which leaves too little to Python, pyarrow and a second process).
DEFAULT_MEMORY_SHARE = 0.5
_MEMORY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(%|[KMGT]i?B|B)?\s*$", re.IGNORECASE)


def memory_limit(value: str | None = None) -> str:
    """The memory limit queries run under, as DuckDB takes it: ``value`` (``500MB``,
    ``4GiB``, ``25%`` of RAM), else ``$CCLQ_MEMORY_LIMIT``, else half the machine's RAM."""
    text = value or os.environ.get(MEMORY_ENV)
    total = _physical_memory()
    if not text:
        return f"{int(total * DEFAULT_MEMORY_SHARE) >> 20}MiB" if total else "80%"
    m = _MEMORY.match(text)
    if not m:
        raise UsageError(f"memory limit {text!r}: want a size such as 500MB or 4GiB, or a share of RAM such as 25%")
    number, unit = float(m.group(1)), (m.group(2) or "B").upper()
    if unit == "%":
        if not 0 < number <= 100 or not total:
            raise UsageError(f"memory limit {text!r}: a share of RAM is 1..100%")
        return f"{int(total * number / 100) >> 20}MiB"
    factor = {"B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
              "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}[unit]
    if number * factor < 64e6:
        raise UsageError(f"memory limit {text!r}: DuckDB needs at least 64 MB")
    return f"{int(number * factor) >> 20}MiB"


def _physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 0


def _spill_directory(wh: Warehouse) -> Path:
    """Where a connection's DuckDB spills what does not fit its memory limit: a folder of
    its own inside the warehouse (``spill/<pid>@<host>-<random>``), removed when the
    connection goes; writers collect the folders of this host's processes that died (a
    warehouse on a shared file system has readers on other hosts). A warehouse that cannot be
    written spills to the system's temp folder instead."""
    for parent in (wh.root / "spill", Path(tempfile.gettempdir()) / "cclq-spill"):
        try:
            parent.mkdir(parents=True, exist_ok=True)
            return Path(tempfile.mkdtemp(prefix=f"{os.getpid()}@{socket.gethostname()}-", dir=parent))
        except OSError:
            continue
    raise UsageError("no folder to spill query data to (the warehouse and the temp folder are not writable)")


def query_settings(wh: Warehouse) -> tuple[list[str], Path]:
    """The SET statements of a session (memory limit, spill folder) and its spill folder."""
    spill = _spill_directory(wh)
    return [f"SET memory_limit = '{memory_limit()}';", f"SET temp_directory = {_quote(str(spill))};"], spill


def connect(wh: Warehouse, require: bool = True, traces: list[str] | None = None,
            for_sql: str | None = None, views: bool = True,
            snapshot_id: str | None = None) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection over the warehouse's current snapshot.

    ``traces`` restricts every relation to those trace ids (``None``: all).
    ``for_sql``: define only the view modules this SQL needs (``None``: all of them).
    ``views=False``: only the base relations; ``define_views`` adds modules when a query
    needs them (a metric whose result is cached never needs them).
    Queries run under ``memory_limit()`` and spill to disk beyond it. ``snapshot_id``: that
    snapshot instead of the current one (a Dask worker reading what its client reads;
    see ``Warehouse.open_snapshot``).
    """
    snapshot = wh.open_snapshot(snapshot_id=snapshot_id)
    spill: Path | None = None
    try:
        con = duckdb.connect(":memory:")
        settings, spill = query_settings(wh)
        # DuckDB draws its progress bar on stdout for a query past 2 s, into the middle of
        # `cclq metric -f csv > file` (found by the scale bench at 400 traces)
        con.execute("\n".join([*settings, "SET enable_progress_bar = false;"]))
        if views:
            con.execute(setup_script(snapshot, traces, for_sql))
        else:
            con.execute("\n".join(["SET parquet_metadata_cache = true;"] + base_relations(snapshot, traces)))
    except BaseException:
        snapshot.close()
        if spill is not None:
            shutil.rmtree(spill, ignore_errors=True)
        raise
    # the snapshot's files stay safe from garbage collection while the connection lives
    weakref.finalize(con, snapshot.close)
    weakref.finalize(con, shutil.rmtree, spill, True)
    _SNAPSHOTS[con] = (snapshot, None if traces is None else list(traces))
    return con


def define_views(con: duckdb.DuckDBPyConnection, sql: str, comments: bool = False) -> None:
    """Creates the view modules ``sql`` needs that the connection does not have yet.

    ``comments``: with their documentation (COMMENT ON, as ``setup_script`` gives every
    user-facing session), and the base relations' too; off for computations (metrics),
    which never read it."""
    defined = con.execute(
        "SELECT view_name, 'view' FROM duckdb_views() WHERE NOT internal "
        "UNION ALL SELECT table_name, 'table' FROM duckdb_tables() "
        "UNION ALL SELECT function_name, 'function' FROM duckdb_functions() WHERE NOT internal"
    ).fetchall()
    have = {name.lower() for name, _ in defined}
    needed = modules_for(sql)
    absent = {m.name for m in needed if not defined_names(m) <= have}
    # an extension defines the names of the module it extends: it goes with that module
    missing = [m for m in needed if m.name in absent or absent & set(m.extends)]
    if missing:
        parquet_views = [t for t in TABLE_SCHEMAS if (t, "view") in defined]
        script = [module_script(m) if comments else m.sql for m in missing]
        con.execute("\n".join(_modules_bound_on_placeholder(script, parquet_views)))
    if comments:
        con.execute("\n".join(_base_comments({n: k.upper() for n, k in defined})) or "SELECT 1")


def run_user_query(con: duckdb.DuckDBPyConnection, query: str, read_only: bool = True) -> pa.Table:
    """Runs ad-hoc SQL on a connection made by ``connect``. Read-only (the default):
    only SELECT-like statements, no file readable but the snapshot's, none writable, the
    configuration locked (so a ``COPY ... TO`` into the warehouse or an ``ATTACH`` cannot
    change what metrics read, nor read files elsewhere)."""
    try:
        statements = con.extract_statements(query)
    except duckdb.Error as e:
        raise QueryError(str(e).splitlines()[0]) from e
    if not statements:
        raise QueryError("no SQL statement given")
    if read_only:
        for st in statements:
            if st.type not in _READ_ONLY_STATEMENTS:
                kind = str(st.type).rsplit(".", 1)[-1]
                raise QueryError(f"cclq sql is read-only: {kind} statements are not run",
                                 hint="queries (SELECT, DESCRIBE, SHOW, EXPLAIN) only; "
                                      "`cclq sql --read-write` or `cclq shell` for a full DuckDB session")
        listed = "[" + ", ".join(_quote(str(p)) for p in readable_files(con)) + "]"
        con.execute(f"SET allowed_paths = {listed}")
        con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")
    try:
        result = None
        for st in statements:
            result = con.execute(st.query)
        assert result is not None
        return result.to_arrow_table()
    except duckdb.Error as e:
        raise QueryError(str(e).splitlines()[0]) from e


def connection_snapshot(con: duckdb.DuckDBPyConnection) -> tuple[Snapshot, list[str] | None]:
    """The snapshot a connection made by ``connect`` reads, and the traces it selected."""
    return _SNAPSHOTS[con]


def readable_files(con: duckdb.DuckDBPyConnection) -> list[Path]:
    """Every file a connection made by ``connect`` reads: its snapshot's catalog files
    and the data files of the traces it selected."""
    snapshot, _traces = _SNAPSHOTS[con]
    root = snapshot.warehouse.root
    data = [root / p for (p,) in con.execute("SELECT DISTINCT path FROM parts ORDER BY path").fetchall()]
    return [snapshot.catalog_file(name) for name in CATALOG_SCHEMAS] + data
