"""The interface every format reader implements, and what a read yields.

A reader works in two steps, so that every row can be written with its rank:

1. ``prepare(path, detected)`` learns, cheaply (a file's head and tail, a few small
   SQL queries), what the file says about itself: the rank, the world size, metadata.
2. ``read(path, detected, prepared, file_id, sinks, progress)`` streams the file into
   record batches, one ``sinks[table]`` call per batch, for the tables it declares
   (``tables``; schemas in ``cclq.schema.TABLE_SCHEMAS``), and returns a ``ReadResult``.

Readers never touch the warehouse: ``cclq.ingest`` gives them sinks that write temp
Parquet files, and commits those. A file a reader cannot take raises
``TraceFileError`` (one line, naming the file); a format it recognises but does not
ingest raises ``UnsupportedFormat``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import pyarrow as pa

from cclq.formats.detect import Detected

BatchSink = Callable[[pa.RecordBatch], None]
ProgressFn = Callable[[int], None]


@dataclass
class Prepared:
    """What a file says about itself before it is read."""

    rank: int | None = None  # None: the file does not say (ingest tries the file name)
    rank_source: str | None = None  # where ``rank`` came from ("distributedInfo", "MPI rank", ...)
    world_size: int | None = None
    metadata: dict[str, Any] = field(default_factory=dict)  # reader-specific, handed back to read()
    warnings: list[str] = field(default_factory=list)


@dataclass
class ReadResult:
    """What one file yielded, besides its rows."""

    events_read: int = 0  # records of the input (events, rows, lines), including dropped ones
    rows_written: int = 0
    drops: Counter[tuple[str, str]] = field(default_factory=Counter)  # (reason, ph) -> n
    notes: Counter[str] = field(default_factory=Counter)  # kept but noteworthy
    metadata: dict[str, Any] = field(default_factory=dict)  # top-level facts (distributedInfo, ...)
    base_time_ns: int = 0
    ts_min_ns: int | None = None  # min(ts) over the timed events (not ``M`` metadata)
    ts_max_ns: int | None = None  # max(ts + dur)
    decompressed_bytes: int = 0
    content_hash: str | None = None  # None: ingest hashes the file itself
    warnings: list[str] = field(default_factory=list)


class ReadAgain(Exception):
    """Raised by ``read`` to be called once more with the same (updated) ``Prepared``:
    what it wrote so far is thrown away (e.g. timestamps that need an exact pass)."""


class Reader(Protocol):
    """One format family. ``name`` is recorded in ``files.parser``."""

    name: str
    tables: tuple[str, ...]

    def prepare(self, path: str, detected: Detected) -> Prepared: ...

    def read(self, path: str, detected: Detected, prepared: Prepared, file_id: str,
             sinks: dict[str, BatchSink], progress: ProgressFn | None) -> ReadResult: ...
