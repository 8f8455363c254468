"""The reference reader for Chrome trace-event JSON: PyTorch profiler (Kineto), generic
Chrome traces and xprof trace-viewer JSON, streamed with ijson.

The file is never loaded whole: ``ijson`` (C backend) yields one event dict at a time,
numbers with a fraction as ``Decimal`` so that no timestamp passes through a float. The
Python loop only checks each event and appends it to a batch; turning a batch into
Arrow columns is done column-wise by the rules in ``cclq.formats.chrome.events``, which the
fast reader (``fast_reader``) shares. Memory is bounded by the batch size, the open
``B`` stacks and a few MB of head/tail text used to find top-level keys. Before ijson
sees a byte, a ``StructureScanner`` checks it against the ``ReadLimits`` (ijson's cost
on a long string or deep nesting grows with its square).

Normalisation rules (also listed in the README's "What ingest does"):

* ``ts``/``dur`` are microseconds in the file, converted to exact integer ns
  (``events.time_ns``). When the file has ``baseTimeNanoseconds`` the base is added, so
  ``ts_ns`` is epoch ns and comparable across ranks.
* ``B``/``E`` pairs on one (pid, tid) become one row with ``ph = 'B'`` and the E's
  args merged in; an ``E`` without an open ``B`` is dropped; a ``B`` never closed
  is kept with ``dur_ns`` NULL.
* ``args`` is the event's args value as JSON text, every key kept (numbers exact:
  ``events.encode_exact``); keys listed in ``schema.PROMOTED_ARGS`` are also copied
  into typed columns (NULL where a value does not convert).
* Legacy categories (``Kernel``, ``Operator``, ...) are mapped to today's names,
  the original kept in ``cat_raw``.
* Events that cannot be used are dropped and counted by (reason, ph): no ``ts`` (except
  ``M``), a ``ts`` or ``dur`` that is not a usable number, a negative ``dur``, an ``E``
  without its ``B``, a non-object entry, ``{}``. The ``{}`` that ends every xprof array
  is a note (``XPROF_END_MARKER``), not a drop.
* A file's time bounds (``ts_min_ns``/``ts_max_ns``) leave out ``M`` events.
"""

from __future__ import annotations

import gc
import json
import re
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import ijson
import pyarrow as pa
import pyarrow.compute as pc

from cclq.errors import TraceFileError
from cclq.formats.base import READER_IJSON, BatchSink, Detected, ReadResult
from cclq.formats.chrome import events as ev_rules
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
    id_text,
    map_categories,
    slice_key,
    split_args,
    text_array,
    time_ns,
    time_ns_array,
)
from cclq.formats.chrome.jsonscan import bounds_check
from cclq.formats.limits import DEFAULT_LIMITS, LimitExceeded, ReadLimits
from cclq.formats.source import BlockCheck, Source, gzip_errors, is_gzip, read_tail
from cclq.schema import EVENT_SCHEMA

# Notes for a Horovod timeline that ends without its closing "]".
HOROVOD_UNTERMINATED = "timeline not closed (no final ']', as Horovod <= 0.20 writes it); every event kept"
HOROVOD_TRUNCATED = "timeline cut off inside its last event (a killed job?); the events before it kept"
# The note for the empty event that ends every xprof trace-viewer array. It is neither
# written nor dropped, so for such a file events_read = written + dropped + merged E + 1.
XPROF_END_MARKER = "xprof end marker {}"


# Top-level keys worth reading besides the event array, and how to find them.
_META_KEYS = ("distributedInfo", "baseTimeNanoseconds", "deviceProperties", "displayTimeUnit", "schemaVersion")


