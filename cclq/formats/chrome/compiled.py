"""The compiled chunk parser (``eventparse``, C) of the fast reader, where it was built.

``pip install`` compiles ``eventparse.c``, ``eventparse_core.c`` and ``eventparse_json.c``
when the machine has a C compiler and skips them when it has none (``build_hooks/compiled_reader.py``; with
``CCLQ_REQUIRE_COMPILED=1`` that is an error); the fast reader then decodes every
chunk with msgspec, as it did before, and writes the same table. ``AVAILABLE`` says which;
``cclq --version`` says it to the user.

The C parser takes a chunk of whole events (``[`` + events + ``]``, as the chunker cuts
it, ``chunks``) to Arrow column buffers in one pass, by the rules of ``events.py``, with no Python
object per event. It declines a chunk it cannot take with certainty (B/E pairs, a string
timestamp, a float pid, a promoted value that needs Python's ``Decimal`` rules, a bound
approached, invalid UTF-8, ...); the caller reads that chunk with msgspec. The tests run
every differential and property test with both, against the ijson reference.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from cclq.formats.chrome.events import (
    BAD_DUR,
    BAD_TS,
    EMPTY_OBJECT,
    KIND_TYPE,
    NEGATIVE_DUR,
    NO_TS,
    NOT_AN_OBJECT,
    PROMOTE,
    PROMOTED_COLUMNS,
)
from cclq.schema import EVENT_SCHEMA, LEGACY_CATEGORIES

try:  # built at install where a C compiler was found (pyproject.toml, ext-modules)
    from cclq.formats.chrome import eventparse  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - depends on the install
    eventparse = None

# CCLQ_COMPILED_READER=0 leaves the compiled parser unused (as on a machine without a compiler)
AVAILABLE = eventparse is not None and os.environ.get("CCLQ_COMPILED_READER", "1") != "0"

# The drop reasons, in the C parser's order (eventparse_core.h, DROP_*).
DROP_REASONS = (NO_TS, BAD_TS, BAD_DUR, NEGATIVE_DUR, NOT_AN_OBJECT, EMPTY_OBJECT)
_KIND_CODES = {"int": 0, "float": 1, "str": 2, "int_list": 3}
_COLUMN_NUMBER = {column: i for i, (column, _) in enumerate(PROMOTED_COLUMNS)}

if eventparse is not None:
    eventparse.configure(
        [(key, _COLUMN_NUMBER[column], _KIND_CODES[dict(PROMOTED_COLUMNS)[column]]) for key, column in PROMOTE.items()],
        len(PROMOTED_COLUMNS),
        list(LEGACY_CATEGORIES.items()),
    )

# The C parser's base columns: EVENT_SCHEMA's after file_id.
_BASE_TYPES = [f.type for f in EVENT_SCHEMA][1:14]
_PROMOTED_TYPES = [KIND_TYPE[kind] for _, kind in PROMOTED_COLUMNS]


def description() -> str:
    """What ``cclq --version`` says of the JSON reader."""
    if AVAILABLE:
        return "compiled (C parser, with msgspec for the chunks it declines)"
    if eventparse is not None:
        return "msgspec (the compiled parser is built but switched off: CCLQ_COMPILED_READER=0)"
    return "msgspec (the compiled parser was not built: no C compiler at install)"


class CutInsideEvent(Exception):
    """The chunk's text ends inside an event: the cut was not an event boundary."""


@dataclass
class Declined:
    """The C parser does not take this chunk (``reason``): read it with msgspec."""

    reason: str


class Parsed:
    """A chunk the C parser read: its rows as column buffers, what it dropped and why."""

    __slots__ = ("entries", "rows", "last_empty", "base", "promoted", "drops", "out_of_range")

    def __init__(self, answer: tuple[Any, ...]) -> None:
        _, self.entries, self.rows, self.last_empty, self.base, self.promoted, drops, ranges = answer
        self.drops: list[tuple[str, str]] = [(DROP_REASONS[reason], ph) for reason, ph in drops]
        self.out_of_range: dict[str, int] = {column: k for (column, _), k in zip(PROMOTED_COLUMNS, ranges) if k}

    def __len__(self) -> int:  # entries of the array, as a decoded chunk's list has
        return int(self.entries)

    def batch(self, file_id: str, first: int) -> pa.RecordBatch:
        """The rows as ``EVENT_SCHEMA``, ``event_idx`` counted from ``first``."""
        n = self.rows
        base = [_array(t, n, c) for t, c in zip(_BASE_TYPES, self.base)]
        if first:
            base[0] = pc.add(base[0], pa.scalar(first, pa.int64()))
        promoted = [_array(t, n, c) for t, c in zip(_PROMOTED_TYPES, self.promoted)]
        return pa.RecordBatch.from_arrays([pa.repeat(file_id, n)] + base + promoted, schema=EVENT_SCHEMA)


def _array(typ: pa.DataType, n: int, column: tuple[int, bytes | None, bytes, bytes | None] | None) -> pa.Array:
    """An Arrow array over the C parser's buffers (no copy)."""
    if column is None:
        return pa.nulls(n, typ)
    nulls, valid, values, data = column
    validity = None if valid is None else pa.py_buffer(valid)
    if typ == pa.string():
        return pa.Array.from_buffers(typ, n, [validity, pa.py_buffer(values), pa.py_buffer(data)], null_count=nulls)
    if isinstance(typ, pa.ListType):
        assert data is not None
        child = pa.Array.from_buffers(pa.int64(), len(data) // 8, [None, pa.py_buffer(data)])
        return pa.Array.from_buffers(typ, n, [validity, pa.py_buffer(values)], null_count=nulls, children=[child])
    return pa.Array.from_buffers(typ, n, [validity, pa.py_buffer(values)], null_count=nulls)


# Chunks this process gave the C parser: "parsed", or "declined: <reason>". Read by the
# tests (that the parser, not msgspec, read what they check) and by ``--debug``.
chunk_counts: Counter[str] = Counter()


def parse(chunk: bytes, value_levels: int, max_string: int, max_event: int, base: int) -> Parsed | Declined:
    """The chunk read by the C parser, or why it declined; raises ``CutInsideEvent``."""
    assert eventparse is not None
    answer = eventparse.parse(chunk, value_levels, max_string, max_event, base)
    status = answer[0]
    if status == 0:
        chunk_counts["parsed"] += 1
        return Parsed(answer)
    if status == 1:
        raise CutInsideEvent(answer[1])
    chunk_counts["declined: " + answer[1]] += 1
    return Declined(answer[1])
