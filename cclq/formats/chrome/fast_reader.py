"""The fast reader for Chrome trace-event JSON: the same table as the ijson reader
(``chrome.read_chrome_json``), several times faster, in the same bounded memory.

How (each step measured on a 127 MB Kineto file, see the README's benchmark):

* **Chunks at event boundaries.** The decompressed text is cut into pieces of about
  ``CHUNK_BYTES`` that hold whole events. A cut is only a guess (a ``}`` followed by a
  comma and the next ``{``, whatever the layout: one event per line as the profilers
  write it, Kineto's indented form, or one long line); msgspec decodes
  ``[`` + piece + ``]``, and the guess is right exactly when that decodes: a cut inside
  a string or inside an event leaves a bracket or a quote open, which the decoder
  reports at the end of the piece. A wrong guess costs a retry at the next candidate;
  after a few, the exact event ends come from the structural scan (``jsonscan``).
* **One C decode per chunk.** The chunk is made compact (``msgspec.json.format``: the
  whitespace outside strings removed, every token as written), then msgspec decodes it
  into small structs with the event's fields; ``ts``, ``dur`` and ``args`` are kept as
  their raw text (``msgspec.Raw``). The struct types forbid unknown keys and bound the
  nesting: a chunk they accept is within the ``ReadLimits`` by construction (``args``,
  which they do not see, by a bracket count); any other goes through the structural scan.
* **Columns, not rows.** Fields are transposed into columns in C. ``ts``/``dur`` texts
  are joined into one Arrow array and converted to exact ns by ``decimal128`` casts, in
  bulk, whatever their form (relative or epoch, 3 decimals or a float's repr); ``args``
  texts are the ``args`` column as they are. The promoted columns come from the args
  decoded once more, grouped by their key tuple (a Kineto kernel always has the same
  dozen keys), each promoted key taken for the whole group at once.
* **Helpers.** With ``helpers``, forked processes decode and build the chunks that this
  process cuts (``_read_with_helpers``): one big file uses every core.

Anything it cannot take with certainty (invalid JSON, a bound exceeded, a second
``traceEvents`` array, an unreadable head) raises ``FallbackToIjson``: the caller reads
the file again with the reference reader, which gives the same rows or the same error
as it always has, and the file's ``ingest_stats`` say so.
"""

from __future__ import annotations

import gc
import json
import os
import re
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from decimal import Decimal
from itertools import chain
from multiprocessing import shared_memory
from operator import itemgetter
from types import GenericAlias
from typing import Any, Union

import msgspec
import pyarrow as pa
import pyarrow.compute as pc

from cclq.errors import TraceFileError
from cclq.formats.base import READER_FAST, Detected
from cclq.formats.chrome import compiled
from cclq.formats.chrome.events import (
    BAD_DUR,
    BAD_TS,
    E_WITHOUT_B,
    EMPTY_OBJECT,
    INT64_MAX,
    INT64_MIN,
    KIND_TYPE,
    NEGATIVE_DUR,
    NO_TS,
    NOT_AN_OBJECT,
    PROMOTED_COLUMNS,
    arg_plan,
    id_text,
    map_categories,
    promote_value,
    range_note,
    slice_key,
    text_array,
    time_ns,
    time_ns_from_text,
)
from cclq.formats.chrome.ijson_reader import (
    XPROF_END_MARKER,
    BatchSink,
    EventBatch,
    ReadResult,
    add_bounds,
    base_ns,
    count_down,
    event_depth,
    file_metadata,
    finish_metadata,
    gc_paused,
    no_events_error,
)
from cclq.formats.chrome.jsonscan import StructureScanner
from cclq.formats.limits import DEFAULT_LIMITS, ReadLimits
from cclq.formats.source import Source, gzip_errors
from cclq.proc import die_with_parent
from cclq.schema import EVENT_SCHEMA

# Decoded at once; memory is a few times this. 1 MB: the ingest of hta_df_index_resolver
# (54 MB) peaked at 146 MB resident against 165 MB with 4 MB chunks, no slower.
CHUNK_BYTES = 1 << 20
# Helpers (threads or processes) for a file of at least this much text: below it, the
# reading thread, the read-ahead thread and the Parquet encoder's already keep two
# cores busy, and helpers only add chunks in flight (memory).
HELPERS_MIN_BYTES = 64 << 20
# Rows handed to the sink at once for a file that big (each becomes one Parquet row group;
# smaller files keep batch_rows, for memory): the encoder's cost per column chunk (a zstd
# context each) made 32k-row groups of the 127 MB Kineto file 0.69 s to encode against
# 0.50 s as 128k-row groups. 64k is as fast as 128k (the 127 MB file 1.19-1.27 s either
# way, the 1 GB one 6.45 s against 6.78 s, -j2) and peaks 70 MB lower: 1 GB -j2 238 MB
# resident against 312 MB, the 127 MB file 204 MB against 273 MB.
BIG_FILE_BATCH_ROWS = 65_536
MAX_GUESSES = 8  # wrong cut guesses before the structural scan finds the cut
CERTIFIED_LEVELS = 6  # nesting the fast decoder checks by its types (deeper: the scan)


class FallbackToIjson(Exception):
    """The fast reader cannot take this file with certainty; read it with ijson."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class ReadSequentially(Exception):
    """The parallel read met what only a sequential read can take (B/E pairs across
    chunks, a cut that was not an event boundary); read the file again with one process."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


# ------------------------------------------------------------------ decode types
def _json_value(levels: int) -> Any:
    """The type of a JSON value with at most ``levels`` nested arrays or objects."""
    value: Any = Union[str, int, float, bool, None]
    for _ in range(levels):
        value = Union[str, int, float, bool, None, list[value], dict[str, value]]
    return value


_NO_RAW = msgspec.Raw()  # a field that was not there
_FIELDS = ("ph", "cat", "name", "pid", "tid", "ts", "dur", "id", "bp", "s", "args")
_RAW_FIELDS = ("ts", "dur", "args")  # kept as their (compact) source text


def _event_struct(levels: int | None) -> type:
    """A struct for one event: its fields typed to at most ``levels`` nested levels, or any
    JSON with ``None`` (and then unknown keys allowed); ``ts``, ``dur`` and ``args`` as
    their raw text (``msgspec.Raw``): times are converted exactly in bulk, ``args`` is
    written as it is."""
    value = Any if levels is None else _json_value(levels)
    fields = [(name, msgspec.Raw, _NO_RAW) if name in _RAW_FIELDS else (name, value, None) for name in _FIELDS]
    return msgspec.defstruct(f"Event{levels}", fields,
                             forbid_unknown_fields=levels is not None, gc=False)


def _entries_of(struct: type, levels: int | None) -> Any:
    """An entry of the event array: an event, or anything else (dropped, counted)."""
    # GenericAlias(list, (t,)) is list[t] for a t built at run time
    other_list = (list if levels is None
                  else GenericAlias(list, (_json_value(max(levels - 1, 0)),)) if levels else list[None])
    return Union[struct, other_list, str, int, float, bool, None]


_DECODERS: dict[int | None, msgspec.json.Decoder] = {}
_ALL_STRUCTS: set[type] = set()


def _decoder(levels: int | None) -> msgspec.json.Decoder:
    """The decoder for chunks: bounded ``levels`` (the fast lane) or any JSON (``None``,
    the slow lane); built once per kind (bounded types take milliseconds to build)."""
    if levels not in _DECODERS:
        struct = _event_struct(levels)
        _ALL_STRUCTS.add(struct)
        _DECODERS[levels] = msgspec.json.Decoder(GenericAlias(list, (_entries_of(struct, levels),)))
    return _DECODERS[levels]


_GENERIC = msgspec.json.Decoder()
_FORMAT = msgspec.json.format

# A cut guess: a '}' then a comma before the next '{' (any whitespace between).
_SEPARATOR = re.compile(rb"\}[ \t\r\n]*,[ \t\r\n]*\{")
_ARRAY_END = re.compile(rb"\}[ \t\r\n]*\]")
_GAP = re.compile(rb"[ \t\r\n]*")
_BYTE_OFFSET = re.compile(r"\(byte (\d+)\)")


