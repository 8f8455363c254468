"""The interface every format reader implements, and what a read yields.

A reader works in two steps, so that every row can be written with its rank:

1. ``prepare(path, detected)`` learns, cheaply (a file's head and tail, a few small
   SQL queries), what the file says about itself: the rank, the world size, metadata.
2. ``read(path, detected, prepared, file_id, sinks, progress)`` streams the file into
   record batches, one ``sinks[table]`` call per batch, for the tables it declares
   (``tables``; schemas in ``cclq.schema.TABLE_SCHEMAS``), and returns a ``ReadResult``.

Readers never touch the warehouse: ``cclq.ingest.run`` gives them sinks that write temp
Parquet files, and commits those. A file a reader cannot take raises
``TraceFileError`` (one line, naming the file); a format it recognises but does not
ingest raises ``UnsupportedFormat``.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import pyarrow as pa

from cclq.formats.limits import DEFAULT_LIMITS, ReadLimits


@dataclass(frozen=True)
class Detected:
    """What ``cclq.formats.detect`` found a file to be, from its first bytes."""

    kind: str  # the reader: "chrome_json" (Kineto, Chrome, xprof JSON), "nsys_sqlite", "xplane" (to convert)
    flavor: str  # "kineto", "xprof", "chrome", "nsys": the format recorded in files.format
    array_form: bool  # bare ``[...]`` rather than ``{"traceEvents": [...]}``
    head: bytes


# The Chrome-JSON readers: chunks of whole events read by the compiled C parser where it
# was built, msgspec reading what it declines (READER_COMPILED, spelled "fast" on the
# command line and in files.parser; on a machine without a compiler it is msgspec alone);
# the same chunks by msgspec only (msgspec); event by event with ijson (the reference).
READER_COMPILED = "fast"
READER_MSGSPEC = "msgspec"
READER_IJSON = "ijson"
READERS = (READER_COMPILED, READER_MSGSPEC, READER_IJSON)


@dataclass(frozen=True)
class ReadOptions:
    """How to read trace files: which JSON reader, within which bounds."""

    reader: str = READER_COMPILED
    limits: ReadLimits = field(default_factory=lambda: DEFAULT_LIMITS)
    threads: int = 0  # threads that parse one big file's chunks with the C parser (fast_reader)

    def __post_init__(self) -> None:
        if self.reader not in READERS:
            raise ValueError(f"unknown reader {self.reader!r} (one of {', '.join(READERS)})")

    def for_fallback(self) -> ReadOptions:
        """The reference reader in one process: what a file the fast reader gave up is read with."""
        return replace(self, reader=READER_IJSON, threads=0)


# Gets a file's rows in order: record batches, or tables of several (the fast reader)
BatchSink = Callable[["pa.RecordBatch | pa.Table"], None]
ProgressFn = Callable[[int], None]


# A number in a file name is a rank only below this bound: bigger ones are timestamps
# (``trace_1694128201545.json``) or pids, and ranks are int32 in the catalog.
MAX_RANK_IN_NAME = 1_000_000
# Tried in order; the first rule that finds a plausible number wins.
_RANK_IN_NAME = (
    re.compile(r"(?:rank|worker)[-_]?(\d+)", re.IGNORECASE),
    re.compile(r"[-_](\d+)(?:\.pt\.trace)?\.(?:json(?:\.gz)?|sqlite)$", re.IGNORECASE),
    # xprof writes one file per host: t1v-n-abc-w-1.trace.json.gz, host1.xplane.pb. The
    # lookahead leaves out "<ip>_<port>.xplane.pb", whose number is a port, not a rank.
    re.compile(
        r"^(?!\d+\.\d+\.\d+\.\d+_\d+\.)(?:.*[-_A-Za-z])(\d+)\.(?:trace\.json(?:\.gz)?|xplane\.pb|sqlite)$",
        re.IGNORECASE,
    ),
)


def rank_from_name(name: str) -> int | None:
    """The rank a file name gives: the first rule with a plausible number wins."""
    for pattern in _RANK_IN_NAME:
        for m in pattern.finditer(name):
            rank = int(m.group(1))
            if rank < MAX_RANK_IN_NAME:
                return rank
    return None


def record_batch(schema: pa.Schema, columns: Mapping[str, Sequence[Any] | pa.Array], n: int) -> pa.RecordBatch:
    """A batch of ``schema`` from the columns a reader has; the others are NULL."""
    arrays = []
    for f in schema:
        values = columns.get(f.name)
        if values is None:
            arrays.append(pa.nulls(n, f.type))
        elif isinstance(values, pa.Array):
            arrays.append(values if values.type == f.type else values.cast(f.type))
        else:
            arrays.append(pa.array(values, f.type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


@dataclass
class Prepared:
    """What a file says about itself before it is read.

    A file normally holds one rank. A reader whose files may hold several (an Nsight
    Systems export of a whole node) sets ``ranks``: its batches then start with a
    ``rank`` column (int32) and ingest writes each rank's rows to a data file of its own.
    """

    rank: int | None = None  # None: the file does not say (ingest tries the file name)
    rank_source: str | None = None  # where ``rank`` came from ("distributedInfo", "MPI rank", ...)
    ranks: list[int] | None = None  # every rank a multi-rank file holds
    world_size: int | None = None
    metadata: dict[str, Any] = field(default_factory=dict)  # reader-specific, handed back to read()
    warnings: list[str] = field(default_factory=list)
    # how read() reads the file; a ``ReadAgain`` names the options of the next attempt
    options: ReadOptions | None = None


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
    reader: str = ""  # which of a format's readers made the rows (Chrome JSON: one of READERS)
    parser: str | None = None  # files.parser, when the reader's ``name`` does not say it


class ReadAgain(Exception):
    """Raised by ``read`` to be called once more, from the start, with ``options`` (the
    fast JSON reader handing a file to ijson, or its threads to one thread): what it
    wrote so far is thrown away, and ``note`` goes to the file's ``ingest_stats``."""

    def __init__(self, options: ReadOptions, note: str) -> None:
        super().__init__(note)
        self.options = options
        self.note = note


class Reader(Protocol):
    """One format family. ``name`` is recorded in ``files.parser``."""

    name: str

    @property
    def tables(self) -> tuple[str, ...]: ...  # read-only, so that a class's ("events",) is one

    def prepare(self, path: str, detected: Detected) -> Prepared: ...

    def read(
        self,
        path: str,
        detected: Detected,
        prepared: Prepared,
        file_id: str,
        sinks: dict[str, BatchSink],
        progress: ProgressFn | None,
    ) -> ReadResult: ...
