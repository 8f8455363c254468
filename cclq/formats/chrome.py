"""Streaming reader for Chrome trace-event JSON: PyTorch profiler (Kineto), generic
Chrome traces and xprof trace-viewer JSON.

The file is never loaded whole: ``ijson`` (C backend) yields one event dict at a
time. The Python loop only checks each event and appends it to a batch; turning a
batch into Arrow columns (time conversion, category mapping, promoted arguments)
is done column-wise in pyarrow's C code. Memory is bounded by the batch size, the
open ``B`` stacks and a few MB of head/tail text used to find top-level keys.

Normalisation rules (also listed in the README's "event schema" section):

* ``ts``/``dur`` are microseconds in the file, converted to integer ns exactly.
  Numbers are parsed as floats when that is exact (|value| < 2**43 us, i.e. any
  relative or uptime timestamp; see ``_FLOAT_EXACT_LIMIT``) and as ``Decimal`` otherwise
  (epoch microseconds with 3 decimals), decided from the first MB and, if a later
  value needs it, by re-reading the file (``NeedExactDecimals``). When the file has
  ``baseTimeNanoseconds`` the base is added, so ``ts_ns`` is epoch ns and
  comparable across ranks.
* ``B``/``E`` pairs on one (pid, tid) become one row with ``ph = 'B'`` and the E's
  args merged in; an ``E`` without an open ``B`` is dropped; a ``B`` never closed
  is kept with ``dur_ns`` NULL.
* Keys listed in ``schema.PROMOTED_ARGS`` go to typed columns and ``args`` keeps
  every *other* argument as JSON text, plus any promoted value that did not convert
  (``"inf"``, ``"N/A"``: NULL in its column, the text in ``args``). Nothing is
  lost, and the common arguments cost no JSON encoding (the slowest part of ingest).
* Legacy categories (``Kernel``, ``Operator``, ...) are mapped to today's names,
  the original kept in ``cat_raw``.
* Events that cannot be used are dropped and counted by (reason, ph); see
  ``ReadResult.drops``. The ``{}`` that ends every xprof array is a note
  (``XPROF_END_MARKER``), not a drop.
* A file's time bounds (``ts_min_ns``/``ts_max_ns``) leave out ``M`` events.
"""

from __future__ import annotations

import gc
import json
import math
from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]
import re
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from decimal import Decimal, InvalidOperation
from typing import Any

import ijson
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from cclq.errors import TraceFileError
from cclq.formats.base import BatchSink, Prepared, ProgressFn, ReadAgain, ReadResult
from cclq.formats.detect import Detected
from cclq.formats.source import Source, gzip_errors, read_tail
from cclq.schema import (
    EVENT_SCHEMA,
    LEGACY_CATEGORIES,
    PROMOTED_ARGS,
    promoted_columns,
)

# Notes for a Horovod timeline that ends without its closing "]".
HOROVOD_UNTERMINATED = "timeline not closed (no final ']', as Horovod <= 0.20 writes it); every event kept"
HOROVOD_TRUNCATED = "timeline cut off inside its last event (a killed job?); the events before it kept"
# The note for the empty event that ends every xprof trace-viewer array. It is neither
# written nor dropped, so for such a file events_read = written + dropped + merged E + 1.
XPROF_END_MARKER = "xprof end marker {}"

_PROMOTED_COLUMNS = promoted_columns()
_orjson_dumps = orjson.dumps


def _json_default(o: Any) -> Any:
    return float(o) if isinstance(o, Decimal) else str(o)


# One C encoder built once: json.dumps builds a new one per call, which costs more
# than encoding a small args dict.
_c_encoder = c_make_encoder(None, _json_default, encode_basestring, None, ":", ",", False, False, True)


def _encode_json(obj: Any) -> str:
    """Compact JSON text of an args value: orjson, else the stdlib's C encoder.

    Re-encoding the arguments that are not promoted is the largest per-event cost of
    ingest after the parse itself; orjson does it 4-5x faster than the stdlib. It refuses
    integers beyond 64 bits, which the stdlib encodes.
    """
    try:
        return _orjson_dumps(obj, default=_json_default).decode()
    except TypeError:
        return "".join(_c_encoder(obj, 0))


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
        value_start = m.end()
        try:
            # decode from the value on: at most what one value can span of the slice
            found[key], _ = decoder.raw_decode(text[value_start:].decode("utf-8", errors="replace"))
        except ValueError:
            continue  # cut off by the slice boundary
    return found