# ---------------------------------------------------------------------- chunker
def decode_chunk(data: bytes, offset: int, limits: ReadLimits, depth: int, levels: int, base: int = 0,
                 use_compiled: bool = False) -> tuple[list[Any] | compiled.Parsed, bool]:
    """(entries, whether the slow lane took it) of ``[`` + events + ``]`` starting at
    ``offset`` in the file's text. Raises ``_Boundary`` when the text is cut inside an
    event, ``_Undecodable`` for what msgspec refuses, ``FallbackToIjson`` for a bound.

    With ``use_compiled`` the C parser reads the chunk first (``compiled.parse``: its rows
    as columns, ``base`` added to the times); a chunk it declines is decoded as below.

    The fast lane's types prove the nesting bound (see ``CERTIFIED_LEVELS``); a chunk no
    longer than the string and event bounds cannot hold a string or an event beyond
    them. Anything else is checked by the structural scan. (``args`` is raw text that the
    types do not see: the builder checks its nesting, see ``_Builder._args_columns``.)

    The text is first made compact (``msgspec.json.format``, in C: whitespace outside
    strings removed, every token as written), so that each raw value is the compact
    source text the ``args`` column keeps.
    """
    if use_compiled:
        try:
            parsed = compiled.parse(data, limits.max_depth - depth, limits.max_string_bytes, limits.max_event_bytes,
                                    base)
        except compiled.CutInsideEvent:
            raise _Boundary from None
        if isinstance(parsed, compiled.Parsed):
            return parsed, False
    slow = False
    compact = data
    try:
        compact = _FORMAT(data, indent=-1)
        entries = _decoder(levels).decode(compact)
    except msgspec.ValidationError:
        # deep nesting, unknown keys, an entry that is not an object: decode every byte
        # into plain values first, which checks what msgspec only skips (an unknown key's
        # value is not checked for UTF-8, where ijson fails the file); then into structs
        slow = True
        try:
            _GENERIC.decode(data)
            entries = _decoder(None).decode(compact)
        except msgspec.DecodeError as e:
            _classify(e, data, offset)
        except UnicodeDecodeError as e:
            raise _Undecodable(f"invalid UTF-8 ({e.reason})") from None
        except RecursionError:
            raise FallbackToIjson("nesting deeper than the fast decoder follows") from None
    except msgspec.DecodeError as e:
        _classify(e, data, offset)
    except UnicodeDecodeError as e:  # text that is not UTF-8: ijson says where
        raise _Undecodable(f"invalid UTF-8 ({e.reason})") from None
    except RecursionError:
        raise FallbackToIjson("nesting deeper than the fast decoder follows") from None
    if slow or len(data) - 2 > min(limits.max_string_bytes, limits.max_event_bytes):
        scanner = StructureScanner(limits, depth, offset=offset + 1, depth=depth - 1)
        scanner.feed(data[1:-1])
        if scanner.violation is not None:
            raise FallbackToIjson(f"a bound is exceeded ({scanner.violation.kind})")
    return entries, slow


def _classify(e: msgspec.DecodeError, data: bytes, offset: int) -> None:
    """A decode error at the appended ']' (or a truncation) is a wrong cut; earlier, a
    problem in the text itself."""
    msg = str(e)
    m = _BYTE_OFFSET.search(msg)
    if "truncated" in msg or (m is not None and int(m.group(1)) >= len(data) - 1):
        raise _Boundary
    raise _Undecodable(f"msgspec cannot decode the text near byte {offset + (int(m.group(1)) if m else 0)}: {msg}")


class _Boundary(Exception):
    """A cut guess fell inside an event."""


class _Undecodable(Exception):
    """msgspec refused the text before the end of a chunk: invalid JSON, or text after
    the event array; the structural scan decides which."""


class _Chunk:
    """Decoded entries of the event array, the index of the first, and their text."""

    __slots__ = ("entries", "first", "text")

    def __init__(self, entries: list[Any] | compiled.Parsed, first: int, text: bytes) -> None:
        self.entries, self.first, self.text = entries, first, text


