"""Parsing one file into temp Parquet files, in this process or a worker: the reader of
its format, its rank, what it wrote, and one clean failure for anything that goes wrong."""

from __future__ import annotations

import json
import os
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from cclq.errors import TraceFileError
from cclq.formats import xplane
from cclq.formats.base import (
    BatchSink,
    Prepared,
    ReadAgain,
    ReadOptions,
    rank_from_name,
)
from cclq.formats.detect import (
    detect,
)
from cclq.formats.registry import reader_for
from cclq.formats.source import content_hash
from cclq.proc import init_worker_process
from cclq.schema import TABLE_SCHEMAS
from cclq.store.durable import is_disk_full
from cclq.store.writer import DataFileWriter, SharedDataFileWriter

PARSER_DIED = "the parser process died while reading it (out of memory?)"


DISK_FULL = "no space left on device"


@dataclass
class FileTask:
    path: Path
    trace: str
    relpath: str
    file_id: str
    size: int
    mtime_ns: int
    previous: dict | None  # its catalog row, when it came from this same place


class DiskFullError(TraceFileError):
    """The warehouse's disk is full: this file fails, and the run stops cleanly."""


# -------------------------------------------------------------------------- parse
@dataclass
class ParsedFile:
    """What a worker hands back to the committing process (picklable)."""

    parts: list[tuple[str, int, str, int]]  # (table, rank, temp data file, rows)
    rank: int  # the file's rank (the lowest, for a file holding several)
    rank_source: str
    parser: str
    flavor: str
    events_read: int
    events_written: int
    drops: dict[tuple[str, str], int]
    notes: dict[str, int]
    world_size: int | None
    distributed_info: Any
    device_properties: Any
    decompressed_bytes: int
    base_time_ns: int
    ts_min_ns: int | None
    ts_max_ns: int | None
    content_hash: str
    seconds: float
    warnings: list[str]
    # data files this file shares with the other small files of its group (parse_group):
    # its ``discard`` leaves them, the committer decides (``Committer.stage_unit``)
    shared: tuple[str, ...] = ()
    # parts a Dask worker already wrote to the warehouse's object storage: temp name ->
    # data path (``cclq.ingest.dask``); committed under that path, never moved
    placed: dict[str, str] = field(default_factory=dict)

    @property
    def ranks(self) -> list[int]:
        return sorted({rank for _table, rank, _tmp, _rows in self.parts} or {self.rank})

    def discard(self) -> None:
        for _table, _rank, tmp, _rows in self.parts:
            if tmp not in self.shared:
                Path(tmp).unlink(missing_ok=True)


class _BufferSink:
    """Keeps a small file's batches in memory until its parse has succeeded; then
    ``parse_group`` appends them to the group's shared data file (a file that fails
    leaves nothing there)."""

    def __init__(self, table: str, multi_rank: bool) -> None:
        self.table = table
        self.multi_rank = multi_rank
        self.pieces: list[pa.RecordBatch | pa.Table] = []
        self.rows = 0

    def write(self, batch: pa.RecordBatch | pa.Table) -> None:
        self.pieces.append(batch)
        self.rows += batch.num_rows

    def close(self) -> None:
        pass

    def discard(self) -> None:
        self.pieces.clear()


class _TableSink:
    """Writes a reader's batches of one table to temp data files: one file, or one per
    rank when the reader's file holds several (its batches then lead with ``rank``)."""

    def __init__(self, table: str, tmp_dir: str, file_id: str, trace: str, rank: int, multi_rank: bool) -> None:
        self.table = table
        self.multi_rank = multi_rank
        self._new = lambda r: DataFileWriter(
            Path(tmp_dir) / f"{file_id}.{os.getpid()}.{time.monotonic_ns()}.{table}.{r}.parquet",
            trace,
            r,
            TABLE_SCHEMAS[table],
        )
        self.writers: dict[int, DataFileWriter] = {} if multi_rank else {rank: self._new(rank)}

    def write(self, batch: pa.RecordBatch) -> None:
        if not self.multi_rank:
            next(iter(self.writers.values())).write(batch)
            return
        import pyarrow.compute as pc

        ranks = batch.column(0)
        rest = pa.RecordBatch.from_arrays(batch.columns[1:], schema=batch.schema.remove(0))
        for r in pc.unique(ranks).to_pylist():
            writer = self.writers.get(r)
            if writer is None:
                writer = self.writers[r] = self._new(r)
            writer.write(rest.filter(pc.equal(ranks, r)))

    def close(self) -> None:
        for w in self.writers.values():
            w.close()

    def discard(self) -> None:
        for w in self.writers.values():
            w.discard()
        self.writers.clear()


