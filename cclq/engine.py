"""Opening the warehouse in DuckDB with every view defined.

``setup_script`` produces the SQL that defines the base relations over the
warehouse's Parquet files (``events``, ``files``, ``ingest_stats``, ``cards``) and
then every module of ``sql/views`` in dependency order. The same script serves
``connect`` (Python, in-memory DuckDB) and ``cclq shell`` (the DuckDB CLI's
``-init`` file), so what a user sees in the shell is exactly what metrics see (the shell
globs the event files, so that it sees later ingests; a connection lists them).
"""

from __future__ import annotations

import glob
import os

import duckdb
import pyarrow as pa

from cclq.cards import CARD_SCHEMA
from cclq.ingest import FILES_SCHEMA, STATS_SCHEMA
from cclq.schema import EVENT_SCHEMA
from cclq.sqlfiles import defined_names, modules_for, view_modules
from cclq.warehouse import Warehouse

_DUCK_TYPES = {
    pa.string(): "VARCHAR",
    pa.int64(): "BIGINT",
    pa.int32(): "INTEGER",
    pa.float64(): "DOUBLE",
    pa.bool_(): "BOOLEAN",
    pa.list_(pa.int64()): "BIGINT[]",
    pa.timestamp("us", tz="UTC"): "TIMESTAMPTZ",
}