def _to_ns(value: Any) -> int | None:
    """Microseconds (int, Decimal or numeric string) to integer ns, exactly."""
    t = type(value)
    if t is int:
        return value * 1000
    if t is Decimal:
        v = value * 1000
        return int(v) if v == v.to_integral_value() else round(v)
    if t is str:
        try:
            return _to_ns(Decimal(value))
        except InvalidOperation:
            return None
    if t is float:
        return None if not math.isfinite(value) else round(value * 1000)
    return None


def _conv_int(v: Any) -> int | None:
    t = type(v)
    if t is int:
        return v
    if t is Decimal or t is float:
        return int(v) if v == int(v) else None
    if t is str:
        try:
            d = Decimal(v)
            return int(d) if d.is_finite() and d == int(d) else None
        except (InvalidOperation, ValueError):
            return None
    return None


def _conv_float(v: Any) -> float | None:
    t = type(v)
    if t is int or t is Decimal or t is float:
        f = float(v)
        return f if math.isfinite(f) else None
    if t is str:
        try:
            f = float(v)
        except ValueError:
            return None
        return f if math.isfinite(f) else None
    return None


def _conv_str(v: Any) -> str | None:
    if type(v) is str:
        return v
    if v is None:
        return None
    return _encode_json(v)


def _conv_int_list(v: Any) -> list[int] | None:
    if type(v) is list and all(type(x) is int for x in v):
        return v
    return None


_CONVERTERS: dict[str, Callable[[Any], Any]] = {
    "int": _conv_int,
    "float": _conv_float,
    "str": _conv_str,
    "int_list": _conv_int_list,
}


def _id_text(v: Any) -> str | None:
    if v is None:
        return None
    return v if type(v) is str else str(v)


def _text_array(values: Sequence[Any]) -> pa.Array:
    """Strings, or ints written as text (pids, tids, flow ids): fast paths in C."""
    try:
        return pa.array(values, pa.string())
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        pass
    try:
        return pa.array(values, pa.int64()).cast(pa.string())
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        pass
    # mostly ints with a few strings (Kineto's "Spans" pid): cast the ints in C
    try:
        as_text = pa.array([v if type(v) is int else None for v in values], pa.int64()).cast(pa.string())
    except (pa.ArrowInvalid, OverflowError):
        return pa.array([_id_text(v) for v in values], pa.string())
    others = [None if type(v) is int else _id_text(v) for v in values]
    return pc.coalesce(as_text, pa.array(others, pa.string()))


class NeedExactDecimals(Exception):
    """The float pass met a number it cannot carry exactly (a big timestamp written with
    decimals, an integer beyond 64 bits): re-read with Decimals."""


# Below 2**43 us (101 days) a double's spacing is at most 2**-10 us (0.98 ns), so the
# parsed float is within 0.49 ns of the 3-decimal microsecond value the file wrote and
# rounding recovers the nanosecond integer exactly. Relative timestamps (Kineto with
# baseTimeNanoseconds, xprof) and uptime clocks (CLOCK_MONOTONIC, weeks) are below it;
# epoch microseconds (~1.7e15) are not and take the Decimal path.
_FLOAT_EXACT_LIMIT = float(2**43)
_FRACTIONAL_TIME = re.compile(rb'"(?:ts|dur)"\s*:\s*(-?\d+\.\d+)')


def needs_exact_decimals(head: bytes) -> bool:
    """Whether the start of the file already shows timestamps that floats cannot hold.

    The first 256 timestamps of the first 256 KB decide; a later one that needs decimals
    makes the reader start over (``NeedExactDecimals``), which is rare and only costs time.
    """
    for i, m in enumerate(_FRACTIONAL_TIME.finditer(head, 0, 256 << 10)):
        if abs(float(m.group(1))) >= _FLOAT_EXACT_LIMIT:
            return True
        if i > 256:
            break
    return False


