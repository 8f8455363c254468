"""The SQL that opens the warehouse in DuckDB with every view defined.

A session (``cclq.query.session``) reads ONE catalog snapshot (``Warehouse.open_snapshot``): the catalog
tables (``files``, ``ingest_stats``, ``cards``, ``parts``) are loaded from that
snapshot's Parquet files, and each data table (``events``, ...) is a view over exactly
the data files the snapshot names. An ingest running meanwhile changes nothing the
connection sees, and data a killed ingest left uncommitted is never visible. The
snapshot stays locked against garbage collection for as long as the connection lives.

``setup_script`` produces that SQL, then every module of ``sql/views`` in dependency
order, each followed by the ``COMMENT ON`` statements of its documented views, and
those of the base relations (so ``duckdb_views().comment`` and
``duckdb_columns().comment`` describe them; ``cclq.query.sqlfiles.comment_statements``).
The same script serves a ``Session`` (Python, in-memory DuckDB) and ``cclq shell``
(the DuckDB CLI's ``-init`` file), so what a user sees in the shell is exactly what
metrics see.
"""

from __future__ import annotations

import re

import duckdb
import pyarrow as pa

from cclq.query.sqlfiles import comment_statements, defined_names, module_script, modules_for, view_modules
from cclq.schema import TABLE_SCHEMAS, data_file_schema
from cclq.sqltext import path_literal, quote_literal
from cclq.store.warehouse import Snapshot

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




def _empty(name: str, schema: pa.Schema) -> str:
    cols = [f'"{f.name}" {_DUCK_TYPES[f.type]}' for f in schema]
    return f"CREATE OR REPLACE TABLE {name} ({', '.join(cols)});"


def _trace_filter(traces: list[str] | None) -> str:
    if traces is None:
        return ""
    return " WHERE trace IN (" + ", ".join(quote_literal(t) for t in traces) + ")" if traces else " WHERE false"


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
                f"[{', '.join(path_literal(p) for p in files)}], hive_partitioning = false);"
            )
        else:
            stmts.append(_data_placeholder(table))
    for name, relation in CATALOG_RELATIONS.items():
        path = snapshot.catalog_file(name)
        stmts.append(f"CREATE OR REPLACE TABLE {relation} AS SELECT * FROM read_parquet({path_literal(path)}){where};")
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


def _safe_id(text: str) -> str:
    """A snapshot id for a comment line: cclq makes them, but nothing that is not a plain
    name ever reaches SQL text (a newline would end the comment)."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", text)


def setup_script(snapshot: Snapshot, traces: list[str] | None = None, for_sql: str | None = None) -> str:
    relations = base_relations(snapshot, traces)
    # the catalog tables are read once: cache Parquet footers for the queries after them
    parts = [f"-- cclq: snapshot {_safe_id(snapshot.id)}",
             "SET parquet_metadata_cache = true;"] + relations
    modules = [f"-- module {m.name}\n{module_script(m).strip()}"
               for m in (view_modules() if for_sql is None else modules_for(for_sql))]
    parquet_views = parquet_views_of(snapshot, traces)
    parts += _modules_bound_on_placeholder(modules, parquet_views)
    kinds = {t: "VIEW" if t in parquet_views else "TABLE" for t in TABLE_SCHEMAS}
    parts += _base_comments({**kinds, **{r: "TABLE" for r in CATALOG_RELATIONS.values()}})
    return "\n".join(parts) + "\n"


def parquet_views_of(snapshot: Snapshot, traces: list[str] | None) -> list[str]:
    """The data tables that are views over Parquet files (those with files for ``traces``)."""
    return [t for t in TABLE_SCHEMAS if snapshot.data_files(t, traces)]


def define_views(con: duckdb.DuckDBPyConnection, sql: str, comments: bool = False,
                 created: set[str] | None = None, parquet_views: list[str] | None = None) -> None:
    """Creates the view modules ``sql`` needs that the connection does not have yet.

    ``comments``: with their documentation (COMMENT ON, as ``setup_script`` gives every
    user-facing session), and the base relations' too; off for computations (metrics),
    which never read it.

    ``created``: the modules this connection has, when its owner knows them all (a
    session opened with only the base relations, that created every module through here)
    and ``parquet_views`` the data tables that are Parquet views: then DuckDB is not
    asked what exists, which lists every function (30 ms, once per new set of modules:
    0.6 s of a report)."""
    needed = modules_for(sql)
    if created is not None and parquet_views is not None and not comments:
        missing = [m for m in needed if m.name not in created]
        if missing:
            con.execute("\n".join(_modules_bound_on_placeholder([m.sql for m in missing], parquet_views)))
        return
    defined = con.execute(
        "SELECT view_name, 'view' FROM duckdb_views() WHERE NOT internal "
        "UNION ALL SELECT table_name, 'table' FROM duckdb_tables() "
        "UNION ALL SELECT function_name, 'function' FROM duckdb_functions() WHERE NOT internal"
    ).fetchall()
    have = {name.lower() for name, _ in defined}
    absent = {m.name for m in needed if not defined_names(m) <= have}
    # an extension defines the names of the module it extends: it goes with that module
    missing = [m for m in needed if m.name in absent or absent & set(m.extends)]
    if missing:
        parquet_views = [t for t in TABLE_SCHEMAS if (t, "view") in defined]
        script = [module_script(m) if comments else m.sql for m in missing]
        con.execute("\n".join(_modules_bound_on_placeholder(script, parquet_views)))
    if comments:
        con.execute("\n".join(_base_comments({n: k.upper() for n, k in defined})) or "SELECT 1")