class _Chunker:
    """Cuts the decompressed text of one file into decoded chunks of whole events."""

    def __init__(self, source: Source, detected: Detected, limits: ReadLimits, base: int = 0,
                 use_compiled: bool = False) -> None:
        self.base_ns = base  # the file's base time, which the C parser adds (and checks)
        self.use_compiled = use_compiled
        self.stream = source.stream
        self.path = source.path
        self.array_form = detected.array_form
        self.limits = limits
        self.depth = event_depth(detected)
        self.levels = min(max(limits.max_depth - self.depth, 0), CERTIFIED_LEVELS)
        self.buf = bytearray()
        self.base = 0  # absolute offset of buf[0]
        self.eof = False
        self.entries = 0

    # -- reading
    def _more(self) -> bool:
        if self.eof:
            return False
        try:
            block = self.stream.read_block()
        except (TraceFileError,) + gzip_errors() as e:
            # a damaged or exploding stream: ijson reads up to the same point and reports
            # it, or an earlier syntax error, as it always has
            raise FallbackToIjson(f"the stream failed: {e}") from None
        if not block:
            self.eof = True
            return False
        self.buf += block
        return True

    def _fill(self, end: int) -> None:
        while len(self.buf) < end and self._more():
            pass

    def _drop_before(self, pos: int) -> int:
        """Forgets the text before ``pos`` (keeping one byte for the bracket trick)."""
        cut = pos - 1
        if cut > 0:
            del self.buf[:cut]
            self.base += cut
            return 1
        return pos

    # -- the head: where the events start
    def _locate_events(self) -> int:
        """Index in ``buf`` of the first byte after the ``[`` of the event array."""
        self._fill(1 << 20)
        window = 64 << 10  # the head is read from a window that grows: most heads are short
        while True:
            try:
                return self._parse_head(window)
            except _NeedMore:
                if window < len(self.buf):
                    window *= 4
                    continue
                if len(self.buf) > self.limits.max_event_bytes or not self._more():
                    raise FallbackToIjson("the event array does not start where the fast reader looks for it")

    def _parse_head(self, window: int) -> int:
        """The head, from the first ``window`` bytes of ``buf`` (``_NeedMore``: not in them)."""
        buf = bytes(self.buf[:window])
        text = buf.decode("utf-8", errors="surrogateescape")
        i = _skip_ws(text, 0)
        if self.array_form:
            if text[i:i + 1] != "[":
                raise FallbackToIjson("the file does not start with '['")
            return i + 1
        if text[i:i + 1] != "{":
            raise FallbackToIjson("the file does not start with '{'")
        decoder = json.JSONDecoder()
        i += 1
        while True:
            i = _skip_ws(text, i)
            if i >= len(text):
                raise _NeedMore
            if text[i] != '"':
                raise FallbackToIjson("no traceEvents array among the top-level keys")
            try:
                key, i = decoder.raw_decode(text, i)
            except ValueError:
                raise _NeedMore from None
            i = _skip_ws(text, i)
            if text[i:i + 1] != ":":
                raise _NeedMore if i >= len(text) else FallbackToIjson("malformed top-level object")
            i = _skip_ws(text, i + 1)
            if i >= len(text):
                raise _NeedMore
            if key == "traceEvents" and text[i] == "[":
                end = len(text[: i + 1].encode("utf-8", errors="surrogateescape"))
                self._check_text(buf[:end], 0, 0)
                try:  # the stdlib found the way here; msgspec is as strict as ijson (no NaN, UTF-8 only)
                    _GENERIC.decode(buf[:end] + b"]}")
                except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
                    raise FallbackToIjson("the keys before the event array do not decode") from None
                return end
            try:
                _, i = decoder.raw_decode(text, i)
            except (ValueError, RecursionError):
                raise _NeedMore from None
            i = _skip_ws(text, i)
            if i >= len(text):
                raise _NeedMore
            if text[i] == ",":
                i += 1
            else:
                raise FallbackToIjson("no traceEvents array among the top-level keys")

    # -- bounds
    def _check_text(self, data: bytes, offset: int, depth: int) -> None:
        """Runs the structural scan over ``data``; a bound exceeded sends the file to ijson
        (which reports it, or an earlier syntax error, exactly as it always has). A text
        shorter than the string and event bounds, with fewer brackets than the depth left,
        cannot exceed one: it is not scanned (the scan's set-up was 1 ms a small file)."""
        limits = self.limits
        if (len(data) < min(limits.max_string_bytes, limits.max_event_bytes)
                and depth + data.count(b"[") + data.count(b"{") <= limits.max_depth):
            return
        scanner = StructureScanner(self.limits, self.depth, offset=offset, depth=depth)
        scanner.feed(data)
        if scanner.violation is not None:
            raise FallbackToIjson(f"a bound is exceeded ({scanner.violation.kind})")

    # -- decoding one chunk
    def _bracketed(self, start: int, end: int) -> bytes:
        """``[`` + the text of ``buf[start:end]`` + ``]``, in one copy."""
        buf = self.buf
        saved = buf[end] if end < len(buf) else None
        buf[start - 1] = 0x5B  # '[' over the comma (or the array's own bracket)
        if saved is None:
            buf.append(0x5D)
        else:
            buf[end] = 0x5D  # ']' over whatever followed the last event
        try:
            with memoryview(buf) as view:
                return bytes(view[start - 1:end + 1])
        finally:
            if saved is None:
                del buf[end]
            else:
                buf[end] = saved

    def _decode(self, start: int, end: int) -> tuple[list[Any] | compiled.Parsed, bytes]:
        """Decodes the entries in ``buf[start:end]``; raises ``_Boundary`` for a wrong cut."""
        data = self._bracketed(start, end)
        entries, _ = decode_chunk(data, self.base + start - 1, self.limits, self.depth, self.levels, self.base_ns,
                                  self.use_compiled)
        return entries, data

    # -- the main loop
    def __iter__(self) -> Iterator[_Chunk]:
        pos = self._locate_events()
        pos = self._drop_before(pos)
        while True:
            gap = _GAP.match(self.buf, pos)
            pos = gap.end()  # type: ignore[union-attr]
            self._fill(pos + CHUNK_BYTES + min(CHUNK_BYTES, 64 << 10))
            if pos >= len(self.buf) and self.eof:
                raise FallbackToIjson("the event array is not closed")
            if self.buf[pos:pos + 1] == b"]":
                self._finish(pos)
                return
            if self.eof and len(self.buf) - pos <= CHUNK_BYTES + min(CHUNK_BYTES, 64 << 10):
                chunks, last = self._last_chunk(pos)
                yield from chunks
                self._finish(last)
                return
            chunks, close, end = self._next_chunk(pos)
            yield from chunks
            if close is not None:
                self._finish(close)
                return
            pos = self._after_value(end)

    def speculative(self) -> Iterator[tuple[bytes, int] | int]:
        """For helper processes: (``[`` + text + ``]``, its offset) cut at guessed event
        boundaries without decoding (a helper's decode proves each cut), then the position
        of the rest, which the caller reads itself (``_last_chunk``/``_finish``)."""
        pos = self._drop_before(self._locate_events())
        while True:
            pos = _GAP.match(self.buf, pos).end()  # type: ignore[union-attr]
            self._fill(pos + CHUNK_BYTES + min(CHUNK_BYTES, 64 << 10))
            if self.buf[pos:pos + 1] == b"]" or (
                    self.eof and len(self.buf) - pos <= CHUNK_BYTES + min(CHUNK_BYTES, 64 << 10)):
                yield pos
                return
            search = pos + CHUNK_BYTES
            m = _SEPARATOR.search(self.buf, search)
            while m is None and len(self.buf) - pos <= 2 * CHUNK_BYTES:
                searched = len(self.buf)
                if not self._more():
                    break
                m = _SEPARATOR.search(self.buf, max(search, searched - 64))
            if m is None:
                raise ReadSequentially("no event boundary where one was guessed")
            end = m.start() + 1
            yield self._bracketed(pos, end), self.base + pos - 1
            pos = self._after_value(end)

    def read_rest(self, pos: int) -> list[_Chunk]:
        """The chunks from ``pos`` to the end of the events (the text after them checked)."""
        self._fill(pos + 1)
        if self.buf[pos:pos + 1] == b"]":
            self._finish(pos)
            return []
        chunks, close = self._last_chunk(pos)
        self._finish(close)
        return chunks

    def _emit(self, entries: list[Any] | compiled.Parsed, text: bytes) -> _Chunk:
        chunk = _Chunk(entries, self.entries, text)
        self.entries += len(entries)
        return chunk

    def _after_value(self, end: int) -> int:
        """Past the comma that follows a chunk (or at the array's ']')."""
        self._fill(end + 1024)
        gap = _GAP.match(self.buf, end)
        i = gap.end()  # type: ignore[union-attr]
        if self.buf[i:i + 1] == b",":
            return self._drop_before(i + 1)
        return self._drop_before(i)

    def _next_chunk(self, pos: int) -> tuple[list[_Chunk], int | None, int]:
        """The next chunk from ``pos``: (chunks, the array's ']' if it was reached, the
        end of the text decoded)."""
        search = pos + CHUNK_BYTES
        for _ in range(MAX_GUESSES):
            m = _SEPARATOR.search(self.buf, search)
            # no cut within another chunk's length: one huge event, or a layout without
            # separators; the scan reads on block by block (and stops at a bound)
            while m is None and len(self.buf) - pos <= 2 * CHUNK_BYTES:
                searched = len(self.buf)
                if not self._more():
                    break
                m = _SEPARATOR.search(self.buf, max(search, searched - 64))
            if m is None:
                break
            end = m.start() + 1
            try:
                entries, text = self._decode(pos, end)
            except _Boundary:
                search = m.end()
                continue
            except _Undecodable:
                break  # invalid JSON, or the events ended before the cut: the scan tells
            return [self._emit(entries, text)], None, end
        return self._cut_by_scan(pos)

    def _cut_by_scan(self, pos: int) -> tuple[list[_Chunk], int | None, int]:
        """The exact end of an event past the target size, or of the array, from the
        structural scan (what ``_next_chunk`` returns)."""
        scanner = StructureScanner(self.limits, self.depth, offset=self.base + pos, depth=self.depth - 1)
        fed = pos
        ends: list[int] = []
        close: int | None = None
        while True:
            upto = min(len(self.buf), fed + (1 << 20))  # a block at a time: memory stays flat
            result = scanner.feed(bytes(self.buf[fed:upto]))
            fed = upto
            if scanner.violation is not None:
                raise FallbackToIjson(f"a bound is exceeded ({scanner.violation.kind})")
            ends.extend(e - self.base for e in result.event_ends)
            if result.closed_below is not None:
                close = result.closed_below - self.base
                break
            if ends and ends[-1] >= pos + CHUNK_BYTES:
                break
            if fed < len(self.buf):
                continue
            if len(self.buf) - pos > self.limits.max_event_bytes + CHUNK_BYTES:
                # within the bounds (long whitespace, many scalars) but no event in sight:
                # ijson streams it in flat memory
                raise FallbackToIjson("no event boundary within the event size bound")
            if not self._more():
                raise FallbackToIjson("the event array is not closed")
        if close is not None:
            return self._until_close(pos, close), close, close
        end = next(e for e in ends if e >= pos + CHUNK_BYTES) + 1
        return [self._emit(*self._decode_sure(pos, end))], None, end

    def _decode_sure(self, start: int, end: int) -> tuple[list[Any] | compiled.Parsed, bytes]:
        """Decodes a chunk whose end the structural scan found: failing now is invalid JSON."""
        try:
            return self._decode(start, end)
        except (_Boundary, _Undecodable) as e:
            raise FallbackToIjson(f"the text does not decode where the structural scan says events end ({e})") \
                from None

    def _until_close(self, pos: int, close: int) -> list[_Chunk]:
        """The entries from ``pos`` up to the array's ']' at ``close``."""
        end = close
        while end > pos and self.buf[end - 1] in b" \t\r\n":
            end -= 1
        if end == pos:
            return []
        return [self._emit(*self._decode_sure(pos, end))]

    def _last_chunk(self, pos: int) -> tuple[list[_Chunk], int]:
        """The rest of the array up to its ']': (chunks, where the ']' is)."""
        for m in _ARRAY_END.finditer(self.buf, pos):
            end = m.start() + 1
            try:
                entries, text = self._decode(pos, end)
            except _Boundary:
                continue
            except _Undecodable:
                break
            return [self._emit(entries, text)], m.end() - 1
        # the last entry is not an object, or the text is odd: the scan finds the end
        chunks, close, _ = self._cut_by_scan(pos)
        if close is None:
            raise FallbackToIjson("the event array does not end where the file does")
        return chunks, close

    def _finish(self, close: int) -> None:
        """Checks what follows the event array's ']' as ijson would: nothing for a bare
        array; more top-level keys (none of them a second ``traceEvents``) and '}'."""
        while self._more():
            if len(self.buf) - close > self.limits.max_event_bytes + CHUNK_BYTES:
                raise FallbackToIjson("more than the event size bound follows the events")
        rest = bytes(self.buf[close + 1:])
        self._check_text(rest, self.base + close + 1, 0 if self.array_form else 1)
        stripped = rest.strip(b" \t\r\n")
        if self.array_form:
            if stripped:
                raise FallbackToIjson("text after the event array")
            return
        if stripped[:1] == b"}":
            if stripped[1:].strip(b" \t\r\n"):
                raise FallbackToIjson("text after the top-level object")
            return
        if stripped[:1] != b",":
            raise FallbackToIjson("malformed text after the event array")
        try:
            tail = _GENERIC.decode(b"{" + stripped[1:])
        except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
            raise FallbackToIjson("the keys after the event array do not decode") from None
        if not isinstance(tail, dict) or "traceEvents" in tail:
            raise FallbackToIjson("a second traceEvents array")


