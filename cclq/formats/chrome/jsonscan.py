"""The structural scan of JSON bytes: strings, nesting and event extents, block by block.

``StructureScanner`` is fed the decompressed text of a file in blocks, in order, and
tracks what a parser would: whether a byte is inside a string (quotes, backslash
escapes), the nesting depth, and where each event (an element of a top-level array)
starts and ends. It records the first place where the text exceeds a ``ReadLimits``
bound. Readers run it *before* their parser sees the bytes: ijson's cost on a long
token or deep nesting is quadratic, so the check has to come first.

It never looks at a byte from Python. Each block is mapped through ``bytes.translate``
to a small code per byte (quote, backslash, opening or closing bracket, else 0); pyarrow
then works on the positions of the non-zero codes, a sixth of the bytes: running sums of
quotes give the string state, running sums of the brackets outside strings give the
depth. Backslashes, rare in traces, are resolved in Python. A second ``translate`` marks
the bytes that can form a number or literal, and a substring search finds runs longer
than the token bound. ``reference_scan`` is the same specification written as a plain
byte loop; the tests check one against the other.

Invalid JSON is scanned too, consistently (depth may go wrong, nothing raises): the
parser that comes after reports it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from cclq.formats.limits import (
    INT_DIGITS,
    LimitExceeded,
    ReadLimits,
    event_too_large,
    number_too_long,
    string_too_long,
    too_deep,
)

_QUOTE, _BACKSLASH, _OPEN, _CLOSE = 1, 2, 3, 4
# Compute functions given a Python number build a scalar each call, and that tries (and
# fails) to import optional modules: 0.1 ms a call, more than the work on a block.
_U8 = {code: pa.scalar(code, pa.uint8()) for code in (_QUOTE, _BACKSLASH, _OPEN, _CLOSE)}
_I64 = {k: pa.scalar(k, pa.int64()) for k in (-1, 0, 1)}
_I32 = {k: pa.scalar(k, pa.int32()) for k in (0, 1)}


def _table(mapping: dict[int, int]) -> bytes:
    return bytes(mapping.get(b, 0) for b in range(256))


_STRUCT = _table(
    {ord('"'): _QUOTE, ord("\\"): _BACKSLASH, ord("{"): _OPEN, ord("["): _OPEN, ord("}"): _CLOSE, ord("]"): _CLOSE}
)
# Bytes a number or a literal (true, false, null) is made of. A run of them longer than
# the token bound outside a string is a token too long; inside a string, the string bound
# already covers it.
TOKEN_BYTES = b"0123456789+-.abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
_TOKEN = _table({b: 1 for b in TOKEN_BYTES})

# Kinds of violation, in the order they are reported when two trigger at one byte.
STRING, DEPTH, EVENT = "string", "depth", "event"


@dataclass(frozen=True)
class Violation:
    """The first bound a text exceeds: ``start`` is where the offending string, token or
    event begins (or the bracket that goes too deep); ``trigger`` is the first byte past
    the bound, the point where a streaming parser would have to stop."""

    kind: str
    start: int
    trigger: int


def report_order(v: Violation) -> tuple[int, int, int]:
    """Which of two violations is reported: the first a parser would reach; at one byte
    (a long string is also a long run of letters), the one that starts first."""
    return v.trigger, v.start, (STRING, DEPTH, EVENT).index(v.kind)


@dataclass
class ScanResult:
    """What one ``feed`` found besides violations (absolute offsets)."""

    event_ends: list[int] = field(default_factory=list)  # last byte of each event closed
    closed_below: int | None = None  # first bracket that closed the container holding the events


def _u8(data: bytes) -> pa.Array:
    return pa.Array.from_buffers(pa.uint8(), len(data), [None, pa.py_buffer(data)])


class StructureScanner:
    """Scans a JSON text fed in order, block by block; see the module docstring.

    ``event_depth`` is the depth *inside* an event: 3 for ``{"traceEvents": [{...}]}``
    (object, array, event) and 2 for a bare ``[{...}]``. A scan may also start in the
    middle of a text at a known state (``depth``, outside any string), as the fast
    reader's chunker does at an event boundary.
    """

    def __init__(self, limits: ReadLimits, event_depth: int, offset: int = 0, depth: int = 0) -> None:
        self.limits = limits
        self.event_depth = event_depth
        self.offset = offset  # absolute offset of the next byte
        self.depth = depth
        self.in_string = False
        self.string_open = -1  # absolute offset of the quote that opened the current string
        self.backslashes = 0  # length of the backslash run that ended the previous block
        self.event_open = -1  # absolute offset of the bracket that opened the current event
        self.token_run = 0  # length of the token-byte run that ended the previous block
        self.violation: Violation | None = None

    # ------------------------------------------------------------------ reporting
    def _report(self, kind: str, start: int, trigger: int) -> None:
        v = Violation(kind, start, trigger)
        if self.violation is None or report_order(v) < report_order(self.violation):
            self.violation = v

    # ---------------------------------------------------------------------- feed
    def feed(self, data: bytes) -> ScanResult:
        result = ScanResult()
        n = len(data)
        if n == 0:
            return result
        base = self.offset
        self._scan_tokens(data, base)
        self._scan_structure(data, base, result)
        self.offset = base + n
        return result

    def _scan_tokens(self, data: bytes, base: int) -> None:
        limit = self.limits.max_string_bytes
        marks = data.translate(_TOKEN)
        first_gap = marks.find(b"\x00")
        if first_gap < 0:  # the whole block continues one run
            run_start = base - self.token_run
            self.token_run += len(data)
            if self.token_run > limit:
                self._report(STRING, run_start, run_start + limit)
            return
        if self.token_run + first_gap > limit:
            run_start = base - self.token_run
            self._report(STRING, run_start, run_start + limit)
        last_gap = marks.rfind(b"\x00")
        if last_gap - first_gap > limit:  # room for a run longer than the bound inside
            at = marks.find(b"\x01" * (limit + 1), first_gap, last_gap)
            if at >= 0:
                self._report(STRING, base + at, base + at + limit)
        self.token_run = len(data) - 1 - last_gap
        if self.token_run > limit:
            run_start = base + last_gap + 1
            self._report(STRING, run_start, run_start + limit)

    def _scan_structure(self, data: bytes, base: int, result: ScanResult) -> None:
        limits = self.limits
        n = len(data)
        codes_all = _u8(data.translate(_STRUCT))
        pos = pc.cast(pc.indices_nonzero(codes_all), pa.int64())
        codes = pc.take(codes_all, pos)
        has_backslash = pc.any(pc.equal(codes, _U8[_BACKSLASH])).as_py() if len(codes) else False
        if has_backslash or self.backslashes:
            pos, codes = self._resolve_escapes(pos, codes, n)
        elif len(codes) == 0:
            self._grow(base, n)
            return

        # Strings: every remaining quote opens or closes one.
        is_quote = pc.equal(codes, _U8[_QUOTE])
        quotes_before = pc.subtract(pc.cumulative_sum(pc.cast(is_quote, pa.int32())), pc.cast(is_quote, pa.int32()))
        inside = pc.bit_wise_and(pc.add(quotes_before, _I32[int(self.in_string)]), _I32[1])  # state before each entry
        qpos = pc.filter(pos, is_quote)
        nq = len(qpos)
        first_pair = 0
        if self.in_string and nq:
            self._check_string(self.string_open, base + qpos[0].as_py())
            first_pair = 1
        pairs = (nq - first_pair) // 2
        if pairs:
            # (open, close) quote pairs: the positions viewed as a list of pairs, no copy
            paired = pa.FixedSizeListArray.from_arrays(qpos.slice(first_pair, 2 * pairs), 2)
            opens = pc.list_element(paired, _I32[0])
            lengths = pc.subtract(pc.subtract(pc.list_element(paired, _I32[1]), opens), _I64[1])
            if pc.max(lengths).as_py() > limits.max_string_bytes:
                too_long = pc.greater(lengths, pa.scalar(limits.max_string_bytes, pa.int64()))
                first = pc.indices_nonzero(too_long)[0].as_py()
                start = base + opens[first].as_py()
                self._report(STRING, start, start + 1 + limits.max_string_bytes)
        if (nq - first_pair) % 2:  # a string opened here runs past the block
            self.in_string = True
            self.string_open = base + qpos[nq - 1].as_py()
        elif nq:
            self.in_string = False
        if self.in_string:
            self._check_string(self.string_open, base + n)

        # Brackets outside strings: depth and events.
        structural = pc.and_(pc.greater_equal(codes, _U8[_OPEN]), pc.equal(inside, _I32[0]))
        bpos = pc.filter(pos, structural)
        if len(bpos):
            bcode = pc.filter(codes, structural)
            is_open = pc.equal(bcode, _U8[_OPEN])
            delta = pc.if_else(is_open, _I64[1], _I64[-1])
            depth_after = pc.add(pc.cumulative_sum(delta), pa.scalar(self.depth, pa.int64()))
            if pc.max(depth_after).as_py() > limits.max_depth:
                first = pc.indices_nonzero(pc.greater(depth_after, pa.scalar(limits.max_depth, pa.int64())))[0].as_py()
                at = base + bpos[first].as_py()
                self._report(DEPTH, at, at)
            self._events(base, n, bpos, is_open, depth_after, result)
            self.depth = depth_after[len(depth_after) - 1].as_py()
        elif self.event_open >= 0:
            self._check_event(self.event_open, base + n)

    def _grow(self, base: int, n: int) -> None:
        """A block without quotes or brackets: open strings and events only get longer."""
        if self.in_string:
            self._check_string(self.string_open, base + n)
        if self.event_open >= 0:
            self._check_event(self.event_open, base + n)

    def _check_string(self, open_at: int, end: int) -> None:
        """A string from the quote at ``open_at`` whose content reaches ``end`` (exclusive)."""
        if end - open_at - 1 > self.limits.max_string_bytes:
            self._report(STRING, open_at, open_at + 1 + self.limits.max_string_bytes)

    def _check_event(self, open_at: int, end: int) -> None:
        """An event from ``open_at`` whose text reaches ``end`` (exclusive)."""
        if end - open_at > self.limits.max_event_bytes:
            self._report(EVENT, open_at, open_at + self.limits.max_event_bytes)

    def _events(
        self, base: int, n: int, bpos: pa.Array, is_open: pa.Array, depth_after: pa.Array, result: ScanResult
    ) -> None:
        level = self.event_depth
        opens_mask = pc.and_(is_open, pc.equal(depth_after, pa.scalar(level, pa.int64())))
        closes_mask = pc.and_(pc.invert(is_open), pc.equal(depth_after, pa.scalar(level - 1, pa.int64())))
        opens = pc.filter(bpos, opens_mask)
        closes = pc.filter(bpos, closes_mask)
        below = pc.and_(pc.invert(is_open), pc.equal(depth_after, pa.scalar(level - 2, pa.int64())))
        if result.closed_below is None and pc.any(below).as_py():
            result.closed_below = base + pc.filter(bpos, below)[0].as_py()
        # Inside an event at the block's start (its opening seen or not, when the scan
        # began inside one): the first close ends it.
        carried = 1 if self.depth >= level else 0
        n_open, n_close = len(opens), len(closes)
        if carried and n_close:
            if self.event_open >= 0:
                self._check_event(self.event_open, base + closes[0].as_py() + 1)
            self.event_open = -1
        pairs = min(n_open, n_close - carried) if n_close >= carried else 0
        if pairs > 0:
            o = opens.slice(0, pairs)
            c = closes.slice(carried, pairs)
            sizes = pc.add(pc.subtract(c, o), _I64[1])
            if pc.max(sizes).as_py() > self.limits.max_event_bytes:
                too_big = pc.greater(sizes, pa.scalar(self.limits.max_event_bytes, pa.int64()))
                first = pc.indices_nonzero(too_big)[0].as_py()
                start = base + o[first].as_py()
                self._report(EVENT, start, start + self.limits.max_event_bytes)
        if n_close:
            result.event_ends.extend(base + p for p in closes.to_pylist())
        if n_open > max(pairs, 0):  # an event opened here is still open at the block's end
            self.event_open = base + opens[n_open - 1].as_py()
        if self.event_open >= 0:
            self._check_event(self.event_open, base + n)

    def _resolve_escapes(self, pos: pa.Array, codes: pa.Array, n: int) -> tuple[pa.Array, pa.Array]:
        """Drops backslashes and the quotes they escape from the entries.

        A quote is escaped when an odd run of backslashes ends right before it; a run that
        reaches the end of the block carries its length into the next one.
        """
        bs_entries = pc.indices_nonzero(pc.equal(codes, _U8[_BACKSLASH])).to_pylist()
        bs_pos = pc.take(pos, pa.array(bs_entries, pa.int64())).to_pylist() if bs_entries else []
        escaped: list[int] = []  # entry indices of escaped quotes
        carry = self.backslashes
        self.backslashes = 0
        if carry % 2 and (not bs_pos or bs_pos[0] != 0):
            # the previous block ended with an odd run: this block's first byte is escaped
            if len(pos) and pos[0].as_py() == 0 and codes[0].as_py() == _QUOTE:
                escaped.append(0)
        i = 0
        while i < len(bs_pos):
            j = i
            while j + 1 < len(bs_pos) and bs_pos[j + 1] == bs_pos[j] + 1:
                j += 1
            run = j - i + 1 + (carry if bs_pos[i] == 0 else 0)
            after = bs_pos[j] + 1
            if after == n:
                self.backslashes = run
            elif run % 2:
                e = bs_entries[j] + 1
                if e < len(codes) and pos[e].as_py() == after and codes[e].as_py() == _QUOTE:
                    escaped.append(e)
            i = j + 1
        keep = pc.not_equal(codes, _U8[_BACKSLASH])
        if escaped:
            hit = pc.fill_null(
                pc.scatter(pa.array([True] * len(escaped)), pa.array(escaped, pa.int64()), max_index=len(codes) - 1),
                False,
            )
            keep = pc.and_(keep, pc.invert(hit))
        return pc.filter(pos, keep), pc.filter(codes, keep)


_DIGIT = _table({b: 1 for b in b"0123456789"})


class DigitRuns:
    """Finds the first run of more than ``INT_DIGITS`` decimal digits in a text fed in
    blocks. Python converts no longer integer, and ijson's C backend (yajl2_c 3.x)
    crashes the process (a segfault, not an exception) on one, so no JSON parser may see
    it. Digits inside strings count too: a run that long is no real trace's."""

    def __init__(self) -> None:
        self.run = 0  # digits that ended the previous block
        self.found: int | None = None  # absolute offset of the first digit past the bound

    def feed(self, data: bytes, base: int) -> None:
        if self.found is not None or not data:
            return
        limit = INT_DIGITS
        marks = data.translate(_DIGIT)
        first_gap = marks.find(b"\x00")
        if first_gap < 0:
            if self.run + len(data) > limit:
                self.found = base + (limit - self.run)
            self.run += len(data)
            return
        if self.run + first_gap > limit:
            self.found = base + (limit - self.run)
            return
        last_gap = marks.rfind(b"\x00")
        if last_gap - first_gap > limit:
            at = marks.find(b"\x01" * (limit + 1), first_gap, last_gap)
            if at >= 0:
                self.found = base + at + limit
                return
        self.run = len(data) - 1 - last_gap
        if self.run > limit:
            self.found = base + last_gap + 1 + limit


def bounds_check(
    path: str, limits: ReadLimits, event_depth: int, compressed: bool
) -> Callable[[bytes, int], tuple[int, LimitExceeded] | None]:
    """A ``Source`` block check that runs a ``StructureScanner`` over the whole text and
    stops the reader at the first byte past a bound, with the error that names it (and
    at a run of digits no parser may see, ``DigitRuns``)."""
    scanner = StructureScanner(limits, event_depth)
    digits = DigitRuns()
    errors = {STRING: string_too_long, DEPTH: too_deep, EVENT: event_too_large}

    def check(block: bytes, offset: int) -> tuple[int, LimitExceeded] | None:
        scanner.feed(block)
        digits.feed(block, offset)
        v = scanner.violation
        found: list[tuple[int, LimitExceeded]] = []
        if v is not None and v.trigger < offset + len(block):
            found.append((v.trigger, errors[v.kind](path, v.start, limits, compressed)))
        if digits.found is not None and digits.found < offset + len(block):
            found.append((digits.found, number_too_long(path, digits.found, compressed)))
        return min(found, key=lambda f: f[0]) if found else None

    return check