_progress_queue: Any = None  # set in worker processes by init_worker


def init_worker(progress_queue: Any, lock_fd: int | None, parent_pid: int) -> None:
    """Runs first in every parser process: the progress queue, and ``cclq.proc``'s rules
    (the lock's descriptor closed, SIGTERM when the ingest dies)."""
    global _progress_queue
    _progress_queue = progress_queue
    init_worker_process(lock_fd, parent_pid)


def _identity(path: str) -> tuple[int, int, int, int]:
    """What changes when a file is rewritten: (device, inode, size, mtime)."""
    st = os.stat(path)
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def parse_file(
    path: str,
    file_id: str,
    tmp_dir: str,
    trace: str,
    options: ReadOptions = ReadOptions(),
    progress: Callable[[int], None] | None = None,
) -> ParsedFile | TraceFileError:
    """Parses one file into temp Parquet files. Runs in a worker process.

    A file rewritten while it is read (its size, mtime or inode moved between the start
    and the end of the read) would mix two versions: it is read once more, then fails.
    ``options`` chooses the JSON reader and the bounds a file must keep; ``progress``
    gets the bytes read as they are (in a worker process, the pool's queue does).
    """
    return _parse_checked(path, file_id, tmp_dir, trace, options, progress, False)[0]


def _parse_checked(
    path: str,
    file_id: str,
    tmp_dir: str,
    trace: str,
    options: ReadOptions,
    progress: Callable[[int], None] | None,
    buffer: bool,
) -> tuple[ParsedFile | TraceFileError, list[_BufferSink]]:
    """``parse_file``; with ``buffer``, the rows stay in memory (returned beside the result)."""
    started = time.perf_counter()
    for _attempt in range(2):
        try:
            before = _identity(path)
        except OSError as e:
            return TraceFileError(path, f"cannot read: {e.strerror or e}"), []
        parsed, buffers = _parse_once(path, file_id, tmp_dir, trace, options, progress, buffer)
        if isinstance(parsed, TraceFileError):
            return parsed, []
        try:
            unchanged = _identity(path) == before
        except OSError:
            unchanged = False
        if unchanged:
            parsed.seconds = time.perf_counter() - started
            return parsed, buffers
        parsed.discard()
    return TraceFileError(path, "changed while it was being read (twice); ingest it again once it is written"), []