def scan_top_level_keys(text: bytes, last: bool, keys: Sequence[str] = _META_KEYS) -> dict[str, Any]:
    """Finds ``keys`` (Kineto's ``_META_KEYS`` by default) in a slice of JSON text and
    decodes their values.

    A key pattern ``"name":`` with an unescaped quote can only be a real key, so a
    regex plus ``raw_decode`` is safe on a slice that starts mid-document. With
    ``last`` the last occurrence wins (keys written after the event array).
    """
    found: dict[str, Any] = {}
    decoder = json.JSONDecoder()
    for key in keys:
        # bytes.find / rfind (C, memchr-fast) to the candidate, the regex only there: a
        # finditer over the 4 MB tail for each key was a tenth of a small file's ingest
        needle = b'"' + key.encode() + b'"'
        pattern = re.compile(re.escape(needle) + rb"\s*:\s*")
        pos = text.rfind(needle) if last else text.find(needle)
        while pos >= 0:
            m = pattern.match(text, pos)
            if m:
                break
            pos = text.rfind(needle, 0, pos) if last else text.find(needle, pos + 1)
        else:
            continue
        try:
            # decode from the value on: at most what one value can span of the slice
            found[key], _ = decoder.raw_decode(text[m.end() :].decode("utf-8", errors="replace"))
        except (ValueError, RecursionError):
            continue  # cut off by the slice boundary
    return found


def file_metadata(path: str, detected: Detected, limits: ReadLimits = DEFAULT_LIMITS) -> dict[str, Any]:
    """The top-level keys a file states before its events, and those after them that
    must be known before the first row is written: ``baseTimeNanoseconds`` (added to
    every timestamp) and ``distributedInfo`` (the rank every row carries). Kineto writes
    either after the event array on some paths, so the tail is read when the head lacks
    one of them (a seek for plain JSON; gzip must be decompressed to its end).
    """
    meta = scan_top_level_keys(_head_before_events(detected.head), last=False)
    if detected.flavor == "horovod":
        # Horovod >= 0.20.1 opens its timeline with the epoch time of its ts 0
        m = re.search(rb'"start_time_since_epoch_in_micros"\s*:\s*(\d+)', detected.head)
        return {"baseTimeNanoseconds": int(m.group(1)) * 1000} if m else {}
    wanted = [
        k
        for k in ("baseTimeNanoseconds", "distributedInfo")
        if k not in meta and (k == "baseTimeNanoseconds" or detected.flavor == "kineto")
    ]
    # what comes after the events is small: the last 256 KB, then the last 4 MB if a key
    # is still missing (a distributedInfo listing thousands of ranks). A gzip file is
    # inflated to its end for either, so it is read once, for the 4 MB (hta_df_index_resolver:
    # its 54 MB were inflated twice, 0.15 s of a 1 s ingest, for a key it does not have)
    for size in (None,) if is_gzip(path) else (256 << 10, None):
        if not wanted:
            break
        tail_text = read_tail(path, limits=limits) if size is None else read_tail(path, size, limits=limits)
        tail = scan_top_level_keys(tail_text, last=True, keys=wanted)
        meta.update(tail)
        wanted = [k for k in wanted if k not in tail]
    return meta


def finish_metadata(result: ReadResult, head_meta: dict[str, Any], tail: bytes) -> None:
    """Top-level keys: those before the events win over those after (in the kept tail)."""
    missing = [k for k in _META_KEYS if k not in head_meta]  # keys Kineto may write after the events
    tail_meta = scan_top_level_keys(tail, last=True, keys=missing) if missing else {}
    result.metadata = {**head_meta, **tail_meta}


def base_ns(meta: dict[str, Any]) -> int:
    base = meta.get("baseTimeNanoseconds")
    return base if type(base) is int and INT64_MIN <= base <= INT64_MAX else 0


def event_depth(detected: Detected) -> int:
    """Depth inside one event: the array, then the event (plus the object around them)."""
    return 2 if detected.array_form else 3