class _NeedMore(Exception):
    """The head is cut off before the event array starts: read more."""


def _skip_ws(text: str, i: int) -> int:
    n = len(text)
    while i < n and text[i] in " \t\r\n":
        i += 1
    return i


# ----------------------------------------------------------------------- builder
def _raw_value(raw: msgspec.Raw) -> Any:
    """The value ijson (``use_float=False``) gives for this JSON text; None if absent.

    A raw value's text was only skipped over by msgspec: decoding it here is also what
    checks that a string in it is valid UTF-8 (else the file goes to ijson, which fails it).
    """
    b = bytes(raw)
    if not b:
        return None
    try:
        value = _GENERIC.decode(b)
    except (msgspec.DecodeError, UnicodeDecodeError) as e:
        raise FallbackToIjson(f"a ts or dur value that does not decode ({e})") from None
    if b[:1] in b"-0123456789":
        return Decimal(b.decode()) if (b"." in b or b"e" in b or b"E" in b) else int(b)
    return value


_astuple = msgspec.structs.astuple  # fields in _FIELDS order
_ARANGE: list[pa.Array] = [pa.array([], pa.int64())]


def _positions(first: int, n: int) -> pa.Array:
    """first, first + 1, ..., first + n - 1 as int64, from a cached range."""
    if len(_ARANGE[0]) < n:
        _ARANGE[0] = pa.array(range(max(n, 2 * len(_ARANGE[0]))), pa.int64())
    return pc.add(_ARANGE[0].slice(0, n), pa.scalar(first, pa.int64()))
_NONE = type(None)
Times = tuple[pa.Array, list[int], list[int]]  # (exact ns, rows without a value, rows unusable)


def _text_array(raws: Sequence[msgspec.Raw]) -> tuple[pa.Array, pa.Array]:
    """(utf8 array, lengths) of raw texts, in C: one join, no object per value. Raises
    ``FallbackToIjson`` for text that is not UTF-8 (msgspec skips raw values unchecked)."""
    lengths = pa.array(list(map(len, raws)), pa.int32())
    offsets = pa.concat_arrays([_ZERO32, pc.cumulative_sum(lengths)])
    binary = pa.Array.from_buffers(pa.binary(), len(raws), [None, offsets.buffers()[1], pa.py_buffer(b"".join(raws))])
    try:
        return binary.cast(pa.string()), lengths
    except pa.ArrowInvalid:
        raise FallbackToIjson("a raw value that is not valid UTF-8") from None


_ZERO32 = pa.array([0], pa.int32())
_DEC3 = pa.decimal128(19, 3)  # 16 integer digits: int64 ns holds at most 9.2e15 us
_DEC18 = pa.decimal128(38, 18)  # any decimals a float's repr has, 20 integer digits
_DEC3_38 = pa.decimal128(38, 3)
_NS_38 = pa.decimal128(38, 0)
_D1000 = pa.scalar(Decimal(1000), pa.decimal128(4, 0))


def _ns_from_decimal_text(text: pa.Array) -> pa.Array:
    """Exact ns of number texts (us) in C; raises ``ArrowInvalid`` where one is not a
    plain number, has more than 18 decimals, or leaves int64 ns.

    At most 3 decimals (every profiler's form): ``decimal128(19, 3)`` times 1000. More
    (a float's repr, ``1008491.4650139``): ``decimal128(38, 18)`` rounded half to even
    to 3 decimals, whose unscaled integer is the ns. (The second is 3x slower, so it is
    only tried when the first fails.)"""
    try:
        return pc.cast(pc.multiply(pc.cast(text, _DEC3), _D1000), pa.int64())
    except pa.ArrowInvalid:
        pass
    thousandths = pc.cast(pc.round(pc.cast(text, _DEC18), ndigits=3, round_mode="half_to_even"), _DEC3_38)
    return pc.cast(pa.Array.from_buffers(_NS_38, len(thousandths), thousandths.buffers()), pa.int64())
_NULL_TEXT = pa.scalar(None, pa.string())


def _times_from_text(raws: Sequence[msgspec.Raw], levels: int) -> Times:
    """Exact ns from the raw JSON text of each ts or dur value (empty: absent), as
    ``events.time_ns`` defines them: in C for every plain number with at most 18 decimals
    (integer or fraction, relative or epoch: ``_ns_from_decimal_text``). Only a chunk
    with another value (a numeric string, ``"NaN"``, 19 decimals, beyond int64 ns) has
    its odd rows converted one by one.

    A value msgspec kept as text was not checked for nesting: one with more than
    ``levels`` brackets (in or out of its strings: a bound never exceeded when it holds)
    goes to ijson, which decides."""
    text, lengths = _text_array(raws)
    absent = pc.equal(lengths, pa.scalar(0, pa.int32()))
    any_absent = pc.any(absent).as_py()
    try:
        present = pc.if_else(absent, _NULL_TEXT, text) if any_absent else text
        ns = _ns_from_decimal_text(present)
        return ns, pc.indices_nonzero(absent).to_pylist() if any_absent else [], []
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    ns, simple = time_ns_from_text(text)
    others = pc.indices_nonzero(pc.invert(simple)).to_pylist()
    missing: list[int] = []
    bad: list[int] = []
    fix_rows: list[int] = []
    fix_values: list[int] = []
    for i in others:
        raw = raws[i]
        b = bytes(raw)
        if b.count(b"[") + b.count(b"{") > levels:
            raise FallbackToIjson("a ts or dur value nested deeper than the fast reader checks")
        value = _raw_value(raw)
        if value is None:
            missing.append(i)
            continue
        v = time_ns(value)
        if v is None:
            bad.append(i)
        else:
            fix_rows.append(i)
            fix_values.append(v)
    if fix_rows:
        fixes = pc.scatter(pa.array(fix_values, pa.int64()), pa.array(fix_rows, pa.int64()), max_index=len(raws) - 1)
        ns = pc.coalesce(ns, fixes)
    return ns, missing, bad