def _parse_once(
    path: str,
    file_id: str,
    tmp_dir: str,
    trace: str,
    options: ReadOptions,
    local_progress: Callable[[int], None] | None,
    buffer: bool = False,
) -> tuple[ParsedFile | TraceFileError, list[_BufferSink]]:
    writers: list[_TableSink | _BufferSink] = []
    pending = 0
    # The bar counts bytes of the file as planned (its size on disk). What is read can be
    # more: the JSON xprof converts an xplane.pb into, or a second pass with Decimals.
    # So reads are scaled to the planned file and never advance it past its size.
    try:
        budget = os.path.getsize(path)
    except OSError:  # reported by detect() below, with the reason
        budget = 0
    scale = 1.0

    def progress(n: int) -> None:
        nonlocal pending, budget
        step = min(int(n * scale), budget)
        budget -= step
        if _progress_queue is None:
            if local_progress is not None:
                local_progress(step)
            return
        pending += step
        if pending >= 1 << 20:
            _progress_queue.put(pending)
            pending = 0

    def discard_all() -> None:
        for w in writers:
            w.discard()
        writers.clear()

    converted: str | None = None  # the trace-viewer JSON xprof made from an xplane.pb
    try:
        detected = detect(path)
        read_path = path
        if detected.kind == "xplane":
            converted = read_path = xplane.convert(path, tmp_dir)
            detected = detect(read_path)
            scale = budget / max(os.path.getsize(read_path), 1)
        reader = reader_for(detected, options)
        prepared = reader.prepare(read_path, detected)
        rank, rank_source = _rank_of(path, prepared)
        again: list[str] = []  # why the file was read more than once
        for attempt in range(3):  # the fast reader's threads give up, then the fast reader
            multi_rank = prepared.ranks is not None
            writers[:] = [
                _BufferSink(table, multi_rank)
                if buffer
                else _TableSink(table, tmp_dir, file_id, trace, rank, multi_rank)
                for table in reader.tables
            ]
            sinks: dict[str, BatchSink] = {w.table: w.write for w in writers}
            try:
                result = reader.read(read_path, detected, prepared, file_id, sinks, progress)
                break
            except ReadAgain as e:
                discard_all()
                if attempt == 2:
                    raise
                prepared.options = e.options  # the next attempt: ijson, or one process
                again.append(e.note)
        for note in again:
            if note:
                result.notes[note] += 1
        for w in writers:
            w.close()
        digest = result.content_hash if converted is None and result.content_hash else content_hash(path)
    except TraceFileError as e:
        discard_all()
        return e, []
    except MemoryError:
        discard_all()
        return TraceFileError(path, "out of memory while parsing"), []
    except Exception as e:  # noqa: BLE001 - the file boundary: whatever went wrong, this file fails alone
        discard_all()
        if is_disk_full(e):
            return DiskFullError(path, DISK_FULL), []
        return TraceFileError(
            path,
            f"unexpected error while reading it ({type(e).__name__}: {e}); this is a bug in cclq, --debug shows where",
            detail=traceback.format_exc(),
        ), []
    except BaseException:
        discard_all()
        raise
    finally:
        if pending and _progress_queue is not None:
            _progress_queue.put(pending)
        if converted is not None:
            xplane.cleanup(converted)

    warnings = list(prepared.warnings) + list(result.warnings)
    notes = dict(result.notes)
    if converted is not None:
        notes["xplane.pb converted to trace-viewer JSON with xprof"] = 1
    elif detected.flavor == "xprof" and result.events_read >= xplane.TRACE_VIEWER_MAX_EVENTS:
        warnings.append(xplane.truncation_warning(path, result.events_read))
    info = result.metadata.get("distributedInfo")
    parts = [
        (w.table, r, str(f.path), f.rows)
        for w in writers
        if isinstance(w, _TableSink)
        for r, f in sorted(w.writers.items())
    ]
    parsed = ParsedFile(
        parts=parts,
        rank=min([r for _t, r, _p, _n in parts], default=rank),
        rank_source=rank_source,
        parser=result.parser or reader.name,
        flavor=detected.flavor,
        events_read=result.events_read,
        events_written=result.rows_written,
        drops=dict(result.drops),
        notes=notes,
        world_size=prepared.world_size,
        distributed_info=json_or_none(info),
        device_properties=json_or_none(result.metadata.get("deviceProperties")),
        decompressed_bytes=result.decompressed_bytes,
        base_time_ns=result.base_time_ns,
        ts_min_ns=result.ts_min_ns,
        ts_max_ns=result.ts_max_ns,
        content_hash=digest,
        seconds=0.0,
        warnings=warnings,
    )
    return parsed, [w for w in writers if isinstance(w, _BufferSink)]


def _rank_of(path: str, prepared: Prepared) -> tuple[int, str]:
    """The file's own word first, then a number in its name, else 0 (``ingest`` warns
    when two files of a workload end up there)."""
    if prepared.ranks:
        return min(prepared.ranks), prepared.rank_source or "file content"
    if prepared.rank is not None:
        return prepared.rank, prepared.rank_source or "file content"
    rank = rank_from_name(Path(path).name)
    if rank is not None:
        return rank, "file name"
    return 0, "default"


def inflight_marker(tmp_dir: str, file_id: str) -> Path:
    return Path(tmp_dir) / f"{file_id}.parsing"


def parse_in_worker(
    path: str, file_id: str, tmp_dir: str, trace: str, options: ReadOptions
) -> ParsedFile | TraceFileError:
    """``parse_file`` in a pool process, leaving a marker file while it runs: if the
    process dies, the marker tells ``_run_parsers`` which file it was reading."""
    marker = inflight_marker(tmp_dir, file_id)
    marker.touch()
    try:
        return parse_file(path, file_id, tmp_dir, trace, options)
    finally:
        marker.unlink(missing_ok=True)


# A file this small (on disk) is parsed in a group with the other small files of its
# trace (``parse_group``), and a group reads up to GROUP_BYTES. Measured on DLRM's 0.9 MB
# Kineto files: a data file of its own per input file, then compaction rewriting them
# into one, cost 11 ms of CPU per file of the ~40 (docs/history/benchmarks-history.md, "Small files").
SMALL_FILE_BYTES = 8 << 20
GROUP_BYTES = 64 << 20