def _time_ns_array(values: Sequence[Any], exact: bool) -> pa.Array:
    """Microsecond numbers to exact int64 ns, vectorised when they are floats."""
    if not exact:
        try:
            us = pa.array(values, pa.float64())  # refuses ints a double cannot hold
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
            us = None
        if us is not None:
            big = pc.greater_equal(pc.abs(us), _FLOAT_EXACT_LIMIT)
            if pc.any(big).as_py() and any(type(values[i]) is float for i in pc.indices_nonzero(big).to_pylist()):
                # A number this big that the file wrote with a decimal point: the float may
                # already have rounded its last digits away (1700000000000000.123 parses to
                # ...000.0), so a zero fraction proves nothing. Integers this big are exact.
                raise NeedExactDecimals
            whole = pc.trunc(us)
            frac = pc.subtract(us, whole)  # exact in binary floating point
            return pc.add(
                pc.multiply(pc.cast(whole, pa.int64()), 1000),
                pc.cast(pc.round(pc.multiply(frac, 1000.0)), pa.int64()),
            )
    return pa.array([None if v is None else _to_ns(v) for v in values], pa.int64())


def _map_categories(raw: pa.Array) -> tuple[pa.Array, pa.Array]:
    """(cat, cat_raw): legacy names replaced, originals kept where replaced."""
    cat = raw
    is_legacy = pc.is_in(raw, value_set=_LEGACY_KEYS)
    if not pc.any(is_legacy).as_py():
        return raw, pa.nulls(len(raw), pa.string())
    for old, new in LEGACY_CATEGORIES.items():
        cat = pc.if_else(pc.equal(raw, old), new, cat)
    return cat, pc.if_else(is_legacy, raw, pa.scalar(None, pa.string()))


_LEGACY_KEYS = pa.array(list(LEGACY_CATEGORIES), pa.string())
_KIND_TYPE = {"int": pa.int64(), "float": pa.float64(), "str": pa.string(), "int_list": pa.list_(pa.int64())}
_PROMOTE = {key: spec.column for key, spec in PROMOTED_ARGS.items()}  # raw key -> column
_COLUMN_KIND = dict(_PROMOTED_COLUMNS)
_NATIVE_TYPE = {"int": int, "float": float, "str": str, "int_list": list}


def _promoted_array(kind: str, n: int, sparse: dict[int, Any]) -> pa.Array:
    """A column from {row: raw value}; most promoted columns are sparse in a batch.

    pyarrow converts ints, floats and int lists in C and scatters them to their rows;
    only a batch holding values it refuses (strings in a number column, ...) goes
    through ``_CONVERTERS``.
    """
    typ = _KIND_TYPE[kind]
    if not sparse:
        return pa.nulls(n, typ)
    values = list(sparse.values())
    try:
        column = pa.array(values, typ)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError):
        conv = _CONVERTERS[kind]
        column = pa.array([None if v is None else conv(v) for v in values], typ)
    if len(values) == n:  # rows are inserted in order: the values are the column
        return column
    return pc.scatter(column, pa.array(list(sparse), pa.int64()), max_index=n - 1)


# Events of one kind carry the same argument keys in the same order (every Kineto
# kernel has the same dozen), so which of them are promoted, and how, is worked out
# once per key tuple. Bounded, for files whose counters invent a key per event.
_ArgPlan = tuple[tuple[str, str, type, str], ...]  # (raw key, column, native type, kind)
_ARG_PLANS: dict[tuple[str, ...], _ArgPlan] = {}
_ARG_PLANS_MAX = 4096


def _arg_plan(keys: tuple[str, ...]) -> _ArgPlan:
    plan = tuple(
        (key, _PROMOTE[key], _NATIVE_TYPE[_COLUMN_KIND[_PROMOTE[key]]], _COLUMN_KIND[_PROMOTE[key]])
        for key in keys if key in _PROMOTE
    )
    if len(_ARG_PLANS) < _ARG_PLANS_MAX:
        _ARG_PLANS[keys] = plan
    return plan


