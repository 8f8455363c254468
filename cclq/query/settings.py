"""How queries run: the user's memory limit and spill folder, and the settings every
DuckDB database cclq opens starts with (``open_database``).

``--memory-limit`` / ``--spill-dir``, else ``$CCLQ_MEMORY_LIMIT`` / ``$CCLQ_SPILL_DIR``:
read once by an entry point (``QuerySettings.from_env``) and handed to every
``Session``; a library caller passes its own. Standard library only, so that the CLI
can read them before anything heavy is imported.
"""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from cclq.errors import UsageError
from cclq.runtime import address_space_limit
from cclq.sqltext import quote_literal

if TYPE_CHECKING:
    import duckdb

    from cclq.store.warehouse import Warehouse

MEMORY_ENV = "CCLQ_MEMORY_LIMIT"
SPILL_ENV = "CCLQ_SPILL_DIR"
# Without a memory limit: this much per core (DuckDB runs a thread per core, shared among
# a batch's lanes, cclq.query.lanes), and at most this share of the machine's memory (DuckDB's own default
# is 80%, which leaves too little to Python, pyarrow and a second process). Beyond it
# DuckDB spills; the batch's shared tables are a compressed file (cclq.query.metrics), so
# what spills is the queries' own working rows. On the 1 GB rank (issue 42, 2 cores, load
# 1.3-1.5) the report took 34.3 s at 2.83 GB peak with half the RAM (12 GB) and the tables
# in memory; 36.2 s at 1.66 GB with the file and half the RAM; with the file and 1,200 MB,
# 35.7 s at 1.37 GB (1 GiB: 39.3 s, 1.20 GB). DuckDB's own sizing guide asks 1-2 GB a
# thread for heavy aggregations.
DEFAULT_MEMORY_PER_CORE = 600 << 20
DEFAULT_MEMORY_SHARE = 0.5
# ... and this share of the address space the process may map, where that is limited
# (``ulimit -v``, ``prlimit --as``): code, thread stacks and the allocators' arenas take
# the rest. DuckDB does not look at that limit: a board over the shared traces peaked at
# 995 MB resident with nothing to stop it, and failed under a 2 GB limit.
ADDRESS_SPACE_SHARE = 0.25
# DuckDB 2.0 starts `async_threads` I/O threads (8 by default) in every database it opens,
# for remote reads; cclq reads local Parquet, and each idle thread holds a stack and, once
# it allocates, a malloc arena: 9 threads and 670 MB of address space per connection,
# which made a board over the shared traces fail under a 2 GB limit. One is kept.
ASYNC_THREADS = 1
# hta_events holds every event it reads (17 columns, ~160 bytes an event: 585 MB for the
# 3.69 M events of the 1 GB rank) unless that would take more than this share of the
# memory limit; then each of its steps reads the Parquet files again (sql/views/hta.sql).
HELD_SCAN_BYTES_PER_EVENT = 160
HELD_SCAN_SHARE = 0.25
_MEMORY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(%|[KMGT]i?B|B)?\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class QuerySettings:
    """How queries run: the memory limit (``500MB``, ``4GiB``, ``25%`` of RAM; None: 600 MiB
    a core, at most half the RAM and a quarter of a limited address space) beyond which DuckDB spills
    to ``spill_dir`` (None: the warehouse's ``spill/``, else the system's temp folder)."""

    memory_limit: str | None = None
    spill_dir: Path | None = None

    @classmethod
    def from_env(cls, memory_limit: str | None = None, spill_dir: str | Path | None = None) -> QuerySettings:
        """The options given, else ``$CCLQ_MEMORY_LIMIT`` and ``$CCLQ_SPILL_DIR``: what an
        entry point (the CLI, ``python -m cclq.main``) reads once."""
        spill = spill_dir or os.environ.get(SPILL_ENV) or None
        settings = cls(memory_limit or os.environ.get(MEMORY_ENV) or None, Path(spill) if spill else None)
        settings.duckdb_memory_limit()  # a bad value is a usage error here, before any work
        return settings

    def duckdb_memory_limit(self) -> str:
        """The limit as DuckDB takes it, in MiB."""
        text = self.memory_limit
        total = _physical_memory()
        if not text:
            shares = [(os.cpu_count() or 1) * DEFAULT_MEMORY_PER_CORE]
            if total:
                shares.append(int(total * DEFAULT_MEMORY_SHARE))
            if (space := address_space_limit()) is not None:
                shares.append(max(int(space * ADDRESS_SPACE_SHARE), 64 << 20))
            return f"{min(shares) >> 20}MiB"
        m = _MEMORY.match(text)
        if not m:
            raise UsageError(f"memory limit {text!r}: want a size such as 500MB or 4GiB, or a share of RAM such as 25%")
        number, unit = float(m.group(1)), (m.group(2) or "B").upper()
        if unit == "%":
            if not 0 < number <= 100 or not total:
                raise UsageError(f"memory limit {text!r}: a share of RAM is 1..100%")
            return f"{int(total * number / 100) >> 20}MiB"
        factor = {
            "B": 1,
            "KB": 1e3,
            "MB": 1e6,
            "GB": 1e9,
            "TB": 1e12,
            "KIB": 2**10,
            "MIB": 2**20,
            "GIB": 2**30,
            "TIB": 2**40,
        }[unit]
        if number * factor < 64e6:
            raise UsageError(f"memory limit {text!r}: DuckDB needs at least 64 MB")
        return f"{int(number * factor) >> 20}MiB"

    def held_scan_events(self) -> int:
        """The most events hta_events holds: those that fit HELD_SCAN_SHARE of the limit."""
        limit = int(self.duckdb_memory_limit().removesuffix("MiB")) << 20
        return int(limit * HELD_SCAN_SHARE / HELD_SCAN_BYTES_PER_EVENT)

    def connection_statements(self) -> list[str]:
        """What each connection of a session runs once its views exist (its lanes too:
        DuckDB variables belong to a connection): hta_events holds its scan only while
        the session's events are at most ``held_scan_events``; ``snapshot_formats``, the
        formats of the session's files, lets a view of one format's records be planned
        as empty where no file has it (``snapshot_holds``, sql/views/catalog.sql)."""
        events = self.held_scan_events()
        return [
            f"SET VARIABLE hta_hold_scan = (SELECT coalesce(sum(events_written), 0) <= {int(events)} FROM files);",
            "SET VARIABLE snapshot_formats = (SELECT list(DISTINCT format ORDER BY format) FROM files);",
        ]

    def make_spill_folder(self, wh: Warehouse) -> Path:
        """A spill folder of this session's own (``<pid>@<host>-<random>``), removed when the
        session closes; writers collect the folders of this host's processes that died (a
        warehouse on a shared file system has readers on other hosts). A warehouse that
        cannot be written spills to the system's temp folder instead."""
        import socket  # here, not at the top: `cclq --help` imports this module (~2-5 ms)

        parents = (
            [self.spill_dir]
            if self.spill_dir is not None
            else [wh.root / "spill", Path(tempfile.gettempdir()) / "cclq-spill"]
        )
        for parent in parents:
            try:
                parent.mkdir(parents=True, exist_ok=True)
                return Path(tempfile.mkdtemp(prefix=f"{os.getpid()}@{socket.gethostname()}-", dir=parent))
            except OSError:
                continue
        where = " or ".join(str(p) for p in parents)
        raise UsageError(
            f"no folder to spill query data to ({where} cannot be written)", hint=f"--spill-dir DIR or ${SPILL_ENV}"
        )

    def set_statements(self, spill: Path) -> list[str]:
        """The SET statements of a session with these settings."""
        return [
            f"SET memory_limit = {quote_literal(self.duckdb_memory_limit())};",
            f"SET temp_directory = {quote_literal(str(spill))};",
        ]


def open_database(database: str = ":memory:") -> duckdb.DuckDBPyConnection:
    """A DuckDB database opened with the start-up settings above (every connection cclq
    opens itself comes from here; the releases before 2.0 have no ``async_threads``)."""
    import duckdb

    config: dict[str, str | bool | int | float | list[str]] = {}
    if int(duckdb.__version__.split(".")[0]) >= 2:
        config["async_threads"] = ASYNC_THREADS
    return duckdb.connect(database, config=config)


def _physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 0