# ------------------------------------------------------------- args and promoted
def parsed_args(raw: msgspec.Raw) -> Any:
    """An args value from its raw text as the ijson reader has it (``Decimal`` for a
    fraction); ``None`` when absent. For B/E pairs, whose args are merged."""
    b = bytes(raw)
    if not b:
        return None
    try:
        return json.loads(b, parse_float=Decimal)
    except (ValueError, RecursionError) as e:  # UnicodeDecodeError is a ValueError
        raise FallbackToIjson(f"an args value that does not decode ({e})") from None


def _raw_args(raw: msgspec.Raw) -> bytes | None:
    """An unmerged B's args as the text written (``EventBatch.add`` parses it for its
    promoted keys)."""
    return bytes(raw) or None


_EMPTY_OBJECT_TEXT = pa.scalar("{}", pa.string())
_NEWLINE = pa.scalar("\n", pa.string())
_EMPTY_TEXT = pa.scalar("", pa.string())
_NULL_JSON = pa.scalar("null", pa.string())
_COMMA = pa.scalar(",", pa.string())
_OPEN = ("[", "{")


_INT_TEXT = r"^-?[0-9]{1,18}$"
_FLOAT_TEXT = r"^-?[0-9]{1,300}(\.[0-9]{1,300})?([eE][-+]?[0-9]{1,3})?$"


def _fast_promote(kind: str, values: list[Any]) -> pa.Array | None:
    """The column for a group's values when every one converts and fits, computed in C;
    None when some value needs ``promote_value``.

    Text in a number column (every xprof argument is text) is parsed by pyarrow when it
    is a plain decimal number, a form both parsers read alike; anything else sends the
    group to ``promote_value``.
    """
    types = set(map(type, values))
    try:
        if kind == "int":
            if types == {int}:
                return pa.array(values, pa.int64())
            if types == {str}:
                text = pa.array(values, pa.string())
                if not pc.all(pc.match_substring_regex(text, _INT_TEXT)).as_py():
                    return None  # "0x0", " 5", "5.0": promote_value decides
                return pc.cast(text, pa.int64())
            return None
        if kind == "float":
            if types <= {float, int}:
                floats = pa.array(values, pa.float64())
            elif types == {str}:
                text = pa.array(values, pa.string())
                if not pc.all(pc.match_substring_regex(text, _FLOAT_TEXT)).as_py():
                    return None
                floats = pc.cast(text, pa.float64())
            else:
                return None
            return floats if pc.all(pc.is_finite(floats)).as_py() else None  # 1e999 is NULL
        if kind == "str":
            return pa.array(values, pa.string()) if types == {str} else None
        if types == {list} and set(map(type, chain.from_iterable(values))) <= {int}:
            return pa.array(values, pa.list_(pa.int64()))
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        return None
    return None


def _group_by_keys(args: list[Any]) -> dict[tuple[str, ...], list[int]]:
    """Rows of the non-empty args objects by key tuple, in order of first appearance.

    When every entry is an object (the rule: ``{}`` stands for absent args), the tuples
    are made and numbered by C calls (``map``; a key tuple's number is the row where it
    first occurs) and grouped by Arrow: no Python code runs per event."""
    m = len(args)
    groups: dict[tuple[str, ...], list[int]] = {}
    if m and set(map(type, args)) == {dict}:
        keys = list(map(tuple, args))
        first: dict[tuple[str, ...], int] = {}
        codes = pa.array(list(map(first.setdefault, keys, range(m))), pa.int64())
        grouped = pa.table({"code": codes, "row": _positions(0, m)}).group_by("code", use_threads=False) \
            .aggregate([("row", "list")])
        for code, idxs in zip(grouped.column("code").to_pylist(), grouped.column("row_list").to_pylist()):
            if keys[code]:
                groups[keys[code]] = idxs
        return groups
    get = groups.get
    for i in range(m):
        a = args[i]
        if type(a) is dict and a:
            k = tuple(a)
            g = get(k)
            if g is None:
                groups[k] = [i]
            else:
                g.append(i)
    return groups


_B = "B"
_E = "E"
_M = "M"