def no_events_error(path: str, detected: Detected) -> TraceFileError:
    problem = (
        "no traceEvents array"
        if not detected.array_form and b'"traceEvents"' not in detected.head
        else "no trace events"
    )
    return TraceFileError(path, f"not a trace: {problem}")


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pauses Python's cyclic garbage collector while a file is parsed.

    A reader hands out ~1 dict per event and a batch keeps tens of thousands alive, so
    the collector's generation scans run over and over and find nothing: parsed
    events are trees, never cycles. Pausing it cuts ingest time by 20-25%; reference
    counting still frees every batch as soon as it is written.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class EventBatch:
    """Rows of one record batch, as the loop appends them."""

    __slots__ = ("rows", "promoted", "out_of_range", "row_out_of_range", "b_times")

    def __init__(self) -> None:
        # (event_idx, ph, cat, name, pid, tid, ts, dur, id, bp, s, args_json), raw values
        self.rows: list[tuple[Any, ...]] = []
        self.promoted: dict[str, dict[int, Any]] = {column: {} for column, _ in PROMOTED_COLUMNS}
        self.out_of_range: dict[str, int] = {}  # column -> values that did not fit, in rows kept
        self.row_out_of_range: dict[int, dict[str, int]] = {}  # until it is known which rows stay
        self.b_times: dict[int, tuple[int, int]] = {}  # row -> (ts_ns, dur_ns) of a closed B/E pair

    def add(self, row: tuple[Any, ...], args: Any) -> None:
        """Appends a row; its promoted args are also copied into their columns."""
        promoted: dict[str, Any] = {}
        out_of_range: dict[str, int] = {}
        args_json = split_args(args, promoted, out_of_range)
        i = len(self.rows)
        if out_of_range:
            self.row_out_of_range[i] = out_of_range
        for column, value in promoted.items():
            self.promoted[column][i] = value
        self.rows.append(row + (args_json,))

    def to_record_batch(self, file_id: str, base: int, drops: Counter[tuple[str, str]]) -> pa.RecordBatch | None:
        """The batch as Arrow; rows whose ts or dur turn out unusable are dropped (and
        counted in ``drops``) here, where the whole column is converted at once."""
        n = len(self.rows)
        cols = list(zip(*self.rows))
        ts, ts_bad = time_ns_array(cols[6])
        dur, dur_bad = time_ns_array(cols[7])
        if self.b_times:  # closed B/E pairs: times computed when the E arrived
            ts_list, dur_list = ts.to_pylist(), dur.to_pylist()
            for row, (t, d) in self.b_times.items():
                ts_list[row], dur_list[row] = t, d
            ts, dur = pa.array(ts_list, pa.int64()), pa.array(dur_list, pa.int64())
        ph = text_array(cols[1])
        keep = _valid_times(ts, dur, ts_bad, dur_bad, base, ph, drops)
        if base:
            ts = pc.add(ts, pa.scalar(base, pa.int64()))  # in range: checked by _valid_times
        cat, cat_raw = map_categories(text_array(cols[2]))
        arrays = [
            pa.array([file_id] * n, pa.string()),
            pa.array(cols[0], pa.int64()),
            ph,
            cat,
            cat_raw,
            text_array(cols[3]),
            text_array(cols[4]),
            text_array(cols[5]),
            ts,
            dur,
            text_array(cols[8]),
            text_array(cols[9]),
            text_array(cols[10]),
            pa.array(cols[11], pa.string()),
        ] + [_promoted_array(kind, n, self.promoted[column]) for column, kind in PROMOTED_COLUMNS]
        batch = pa.RecordBatch.from_arrays(arrays, schema=EVENT_SCHEMA)
        if keep is not None:
            batch = batch.filter(keep)
        kept = keep.to_pylist() if keep is not None else None
        for row, counts in self.row_out_of_range.items():  # only rows that stay count
            if kept is None or kept[row]:
                for column, k in counts.items():
                    self.out_of_range[column] = self.out_of_range.get(column, 0) + k
        return batch if batch.num_rows else None


