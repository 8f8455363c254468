"""Read-only ad-hoc SQL (``cclq sql`` without ``--read-write``), by construction.

A statement runs only if it is a query all the way down:

1. DuckDB's parser splits the text into statements; each must be a SELECT (which
   covers FROM-first queries, DESCRIBE, SHOW, SUMMARIZE, VALUES, UNPIVOT, CTEs), or an
   EXPLAIN / EXPLAIN ANALYZE whose inner statement passes this same check.
2. A SELECT must serialize with ``json_serialize_sql``, which accepts only a SELECT
   parse tree: a PRAGMA dressed as a SELECT, or a PIVOT that first creates an enum type,
   is refused here.
3. The connection then runs with external access off, the only readable files those of
   the snapshot (``allowed_paths``), extensions neither installed nor loaded, and its
   configuration locked, so even a statement that slipped past 1-2 could neither read
   nor write elsewhere; a query tree has no statement that writes.

tests/query/test_read_only_sql.py runs every statement type DuckDB's parser knows, in
every wrapper, and checks each is refused or leaves every warehouse byte unchanged.
"""

from __future__ import annotations

import re

import duckdb

from cclq.errors import QueryError

_EXPLAIN = re.compile(r"^\s*EXPLAIN\s+(?:ANALYZE\s+|\(\s*[^)]*\)\s*)?(?P<inner>.*)$", re.IGNORECASE | re.DOTALL)
_COMMENTS = re.compile(r"^\s*(?:--[^\n]*(?:\n|$)|/\*.*?\*/)\s*", re.DOTALL)
_HINT = (
    "queries only (SELECT, WITH, FROM, DESCRIBE, SHOW, SUMMARIZE, EXPLAIN of them); "
    "`cclq sql --read-write` or `cclq shell` for a full DuckDB session"
)


def split_statements(con: duckdb.DuckDBPyConnection, text: str) -> list[duckdb.Statement]:
    """DuckDB's parse of ``text`` into statements; a parse error or no statement at all
    is a ``QueryError``."""
    try:
        statements = con.extract_statements(text)
    except duckdb.Error as e:
        raise QueryError(str(e).splitlines()[0]) from e
    if not statements:
        raise QueryError("no SQL statement given")
    return statements


def check_read_only(con: duckdb.DuckDBPyConnection, text: str, depth: int = 0) -> list[str]:
    """The statements of ``text`` if every one is a query (see the module docstring),
    else ``QueryError`` naming the first that is not."""
    statements = split_statements(con, text)
    out = []
    for st in statements:
        kind = str(st.type).rsplit(".", 1)[-1]
        if st.type == duckdb.StatementType.EXPLAIN and depth < 4:
            body = st.query
            while (m := _COMMENTS.match(body)) and m.end() > 0:
                body = body[m.end() :]
            explained = _EXPLAIN.match(body)
            if explained is None:
                raise QueryError("cclq sql is read-only: an EXPLAIN it cannot read is not run", hint=_HINT)
            check_read_only(con, explained.group("inner"), depth + 1)
        elif st.type != duckdb.StatementType.SELECT or not _is_select_tree(con, st.query):
            raise QueryError(f"cclq sql is read-only: {kind} statements are not run", hint=_HINT)
        out.append(st.query)
    return out


def _is_select_tree(con: duckdb.DuckDBPyConnection, query: str) -> bool:
    """Whether DuckDB's serializer takes the statement as a SELECT parse tree."""
    try:
        serialized = con.execute("SELECT json_serialize_sql(?::VARCHAR)", [query]).fetchone()
    except duckdb.Error:
        return False
    return serialized is not None and '"error":true' not in str(serialized[0]).replace(" ", "")


def lock_down(con: duckdb.DuckDBPyConnection, readable: list[str]) -> None:
    """Only ``readable`` files can be read, nothing installed or loaded, the settings locked."""
    from cclq.sqltext import quote_literal

    listed = "[" + ", ".join(quote_literal(p) for p in readable) + "]"
    con.execute("SET autoinstall_known_extensions = false")
    con.execute("SET autoload_known_extensions = false")
    con.execute(f"SET allowed_paths = {listed}")
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")