class _Builder:
    """Turns decoded chunks into record batches by the rules of ``cclq.formats.chrome.events``."""

    def __init__(self, file_id: str, base: int, result: ReadResult, sink: BatchSink, batch_rows: int,
                 limits: ReadLimits, depth: int, pairs: bool = True) -> None:
        self.limits = limits
        self.depth = depth  # the depth of an event (see ijson_reader.event_depth)
        self.value_levels = limits.max_depth - depth  # nesting an event's values may have within the bounds
        self.pairs = pairs  # False in a helper process, which sees one chunk and not the stacks
        self.file_id = file_id
        self.base = base
        self.result = result
        self.drops = result.drops
        self.sink = sink
        self.batch_rows = batch_rows
        self.pending: list[pa.RecordBatch] = []
        self.pending_rows = 0
        self.ts_bounds: list[int] = []
        self.open_slices: dict[tuple[Any, Any], list[tuple[int, Any, int, Any]]] = {}
        self.out_of_range: dict[str, int] = {}
        self.last_empty = -2
        self.last_index = -1

    # -- output
    def emit(self, batch: pa.RecordBatch) -> None:
        self._emit(batch)

    def _emit(self, batch: pa.RecordBatch) -> None:
        if not batch.num_rows:
            return
        self.pending.append(batch)
        self.pending_rows += batch.num_rows
        if self.pending_rows >= self.batch_rows:
            self._flush()

    def _flush(self) -> None:
        if not self.pending:
            return
        for batch in self.pending:
            add_bounds(batch, self.ts_bounds)
            self.result.rows_written += batch.num_rows
        # at least batch_rows rows at once, as the reference reader writes them: the writer
        # makes one row group of a table's chunks, without copying them together
        table = pa.Table.from_batches(self.pending)
        self.pending, self.pending_rows = [], 0
        self.sink(table)

    # -- one chunk
    def add(self, chunk: _Chunk) -> None:
        entries = chunk.entries
        first = chunk.first
        if not isinstance(entries, list):  # read by the C parser
            self._add_parsed(entries, first)
            return
        n = len(entries)
        self.last_index = first + n - 1
        if set(map(type, entries)) <= _STRUCT_TYPES:
            objs, where = entries, None
        else:
            where = [i for i, e in enumerate(entries) if type(e) in _STRUCT_TYPES]
            objs = [entries[i] for i in where]
        m = len(objs)
        if where is not None:
            self.drops[NOT_AN_OBJECT, ""] += n - m
        if not m:
            return
        # fields into columns: one tuple per event, transposed by zip, both in C (3x
        # faster than one attrgetter map per field)
        ph, cat, name, pid, tid, ts_in, dur_in, fid, bp, sc, args = zip(*map(_astuple, objs))
        index = _positions(first, n) if where is None else pa.array([first + i for i in where], pa.int64())
        keep = [True] * m
        drops = self.drops

        def drop(i: int, reason: str) -> None:
            if keep[i]:
                keep[i] = False
                drops[reason, id_text(ph[i]) or ""] += 1

        # 1. ts: absent (kept for M), empty object, unusable, beyond int64 with the base
        ts_ns, ts_missing, ts_bad = _times_from_text(ts_in, self.value_levels)
        if ts_missing:
            empty_rows = [i for i in ts_missing if ph[i] is None and _all_unset(objs[i])]
            empties = self._empty_entries(chunk, where, empty_rows) if empty_rows else set()
            for i in ts_missing:
                if i in empties:
                    keep[i] = False
                    drops[EMPTY_OBJECT, ""] += 1
                    self.last_empty = first + (i if where is None else where[i])
                elif ph[i] != _M:
                    drop(i, NO_TS)
        for i in ts_bad:
            drop(i, BAD_TS)
        ts_total = self._with_base(ts_ns, drop)
        # 2. B/E pairs (never written as they are: a closed pair becomes one B row)
        be = _B in ph or _E in ph
        if be and not self.pairs:
            raise ReadSequentially("B/E events")
        pairs = self._begin_end(ph, pid, tid, objs, ts_total, keep, first, where) if be else []
        # 3. dur: unusable, negative, or an end beyond int64
        dur_ns, _, dur_bad = _times_from_text(dur_in, self.value_levels)
        self._check_durs(ts_total, dur_ns, dur_bad, keep, drop)

        rows = None if all(keep) else [i for i in range(m) if keep[i]]
        batch = self._columns(m, index, ph, cat, name, pid, tid, ts_total, dur_ns, fid, bp, sc, args, rows,
                              chunk.text)
        if rows is not None:
            batch = batch.filter(pa.array(keep, pa.bool_()))
        if pairs:
            batch = self._merge_pairs(batch, keep, pairs)
        self._emit(batch)

    def _add_parsed(self, parsed: compiled.Parsed, first: int) -> None:
        """A chunk the C parser read: its drops and notes counted, its rows emitted."""
        self.last_index = first + parsed.entries - 1
        for key in parsed.drops:
            self.drops[key] += 1
        if parsed.last_empty >= 0:
            self.last_empty = first + parsed.last_empty
        self._count_range(parsed.out_of_range)
        if parsed.rows:
            self._emit(parsed.batch(self.file_id, first))

    def _with_base(self, ts: pa.Array, drop: Any) -> pa.Array:
        """ts + the file's base; rows where that leaves int64 are dropped as "bad ts"."""
        base = self.base
        lo, hi = (v.as_py() for v in pc.min_max(ts).values())
        if lo is None or not base:
            return ts
        if INT64_MIN <= lo + base and hi + base <= INT64_MAX:
            return pc.add(ts, pa.scalar(base, pa.int64()))
        values = ts.to_pylist()
        for i, t in enumerate(values):
            if t is None:
                continue
            if INT64_MIN <= t + base <= INT64_MAX:
                values[i] = t + base
            else:
                drop(i, BAD_TS)
                values[i] = None
        return pa.array(values, pa.int64())

    @staticmethod
    def _check_durs(ts: pa.Array, dur: pa.Array, dur_bad: list[int], keep: list[bool], drop: Any) -> None:
        """Drops rows still kept whose dur is unusable, negative, or ends beyond int64."""
        for i in dur_bad:
            drop(i, BAD_DUR)
        negative = pc.any(pc.less(dur, pa.scalar(0, pa.int64()))).as_py()
        hi_ts, hi_dur = pc.max(ts).as_py(), pc.max(dur).as_py()
        if not (negative or (hi_ts is not None and hi_dur is not None and hi_ts + hi_dur > INT64_MAX)):
            return
        for i, (t, d) in enumerate(zip(ts.to_pylist(), dur.to_pylist())):
            if d is None or not keep[i]:
                continue
            if d < 0:
                drop(i, NEGATIVE_DUR)
            elif t is not None and t + d > INT64_MAX:
                drop(i, BAD_DUR)

    def _empty_entries(self, chunk: _Chunk, where: list[int] | None, rows: list[int]) -> set[int]:
        """Which of these rows were ``{}`` (a struct cannot tell {} from all-null keys)."""
        try:
            generic = _GENERIC.decode(chunk.text)
        except (msgspec.DecodeError, UnicodeDecodeError, RecursionError) as e:
            # a Raw value (args) is not checked when the chunk is decoded into structs: here
            # it is, and what does not decode is for the reference reader to report
            raise FallbackToIjson(f"an entry that does not decode ({e})") from None
        return {i for i in rows if generic[i if where is None else where[i]] == {}}

    def _begin_end(self, ph: Sequence[Any], pid: Sequence[Any], tid: Sequence[Any], objs: list[Any],
                   ts: pa.Array, keep: list[bool], first: int, where: list[int] | None
                   ) -> list[tuple[int, tuple[Any, ...], Any, int, int]]:
        """B/E pairs, in file order: B rows wait on a stack per (pid, tid); an E closes the
        last one. Returns the closed pairs as (E row, B fields, merged args, ts, dur)."""
        ts_list = ts.to_pylist()
        pairs = []
        for i, p in enumerate(ph):
            if p != _B and p != _E:
                continue
            if not keep[i]:  # dropped for its ts
                continue
            keep[i] = False  # a B is written when its E arrives; an E never is
            key = slice_key(pid[i], tid[i])
            if p == _B:
                o = objs[i]
                self.open_slices.setdefault(key, []).append(
                    (first + (i if where is None else where[i]), o, ts_list[i], None))
                continue
            stack = self.open_slices.get(key)
            if not stack:
                self.drops[E_WITHOUT_B, "E"] += 1
                continue
            b_idx, b, b_ts, _ = stack.pop()
            if ts_list[i] < b_ts:
                self.drops[NEGATIVE_DUR, "B"] += 1
                continue
            args: Any = _raw_args(b.args)
            e_args = parsed_args(objs[i].args)
            if e_args and type(e_args) is dict:  # merged as parsed values, as the ijson reader merges
                b_args = parsed_args(b.args)
                args = {**b_args, **e_args} if type(b_args) is dict else e_args
            pairs.append((i, (b_idx, _B, b.cat, b.name, b.pid, b.tid, None, None, b.id, b.bp, b.s), args, b_ts,
                          ts_list[i] - b_ts))
        return pairs

    def _merge_pairs(self, batch: pa.RecordBatch, keep: list[bool],
                     pairs: list[tuple[int, tuple[Any, ...], Any, int, int]]) -> pa.RecordBatch:
        """Puts closed B/E slices where their E was, as the reference reader writes them."""
        b_batch = EventBatch()
        for row, fields, args, b_ts, dur in pairs:
            b_batch.b_times[len(b_batch.rows)] = (b_ts - self.base, dur)
            b_batch.add(fields, args)
        slices = b_batch.to_record_batch(self.file_id, self.base, self.drops)
        self._count_range(b_batch.out_of_range)
        if slices is None:
            return batch
        order = [i for i in range(len(keep)) if keep[i]] + [row for row, *_ in pairs]
        both = pa.Table.from_batches([batch, slices])
        return both.take(pc.sort_indices(pa.array(order, pa.int64()))).combine_chunks().to_batches()[0] \
            if both.num_rows else batch

    def _count_range(self, counts: dict[str, int]) -> None:
        for column, k in counts.items():
            self.out_of_range[column] = self.out_of_range.get(column, 0) + k

    # -- columns
    def _columns(self, m: int, index: pa.Array, ph: Sequence[Any], cat: Sequence[Any], name: Sequence[Any],
                 pid: Sequence[Any], tid: Sequence[Any], ts: pa.Array, dur: pa.Array, fid: Sequence[Any],
                 bp: Sequence[Any], sc: Sequence[Any], args: Sequence[msgspec.Raw], rows: list[int] | None,
                 text: bytes) -> pa.RecordBatch:
        args_col, promoted = self._args_columns(args, rows, text)
        cat_col, cat_raw = map_categories(text_array(cat))
        arrays = [
            pa.array([self.file_id] * m, pa.string()),
            index,
            text_array(ph),
            cat_col,
            cat_raw,
            text_array(name),
            text_array(pid),
            text_array(tid),
            ts,
            dur,
            text_array(fid),
            text_array(bp),
            text_array(sc),
            args_col,
        ] + [promoted[column] if column in promoted else pa.nulls(m, KIND_TYPE[kind])
             for column, kind in PROMOTED_COLUMNS]
        return pa.RecordBatch.from_arrays(arrays, schema=EVENT_SCHEMA)

    def _args_columns(self, raws: Sequence[msgspec.Raw], rows: list[int] | None, text: bytes
                      ) -> tuple[pa.Array, dict[str, pa.Array]]:
        """The ``args`` column (each event's args as its compact source text; NULL where
        absent or ``null``) and the promoted columns.

        The text is msgspec's raw value, joined into one Arrow array (UTF-8 checked
        there). Its nesting was not checked by the decoder's types: a value with more
        brackets than the bound allows (a bound never exceeded when it holds) has the
        chunk's ``text`` go through the structural scan. Promoted columns: see
        ``_promote_grouped``.

        (pyarrow's JSON reader with the promoted keys as an explicit schema gives the
        same columns in C, but cost 1.25x the CPU of ``_promote_grouped`` on Kineto
        files: its cost grows with the number of fields, 41, of which Kineto has 29.)
        """
        args_text, lengths = _text_array(raws)
        null = pc.or_(pc.equal(lengths, pa.scalar(0, pa.int32())), pc.equal(args_text, _NULL_JSON))
        any_null = pc.any(null).as_py()
        args_col = pc.if_else(null, _NULL_TEXT, args_text) if any_null else args_text
        if len(raws) and pc.max(pc.add(pc.count_substring(args_text, "["),
                                       pc.count_substring(args_text, "{"))).as_py() > self.value_levels:
            scanner = StructureScanner(self.limits, self.depth, offset=0, depth=self.depth - 1)
            scanner.feed(text[1:-1])
            if scanner.violation is not None:
                raise FallbackToIjson(f"a bound is exceeded ({scanner.violation.kind})")
        objects = pc.if_else(null, _EMPTY_OBJECT_TEXT, args_text) if any_null else args_text
        return args_col, self._promote_grouped(objects, rows)

    def _promote_grouped(self, objects: pa.Array, rows: list[int] | None) -> dict[str, pa.Array]:
        """The promoted columns from the args decoded as values (one msgspec call for the
        chunk): events grouped by their key tuple (a Kineto kernel always has the same
        dozen keys), each promoted key taken for a whole group at once in C where every
        value is plain (``_fast_promote``), else by ``events.promote_value``; each column
        put back in row order with one ``take``."""
        m = len(objects)
        joined = pc.binary_join_element_wise(objects, _EMPTY_TEXT, _COMMA)
        size = pc.sum(pc.binary_length(joined)).as_py() if m else 0
        body = memoryview(joined.buffers()[2])[:max(size - 1, 0)] if m else b""
        try:
            args = _GENERIC.decode(b"".join((b"[", body, b"]")))
        except (msgspec.DecodeError, UnicodeDecodeError, RecursionError) as e:
            raise FallbackToIjson(f"an args value that does not decode ({e})") from None
        groups = _group_by_keys(args)
        kept = None if rows is None else set(rows)
        sizes: list[int] = []
        columns: dict[str, dict[int, pa.Array]] = {}  # column -> {group number: values}
        order: list[int] = []
        for g, (keys, idxs) in enumerate(groups.items()):
            plan = arg_plan(keys)
            if not plan:
                continue
            gi = len(sizes)
            sizes.append(len(idxs))
            order += idxs
            gd = [args[idxs[0]]] if len(idxs) == 1 else itemgetter(*idxs)(args)
            for key, column, kind in plan:
                values = list(map(itemgetter(key), gd))
                arr = _fast_promote(kind, values)
                if arr is None:
                    out = []
                    for i, v in zip(idxs, values):
                        value, _, too_big = promote_value(kind, v)
                        out.append(value)
                        if too_big and (kept is None or i in kept):
                            self.out_of_range[column] = self.out_of_range.get(column, 0) + 1
                    arr = pa.array(out, KIND_TYPE[kind])
                columns.setdefault(column, {})[gi] = arr
        if not columns:
            return {}
        covered = len(order)
        if covered == m and sizes == [m] and order[0] == 0 and order[-1] == m - 1:
            where = None  # one group, every row, in order
        else:
            where = pc.scatter(pa.array(range(covered), pa.int64()), pa.array(order, pa.int64()), max_index=m - 1)
        out_columns: dict[str, pa.Array] = {}
        for column, parts in columns.items():
            typ = KIND_TYPE[COLUMN_KIND_OF[column]]
            grouped = pa.concat_arrays([parts[g] if g in parts else pa.nulls(n, typ) for g, n in enumerate(sizes)])
            out_columns[column] = grouped if where is None else grouped.take(where)
        return out_columns

    # -- the end of the file
    def finish(self) -> None:
        unclosed = EventBatch()
        for stack in self.open_slices.values():
            for b_idx, b, b_ts, _ in stack:
                unclosed.b_times[len(unclosed.rows)] = (b_ts - self.base, None)  # type: ignore[assignment]
                unclosed.add((b_idx, _B, b.cat, b.name, b.pid, b.tid, None, None, b.id, b.bp, b.s), _raw_args(b.args))
        if unclosed.rows:
            self.result.notes["B without E (kept, dur_ns NULL)"] = len(unclosed.rows)
            batch = unclosed.to_record_batch(self.file_id, self.base, self.drops)
            self._count_range(unclosed.out_of_range)
            if batch is not None:
                self._emit(batch)
        self._flush()
        for column, k in self.out_of_range.items():
            self.result.notes[range_note(column)] += k