def _valid_times(
    ts: pa.Array,
    dur: pa.Array,
    ts_bad: list[int],
    dur_bad: list[int],
    base: int,
    ph: pa.Array,
    drops: Counter[tuple[str, str]],
) -> pa.Array | None:
    """Which rows keep their event: a usable ts (also with the base added), a usable dur
    that is not negative and does not carry the end beyond int64. Counts the others."""
    n = len(ts)
    bad_ts = set(ts_bad)
    # ts + base and ts + dur must stay in int64: checked where the arrays say they might not
    bounds: list[Any] = [s.as_py() for s in pc.min_max(ts).values()] if n else [None, None]
    lo, hi = bounds
    base_risk = lo is not None and not (INT64_MIN <= lo + base and hi + base <= INT64_MAX)
    dmax = pc.max(dur).as_py() if n else None
    end_risk = dmax is not None and hi is not None and hi + base + dmax > INT64_MAX
    negative = pc.any(pc.less(dur, pa.scalar(0, pa.int64()))).as_py() if n else False
    if not (bad_ts or dur_bad or base_risk or end_risk or negative):
        return None
    ts_l, dur_l, ph_l = ts.to_pylist(), dur.to_pylist(), ph.to_pylist()
    bad_dur = set(dur_bad)
    keep = [True] * n
    for i in range(n):
        t = ts_l[i]
        reason = None
        if i in bad_ts or (t is not None and not INT64_MIN <= t + base <= INT64_MAX):
            reason = BAD_TS
        elif i in bad_dur:
            reason = BAD_DUR
        elif dur_l[i] is not None and dur_l[i] < 0:
            reason = NEGATIVE_DUR
        elif dur_l[i] is not None and t is not None and t + base + dur_l[i] > INT64_MAX:
            reason = BAD_DUR
        if reason is not None:
            keep[i] = False
            drops[reason, ph_l[i] or ""] += 1
    return pa.array(keep, pa.bool_())


def _promoted_array(kind: str, n: int, sparse: dict[int, Any]) -> pa.Array:
    """A column from {row: converted value}; most promoted columns are sparse in a batch."""
    typ = KIND_TYPE[kind]
    if not sparse:
        return pa.nulls(n, typ)
    column = pa.array(list(sparse.values()), typ)
    if len(sparse) == n:  # rows are inserted in order: the values are the column
        return column
    return pc.scatter(column, pa.array(list(sparse), pa.int64()), max_index=n - 1)


def _event_row(idx: int, ph: str | None, ev: dict, ts: Any = None, dur: Any = None) -> tuple:
    """An event's row as ``EventBatch.add`` takes it. A ``B`` event's row is made when its
    ``E`` comes (or the file ends) with no ts and dur: its times go in ``b_times``."""
    return (
        idx,
        ph,
        ev.get("cat"),
        ev.get("name"),
        ev.get("pid"),
        ev.get("tid"),
        ts,
        dur,
        ev.get("id"),
        ev.get("bp"),
        ev.get("s"),
    )


def _ts_ns_or_none(ts: Any, base: int) -> int | None:
    """A B or E event's ts in ns with the base, or None when unusable."""
    ns = time_ns(ts)
    if ns is None or not INT64_MIN <= ns + base <= INT64_MAX:
        return None
    return ns + base


