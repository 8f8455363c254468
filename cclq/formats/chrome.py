"""Streaming reader for Chrome trace-event JSON: PyTorch profiler (Kineto), generic
Chrome traces and xprof trace-viewer JSON.

The file is never loaded whole: ``ijson`` (C backend) yields one event dict at a
time and rows are collected column-wise into Arrow record batches of
``batch_rows`` rows. Memory is bounded by the batch size, the open ``B`` stacks and
a few MB of head/tail text used to find top-level keys.

Normalisation rules (each one is a line in the README's "event schema" section):

* ``ts``/``dur`` are microseconds in the file. They are converted to integer ns
  from the *decimal text* (ijson hands us ``Decimal``), so Kineto's 3-decimal
  epoch microseconds survive exactly. When the file has ``baseTimeNanoseconds``
  the base is added, so ``ts_ns`` is epoch ns and comparable across ranks.
* ``B``/``E`` pairs on one (pid, tid) become one row with ``ph = 'B'`` and the E's
  args merged in; an ``E`` without an open ``B`` is dropped; a ``B`` never closed
  is kept with ``dur_ns`` NULL.
* Arguments listed in ``schema.PROMOTED_ARGS`` go to typed columns. ``args`` keeps
  every other argument as JSON text, plus any promoted value that did not convert
  (``"inf"`` stays in ``args`` and its column is NULL): nothing is lost.
* Events that cannot be used are dropped and counted by (reason, ph); see
  ``ReadResult.drops``.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

import ijson
import pyarrow as pa

from cclq.errors import TraceFileError
from cclq.formats.detect import Detected
from cclq.formats.source import Source, gzip_errors
from cclq.schema import (
    EVENT_SCHEMA,
    LEGACY_CATEGORIES,
    PROMOTED_ARGS,
    promoted_columns,
)

BatchSink = Callable[[pa.RecordBatch], None]

_PROMOTED_COLUMNS = promoted_columns()
_PROMOTED_KIND = dict(_PROMOTED_COLUMNS)
# raw key -> promoted column name, for the hot loop
_PROMOTE = {key: spec.column for key, spec in PROMOTED_ARGS.items()}

_encode_json = json.JSONEncoder(
    separators=(",", ":"), ensure_ascii=False, default=lambda o: float(o) if isinstance(o, Decimal) else str(o)
).encode


@dataclass
class ReadResult:
    """What one file yielded, besides its rows."""

    events_read: int = 0  # entries of the event array, including dropped ones
    rows_written: int = 0
    drops: Counter[tuple[str, str]] = field(default_factory=Counter)  # (reason, ph) -> n
    notes: Counter[str] = field(default_factory=Counter)  # kept but noteworthy
    metadata: dict[str, Any] = field(default_factory=dict)  # top-level keys we read
    base_time_ns: int = 0
    ts_min_ns: int | None = None
    ts_max_ns: int | None = None  # max(ts + dur)
    decompressed_bytes: int = 0
    rebased: bool = False  # base time found after the events: ts rewritten at the end


# Top-level keys worth reading besides the event array, and how to find them.
_META_KEYS = ("distributedInfo", "baseTimeNanoseconds", "deviceProperties", "displayTimeUnit", "schemaVersion")


def scan_top_level_keys(text: bytes, last: bool) -> dict[str, Any]:
    """Finds ``_META_KEYS`` in a slice of JSON text and decodes their values.

    A key pattern ``"name":`` with an unescaped quote can only be a real key, so a
    regex plus ``raw_decode`` is safe on a slice that starts mid-document. With
    ``last`` the last occurrence wins (keys written after the event array).
    """
    found: dict[str, Any] = {}
    decoder = json.JSONDecoder()
    s = text.decode("utf-8", errors="replace")
    for key in _META_KEYS:
        matches = list(re.finditer(r'"' + key + r'"\s*:\s*', s))
        if not matches:
            continue
        m = matches[-1] if last else matches[0]
        try:
            found[key], _ = decoder.raw_decode(s, m.end())
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


class _Batch:
    """Column buffers for one record batch."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.n = 0
        self.event_idx: list[int] = []
        self.ph: list[Any] = []
        self.cat: list[Any] = []
        self.cat_raw: list[Any] = []
        self.name: list[Any] = []
        self.pid: list[Any] = []
        self.tid: list[Any] = []
        self.ts: list[int | None] = []
        self.dur: list[int | None] = []
        self.flow_id: list[Any] = []
        self.bp: list[Any] = []
        self.scope: list[Any] = []
        self.args: list[str | None] = []
        self.promoted: dict[str, list[Any]] = {c: [None] * size for c, _ in _PROMOTED_COLUMNS}

    def to_record_batch(self, file_id: str, base_ns: int) -> pa.RecordBatch:
        n = self.n
        ts = self.ts if not base_ns else [None if t is None else t + base_ns for t in self.ts]
        arrays: list[pa.Array] = [
            pa.array([file_id] * n, pa.string()),
            pa.array(self.event_idx, pa.int64()),
            pa.array([_id_text(v) for v in self.ph], pa.string()),
            pa.array(self.cat, pa.string()),
            pa.array(self.cat_raw, pa.string()),
            pa.array([_id_text(v) for v in self.name], pa.string()),
            pa.array([_id_text(v) for v in self.pid], pa.string()),
            pa.array([_id_text(v) for v in self.tid], pa.string()),
            pa.array(ts, pa.int64()),
            pa.array(self.dur, pa.int64()),
            pa.array([_id_text(v) for v in self.flow_id], pa.string()),
            pa.array([_id_text(v) for v in self.bp], pa.string()),
            pa.array([_id_text(v) for v in self.scope], pa.string()),
            pa.array(self.args, pa.string()),
        ]
        for column, kind in _PROMOTED_COLUMNS:
            raw = self.promoted[column]
            conv = _CONVERTERS[kind]
            values = [None if v is None else conv(v) for v in raw[:n]]
            arrays.append(pa.array(values, EVENT_SCHEMA.field(column).type))
        return pa.RecordBatch.from_arrays(arrays, schema=EVENT_SCHEMA)


