"""The SQL that opens the warehouse in DuckDB with every view defined.

A session (``cclq.query.session``) reads ONE catalog snapshot (``Warehouse.open_snapshot``): the catalog
tables (``files``, ``ingest_stats``, ``cards``, ``parts``) are loaded from that
snapshot's Parquet files, and each data table (``events``, ...) is a view over exactly
the data files the snapshot names. An ingest running meanwhile changes nothing the
connection sees, and data a killed ingest left uncommitted is never visible. The
snapshot stays locked against garbage collection for as long as the connection lives.

``setup_script`` produces that SQL: it attaches the views of ``sql/views``, compiled
once with the ``COMMENT ON`` statements of the documented ones
(``cclq.query.view_catalog``), and creates the base relations, with their comments for
what users read (so ``duckdb_views().comment`` and ``duckdb_columns().comment``
describe them; ``cclq.query.sqlfiles.comment_statements``). The same script serves a
``Session`` (Python, in-memory DuckDB) and ``cclq shell`` (the DuckDB CLI's ``-init``
file), so what a user sees in the shell is exactly what metrics see.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from cclq.query.sqlfiles import comment_statements, module_script, view_modules
from cclq.query.view_catalog import CATALOG_RELATIONS, attach_statements, data_placeholder, matcher_statements
from cclq.schema import TABLE_SCHEMAS
from cclq.sqltext import path_literal, quote_literal
from cclq.store.warehouse import Snapshot

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa


# Rows of each Arrow batch a query result is fetched in. DuckDB reserves each column's
# buffer for a whole batch up front: at its default of a million rows a wide result
# reserved hundreds of MB of address space per query, and a report of 83 metrics under a
# 2 GB address-space limit (prlimit --as) failed 15 of them ("Out of Memory: ArrowBuffer")
# with a resident set of 200 MB. A large result comes as more batches instead.
ARROW_BATCH_ROWS = 65_536


def arrow_table(result: duckdb.DuckDBPyConnection | duckdb.DuckDBPyRelation) -> pa.Table:
    """The rows of an executed query or a relation as an Arrow table, in batches of
    ``ARROW_BATCH_ROWS`` (DuckDB's default of a million rows a batch reserves address
    space that a process under ``RLIMIT_AS`` does not have)."""
    return result.to_arrow_table(ARROW_BATCH_ROWS)


def _trace_filter(traces: list[str] | None) -> str:
    if traces is None:
        return ""
    return " WHERE trace IN (" + ", ".join(quote_literal(t) for t in traces) + ")" if traces else " WHERE false"


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
            stmts.append(data_placeholder(table))
    for name, relation in CATALOG_RELATIONS.items():
        path = snapshot.catalog_file(name)
        stmts.append(f"CREATE OR REPLACE TABLE {relation} AS SELECT * FROM read_parquet({path_literal(path)}){where};")
    return stmts


def _base_comments(kinds: dict[str, str]) -> list[str]:
    """COMMENT ON statements for the base relations (their documentation is in
    sql/relations.sql); ``kinds``: relation -> VIEW or TABLE, as the connection has it."""
    names = [*TABLE_SCHEMAS, *CATALOG_RELATIONS.values()]
    return [s for name in names if name in kinds for s in comment_statements(name, kinds[name])]


# The errors DuckDB raises before a statement runs (its text does not parse, or a name in
# it does not bind): a metric that "does not compile", and an ad-hoc statement that may be
# run again for DuckDB's message with the caret.
COMPILE_ERRORS = ("ParserException", "BinderException", "CatalogException")


# Settings of one connection, not of the database: a second connection (a lane,
# ``Session.worker``) runs them too. Without them a lane planned collectives' ASOF join
# as a nested loop (27 M rows, 5.3 of a report's 12.9 CPU s on a 127 MB rank, issue 42).
CONNECTION_SETTINGS = ("SET parquet_metadata_cache = true;", "SET asof_loop_join_threshold = 0;")


def setup_script(
    snapshot: Snapshot,
    traces: list[str] | None = None,
    comments: bool = False,
    compiled: bool = True,
    attach: bool = True,
) -> str:
    """The SQL that opens ``snapshot`` (optionally only ``traces``) with every view:
    the compiled view catalog (``cclq.query.view_catalog``), then the base relations
    (``comments``: with their documentation, for what users read). ``compiled=False``
    creates the views in the script instead, after the base relations: for a DuckDB of
    another version than the library's (``cclq shell`` with a duckdb CLI that cannot read
    the file the library compiled, whose storage format is its own). ``attach=False``: the
    connection has attached the compiled views already (``session.open_database_soon``)."""
    relations = base_relations(snapshot, traces)
    # the catalog tables are read once: cache Parquet footers for the queries after them
    # ASOF joins always as the sort-merge ASOF operator: below an estimate of 64 left
    # rows DuckDB plans one as a nested loop with an arg_max, and a view's estimates are
    # often that low for millions of rows (collectives' launch stack: quadratic)
    head = [f"-- cclq: snapshot {_safe_id(snapshot.id)}", *CONNECTION_SETTINGS]
    if compiled:
        parts = [*head, *(attach_statements() if attach else []), *relations]
    else:
        matchers = matcher_statements()  # each module's matchers right before it
        parts = [*head, *relations]
        for m in view_modules():
            parts += [*matchers.get(m.name, []), f"-- module {m.name}\n{module_script(m).strip()}"]
    if comments:
        kinds = {t: "VIEW" if snapshot.data_files(t, traces) else "TABLE" for t in TABLE_SCHEMAS}
        parts += _base_comments({**kinds, **{r: "TABLE" for r in CATALOG_RELATIONS.values()}})
    return "\n".join(parts) + "\n"


def _safe_id(text: str) -> str:
    """A snapshot id for a comment line: cclq makes them, but nothing that is not a plain
    name ever reaches SQL text (a newline would end the comment)."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", text)