@gc_paused()
def read_chrome_json(
    source: Source,
    detected: Detected,
    file_id: str,
    sink: BatchSink,
    batch_rows: int = 32768,
    exact: bool = True,
    limits: ReadLimits = DEFAULT_LIMITS,
    metadata: dict[str, Any] | None = None,
) -> ReadResult:
    """Streams the events of ``source`` into ``sink`` as record batches.

    ``exact`` is kept for callers of the old signature: times are always exact now.
    ``source`` should be opened with ``check=bounds_check_for(...)`` so that the limits
    hold before ijson parses; ``limits`` also bounds the tail read for the base time.
    ``metadata`` is ``file_metadata``'s answer when the caller has it already.
    """
    del exact
    result = ReadResult(reader=READER_IJSON)
    head_meta = dict(metadata) if metadata is not None else file_metadata(source.path, detected, limits)
    base = base_ns(head_meta)

    drops = result.drops
    open_slices: dict[tuple[Any, Any], list[tuple[int, dict[str, Any], int]]] = {}
    batch = EventBatch()
    ts_bounds: list[int] = []
    idx = -1
    last_empty = -2  # index of the last ``{}`` entry (see XPROF_END_MARKER)

    def flush() -> None:
        nonlocal batch
        if not batch.rows:
            return
        record_batch = batch.to_record_batch(file_id, base, drops)
        for column, n in batch.out_of_range.items():
            result.notes[ev_rules.range_note(column)] += n
        batch = EventBatch()
        if record_batch is None:
            return
        sink(record_batch)
        add_bounds(record_batch, ts_bounds)
        result.rows_written += record_batch.num_rows

    prefix = "item" if detected.array_form else "traceEvents.item"
    try:
        for ev in ijson.items(source.stream, prefix, use_float=False):
            idx += 1
            if type(ev) is not dict:
                drops[NOT_AN_OBJECT, ""] += 1
                continue
            ph = ev.get("ph")
            ts = ev.get("ts")
            if ts is None:
                if not ev:
                    drops[EMPTY_OBJECT, ""] += 1
                    last_empty = idx
                    continue
                if ph != "M":
                    drops[NO_TS, id_text(ph) or ""] += 1
                    continue
            if ph == "B" or ph == "E":
                ts_ns = _ts_ns_or_none(ts, base)
                if ts_ns is None:
                    drops[BAD_TS, ph] += 1
                    continue
                key = slice_key(ev.get("pid"), ev.get("tid"))
                if ph == "B":
                    open_slices.setdefault(key, []).append((idx, ev, ts_ns))
                    continue
                stack = open_slices.get(key)
                if not stack:
                    drops[E_WITHOUT_B, "E"] += 1
                    continue
                b_idx, b_ev, b_ns = stack.pop()
                if ts_ns < b_ns:
                    drops[NEGATIVE_DUR, "B"] += 1
                    continue
                args = b_ev.get("args")
                e_args = ev.get("args")
                if e_args and type(e_args) is dict:
                    args = {**args, **e_args} if type(args) is dict else e_args
                batch.b_times[len(batch.rows)] = (b_ns - base, ts_ns - b_ns)
                batch.add(
                    _event_row(b_idx, "B", b_ev),
                    args,
                )
            else:
                batch.add(_event_row(idx, ph, ev, ts, ev.get("dur")), ev.get("args"))
            if len(batch.rows) >= batch_rows:
                flush()
    except ijson.JSONError as e:
        if detected.flavor != "horovod" or "premature EOF" not in str(e):
            raise TraceFileError(source.path, parse_error_message(e, source)) from e
        # Horovod <= 0.20.0 never closes its array (each event ends "},\n"), and a killed
        # job cuts the last event short: keep every complete event, and say which it was
        end = source.stream.tail().rstrip()
        result.notes[HOROVOD_UNTERMINATED if end.endswith((b"}", b"},")) else HOROVOD_TRUNCATED] += 1
    except UnicodeDecodeError as e:  # yajl turns a lone surrogate escape into bytes Python refuses
        where = "decompressed byte" if source.compressed else "byte"
        raise TraceFileError(
            source.path,
            f"invalid JSON near {where} {source.stream.offset}: a string with "
            f"invalid UTF-8 or a lone surrogate escape ({e.reason})",
        ) from e
    except gzip_errors() as e:
        raise TraceFileError(source.path, f"corrupt gzip stream: {e}") from e
    except RecursionError as e:  # deeper than Python can follow, within the depth limit
        raise LimitExceeded(
            source.path, f"JSON nested too deeply for the parser ({e}); lower --max-depth reports where"
        ) from e

    unclosed = 0
    for stack in open_slices.values():
        for b_idx, b_ev, b_ns in stack:
            batch.b_times[len(batch.rows)] = (b_ns - base, None)  # type: ignore[assignment]
            batch.add(
                _event_row(b_idx, "B", b_ev),
                b_ev.get("args"),
            )
            unclosed += 1
    if unclosed:
        result.notes["B without E (kept, dur_ns NULL)"] = unclosed
    flush()

    result.events_read = idx + 1
    if detected.flavor == "xprof" and last_empty == idx:
        # xprof closes every trace-viewer array with ``{}``: a note, not a drop
        count_down(drops, (EMPTY_OBJECT, ""))
        result.notes[XPROF_END_MARKER] += 1
    result.decompressed_bytes = source.stream.offset
    finish_metadata(result, head_meta, source.stream.tail())
    result.base_time_ns = base
    result.ts_min_ns = min(ts_bounds) if ts_bounds else None
    result.ts_max_ns = max(ts_bounds) if ts_bounds else None
    if result.events_read == 0:
        raise no_events_error(source.path, detected)
    return result


