"""Cutting the decompressed text of one file into chunks of whole events.

A cut is only a guess (a ``}`` followed by a comma and the next ``{``, whatever the
layout: one event per line as the profilers write it, Kineto's indented form, or one long
line); the chunk's decode (``decode.decode_chunk``) proves it: a cut inside a string or
inside an event leaves a bracket or a quote open, which the parser reports at the end of
the chunk. A wrong guess costs a retry at the next candidate; after a few, the exact event
ends come from the structural scan (``jsonscan``). The text before the event array (the
head) and after it are checked here as ijson would.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import msgspec

from cclq.errors import TraceFileError
from cclq.formats.base import Detected
from cclq.formats.chrome import compiled
from cclq.formats.chrome.decode import (
    CERTIFIED_LEVELS,
    GENERIC,
    FallbackToIjson,
    ReadSequentially,
    Undecodable,
    WrongCut,
    decode_chunk,
)
from cclq.formats.chrome.ijson_reader import event_depth
from cclq.formats.chrome.jsonscan import StructureScanner
from cclq.formats.limits import ReadLimits
from cclq.formats.source import Source, gzip_errors

# Decoded at once; memory is a few times this. 1 MB: the ingest of hta_df_index_resolver
# (54 MB) peaked at 146 MB resident against 165 MB with 4 MB chunks, no slower.
CHUNK_BYTES = 1 << 20
MAX_GUESSES = 8  # wrong cut guesses before the structural scan finds the cut

# A cut guess: a '}' then a comma before the next '{' (any whitespace between).
_SEPARATOR = re.compile(rb"\}[ \t\r\n]*,[ \t\r\n]*\{")
_ARRAY_END = re.compile(rb"\}[ \t\r\n]*\]")
_GAP = re.compile(rb"[ \t\r\n]*")


class Chunk:
    """Decoded entries of the event array, the index of the first, and their text."""

    __slots__ = ("entries", "first", "text")

    def __init__(self, entries: list[Any] | compiled.Parsed, first: int, text: bytes) -> None:
        self.entries, self.first, self.text = entries, first, text


class Chunker:
    """Cuts the decompressed text of one file into decoded chunks of whole events."""

    def __init__(
        self, source: Source, detected: Detected, limits: ReadLimits, base: int = 0, use_compiled: bool = False
    ) -> None:
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
                    raise FallbackToIjson("the event array does not start where the fast reader looks for it") from None

    def _parse_head(self, window: int) -> int:
        """The head, from the first ``window`` bytes of ``buf`` (``_NeedMore``: not in them)."""
        buf = bytes(self.buf[:window])
        text = buf.decode("utf-8", errors="surrogateescape")
        i = _skip_ws(text, 0)
        if self.array_form:
            if text[i : i + 1] != "[":
                raise FallbackToIjson("the file does not start with '['")
            return i + 1
        if text[i : i + 1] != "{":
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
            if text[i : i + 1] != ":":
                raise _NeedMore if i >= len(text) else FallbackToIjson("malformed top-level object")
            i = _skip_ws(text, i + 1)
            if i >= len(text):
                raise _NeedMore
            if key == "traceEvents" and text[i] == "[":
                end = len(text[: i + 1].encode("utf-8", errors="surrogateescape"))
                self._check_text(buf[:end], 0, 0)
                try:  # the stdlib found the way here; msgspec is as strict as ijson (no NaN, UTF-8 only)
                    GENERIC.decode(buf[:end] + b"]}")
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
        if (
            len(data) < min(limits.max_string_bytes, limits.max_event_bytes)
            and depth + data.count(b"[") + data.count(b"{") <= limits.max_depth
        ):
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
                return bytes(view[start - 1 : end + 1])
        finally:
            if saved is None:
                del buf[end]
            else:
                buf[end] = saved

    def _decode(self, start: int, end: int) -> tuple[list[Any] | compiled.Parsed, bytes]:
        """Decodes the entries in ``buf[start:end]``; raises ``WrongCut`` for a wrong cut."""
        data = self._bracketed(start, end)
        entries, _ = decode_chunk(
            data, self.base + start - 1, self.limits, self.depth, self.levels, self.base_ns, self.use_compiled
        )
        return entries, data

    # -- the main loop
    def __iter__(self) -> Iterator[Chunk]:
        pos = self._locate_events()
        pos = self._drop_before(pos)
        while True:
            gap = _GAP.match(self.buf, pos)
            pos = gap.end()  # type: ignore[union-attr]
            self._fill(pos + CHUNK_BYTES + min(CHUNK_BYTES, 64 << 10))
            if pos >= len(self.buf) and self.eof:
                raise FallbackToIjson("the event array is not closed")
            if self.buf[pos : pos + 1] == b"]":
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
            if self.buf[pos : pos + 1] == b"]" or (
                self.eof and len(self.buf) - pos <= CHUNK_BYTES + min(CHUNK_BYTES, 64 << 10)
            ):
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

    def read_rest(self, pos: int) -> list[Chunk]:
        """The chunks from ``pos`` to the end of the events (the text after them checked)."""
        self._fill(pos + 1)
        if self.buf[pos : pos + 1] == b"]":
            self._finish(pos)
            return []
        chunks, close = self._last_chunk(pos)
        self._finish(close)
        return chunks

    def _emit(self, entries: list[Any] | compiled.Parsed, text: bytes) -> Chunk:
        chunk = Chunk(entries, self.entries, text)
        self.entries += len(entries)
        return chunk

    def _after_value(self, end: int) -> int:
        """Past the comma that follows a chunk (or at the array's ']')."""
        self._fill(end + 1024)
        gap = _GAP.match(self.buf, end)
        i = gap.end()  # type: ignore[union-attr]
        if self.buf[i : i + 1] == b",":
            return self._drop_before(i + 1)
        return self._drop_before(i)

    def _next_chunk(self, pos: int) -> tuple[list[Chunk], int | None, int]:
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
            except WrongCut:
                search = m.end()
                continue
            except Undecodable:
                break  # invalid JSON, or the events ended before the cut: the scan tells
            return [self._emit(entries, text)], None, end
        return self._cut_by_scan(pos)

    def _cut_by_scan(self, pos: int) -> tuple[list[Chunk], int | None, int]:
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
        except (WrongCut, Undecodable) as e:
            raise FallbackToIjson(f"the text does not decode where the structural scan says events end ({e})") from None

    def _until_close(self, pos: int, close: int) -> list[Chunk]:
        """The entries from ``pos`` up to the array's ']' at ``close``."""
        end = close
        while end > pos and self.buf[end - 1] in b" \t\r\n":
            end -= 1
        if end == pos:
            return []
        return [self._emit(*self._decode_sure(pos, end))]

    def _last_chunk(self, pos: int) -> tuple[list[Chunk], int]:
        """The rest of the array up to its ']': (chunks, where the ']' is)."""
        for m in _ARRAY_END.finditer(self.buf, pos):
            end = m.start() + 1
            try:
                entries, text = self._decode(pos, end)
            except WrongCut:
                continue
            except Undecodable:
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
        rest = bytes(self.buf[close + 1 :])
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
            tail = GENERIC.decode(b"{" + stripped[1:])
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
