"""Reading one trace file with each reader, for the differential and hostile-input tests."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from cclq.errors import TraceFileError
from cclq.formats.base import (
    READER_COMPILED,
    READER_IJSON,
    READER_MSGSPEC,
    ReadAgain,
    ReadOptions,
    ReadResult,
)
from cclq.formats.chrome import compiled, fast_reader
from cclq.formats.chrome.reader import read_trace_file
from cclq.formats.detect import detect
from cclq.formats.limits import DEFAULT_LIMITS, ReadLimits
from cclq.schema import EVENT_SCHEMA


@dataclass
class Outcome:
    """What one reader made of a file: its table and result, or its error line."""

    reader: str
    table: pa.Table | None = None
    result: ReadResult | None = None
    error: str | None = None
    fallback: str | None = None  # why the fast reader gave the file to ijson

    def summary(self) -> tuple:
        """Everything a reader reports besides the rows (the fallback note left out)."""
        r = self.result
        if r is None:
            return (self.error,)
        notes = {k: v for k, v in r.notes.items() if not k.startswith(("read with ijson", "read again"))}
        return (
            r.events_read,
            r.rows_written,
            dict(r.drops),
            notes,
            r.metadata,
            r.base_time_ns,
            r.ts_min_ns,
            r.ts_max_ns,
            r.decompressed_bytes,
        )


def read_with(path: Path, reader: str, limits: ReadLimits = DEFAULT_LIMITS, threads: int = 0) -> Outcome:
    """Reads ``path`` as ingest does (the fast reader handing the file over when it gives up)."""
    out = Outcome(reader)
    batches: list = []  # record batches, or tables of them
    options = ReadOptions(reader=reader, limits=limits, threads=threads)
    notes: list[str] = []
    # threads asked for are used whatever the file's size (ingest leaves them to big files)
    saved_min, fast_reader.THREADS_MIN_BYTES = (
        fast_reader.THREADS_MIN_BYTES,
        0 if threads else fast_reader.THREADS_MIN_BYTES,
    )
    try:
        detected = detect(str(path))
        while True:
            try:
                result, _ = read_trace_file(str(path), detected, "f0", batches.append, options)
                break
            except ReadAgain as e:
                batches.clear()
                options = e.options
                notes.append(e.note)
                if e.options.reader == "ijson" and out.fallback is None:
                    out.fallback = e.note.split("(", 1)[-1].rstrip(")")
    except TraceFileError as e:
        out.error = e.message
        return out
    finally:
        fast_reader.THREADS_MIN_BYTES = saved_min
    for note in notes:
        result.notes[note] += 1
    out.result = result
    pieces = [b if isinstance(b, pa.Table) else pa.Table.from_batches([b]) for b in batches]
    out.table = pa.concat_tables(pieces) if pieces else EVENT_SCHEMA.empty_table()
    return out


# The two readers of chunks, each checked against the ijson reference: "compiled" is the
# fast reader with its C parser (skipped where it was not built), "msgspec" the same
# chunks decoded by msgspec alone (what "fast" is on a machine without a compiler).
CHUNKED = {"compiled": READER_COMPILED, "msgspec": READER_MSGSPEC}


def chunked_reader(name: str) -> str:
    """The reader option for a ``CHUNKED`` name; skips the test where it is not built."""
    if name == "compiled" and not compiled.AVAILABLE:
        import pytest

        pytest.skip("the compiled parser is not built (no C compiler at install)")
    return CHUNKED[name]


def both(
    path: Path, limits: ReadLimits = DEFAULT_LIMITS, threads: int = 0, reader: str = READER_COMPILED
) -> tuple[Outcome, Outcome]:
    """(``reader``'s outcome, the ijson reference's)."""
    return read_with(path, reader, limits, threads), read_with(path, READER_IJSON, limits)


_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')


def string_spelling(text: str | None) -> str | None:
    """``args`` text with every string written one way (ASCII, escaped as ``json.dumps``
    does): what is left is the text's numbers and keys as the reader spelled them."""
    if text is None:
        return None
    return _STRING.sub(lambda m: json.dumps(json.loads(m.group())), text)


def json_values(texts: list[str | None]) -> list[Any]:
    """``args`` texts as JSON values (numbers exact: ``Decimal`` for a fraction), which is
    what both readers must agree on: the fast reader writes the source text, the ijson
    reader the same value from its parse (``1.500e3`` there may be ``1500`` here)."""
    return [None if t is None else json.loads(t, parse_float=Decimal) for t in texts]


def assert_same(fast: Outcome, ref: Outcome) -> None:
    """Identical tables (every column, every row, in order; ``args`` as JSON values) and
    identical accounting."""
    assert fast.error == ref.error
    assert fast.summary() == ref.summary()
    if ref.table is None:
        return
    assert fast.table.num_rows == ref.table.num_rows
    for name in EVENT_SCHEMA.names:
        a, b = fast.table.column(name), ref.table.column(name)
        if name == "args":
            # rows whose texts are equal agree in value and spelling: only the others
            # are parsed (a real trace's args are mostly byte-identical in both readers)
            same = pc.fill_null(pc.equal(a, b), False)
            same = pc.or_(same, pc.and_(pc.is_null(a), pc.is_null(b)))
            picked = pc.indices_nonzero(pc.invert(same))
            rows, a_rows, b_rows = picked.to_pylist(), a.take(picked).to_pylist(), b.take(picked).to_pylist()
            x, y = json_values(a_rows), json_values(b_rows)
            if x != y:
                diff = rows[next(i for i in range(len(x)) if x[i] != y[i])]
                raise AssertionError(f"args differ at row {diff}: fast {a[diff]!r}, ijson {b[diff]!r}")
            # and the same text: every number spelled alike, one key each (only how a
            # string is escaped may differ: events.py, "args")
            x, y = list(map(string_spelling, a_rows)), list(map(string_spelling, b_rows))
            if x != y:
                diff = rows[next(i for i in range(len(x)) if x[i] != y[i])]
                raise AssertionError(f"args texts differ at row {diff}: fast {a[diff]!r}, ijson {b[diff]!r}")
            continue
        if not a.equals(b):
            x, y = a.to_pylist(), b.to_pylist()
            diff = next(i for i in range(len(x)) if x[i] != y[i])
            raise AssertionError(f"column {name} differs at row {diff}: fast {x[diff]!r}, ijson {y[diff]!r}")