def bounds_check_for(path: str, detected: Detected, limits: ReadLimits) -> Callable[[bool], BlockCheck]:
    """The ``Source`` check that holds ijson to ``limits``."""
    return lambda compressed: bounds_check(path, limits, event_depth(detected), compressed)


_M = pa.scalar("M", pa.string())


def add_bounds(record_batch: pa.RecordBatch, ts_bounds: list[int]) -> None:
    """Adds a batch's time bounds: min(ts) and max(ts + dur) over its non-``M`` rows.

    Kineto writes its ``M`` events at ts 0, which on an uptime clock made a 13 s trace
    span 41 days. (Only the two time columns are filtered: the whole batch costs 50x more.)
    """
    timed = pc.fill_null(pc.not_equal(record_batch.column(2), _M), True)
    ts = pc.filter(record_batch.column(8), timed)
    lo = pc.min(ts).as_py()
    if lo is not None:
        ends = pc.add(ts, pc.fill_null(pc.filter(record_batch.column(9), timed), pa.scalar(0, pa.int64())))
        ts_bounds.extend((lo, pc.max(ends).as_py()))


def count_down(counter: Counter[Any], key: Any) -> None:
    counter[key] -= 1
    if counter[key] <= 0:
        del counter[key]


def _head_before_events(head: bytes) -> bytes:
    """The part of the head before the event array starts (top-level keys only)."""
    pos = head.find(b'"traceEvents"')
    return head if pos < 0 else head[:pos]


def parse_error_message(e: Exception, source: Source) -> str:
    """``invalid JSON at byte N: <yajl's first line>``, N in the decompressed text."""
    raw = e.args[0] if e.args else ""
    # yajl's message about invalid UTF-8 quotes the bytes, and ijson passes it on as bytes
    text = raw.decode("utf-8", errors="surrogateescape") if isinstance(raw, bytes) else str(e)
    lines = text.splitlines()
    what = lines[0].strip() if lines else "parse error"
    offset = source.stream.offset
    if len(lines) >= 3 and "premature EOF" not in what:
        # yajl prints ~30 bytes of context and an arrow one column past the bad byte
        snippet = lines[1].strip().encode("utf-8", errors="surrogateescape")
        pos = source.stream.last_chunk.rfind(snippet) if snippet else -1
        arrow = lines[2].find("^")
        if pos >= 0 and arrow >= 0:
            indent = len(lines[1]) - len(lines[1].lstrip())
            offset = source.stream.last_chunk_start + pos + arrow - indent - 1
    where = "decompressed byte" if source.compressed else "byte"
    return f"invalid JSON at {where} {offset}: {what}"


def is_int32(value: Any) -> bool:
    return type(value) is int and -(2**31) <= value < 2**31