COLUMN_KIND_OF = dict(PROMOTED_COLUMNS)
_STRUCT_TYPES = _ALL_STRUCTS  # every event struct a decoder may produce


def _all_unset(obj: Any) -> bool:
    return all(v is None or (type(v) is msgspec.Raw and not len(v)) for v in msgspec.structs.astuple(obj))


# Arrow scalars for compute calls: a Python value is converted on every call, and that
# conversion tries to import dateutil each time when it is not installed (40 us a call)
_EMPTY_BYTES = pa.scalar(b"", pa.binary())
_CLOSE_BRACE = pa.scalar(b"}", pa.binary())


# ------------------------------------------------------------ helper processes
@dataclass(frozen=True)
class _FileSettings:
    """What a helper process needs to turn chunks of one file into record batches."""

    file_id: str
    base: int
    limits: ReadLimits
    depth: int
    levels: int
    use_compiled: bool


_SETTINGS: _FileSettings | None = None  # in a helper process, set by _helper_start


def _helper_start(settings: _FileSettings, parent_pid: int) -> None:
    global _SETTINGS
    _SETTINGS = settings
    gc.disable()  # as the reading process does (see chrome.gc_paused)

    die_with_parent(parent_pid)  # a helper never outlives the ingest


def _build_in_helper(data: bytes, offset: int) -> tuple[Any, ...]:
    """One chunk, in a helper process: ("ok", Arrow IPC bytes with event_idx counted
    from 0, entries, drops, notes, last empty entry), or ("sequential" | "fallback", reason)."""
    s = _SETTINGS
    assert s is not None
    try:
        entries, _ = decode_chunk(data, offset, s.limits, s.depth, s.levels, s.base, s.use_compiled)
        chunk = _Chunk(entries, 0, data)
        result = ReadResult(reader=READER_FAST)
        out: list[Any] = []
        builder = _Builder(s.file_id, s.base, result, out.append, 1 << 62, s.limits, s.depth, pairs=False)
        builder.add(chunk)
        builder.finish()
    except (_Boundary, _Undecodable, ReadSequentially) as e:
        return ("sequential", str(e) or type(e).__name__)
    except FallbackToIjson as e:
        return ("fallback", e.reason)
    except RecursionError:
        return ("fallback", "nesting deeper than the fast reader follows")
    # through shared memory: a pipe would copy the batches (twice the chunk's size) twice
    size = pa.MockOutputStream()
    _write_ipc(size, out)
    shm = shared_memory.SharedMemory(create=True, size=max(size.size(), 1))
    _untrack(shm)  # the reading process unlinks it
    try:
        _write_ipc(pa.FixedSizeBufferWriter(pa.py_buffer(shm.buf)), out)
        name = shm.name
    finally:
        shm.close()
    return ("ok", (name, size.size()), len(entries), dict(result.drops), dict(result.notes), builder.last_empty)