def read_chrome_json(
    source: Source,
    detected: Detected,
    file_id: str,
    sink: BatchSink,
    batch_rows: int = 65536,
) -> ReadResult:
    """Streams the events of ``source`` into ``sink`` as record batches."""
    result = ReadResult()
    head_meta = scan_top_level_keys(_head_before_events(detected.head), last=False)
    base_ns = _base_ns(head_meta)
    base_known_upfront = "baseTimeNanoseconds" in head_meta

    drops = result.drops
    promote = _PROMOTE
    legacy = LEGACY_CATEGORIES
    to_ns = _to_ns
    encode = _encode_json
    open_slices: dict[tuple[Any, Any], list[tuple[int, dict[str, Any], int]]] = {}

    batch = _Batch(batch_rows)
    ts_min: int | None = None
    ts_max: int | None = None
    idx = -1

    def flush() -> None:
        nonlocal batch
        if batch.n:
            sink(batch.to_record_batch(file_id, base_ns))
            result.rows_written += batch.n
        batch = _Batch(batch_rows)

    def emit(ev: dict[str, Any], event_idx: int, ph: Any, ts_ns: int | None, dur_ns: int | None, args: Any) -> None:
        nonlocal ts_min, ts_max
        b = batch
        row = b.n
        b.event_idx.append(event_idx)
        b.ph.append(ph)
        cat = ev.get("cat")
        mapped = legacy.get(cat) if cat is not None else None
        if mapped is None:
            b.cat.append(cat if cat is None or type(cat) is str else str(cat))
            b.cat_raw.append(None)
        else:
            b.cat.append(mapped)
            b.cat_raw.append(cat)
        b.name.append(ev.get("name"))
        b.pid.append(ev.get("pid"))
        b.tid.append(ev.get("tid"))
        b.ts.append(ts_ns)
        b.dur.append(dur_ns)
        b.flow_id.append(ev.get("id"))
        b.bp.append(ev.get("bp"))
        b.scope.append(ev.get("s"))
        if args:
            if type(args) is dict:
                rest = None
                cols = b.promoted
                for k, v in args.items():
                    column = promote.get(k)
                    if column is None or v is None or type(v) is dict:
                        if rest is None:
                            rest = {}
                        rest[k] = v
                    elif type(v) is str and _PROMOTED_KIND[column] != "str":
                        # numbers written as text (all XLA args, "inf", "N/A"):
                        # convert now; keep the text in args if it does not convert
                        converted = _CONVERTERS[_PROMOTED_KIND[column]](v)
                        cols[column][row] = converted
                        if converted is None:
                            if rest is None:
                                rest = {}
                            rest[k] = v
                    else:
                        cols[column][row] = v
                b.args.append(encode(rest) if rest else None)
            else:
                b.args.append(encode(args))
        else:
            b.args.append(None)
        if ts_ns is not None:
            if ts_min is None or ts_ns < ts_min:
                ts_min = ts_ns
            end = ts_ns + (dur_ns or 0)
            if ts_max is None or end > ts_max:
                ts_max = end
        b.n = row + 1
        if b.n >= b.size:
            flush()

    prefix = "item" if detected.array_form else "traceEvents.item"
    try:
        for ev in ijson.items(source.stream, prefix):
            idx += 1
            if type(ev) is not dict:
                drops["not an object", ""] += 1
                continue
            ph = ev.get("ph")
            if not ev:
                drops["empty object", ""] += 1
                continue
            ts = ev.get("ts")
            if ts is None:
                if ph != "M":
                    drops["no ts", _id_text(ph) or ""] += 1
                    continue
                ts_ns = None
            else:
                ts_ns = to_ns(ts)
                if ts_ns is None:
                    drops["bad ts", _id_text(ph) or ""] += 1
                    continue
            dur = ev.get("dur")
            dur_ns = None if dur is None else to_ns(dur)
            if ph == "B":
                open_slices.setdefault((ev.get("pid"), ev.get("tid")), []).append((idx, ev, ts_ns))  # type: ignore[arg-type]
                continue
            if ph == "E":
                stack = open_slices.get((ev.get("pid"), ev.get("tid")))
                if not stack:
                    drops["E without B", "E"] += 1
                    continue
                b_idx, b_ev, b_ts = stack.pop()
                args = b_ev.get("args")
                e_args = ev.get("args")
                if e_args and type(e_args) is dict:
                    args = {**args, **e_args} if type(args) is dict else e_args
                emit(b_ev, b_idx, "B", b_ts, ts_ns - b_ts, args)  # type: ignore[operator]
                continue
            emit(ev, idx, ph, ts_ns, dur_ns, ev.get("args"))
    except ijson.JSONError as e:
        raise TraceFileError(source.path, _parse_error_message(e, source)) from e
    except gzip_errors() as e:
        raise TraceFileError(source.path, f"corrupt gzip stream: {e}") from e

    unclosed = 0
    for stack in open_slices.values():
        for b_idx, b_ev, b_ts in stack:
            emit(b_ev, b_idx, "B", b_ts, None, b_ev.get("args"))
            unclosed += 1
    if unclosed:
        result.notes["B without E (kept, dur_ns NULL)"] = unclosed
    flush()

    result.events_read = idx + 1
    result.decompressed_bytes = source.stream.offset
    tail_meta = scan_top_level_keys(source.stream.tail(), last=True)
    meta = {**head_meta, **{k: v for k, v in tail_meta.items() if k not in head_meta}}
    result.metadata = meta
    if not base_known_upfront and "baseTimeNanoseconds" in meta:
        base_ns = _base_ns(meta)
        result.rebased = base_ns != 0
    result.base_time_ns = base_ns
    result.ts_min_ns = None if ts_min is None else ts_min + base_ns
    result.ts_max_ns = None if ts_max is None else ts_max + base_ns
    if result.events_read == 0:
        problem = "no traceEvents array" if not detected.array_form and b'"traceEvents"' not in detected.head else "no trace events"
        raise TraceFileError(source.path, f"not a trace: {problem}")
    return result


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