class _Batch:
    """Rows of one record batch, as the loop appends them."""

    __slots__ = ("rows", "promoted", "end_ts")

    def __init__(self) -> None:
        # (event_idx, ph, cat, name, pid, tid, ts, dur, id, bp, s, args_json), raw values
        self.rows: list[tuple[Any, ...]] = []
        self.promoted: dict[str, dict[int, Any]] = {column: {} for column, _ in _PROMOTED_COLUMNS}
        self.end_ts: dict[int, Any] = {}  # row -> raw ts of the E closing a B

    def residual_args_json(self, args: Any) -> str | None:
        """Files promoted args into their columns; JSON text of the rest.

        The args dict is ijson's own and is not used again, so promoted keys are deleted
        from it in place and what is left is encoded as it stands.
        """
        if not args:
            return None
        if type(args) is not dict:
            return _encode_json(args)
        keys = tuple(args)
        plan = _ARG_PLANS.get(keys)
        if plan is None:
            plan = _arg_plan(keys)
        if plan:
            row = len(self.rows)
            promoted = self.promoted
            for key, column, native, kind in plan:
                v = args[key]
                if type(v) is native:
                    promoted[column][row] = v
                    del args[key]
                elif v is not None and type(v) is not dict:
                    # a value of another type (every XLA arg is text, "inf", "N/A", 5.5 for
                    # an int): convert now, and keep the original in args if it does not
                    converted = _CONVERTERS[kind](v)
                    promoted[column][row] = converted
                    if converted is not None:
                        del args[key]
            if not args:
                return None
        return _encode_json(args)

    def to_record_batch(self, file_id: str, base_ns: int, exact: bool) -> pa.RecordBatch:
        n = len(self.rows)
        cols = list(zip(*self.rows))
        ts = _time_ns_array(cols[6], exact)
        dur = _time_ns_array(cols[7], exact)
        if self.end_ts:  # B/E pairs: dur = E.ts - B.ts, computed exactly
            durs = dur.to_pylist()
            for row, end in self.end_ts.items():
                durs[row] = _to_ns(end) - _to_ns(cols[6][row])  # type: ignore[operator]
            dur = pa.array(durs, pa.int64())
        if base_ns:
            ts = pc.add(ts, pa.scalar(base_ns, pa.int64()))
        cat, cat_raw = _map_categories(_text_array(cols[2]))
        arrays = [
            pa.array([file_id] * n, pa.string()),
            pa.array(cols[0], pa.int64()),
            _text_array(cols[1]),
            cat,
            cat_raw,
            _text_array(cols[3]),
            _text_array(cols[4]),
            _text_array(cols[5]),
            ts,
            dur,
            _text_array(cols[8]),
            _text_array(cols[9]),
            _text_array(cols[10]),
            pa.array(cols[11], pa.string()),
        ] + [_promoted_array(kind, n, self.promoted[column]) for column, kind in _PROMOTED_COLUMNS]
        return pa.RecordBatch.from_arrays(arrays, schema=EVENT_SCHEMA)


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Pauses Python's cyclic garbage collector while a file is parsed.

    ijson hands out ~1 dict per event and a batch keeps tens of thousands alive, so
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