def _write_ipc(stream: Any, tables: list[pa.Table]) -> None:
    with pa.ipc.new_stream(stream, EVENT_SCHEMA) as writer:
        for table in tables:
            writer.write_table(table)


def _untrack(shm: shared_memory.SharedMemory) -> None:
    """Python's resource tracker would unlink (and warn about) a segment another process
    owns; this code creates and unlinks each segment exactly once itself."""
    from multiprocessing import resource_tracker

    try:
        resource_tracker.unregister(shm._name, "shared_memory")  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - no tracker: nothing to undo
        pass


def _take_shared(where: tuple[str, int]) -> pa.Table:
    """The table a helper left in shared memory, copied out; the segment is removed."""
    name, size = where
    shm = shared_memory.SharedMemory(name=name)  # (attaching registers it; unlink() below unregisters)
    try:
        assert shm.buf is not None  # attached: None only after close()
        data = bytes(shm.buf[:size])
    finally:
        shm.close()
        shm.unlink()
    return pa.ipc.open_stream(data).read_all()


def _parse_in_thread(data: bytes, offset: int, chunker: _Chunker) -> list[Any] | compiled.Parsed:
    """One speculatively cut chunk, on a thread: the C parser runs without the GIL (a
    chunk it declines is decoded by msgspec, with it). A wrong cut or undecodable text
    sends the file back to one sequential read, as with helper processes."""
    try:
        entries, _ = decode_chunk(data, offset, chunker.limits, chunker.depth, chunker.levels, chunker.base_ns,
                                  chunker.use_compiled)
    except (_Boundary, _Undecodable) as e:
        raise ReadSequentially(str(e) or type(e).__name__) from None
    return entries


def _read_with_threads(chunker: _Chunker, builder: _Builder, threads: int) -> None:
    """Chunks parsed by the C parser on ``threads`` threads while this one cuts the next
    and emits the last, in order (so that B/E pairs across chunks are closed here, as in
    a sequential read). One process: no fork, no copy of the batches between processes;
    the Parquet encoder's thread runs beside them."""
    from concurrent.futures import ThreadPoolExecutor

    in_flight: deque[tuple[bytes, Future[Any]]] = deque()

    def collect() -> None:
        data, future = in_flight.popleft()
        builder.add(chunker._emit(future.result(), data))

    with ThreadPoolExecutor(threads, thread_name_prefix="cclq-parse") as pool:
        _in_order(chunker, builder, lambda data, offset: pool.submit(_parse_in_thread, data, offset, chunker),
                  collect, in_flight, threads)


def _in_order(chunker: _Chunker, builder: _Builder, submit: Callable[[bytes, int], Future[Any]],
              collect: Callable[[], None], in_flight: deque[tuple[bytes, Future[Any]]], width: int) -> None:
    """The chunks ``chunker.speculative`` cuts handed to ``submit`` (at most ``2 * width``
    in flight; ``collect`` takes the oldest back, in order), then the rest of the array,
    read here: what threads and helper processes share."""
    try:
        for item in chunker.speculative():
            if isinstance(item, int):
                while in_flight:
                    collect()
                for chunk in chunker.read_rest(item):
                    builder.add(chunk)
                return
            data, offset = item
            in_flight.append((data, submit(data, offset)))
            while len(in_flight) > 2 * width:
                collect()
    finally:
        for _, future in in_flight:
            future.cancel()


def _read_with_helpers(chunker: _Chunker, builder: _Builder, file_id: str, base: int, helpers: int) -> None:
    """Chunks go to ``helpers`` processes as they are cut; their batches come back in
    order (event indices shifted to the file's) and go to the builder's sink."""
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    settings = _FileSettings(file_id, base, chunker.limits, chunker.depth, chunker.levels, chunker.use_compiled)
    in_flight: deque[tuple[bytes, Future[Any]]] = deque()
    result = builder.result
    with ProcessPoolExecutor(helpers, mp_context=mp.get_context("fork"), initializer=_helper_start,
                             initargs=(settings, os.getpid())) as pool:
        def collect() -> None:
            try:
                answer = in_flight.popleft()[1].result()
            except BrokenProcessPool:  # killed (out of memory?): one process tries it alone
                raise ReadSequentially("a helper process died") from None
            if answer[0] == "sequential":
                raise ReadSequentially(answer[1])
            if answer[0] == "fallback":
                raise FallbackToIjson(answer[1])
            _, ipc, n, drops, notes, last_empty = answer
            first = chunker.entries
            chunker.entries += n
            builder.last_index = first + n - 1
            if last_empty >= 0:
                builder.last_empty = first + last_empty
            result.drops.update(drops)
            for note, k in notes.items():
                result.notes[note] += k
            table = _take_shared(ipc)
            if first:
                idx = table.schema.get_field_index("event_idx")
                table = table.set_column(idx, "event_idx", pc.add(table.column(idx), pa.scalar(first, pa.int64())))
            for batch in table.to_batches():
                builder.emit(batch)  # counted, bounded and written as this process's own

        _in_order(chunker, builder, lambda data, offset: pool.submit(_build_in_helper, data, offset), collect,
                  in_flight, helpers)


@gc_paused()
def read_chrome_json_fast(
    source: Source,
    detected: Detected,
    file_id: str,
    sink: BatchSink,
    batch_rows: int = 32768,
    limits: ReadLimits = DEFAULT_LIMITS,
    helpers: int = 0,
    metadata: dict[str, Any] | None = None,
    use_compiled: bool = compiled.AVAILABLE,
) -> ReadResult:
    """Streams the events of ``source`` into ``sink``: the rows ``read_chrome_json`` writes.

    With ``helpers`` > 0, that many forked processes decode and build the chunks while
    this one cuts them and writes (one big file on several cores); the rows are the
    same. Raises ``FallbackToIjson`` when the file must be read by the reference reader
    instead, ``ReadSequentially`` when the helpers cannot take it (batches already sent
    to ``sink`` are then to be discarded). ``metadata`` is ``file_metadata``'s answer
    when the caller has it already. ``use_compiled``: chunks go to the C parser first
    (``compiled``), else straight to msgspec.
    """
    result = ReadResult(reader=READER_FAST)
    head_meta = dict(metadata) if metadata is not None else file_metadata(source.path, detected, limits)
    base = base_ns(head_meta)
    chunker = _Chunker(source, detected, limits, base, use_compiled and compiled.AVAILABLE)
    big = source.text_size_guess >= HELPERS_MIN_BYTES
    builder = _Builder(file_id, base, result, sink, max(batch_rows, BIG_FILE_BATCH_ROWS) if big else batch_rows,
                       limits, chunker.depth)
    if not big:
        helpers = 0
    try:
        if helpers > 0 and chunker.use_compiled:
            _read_with_threads(chunker, builder, helpers)
        elif helpers > 0:
            _read_with_helpers(chunker, builder, file_id, base, helpers)
        else:
            for chunk in chunker:
                builder.add(chunk)
        builder.finish()
    except RecursionError:  # nesting deeper than Python follows (within --max-depth)
        raise FallbackToIjson("nesting deeper than the fast reader follows") from None
    result.events_read = chunker.entries
    if detected.flavor == "xprof" and builder.last_empty == builder.last_index and result.events_read:
        count_down(result.drops, (EMPTY_OBJECT, ""))
        result.notes[XPROF_END_MARKER] += 1
    result.decompressed_bytes = source.stream.offset
    finish_metadata(result, head_meta, source.stream.tail())
    result.base_time_ns = base
    result.ts_min_ns = min(builder.ts_bounds) if builder.ts_bounds else None
    result.ts_max_ns = max(builder.ts_bounds) if builder.ts_bounds else None
    if result.events_read == 0:
        raise no_events_error(source.path, detected)
    return result


__all__ = ["FallbackToIjson", "ReadSequentially", "read_chrome_json_fast", "decode_chunk", "CHUNK_BYTES"]
