"""No SQL text in the package is built from a value that comes from a file, a path or
the command line, except through the quoting functions of ``cclq/sqltext.py`` (and the
nsys reader's ``quote_ident`` for SQLite). The test reads every f-string of the package
that looks like SQL and checks what it interpolates: a quoting call, a number, or a name
this table vouches for (cclq's own constants: table names from ``cclq.schema``, view
names from its SQL files, column lists it builds from those)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "cclq"
SQL = re.compile(
    r"\b(SELECT|FROM|CREATE|INSERT|UPDATE|DELETE|COPY|ATTACH|PRAGMA|SET|DROP|ALTER|WHERE|VIEW|"
    r"TABLE|read_parquet)\b"
)
QUOTING = {"quote_literal", "quote_identifier", "path_literal", "quote_ident", "_safe_id"}
NUMBERS = {"int", "max", "min", "len", "float", "repr"}
# name -> why it is not outside text (per file: relative path -> names)
TRUSTED: dict[str, dict[str, str]] = {
    "query/engine.py": {
        "name": "a table of cclq.schema",
        "table": "a table of cclq.schema",
        "relation": "a catalog relation name of CATALOG_RELATIONS",
        "t": "a table of cclq.schema",
        "where": "_trace_filter(): trace ids through quote_literal",
        "', '.join((path_literal(p) for p in files))": "file paths, each through path_literal",
    },
    "query/metrics.py": {
        "spec.sql": "a metric's SQL file of sql/metrics (cclq's own)",
        "', '.join(select)": "the metric's own columns, each quoted by _order_by/quote_literal",
        "_order_by(out_names)": "column names, each through a double-quoting join",
        "_order_by(table.column_names)": "column names, each through a double-quoting join",
        "view": "a name of a `-- batch:` line (cclq's own SQL, sqlfiles.batch_views)",
        "index": "a constant column name",
        "name": "a name of a `-- batch:` line (cclq's own SQL, sqlfiles.batch_views)",
        "macro": "a macro of a `-- batch:` line (cclq's own SQL, sqlfiles.batch_views)",
        "SHARED_DB": "a constant database name (_cclq_shared)",
        "call": "a shared macro's call: quoted names and an int version",
        "_ROWS": "the constant name of the runner's temporary result table",
        "given.columns": "a column list of VERSION_INPUTS (cclq's own)",
        "given.rows": "a row condition of VERSION_INPUTS (cclq's own)",
        "target": "a shared table name through quote_identifier",
        "copied": "SELECT of a shared table name through quote_identifier",
        "listed": "trace ids, each through quote_literal",
        "a": "a VERSION_INPUTS side: its own text and a quoted table name",
        "b": "a VERSION_INPUTS side: its own text and a quoted table name",
        "CATALOG": "the constant name of the compiled view catalog",
        "_stored(name)": "a shared table name through quote_identifier",
        "stand_ins[name]": "a stand-in view of a `-- batch:` line (cclq's own SQL, sqlfiles.batch_views)",
        "kept": "_kept_columns(): `*` less the `without` columns of a `-- batch:` line, each quote_identifier'd",
        "_shared_table(macro, base)": "a shared table name through quote_identifier",
        "table": "a shared table name through quote_identifier",
        "kind": "VIEW, TABLE or MACRO TABLE: constants of the code or its own query",
        "quote_identifier(name)": "a name through quote_identifier",
        "source": "a name of a `-- batch:` line or its stand-in (cclq's own SQL)",
        "stand_ins.get(name, name)": "a name of a `-- batch:` line or its stand-in (cclq's own SQL)",
    },
    "query/view_catalog.py": {
        "CATALOG": "the constant name of the compiled view catalog",
        "name": "a base relation of cclq.schema or CATALOG_RELATIONS",
        "', '.join(cols)": "columns of cclq.schema with DuckDB types",
        "matcher.macro": "a macro of a `-- matcher:` line (cclq's own SQL, \\w+ names)",
        "matcher.rules": "a rules view of a `-- matcher:` line (cclq's own SQL, \\w+ names)",
        "names": "columns of a `-- matcher:` line (\\w+ names) and constant column names",
        "arguments": "`text` and the columns of a `-- matcher:` line (\\w+ names)",
        "listed": "CASE arms: matcher columns, _value() constants (quote_literal, numbers)",
    },
    "query/sqlfiles.py": {
        "name": "a name of a `-- batch:` line (cclq's own SQL, \\w+ names)",
        "view.stand_in": "a stand-in of a `-- batch:` line (cclq's own SQL, \\w+ names)",
        "where": "a file and line in an error message, not SQL that runs",
    },
    "query/lanes.py": {"name": "a DuckDB setting named by the module (threads, preserve_insertion_order)"},
    "query/hta_series.py": {
        "key": "a column name constant",
        "value": "a column name constant",
        "source": "a view name or subquery constant",
        "MAX_SERIES": "a number",
        "BINS": "a number",
        "BINS - 1": "a number",
    },
    "query/workloads.py": {
        "', '.join(_INFO_COLUMNS)": "cclq's own column list",
        "', '.join(_CARD_COLUMNS)": "the card columns of cclq.cards.load.CARD_FIELDS",
    },
    "query/readonly.py": {"listed": "file paths, each through quote_literal"},
    "query/critical_path.py": {
        "PATH_TABLE": "the constant name of the path's temporary table",
        "view": "a constant view name of STORED_VIEWS or WINDOWS_VIEW",
        "select": "constant SQL text of prepared() (a view of STORED_VIEWS, scope)",
        "scope": "constant SQL text of prepared(): the scope and only_rank joins",
    },
    "api/hta_kernels.py": {"memory": "one of two constant clauses"},
    "api/hta_breakdown.py": {
        "columns": "a constant column list of the module",
        "where": "a constant condition of the module, a rank through int(), categories of KERNEL_CATS",
    },
    "api/hta_data.py": {
        "listed": "ranks, each through int()",
        "table": "a name of PINNED (cclq's own) through quote_identifier",
        "name": "a name of PINNED (cclq's own)",
        "source or f'SELECT * FROM {name}'": "_from_hta_events' query, or a name of PINNED",
        "view.stand_in": "a stand-in of a `-- batch:` line (cclq's own SQL, \\w+ names)",
        "where": "empty, or only_rank's WHERE with a rank through int()",
    },
    "query/dask.py": {"DUCKDB_MEMORY_SHARE": "a number"},
    "cli/warehouse.py": {"cols": "a constant column list of the traces command"},
    "formats/nsys/reader.py": {
        "', '.join((c if c in texts else int_sql(c) for c, _ in present))": "names of cclq's own `wanted` list, present in the file's table",  # noqa: E501
        "NVTX_THREAD_NAMES": "an event type number",
    },
    "formats/nsys/rows.py": {
        "text": "a constant column expression",
        "short": "a constant column expression",
        "join": "a constant join clause",
        "leading": "_gpu_columns(): constant column expressions",
        "'sn.value' if short else 'NULL'": "one of two constants",
        "', '.join(map(str, wanted))": "Nsight's event type numbers (cclq's constants)",
        "NVTX_DOMAIN_CREATE": "an event type number",
    },
    "synth/nsys.py": {
        "', '.join('?' * 18)": "placeholders",
        "', '.join('?' * 11)": "placeholders",
        "', '.join('?' * 10)": "placeholders",
        "', '.join('?' * 9)": "placeholders",
    },
}


def _allowed(expr: ast.expr, trusted: dict[str, str]) -> bool:
    text = ast.unparse(expr)
    if text in trusted:
        return True
    if isinstance(expr, ast.Call):
        func = expr.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        if name in QUOTING or name in NUMBERS or name in ("int_sql", "col", "_gpu_columns"):
            return True
    if isinstance(expr, ast.Constant):
        return True
    return False


def test_sql_text_interpolates_only_quoted_or_own_values() -> None:
    unvouched = []
    checked = 0
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = str(path.relative_to(PACKAGE))
        trusted = TRUSTED.get(rel, {})
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.JoinedStr):
                continue
            text = "".join(v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str))
            if not SQL.search(text):
                continue
            for value in node.values:
                if isinstance(value, ast.FormattedValue):
                    checked += 1
                    if not _allowed(value.value, trusted):
                        unvouched.append(f"cclq/{rel}:{node.lineno}: {{{ast.unparse(value.value)}}}")
    print(f"\n{checked} interpolations into SQL text checked, {len(unvouched)} unvouched")
    assert not unvouched, "\n".join(unvouched)
