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

import pyarrow as pa

from cclq.locations import user_cache_dir
from cclq.query.settings import open_database
from cclq.query.sqlfiles import module_script, view_modules
from cclq.schema import TABLE_SCHEMAS, data_file_schema
from cclq.sqltext import path_literal
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


@lru_cache(maxsize=1)
def _compile_script() -> str:
    """Everything that goes into the file: the placeholders, then every module with the
    COMMENT ON statements of its views, in dependency order."""
    parts = [sql for _, sql in _placeholders()]
    parts += [f"-- module {m.name}\n{module_script(m).strip()}" for m in view_modules()]
    return "\n".join(parts) + "\n"


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
            con.execute(_compile_script())
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