def parse_group(
    files: list[tuple[str, str, str]],
    tmp_dir: str,
    options: ReadOptions = ReadOptions(),
    progress: Callable[[int], None] | None = None,
    markers: bool = False,
) -> list[ParsedFile | TraceFileError]:
    """Parses small files of one trace, ``files`` as (path, file_id, trace), one after the
    other, into ONE temp data file per table: one Parquet writer, no compaction pass, a
    commit that moves one file per table. Each file's rows are held in memory until its
    parse succeeds, then appended whole (``SharedDataFileWriter``), so a file that fails
    fails alone and leaves nothing in the shared file. A file that holds several ranks or
    states none (its rank may be changed later: ``Committer.stage_rankless``) gets data
    files of its own, as ``parse_file`` writes them. ``markers``: a marker file while each
    file is read (``parse_in_worker``'s)."""
    shared: dict[str, SharedDataFileWriter] = {}
    results: list[ParsedFile | TraceFileError] = []
    stem = files[0][1]

    def fail_shared(e: Exception) -> None:
        """A shared file that cannot be written (a full disk, mostly): every file of the
        group in a shared file fails (one could have rows in another table's), and the
        rest of the group goes on with new shared files."""
        for i, (r, (path, _fid, _trace)) in enumerate(zip(results, files)):
            if isinstance(r, ParsedFile) and r.shared:
                r.discard()
                results[i] = _write_failure(path, e)
        for w in shared.values():
            w.discard()
        shared.clear()

    try:
        for path, file_id, trace in files:
            marker = inflight_marker(tmp_dir, file_id) if markers else None
            if marker is not None:
                marker.touch()
            try:
                parsed, buffers = _parse_checked(path, file_id, tmp_dir, trace, options, progress, True)
                if not isinstance(parsed, ParsedFile):
                    results.append(parsed)
                elif parsed.rank_source == "default" or any(b.multi_rank for b in buffers):
                    results.append(_write_own(path, parsed, buffers, tmp_dir, file_id, trace))
                else:
                    results.append(parsed)
                    for b in buffers:
                        writer = shared.get(b.table)
                        try:
                            if writer is None:
                                name = f"{stem}.{os.getpid()}.{time.monotonic_ns()}.{b.table}.group.parquet"
                                writer = shared[b.table] = SharedDataFileWriter(
                                    Path(tmp_dir) / name, TABLE_SCHEMAS[b.table]
                                )
                            parsed.shared += (str(writer.path),)
                            rows = writer.append(trace, parsed.rank, b.pieces)
                        except Exception as e:  # noqa: BLE001 - the shared files are lost: their files fail
                            fail_shared(e)
                            if isinstance(results[-1], ParsedFile):
                                results[-1].discard()
                                results[-1] = _write_failure(path, e)
                            break
                        parsed.parts.append((b.table, parsed.rank, str(writer.path), rows))
                        b.discard()
            finally:
                if marker is not None:
                    marker.unlink(missing_ok=True)
        try:
            for w in shared.values():
                w.close()
        except Exception as e:  # noqa: BLE001 - a footer could not be written
            fail_shared(e)
    except BaseException:
        for r in results:
            if isinstance(r, ParsedFile):
                r.shared = ()
                r.discard()
        for w in shared.values():
            w.discard()
        raise
    return results


def _write_failure(path: str, e: Exception) -> TraceFileError:
    if is_disk_full(e):
        return DiskFullError(path, DISK_FULL)
    return TraceFileError(path, f"could not be written to the warehouse ({type(e).__name__}: {e})")


def _write_own(
    path: str, parsed: ParsedFile, buffers: list[_BufferSink], tmp_dir: str, file_id: str, trace: str
) -> ParsedFile | TraceFileError:
    """A grouped file's buffered rows written to data files of its own (as ``parse_file``)."""
    try:
        for b in buffers:
            sink = _TableSink(b.table, tmp_dir, file_id, trace, parsed.rank, b.multi_rank)
            try:
                for piece in b.pieces:
                    sink.write(piece)
                sink.close()
            except BaseException:
                sink.discard()
                raise
            parsed.parts.extend((b.table, r, str(f.path), f.rows) for r, f in sorted(sink.writers.items()))
        parsed.rank = min([r for _t, r, _p, _n in parsed.parts], default=parsed.rank)
        return parsed
    except Exception as e:  # noqa: BLE001 - the file boundary: this file fails alone
        parsed.discard()
        return _write_failure(path, e)


def parse_group_in_worker(
    files: list[tuple[str, str, str]], tmp_dir: str, options: ReadOptions
) -> list[ParsedFile | TraceFileError]:
    """``parse_group`` in a pool process, with a marker while each file is read."""
    return parse_group(files, tmp_dir, options, markers=True)


def json_or_none(value: Any) -> str | None:
    """A reader's metadata value as JSON text for the catalog, or NULL."""
    return None if value is None else json.dumps(value, default=str)
