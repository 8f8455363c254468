"""A trace file of the warehouse written back as Chrome trace JSON, with changes and added
events: what HTA's overlays and counter traces are (critical path, frequent kernel
sequences, queue length and memory bandwidth counters), opened by Perfetto,
chrome://tracing and HTA's own loader.

The events are read from the warehouse in file order, a batch at a time, and written
gzip-compressed as they come (``write_trace``): memory stays bounded by a batch whatever
the file's size (HTA reads the whole original file into memory and writes it back).
Each event is rebuilt from its columns (the phase, category as written, name, pid, tid,
ts and dur in µs of the file's own clock, flow id, binding point, instant scope and the
args as written); the top level has the keys the warehouse keeps (distributedInfo,
deviceProperties, baseTimeNanoseconds). Events the reader dropped at ingest (without a
timestamp: ``cclq traces`` counts them) are not written back.
"""

from __future__ import annotations

import gzip
import json
import os
import tempfile
from collections.abc import Callable, Iterable
from functools import lru_cache
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa

from cclq.formats.detect import WRITTEN_FROM_KEY
from cclq.query.session import Session

BATCH_ROWS = 65_536
WRITE_BYTES = 1 << 20
# gzip level 3: the overlay and counter traces are written once and read by a viewer; on a
# 15 MB trace level 5 took 0.31 s of CPU, level 3 0.19 s, for 1.26 vs 1.46 MB
COMPRESS_LEVEL = 3
Event = dict[str, Any]
# an event -> the event to write (changed in place or not), or None to leave it out
Transform = Callable[[Event], "Event | None"]


def _number(value_ns: int) -> int | float:
    """ns as the µs Chrome JSON holds: an integer where it is whole."""
    return value_ns // 1000 if value_ns % 1000 == 0 else value_ns / 1000


def id_value(text: str | None) -> Any:
    """A pid, tid or flow id as the file wrote it: an int where it was a number (the
    warehouse keeps the text), else the text ("Spans"); HTA's frames hold them so too."""
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        return text


def file_events(session: Session, file_id: str) -> Iterable[Event]:
    """The events of one ingested file, in file order, as Chrome trace events."""
    base = session.execute("SELECT coalesce(base_time_ns, 0) FROM files WHERE file_id = ?", [file_id]).fetchone()
    base_ns = int(base[0]) if base else 0
    # streamed on a connection of its own: a stream holds its connection until it is read
    # to the end, and the caller queries the session meanwhile (DuckDB 2.0 refuses that;
    # a DB-API result would copy the whole file's rows first)
    stream = session.worker()
    try:
        yield from _events(
            stream.relation(
                "SELECT event_idx, ph, coalesce(cat_raw, cat) AS cat, name, pid, tid, ts_ns, dur_ns, flow_id, bp, scope, "  # noqa: E501
                "args FROM events WHERE file_id = ? ORDER BY event_idx",
                [file_id],
            ).to_arrow_reader(BATCH_ROWS),
            base_ns,
        )
    finally:
        stream.close()


def _events(reader: pa.RecordBatchReader, base_ns: int) -> Iterable[Event]:
    """Each row as its event dict; the columns walked together (``zip``), not indexed per
    field: 455 k events of an 86 MB trace took 2.0 s indexed."""
    loads = orjson.loads
    # pid and tid decoded once per distinct text: a few values over all the rows
    # (id_value per row was 1.1 M calls on a 54 MB trace)
    ids = lru_cache(maxsize=None)(id_value)
    for batch in reader:
        c = batch.to_pydict()
        rows = zip(
            c["ph"], c["cat"], c["name"], c["pid"], c["tid"], c["ts_ns"], c["dur_ns"], c["flow_id"], c["bp"],
            c["scope"], c["args"], c["event_idx"],
        )  # fmt: skip
        for ph, cat, name, pid, tid, ts, dur, flow, bp, scope, args, idx in rows:
            event: Event = {"ph": ph}
            if cat is not None:
                event["cat"] = cat
            if name is not None:
                event["name"] = name
            if pid is not None:
                event["pid"] = ids(pid)
            if tid is not None:
                event["tid"] = ids(tid)
            if ts is not None:
                event["ts"] = _number(ts - base_ns)
            if dur is not None:
                event["dur"] = _number(dur)
            if flow is not None:
                event["id"] = id_value(flow)
            if bp is not None:
                event["bp"] = bp
            if scope is not None:
                event["s"] = scope
            if args is not None:
                event["args"] = loads(args)
            event["__idx"] = idx
            yield event


def file_header(session: Session, file_id: str) -> dict[str, Any]:
    """The top-level keys of a file that the warehouse keeps."""
    row = session.execute(
        "SELECT distributed_info, device_properties, base_time_ns FROM files WHERE file_id = ?", [file_id]
    ).fetchone()
    header: dict[str, Any] = {}
    if row is None:
        return header
    if row[0]:
        header["distributedInfo"] = json.loads(row[0])
    if row[1]:
        header["deviceProperties"] = json.loads(row[1])
    if row[2] is not None:
        header["baseTimeNanoseconds"] = row[2]
    return header


def _event_texts(
    session: Session, file_id: str, transform: Transform | None, extra: Iterable[Event]
) -> Iterable[bytes]:
    """The JSON of each event ``write_trace`` writes: the file's, through ``transform``
    (None leaves one out), then the ``extra`` ones."""
    for event in file_events(session, file_id):
        kept = transform(event) if transform is not None else event
        if kept is not None:
            kept.pop("__idx", None)
            yield orjson.dumps(kept)
    for event in extra:
        yield orjson.dumps(event, option=orjson.OPT_SERIALIZE_NUMPY)


def write_trace(
    session: Session,
    file_id: str,
    out: Path,
    transform: Transform | None = None,
    extra: Iterable[Event] = (),
    written_from: str | None = None,
) -> Path:
    """Writes file ``file_id`` of the warehouse to ``out`` (gzip-compressed Chrome JSON),
    each event through ``transform``, then the ``extra`` events. The file appears whole
    or not at all (written beside it, then renamed). ``written_from`` (the source file's
    name) marks a file written beside a user's trace: a later ingest of the folder passes
    it over (``cclq.formats.detect.written_by_cclq``)."""
    out = Path(out)
    # the marker first, where a folder walk finds it in the file's first bytes
    header = {WRITTEN_FROM_KEY: written_from} if written_from else {}
    header.update(file_header(session, file_id))
    fd, tmp = tempfile.mkstemp(prefix=out.name + ".", suffix=".part", dir=out.parent)
    os.close(fd)
    try:
        # events gathered into ~1 MB pieces before each gzip write: a write per event
        # (two per event, 162 k on a 15 MB trace) cost more than the compression
        with gzip.open(tmp, "wb", compresslevel=COMPRESS_LEVEL) as f:
            # the header with json's spacing: HTA finds a rank by the pattern "rank": <n>
            head = json.dumps(header)
            buf = bytearray((head[:-1] + (", " if header else "") + '"traceEvents": [').encode())
            separator = b"\n"
            for text in _event_texts(session, file_id, transform, extra):
                buf += separator
                buf += text
                separator = b",\n"
                if len(buf) >= WRITE_BYTES:
                    f.write(buf)
                    buf.clear()
            buf += b"\n]}\n"
            f.write(buf)
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return out