@_gc_paused()
def read_chrome_json(
    source: Source,
    detected: Detected,
    file_id: str,
    sink: BatchSink,
    batch_rows: int = 32768,
    exact: bool = False,
    metadata: dict[str, Any] | None = None,
) -> ReadResult:
    """Streams the events of ``source`` into ``sink`` as record batches.

    ``exact=False`` parses numbers as floats (faster, and exact for relative
    timestamps); a timestamp that a float cannot carry exactly raises
    ``NeedExactDecimals`` and the caller re-reads with ``exact=True``.
    """
    result = ReadResult()
    head_meta = dict(metadata) if metadata is not None else file_metadata(source.path, detected)
    base_ns = _base_ns(head_meta)

    drops = result.drops
    open_slices: dict[tuple[Any, Any], list[tuple[int, dict[str, Any]]]] = {}
    batch = _Batch()
    ts_bounds: list[int] = []
    idx = -1
    last_empty = -2  # index of the last ``{}`` entry (see XPROF_END_MARKER)

    def flush() -> None:
        nonlocal batch
        if not batch.rows:
            return
        record_batch = batch.to_record_batch(file_id, base_ns, exact)
        sink(record_batch)
        # The time bounds leave out metadata events: Kineto writes its ``M`` events at
        # ts 0, which on an uptime clock made a 13 s trace span 41 days.
        # (only the two time columns are filtered: the whole batch costs 50x more)
        timed = pc.fill_null(pc.not_equal(record_batch.column(2), "M"), True)
        ts = pc.filter(record_batch.column(8), timed)
        lo = pc.min(ts).as_py()
        if lo is not None:
            hi = pc.max(pc.add(ts, pc.fill_null(pc.filter(record_batch.column(9), timed), 0))).as_py()
            ts_bounds.extend((lo - base_ns, hi - base_ns))
        result.rows_written += len(batch.rows)
        batch = _Batch()

    prefix = "item" if detected.array_form else "traceEvents.item"
    try:
        for ev in ijson.items(source.stream, prefix, use_float=not exact):
            idx += 1
            if type(ev) is not dict:
                drops["not an object", ""] += 1
                continue
            ph = ev.get("ph")
            ts = ev.get("ts")
            tt = type(ts)
            if tt is not float and tt is not int and tt is not Decimal:
                if ts is None:
                    if not ev:
                        drops["empty object", ""] += 1
                        last_empty = idx
                        continue
                    if ph != "M":
                        drops["no ts", _id_text(ph) or ""] += 1
                        continue
                elif _to_ns(ts) is None:  # a string that is not a number, a list, ...
                    drops["bad ts", _id_text(ph) or ""] += 1
                    continue
            if ph == "B":
                open_slices.setdefault((ev.get("pid"), ev.get("tid")), []).append((idx, ev))
                continue
            if ph == "E":
                stack = open_slices.get((ev.get("pid"), ev.get("tid")))
                if not stack:
                    drops["E without B", "E"] += 1
                    continue
                b_idx, b_ev = stack.pop()
                args = b_ev.get("args")
                e_args = ev.get("args")
                if e_args and type(e_args) is dict:
                    args = {**args, **e_args} if type(args) is dict else e_args
                batch.end_ts[len(batch.rows)] = ts
                ev, idx_out, ph_out = b_ev, b_idx, "B"
            else:
                args = ev.get("args")
                idx_out, ph_out = idx, ph
            args_json = batch.residual_args_json(args) if args else None
            batch.rows.append((
                idx_out, ph_out, ev.get("cat"), ev.get("name"), ev.get("pid"), ev.get("tid"), ev.get("ts"),
                None if ph_out == "B" else ev.get("dur"), ev.get("id"), ev.get("bp"), ev.get("s"), args_json,
            ))
            if len(batch.rows) >= batch_rows:
                flush()
    except ijson.JSONError as e:
        if not exact and "integer overflow" in str(e):
            # yajl's float mode holds integers in 64 bits; the Decimal mode takes any size
            raise NeedExactDecimals from e
        if detected.flavor != "horovod" or "premature EOF" not in str(e):
            raise TraceFileError(source.path, _parse_error_message(e, source)) from e
        # Horovod <= 0.20.0 never closes its array (each event ends "},\n"), and a killed
        # job cuts the last event short: keep every complete event, and say which it was
        end = source.stream.tail().rstrip()
        result.notes[HOROVOD_UNTERMINATED if end.endswith((b"}", b"},")) else HOROVOD_TRUNCATED] += 1
    except gzip_errors() as e:
        raise TraceFileError(source.path, f"corrupt gzip stream: {e}") from e

    unclosed = 0
    for stack in open_slices.values():
        for b_idx, b_ev in stack:
            args_json = batch.residual_args_json(b_ev.get("args"))
            batch.rows.append((
                b_idx, "B", b_ev.get("cat"), b_ev.get("name"), b_ev.get("pid"), b_ev.get("tid"), b_ev.get("ts"),
                None, b_ev.get("id"), b_ev.get("bp"), b_ev.get("s"), args_json,
            ))
            unclosed += 1
    if unclosed:
        result.notes["B without E (kept, dur_ns NULL)"] = unclosed
    flush()

    result.events_read = idx + 1
    if detected.flavor == "xprof" and last_empty == idx:
        # xprof closes every trace-viewer array with ``{}``: a note, not a drop
        _count_down(drops, ("empty object", ""))
        result.notes[XPROF_END_MARKER] += 1
    result.decompressed_bytes = source.stream.offset
    missing = [k for k in _META_KEYS if k not in head_meta]  # keys Kineto may write after the events
    tail_meta = scan_top_level_keys(source.stream.tail(), last=True, keys=missing) if missing else {}
    meta = {**head_meta, **tail_meta}
    result.metadata = meta
    result.base_time_ns = base_ns
    result.ts_min_ns = min(ts_bounds) + base_ns if ts_bounds else None
    result.ts_max_ns = max(ts_bounds) + base_ns if ts_bounds else None
    if result.events_read == 0:
        problem = "no traceEvents array" if not detected.array_form and b'"traceEvents"' not in detected.head else "no trace events"
        raise TraceFileError(source.path, f"not a trace: {problem}")
    return result