def _quote(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def _empty(name: str, schema: pa.Schema, leading: list[tuple[str, str]] | None = None) -> str:
    cols = [f"{c} {t}" for c, t in (leading or [])] + [f"{f.name} {_DUCK_TYPES[f.type]}" for f in schema]
    return f"CREATE OR REPLACE TABLE {name} ({', '.join(cols)});"


def _trace_filter(traces: list[str] | None) -> str:
    if traces is None:
        return ""
    return " WHERE trace IN (" + ", ".join(_quote(t) for t in traces) + ")" if traces else " WHERE false"


def _parquet_relation(name: str, glob: str, schema: pa.Schema, any_files: bool, where: str) -> str:
    """A catalog relation, loaded once into a small in-memory table.

    The catalog is one tiny Parquet file per ingested file; as a view, every query and
    every view that builds on it would list and open them all again.
    """
    if not any_files:
        return _empty(name, schema)
    # union_by_name: catalog rows written by an older cclq may lack newer columns.
    # A per-file row (written by a commit) wins over the compacted _all.parquet.
    key = {"files": "file_id", "ingest_stats": "file_id", "cards": "trace"}[name]
    dedupe = (f" QUALIFY dense_rank() OVER (PARTITION BY {key} "
              "ORDER BY filename LIKE '%/_all.parquet') = 1")
    return (f"CREATE OR REPLACE TABLE {name} AS SELECT * EXCLUDE (filename) FROM read_parquet({_quote(glob)}, "
            f"union_by_name = true, filename = true){where}{dedupe};")


def base_relations(wh: Warehouse, traces: list[str] | None = None, listed: bool = False) -> list[str]:
    """The four relations read straight from Parquet, optionally for some traces only.

    ``events`` stays a view (it can be gigabytes); the catalog relations are tiny and
    become in-memory tables filtered to the selected traces. ``listed=True`` names the
    event files found now instead of a glob: DuckDB then lists no directories when it
    binds each view or runs a query (on a 100-trace warehouse that halves the time to
    define the views), but files ingested later are not seen. Short-lived connections
    (``connect``) list; the long-lived shell globs.
    """
    where = _trace_filter(traces)
    stmts: list[str] = []
    # with a trace list, glob only those traces' folders: listing and opening every
    # other trace's files would make a per-trace query cost grow with the warehouse
    folders = [wh.events_dir] if traces is None else [
        wh.events_dir / f"trace={t}" for t in traces if (wh.events_dir / f"trace={t}").is_dir()
    ]
    if listed:  # glob.glob: pathlib's glob is 3x slower on 1000s of files
        pattern = "*/*.parquet" if traces is not None else "*/*/*.parquet"
        sources = sorted(p for folder in folders for p in glob.glob(os.path.join(glob.escape(str(folder)), pattern)))
    else:
        sources = [wh.events_glob()] if traces is None else [str(f / "*" / "*.parquet") for f in folders
                                                            if any(f.glob("*/*.parquet"))]
    if wh.has_events() and sources:
        stmts.append(
            "CREATE OR REPLACE VIEW events AS SELECT trace, rank, * EXCLUDE (trace, rank) "
            f"FROM read_parquet([{', '.join(_quote(g) for g in sources)}], hive_partitioning = true, "
            "hive_types = {'trace': VARCHAR, 'rank': INTEGER});"
        )
    else:
        stmts.append(_EVENTS_PLACEHOLDER)
    stmts.append(_parquet_relation("files", str(wh.files_dir / "*.parquet"), FILES_SCHEMA,
                                   any(wh.files_dir.glob("*.parquet")), where))
    stmts.append(_parquet_relation("ingest_stats", str(wh.stats_dir / "*.parquet"), STATS_SCHEMA,
                                   any(wh.stats_dir.glob("*.parquet")), where))
    stmts.append(_parquet_relation("cards", str(wh.cards_dir / "*.parquet"), CARD_SCHEMA,
                                   any(wh.cards_dir.glob("*.parquet")), where))
    return stmts


# `events` with no rows and exactly the columns and types of the Parquet view.
_EVENTS_PLACEHOLDER = _empty("events", EVENT_SCHEMA, [("trace", "VARCHAR"), ("rank", "INTEGER")])


def _modules_bound_on_placeholder(module_sql: list[str], events_is_view: bool) -> list[str]:
    """Statements that create view modules while ``events`` is an empty table.

    DuckDB binds a view when it is created, and binding a view over ``events`` binds
    ``read_parquet`` over every event file: on a warehouse of 800 files that was ~15 ms
    per view, most of a connection's set-up. Views are bound again when a query uses
    them, against whatever ``events`` is then, so they are created against an empty
    table of the same columns and types, and the Parquet view is put back afterwards.
    """
    if not module_sql or not events_is_view:
        return module_sql
    return (["ALTER VIEW events RENAME TO _cclq_events_parquet;", _EVENTS_PLACEHOLDER] + module_sql
            + ["DROP TABLE events;", "ALTER VIEW _cclq_events_parquet RENAME TO events;"])


def setup_script(wh: Warehouse, traces: list[str] | None = None, for_sql: str | None = None,
                 listed: bool = False) -> str:
    # the catalog tables are read once: cache Parquet footers for the queries after them
    relations = base_relations(wh, traces, listed)
    parts = ["-- cclq: relations over " + str(wh.root), "SET parquet_metadata_cache = true;"] + relations
    modules = [f"-- module {m.name}\n{m.sql.strip()}"
               for m in (view_modules() if for_sql is None else modules_for(for_sql))]
    parts += _modules_bound_on_placeholder(modules, events_is_view=relations[0] != _EVENTS_PLACEHOLDER)
    return "\n".join(parts) + "\n"


def connect(wh: Warehouse, require: bool = True, traces: list[str] | None = None,
            for_sql: str | None = None, views: bool = True) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with the warehouse's views defined.

    ``traces`` restricts every relation to those trace ids (``None``: all).
    ``for_sql``: define only the view modules this SQL needs (``None``: all of them).
    ``views=False``: only the base relations; ``define_views`` adds modules when a query
    needs them (a metric whose result is cached never needs them).
    """
    if require:
        wh.require()
    con = duckdb.connect(":memory:")
    if views:
        con.execute(setup_script(wh, traces, for_sql, listed=True))
    else:
        con.execute("\n".join(["SET parquet_metadata_cache = true;"] + base_relations(wh, traces, listed=True)))
    return con


def define_views(con: duckdb.DuckDBPyConnection, sql: str) -> None:
    """Creates the view modules ``sql`` needs that the connection does not have yet."""
    defined = con.execute(
        "SELECT view_name, 'view' FROM duckdb_views() WHERE NOT internal "
        "UNION ALL SELECT table_name, 'table' FROM duckdb_tables() "
        "UNION ALL SELECT function_name, 'function' FROM duckdb_functions() WHERE NOT internal"
    ).fetchall()
    have = {name.lower() for name, _ in defined}
    missing = [m for m in modules_for(sql) if not defined_names(m) <= have]
    if missing:
        events_is_view = ("events", "view") in defined
        con.execute("\n".join(_modules_bound_on_placeholder([m.sql for m in missing], events_is_view)))
