"""An open Nsight Systems export, read as untrusted input: read-only, bounded, every
table name from the file quoted (see the package's docstring)."""

from __future__ import annotations

import re
import sqlite3
import sys
from collections.abc import Iterator
from typing import overload

from cclq.errors import TraceFileError, UnsupportedFormat
from cclq.formats.base import Detected
from cclq.formats.limits import (
    DEFAULT_LIMITS,
    ReadLimits,
    sqlite_too_hungry,
    sqlite_too_slow,
    sqlite_value_too_long,
)

BATCH_ROWS = 32768
_NSYS_TABLES = (
    "TARGET_INFO_SESSION_START_TIME",
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "NVTX_EVENTS",
    "META_DATA_EXPORT",
    "EXPORT_META_DATA",
    "ThreadNames",
)
# NVTX event types (ENUM_NSYS_EVENT_TYPE)
NVTX_RANGES = (59, 60, 70, 71)  # push/pop and start/end ranges (NVTX and NVTXt)
NVTX_MARKS = (34, 65)
NVTX_THREAD_NAMES = (39, 72)
NVTX_DOMAIN_CREATE = 75
GPU_TABLES = (
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
)


# What Nsight Systems names its tables (``CUPTI_ACTIVITY_KIND_KERNEL``, ``StringIds``,
# ``MPI_P2P_EVENTS``): a letter, then letters, digits and underscores. Other tables are
# not nsys's and are never read.
_NSIGHT_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,127}")


def quote_ident(name: str) -> str:
    """A SQLite identifier as SQL text: the one way a name from a file enters SQL here."""
    return '"' + name.replace('"', '""') + '"'


def int_sql(expr: str) -> str:
    """``expr`` when SQLite holds an integer there, else NULL (a text in an integer column)."""
    return f"CASE WHEN typeof({expr}) = 'integer' THEN {expr} END"


def _uri(path: str) -> str:
    from urllib.parse import quote

    return f"file:{quote(path)}?mode=ro&immutable=1"


def open_readonly(path: str, limits: ReadLimits = DEFAULT_LIMITS) -> sqlite3.Connection:
    """The export, read-only: ``immutable`` asks SQLite for no locks and no journal, so a
    file on a read-only disk (or being copied) is read as it is. Temp tables and sorts go
    to memory, under SQLite's heap limit (process-wide: one export is read per parser
    process at a time), values under the string bound; the deadline is ``Deadline``'s."""
    con = sqlite3.connect(_uri(path), uri=True, check_same_thread=False)
    con.text_factory = lambda b: b.decode("utf-8", errors="replace")
    con.execute("PRAGMA query_only = true")
    con.execute("PRAGMA trusted_schema = false")
    con.execute("PRAGMA temp_store = MEMORY")
    con.execute(f"PRAGMA hard_heap_limit = {int(limits.max_sqlite_bytes)}")
    if sys.version_info >= (3, 11):  # Connection.setlimit is 3.11+; on 3.10 the heap limit above bounds it
        con.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, min(int(limits.max_string_bytes), (1 << 31) - 1))
    return con


class Deadline:
    """Interrupts SQLite past ``max_sqlite_seconds`` since the file was opened."""

    def __init__(self, con: sqlite3.Connection, seconds: float) -> None:
        import time

        self._now = time.monotonic
        self.until = time.monotonic() + seconds
        self.passed = False
        con.set_progress_handler(self._check, 10_000)

    def _check(self) -> int:
        if self._now() > self.until:
            self.passed = True
            return 1
        return 0


def nsight_tables(con: sqlite3.Connection) -> set[str]:
    return {
        name
        for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        if isinstance(name, str) and _NSIGHT_NAME.fullmatch(name)
    }


def table_columns(con: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in con.execute(f"PRAGMA table_info({quote_ident(table)})")}


def detect_sqlite(path: str) -> Detected:
    """A SQLite file is an Nsight Systems export when it has ``StringIds`` and nsys tables."""
    try:
        con = open_readonly(path)
        try:
            tables = nsight_tables(con)
        finally:
            con.close()
    except sqlite3.Error as e:
        raise TraceFileError(path, f"not a readable SQLite database ({e})") from e
    if "StringIds" in tables and any(t in tables for t in _NSYS_TABLES):
        return Detected("nsys_sqlite", "nsys", False, b"")
    raise UnsupportedFormat(path, "a SQLite database, but not an Nsight Systems export (no StringIds and nsys tables)")