def file_metadata(path: str, detected: Detected) -> dict[str, Any]:
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
    wanted = [k for k in ("baseTimeNanoseconds", "distributedInfo") if k not in meta
              and (k == "baseTimeNanoseconds" or detected.flavor == "kineto")]
    # what comes after the events is small: the last 256 KB, then the last 4 MB if a key
    # is still missing (a distributedInfo listing thousands of ranks)
    for limit in (256 << 10, None):
        if not wanted:
            break
        tail = scan_top_level_keys(read_tail(path) if limit is None else read_tail(path, limit), last=True, keys=wanted)
        meta.update(tail)
        wanted = [k for k in wanted if k not in tail]
    return meta


class ChromeReader:
    """Kineto, generic Chrome and xprof trace-viewer JSON (``detect`` kind ``chrome_json``)."""

    name = f"chrome_json/ijson-{ijson.backend}"
    tables = ("events",)

    def prepare(self, path: str, detected: Detected) -> Prepared:
        meta = file_metadata(path, detected)
        prepared = Prepared(metadata={"top_level": meta, "exact": needs_exact_decimals(detected.head)})
        info = meta.get("distributedInfo")
        if isinstance(info, dict):
            if _is_int32(info.get("rank")) and info["rank"] >= 0:
                prepared.rank, prepared.rank_source = info["rank"], "distributedInfo"
            if _is_int32(info.get("world_size")):
                prepared.world_size = info["world_size"]
        return prepared

    def read(self, path: str, detected: Detected, prepared: Prepared, file_id: str,
             sinks: dict[str, BatchSink], progress: ProgressFn | None) -> ReadResult:
        exact = prepared.metadata["exact"]
        try:
            with Source(path, progress) as source:
                result = read_chrome_json(source, detected, file_id, sinks["events"], exact=exact,
                                          metadata=prepared.metadata["top_level"])
                result.content_hash = source.finish_hash()
        except NeedExactDecimals:
            if exact:
                raise
            # a float could not carry a timestamp exactly: start over with Decimals
            prepared.metadata["exact"] = True
            raise ReadAgain("a timestamp needs exact decimals") from None
        return result


def _is_int32(value: Any) -> bool:
    return type(value) is int and -(2**31) <= value < 2**31


def _count_down(counter: Counter[Any], key: Any) -> None:
    counter[key] -= 1
    if counter[key] <= 0:
        del counter[key]


def _base_ns(meta: dict[str, Any]) -> int:
    base = meta.get("baseTimeNanoseconds")
    return base if type(base) is int else 0


def _head_before_events(head: bytes) -> bytes:
    """The part of the head before the event array starts (top-level keys only)."""
    pos = head.find(b'"traceEvents"')
    return head if pos < 0 else head[:pos]


def _parse_error_message(e: Exception, source: Source) -> str:
    """``invalid JSON at byte N: <yajl's first line>``, N in the decompressed text."""
    lines = str(e).splitlines()
    what = lines[0].strip() if lines else "parse error"
    offset = source.stream.offset
    if len(lines) >= 3 and "premature EOF" not in what:
        # yajl prints ~30 bytes of context and an arrow one column past the bad byte
        snippet = lines[1].strip().encode()
        pos = source.stream.last_chunk.rfind(snippet) if snippet else -1
        arrow = lines[2].find("^")
        if pos >= 0 and arrow >= 0:
            indent = len(lines[1]) - len(lines[1].lstrip())
            offset = source.stream.last_chunk_start + pos + arrow - indent - 1
    where = "decompressed byte" if source.compressed else "byte"
    return f"invalid JSON at {where} {offset}: {what}"
