"""The view modules of ``sql/views``, compiled once into a DuckDB file that sessions attach.

DuckDB binds a view when it is created. Creating the 36 modules took 0.5 s in every
process, a quarter of a report on a small trace, and most of a metric's set-up. Like
Python's ``.pyc``, they are now created once per (module SQL, base schemas, DuckDB
version) into ``views-<key>.duckdb`` under the cache folder (``cache_folder``), and a
session attaches that file read-only as the catalog ``cclq`` (about 20 ms).

Name resolution, which the rest of cclq relies on (tests/query/test_view_catalog.py):

* a view or macro in ``cclq.main`` binds a name in its own catalog first, then in the
  default database (``memory``), where a session creates the base relations (``events``,
  ``parts``, ...: the file has none, they are dropped after compiling);
* the temporary schema comes before both, everywhere: ``metric_scope``,
  ``metric_params`` and the shared views of a batch (``cclq.query.metrics``) are
  temporary;
* a query's own names go ``memory.main`` then ``cclq.main`` (``search_path``), so a user
  of ``cclq shell`` creates tables in ``memory`` and reads every view unqualified.

The file is written to a temporary name and renamed into place, so a process never
attaches a half-written one and two that compile at once both succeed.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
import time
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa

if TYPE_CHECKING:
    import duckdb

from cclq.locations import user_cache_dir
from cclq.query.settings import open_database
from cclq.query.sqlfiles import Matcher, module_matchers, module_script, view_modules
from cclq.schema import TABLE_SCHEMAS, data_file_schema
from cclq.sqltext import path_literal, quote_literal
from cclq.store.catalog import CATALOG_SCHEMAS

log = logging.getLogger("cclq")

CATALOG = "cclq"  # the name sessions attach the compiled file under
CACHE_ENV = "CCLQ_CACHE_DIR"
FORMAT = 1  # of the file's layout: a new number compiles every file again

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


def empty_table(name: str, schema: pa.Schema) -> str:
    """CREATE TABLE of a table with no rows and exactly these columns and types."""
    cols = [f'"{f.name}" {_DUCK_TYPES[f.type]}' for f in schema]
    return f"CREATE OR REPLACE TABLE {name} ({', '.join(cols)});"


def data_placeholder(table: str) -> str:
    """A data table with no rows and exactly the columns and types of its files."""
    return empty_table(table, data_file_schema(TABLE_SCHEMAS[table]))


def _placeholders() -> list[tuple[str, str]]:
    """(name, CREATE TABLE) of every base relation, empty: what the modules bind against
    while they are compiled."""
    data = [(t, data_placeholder(t)) for t in TABLE_SCHEMAS]
    catalog = [(CATALOG_RELATIONS[n], empty_table(CATALOG_RELATIONS[n], s)) for n, s in CATALOG_SCHEMAS.items()]
    return data + catalog


def matcher_macro(con: duckdb.DuckDBPyConnection, matcher: Matcher, temporary: bool = False) -> str:
    """The CREATE MACRO of a ``-- matcher:`` line (``cclq.query.sqlfiles.Matcher``), from
    the rows of its rules view as ``con`` reads them: one arm per rule, its pattern a
    constant that DuckDB compiles once, where a join on the pattern column compiled it for
    every row. A rule is named by its ``priority``, unique among the rules of the same
    ``columns`` values (an error otherwise).

    The matcher is made when the views are compiled, so a session that shadows the rules
    view (a temporary view of the same name, to try a rule) makes it again from that view
    with ``temporary``: a temporary macro, which the compiled views then read."""
    keys = list(matcher.columns)
    names = ", ".join([*keys, "priority", "pattern"])
    rows = con.execute(f"SELECT {names} FROM {matcher.rules} ORDER BY {names}").fetchall()
    arms: list[str] = []
    seen: set[tuple[object, ...]] = set()
    for *values, priority, pattern in rows:
        if (*values, priority) in seen:
            raise ValueError(f"{matcher.rules}: two rules with priority {priority} for {dict(zip(keys, values))}")
        seen.add((*values, priority))
        conditions = [f"{column} = {_value(v)}" for column, v in zip(keys, values, strict=True)]
        conditions.append(f"regexp_matches(text, {_value(pattern)})")
        arms.append(f"  CASE WHEN {' AND '.join(conditions)} THEN {int(priority)} END")
    listed = "[\n" + ",\n".join(arms) + "\n]" if arms else "CAST([] AS INTEGER[])"
    arguments = ", ".join(["text", *keys])
    create = "CREATE OR REPLACE TEMP MACRO" if temporary else "CREATE OR REPLACE MACRO"
    return f"{create} {matcher.macro}({arguments}) AS list_filter({listed}, lambda p: p IS NOT NULL);"


def _matcher_stand_in(matcher: Matcher) -> str:
    """A matcher with no rules (the same arguments and type), for the module that creates
    the rules to bind its own views against before they exist."""
    arguments = ", ".join(["text", *matcher.columns])
    return f"CREATE OR REPLACE MACRO {matcher.macro}({arguments}) AS CAST([] AS INTEGER[]);"


def _value(value: object) -> str:
    """A rule's value as a SQL constant: a number, a quoted string, or NULL (which no
    argument equals, as in a join on the column)."""
    if value is None:
        return "NULL"
    if isinstance(value, bool | int | float):
        return repr(int(value)) if isinstance(value, bool | int) else repr(float(value))
    return quote_literal(str(value))


@lru_cache(maxsize=1)
def matcher_statements() -> dict[str, list[str]]:
    """Module name -> the CREATE MACRO of each of its matchers, from the compiled file's
    rules: for a script that creates the views itself (``cclq shell`` with a DuckDB CLI
    of another version, ``engine.setup_script``), right before that module (a matcher
    reads nothing: its rules are constants in it)."""
    con = open_database()
    try:
        for statement in attach_statements():
            con.execute(statement)
        made = {m.name: [matcher_macro(con, matcher) for matcher in module_matchers(m)] for m in view_modules()}
        return {name: statements for name, statements in made.items() if statements}
    finally:
        con.close()


def catalog_key() -> str:
    """What the compiled file depends on, hashed: its layout, DuckDB's version (the
    storage format and how views are bound), and what makes the script that creates it:
    the placeholders, every module's SQL, and the code that turns modules into the script
    (this file and ``sqlfiles.py``). Not the script itself: building it (the COMMENT ON
    statements of 42 modules) was 60 ms of every process that opens a session."""
    import duckdb  # here, not above: a repeat `cclq metric` reads its cached result without DuckDB

    from cclq.query import sqlfiles

    h = hashlib.sha256(f"{FORMAT}\n{duckdb.__version__}\n".encode())
    for _, sql in _placeholders():
        h.update(sql.encode() + b"\0")
    for module in view_modules():
        h.update(f"{module.name}\n{module.sql}\0".encode())
    for code in (Path(__file__), Path(sqlfiles.__file__)):
        h.update(code.read_bytes() + b"\0")
    return h.hexdigest()[:20]


def cache_folder() -> Path:
    """``$CCLQ_CACHE_DIR``, else ``$XDG_CACHE_HOME/cclq``, else ``~/.cache/cclq``."""
    return user_cache_dir()


@lru_cache(maxsize=1)
def catalog_file() -> Path:
    """The compiled file for this cclq and this DuckDB, compiled first if it is missing.
    A cache folder that cannot be written falls back to the temporary folder."""
    name = f"views-{catalog_key()}.duckdb"
    folders = [cache_folder(), Path(tempfile.gettempdir()) / f"cclq-{os.getuid()}"]
    error: OSError | None = None
    for folder in folders:
        path = folder / name
        if path.is_file():
            return path
        try:
            folder.mkdir(parents=True, exist_ok=True)
            # seconds at the first use after an install or upgrade: a line of its own, so
            # that a log says what is happening and no metric or file is blamed for it
            log.info("compiling the SQL views (once for this cclq and DuckDB) into %s", path)
            start = time.perf_counter()
            _compile(path)
            log.info("views compiled in %.1f s", time.perf_counter() - start)
            return path
        except OSError as e:
            error = e
    assert error is not None
    raise error


def _compile(path: Path) -> None:
    """Creates the modules into a new file beside ``path``, drops the placeholders, and
    renames it to ``path``."""
    fd, scratch = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=".duckdb", dir=path.parent)
    os.close(fd)
    os.unlink(scratch)  # DuckDB creates the file itself; an empty one is not a database
    try:
        con = open_database(scratch)
        try:
            # the placeholders, then every module with the COMMENT ON statements of its
            # views in dependency order, each followed by its matchers (made from the
            # rules it has just created, before any module that reads them)
            con.execute("\n".join(sql for _, sql in _placeholders()))
            for module in view_modules():
                matchers = module_matchers(module)
                for matcher in matchers:  # what the module's own views bind against ...
                    con.execute(_matcher_stand_in(matcher))
                con.execute(f"-- module {module.name}\n{module_script(module).strip()}")
                for matcher in matchers:  # ... until its rules exist (a view binds a macro when it runs)
                    con.execute(matcher_macro(con, matcher))
            con.execute("\n".join(f"DROP TABLE {name};" for name, _ in _placeholders()))
        finally:
            con.close()
        os.replace(scratch, path)
    except BaseException:
        for leftover in (scratch, scratch + ".wal"):
            if os.path.exists(leftover):
                os.unlink(leftover)
        raise


def attach_statements() -> list[str]:
    """The statements that make a connection see the compiled views (see the module
    docstring); run before the base relations are created."""
    return [f"ATTACH {path_literal(catalog_file())} AS {CATALOG} (READ_ONLY);", search_path_statement()]


def search_path_statement() -> str:
    """Unqualified names: the session's own database first, then the compiled views. A
    setting of each connection: a second connection to the same database runs it too."""
    return f"SET search_path = 'memory.main,{CATALOG}.main';"