class Export:
    """An open export: which tables and columns it has, and the checks on them."""

    def __init__(self, path: str, limits: ReadLimits = DEFAULT_LIMITS) -> None:
        self.path = path
        self.limits = limits
        self.version = "unknown"
        try:
            self.con = open_readonly(path, limits)
            self.deadline = Deadline(self.con, limits.max_sqlite_seconds)
            self.tables = nsight_tables(self.con)
        except sqlite3.Error as e:
            raise self._error(e, "not a readable SQLite database") from e
        self._cols: dict[str, set[str]] = {}
        self.version = self._meta("EXPORT_SCHEMA_VERSION") or "unknown"

    def _error(self, e: sqlite3.Error, what: str | None = None) -> TraceFileError:
        """A SQLite error as the file's one line: a bound when one was hit."""
        text = str(e)
        if self.deadline_passed():
            return sqlite_too_slow(self.path, self.limits)
        if "too big" in text:
            return sqlite_value_too_long(self.path, self.limits)
        if "out of memory" in text:
            return sqlite_too_hungry(self.path, self.limits)
        return TraceFileError(
            self.path, f"{what} ({e})" if what else f"Nsight Systems export (schema {self.version}): {e}"
        )

    def deadline_passed(self) -> bool:
        deadline = getattr(self, "deadline", None)
        return deadline is not None and deadline.passed

    def has(self, table: str) -> bool:
        return table in self.tables

    def columns(self, table: str) -> set[str]:
        if table not in self._cols:
            self._cols[table] = table_columns(self.con, table)
        return self._cols[table]

    def require(self, table: str, *columns: str) -> None:
        missing = [c for c in columns if c not in self.columns(table)]
        if missing:
            raise TraceFileError(
                self.path,
                f"Nsight Systems export (schema {self.version}): table {table} "
                f"has no column {', '.join(missing)}; cclq reads the columns of "
                "nsys 2022.2 and later",
            )

    def col(self, table: str, column: str, alias: str | None = None, expr: str | None = None) -> str:
        """``expr AS alias`` when the table has the column, else ``NULL AS alias``; an
        integer column (no ``expr``) reads NULL where the file holds something else."""
        alias = alias or column
        if column in self.columns(table):
            return f"{expr or int_sql('t.' + column)} AS {alias}"
        return f"NULL AS {alias}"

    def query(self, sql: str, params: tuple = ()) -> list[tuple]:
        try:
            return self.con.execute(sql, params).fetchall()
        except sqlite3.Error as e:
            raise self._error(e) from e
        except MemoryError as e:  # SQLite's NOMEM: its heap bound
            raise sqlite_too_hungry(self.path, self.limits) from e

    def batches(self, sql: str) -> Iterator[list[tuple]]:
        try:
            cursor = self.con.execute(sql)
            while rows := cursor.fetchmany(BATCH_ROWS):
                yield rows
        except sqlite3.Error as e:
            raise self._error(e) from e
        except MemoryError as e:
            raise sqlite_too_hungry(self.path, self.limits) from e

    def _meta(self, key: str) -> str | None:
        for table in ("META_DATA_EXPORT", "EXPORT_META_DATA"):
            if table in self.tables:
                row = self.query(f"SELECT value FROM {quote_ident(table)} WHERE name = ?", (key,))
                if row:
                    return str(row[0][0])
        return None

    def close(self) -> None:
        self.con.close()


def pid_of(global_id: int | None) -> int | None:
    """nsys packs (vm id, pid, tid) into one 64-bit ``globalTid`` / ``globalPid``."""
    return None if global_id is None else (global_id >> 24) & 0xFFFFFF


def tid_of(global_tid: int | None) -> int | None:
    return None if global_tid is None else global_tid & 0xFFFFFF


@overload
def process_key(global_id: int) -> int: ...
@overload
def process_key(global_id: None) -> None: ...
def process_key(global_id: int | None) -> int | None:
    """The process part of a ``globalTid`` (``globalPid`` has the thread bits zero)."""
    return None if global_id is None else global_id & ~0xFFFFFF
