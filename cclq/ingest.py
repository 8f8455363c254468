"""``cclq ingest``: from folders of trace files to the Parquet warehouse.

1. ``plan_inputs`` turns the command-line paths into workloads (trace id, files,
   card). A folder holding trace files (or a card) is one workload named after the
   folder; a folder holding only folders is a collection of workloads; a loose file is
   a workload of its own named after the file. A folder that cannot be read, or a
   second folder whose name maps to a trace id already planned, fails alone.
2. Files whose size and mtime (or, failing that, content hash; always the hash with
   ``checksum``) match the catalog are skipped: re-ingesting unchanged input is a no-op.
3. The rest are parsed, in parallel processes with ``jobs > 1`` (or on a Dask cluster:
   ``cclq.distributed``), each by the reader of its format (``cclq.formats``) into temp
   Parquet files. The reader says the file's rank before its first row is written:
   every row carries its trace and rank.
   Parsing never touches the catalog. Any failure while reading a file, foreseen or
   not, fails that file alone, naming it.
4. The main process takes the results in path order, checks each against the catalog
   (no two files may claim one (trace, rank)), and commits them in batches: each batch
   is one new catalog snapshot (``Warehouse.commit``), so readers see all of a batch or
   none of it, and a killed ingest leaves the last snapshot as it was. A batch that
   cannot be committed is retried file by file, so a file that cannot be written fails
   alone; a full disk stops the run cleanly.

A trace id belongs to one place: a workload whose id the catalog holds for files from
another folder (or another loose file) fails instead of replacing them, unless
``force`` says to replace them; the old files then leave in the same snapshot as the
first new file arrives, never before (if every new file fails, the old trace stays).
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import queue
import re
import signal
import stat
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol

import pyarrow as pa

import cclq
from cclq.cards import card_table, find_card, load_card
from cclq.errors import TraceFileError, UnsupportedFormat, UsageError, show_path
from cclq.formats import xplane
from cclq.formats.base import MAX_RANK_IN_NAME, Prepared, ReadAgain, ReadResult, rank_from_name  # noqa: F401
from cclq.formats.detect import detect, is_candidate, is_sqlite, is_trace_event_json, may_be_trace
from cclq.formats.readers import reader_for
from cclq.formats.reading import ReadOptions
from cclq.formats.source import content_hash
from cclq.schema import INGEST_VERSION, RANKED_TABLES, TABLE_SCHEMAS
from cclq.warehouse import (  # noqa: F401  (FILES_SCHEMA, STATS_SCHEMA re-exported)
    FILES_SCHEMA,
    PARTS_SCHEMA,
    STATS_SCHEMA,
    CatalogState,
    Warehouse,
    is_disk_full,
)
from cclq.writer import DataFileWriter, rewrite_rank

_TRACE_ID_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]+")
PARSER_DIED = "the parser process died while reading it (out of memory?)"
DISK_FULL = "no space left on device"
# A batch of parsed files is committed once it is this old (or at the end): one snapshot
# per file made a 3,200-file ingest rewrite the catalog 3,200 times.
COMMIT_INTERVAL_S = 1.0


class Reporter(Protocol):
    """How ingest tells the user what it is doing (the CLI draws a progress bar)."""

    def start(self, total_bytes: int, files: int) -> None: ...
    def advance(self, nbytes: int) -> None: ...
    def file_done(self, outcome: FileOutcome) -> None: ...
    def warn(self, message: str) -> None: ...
    def finish(self) -> None: ...


class SilentReporter:
    def start(self, total_bytes: int, files: int) -> None: ...
    def advance(self, nbytes: int) -> None: ...
    def file_done(self, outcome: FileOutcome) -> None: ...
    def warn(self, message: str) -> None: ...
    def finish(self) -> None: ...


@dataclass
class Workload:
    trace: str
    root: Path  # the folder (or the loose file)
    files: list[Path]
    card: Path | None
    is_folder: bool
    # (path, problem) for parts of the folder that could not be read: the files seen are
    # ingested, but nothing is removed as "no longer in the folder" (it may be there)
    errors: list[tuple[Path, str]] = field(default_factory=list)
    failure: str | None = None  # the whole workload fails (a trace id clash in this run)
    # files that go to another trace than ``trace`` (see ``_split_formats``)
    file_traces: dict[Path, str] = field(default_factory=dict)

    def trace_of(self, path: Path) -> str:
        return self.file_traces.get(path, self.trace)

    @property
    def traces(self) -> set[str]:
        """Every trace id this workload's files go to."""
        return {self.trace, *self.file_traces.values()}


NSYS_SIBLING = "+nsys"


def _split_formats(w: Workload) -> None:
    """A folder with both Kineto/Chrome JSON traces and Nsight Systems exports holds two
    profiles of one run (CCL-Bench's ``metric_source.traces: [nsys, json]``). They go to
    two traces, ``<id>`` and ``<id>+nsys``: in one, rank 0 would be claimed twice and
    every kernel counted twice. (Execution traces and result files fill other tables
    and stay with ``<id>``.)"""
    sqlite = [p for p in w.files if is_sqlite(str(p))]
    if sqlite and any(is_trace_event_json(str(p)) for p in w.files if p not in sqlite):
        w.file_traces = {p: w.trace + NSYS_SIBLING for p in sqlite}


@dataclass
class FileTask:
    path: Path
    trace: str
    relpath: str
    file_id: str
    size: int
    mtime_ns: int
    previous: dict | None  # its catalog row, when it came from this same place


@dataclass
class FileOutcome:
    path: str  # the file; for a workload that failed as a whole, its folder
    trace: str
    status: str  # ingested | unchanged | skipped | failed | removed
    message: str = ""
    rank: int | None = None
    format: str = ""
    events: int = 0
    dropped: int = 0
    size_bytes: int = 0
    seconds: float = 0.0
    detail: str | None = None  # a traceback, for errors cclq did not foresee (--debug)


@dataclass
class IngestReport:
    warehouse: Path
    outcomes: list[FileOutcome] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    compacted: list[Any] = field(default_factory=list)  # cclq.compaction.Compaction of the traces compacted

    @property
    def failed(self) -> list[FileOutcome]:
        return [o for o in self.outcomes if o.status == "failed"]


class DiskFullError(TraceFileError):
    """The warehouse's disk is full: this file fails, and the run stops cleanly."""


# --------------------------------------------------------------------------- plan
def trace_id_for(name: str) -> str:
    """A path-safe trace id: the folder name, or a loose file's stem."""
    return _TRACE_ID_UNSAFE.sub("_", name).strip("._") or "trace"


def _loose_file_trace_id(path: Path) -> str:
    name = path.name
    for suffix in (".gz", ".json", ".trace", ".pt", ".sqlite"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    return trace_id_for(name)


def _is_regular_or_broken(path: Path) -> bool:
    """Whether a file found in a folder may be read: a regular file, or a link that
    leads nowhere (which then fails alone with "cannot read"). A FIFO, socket or device
    is passed by: reading a FIFO would block the ingest forever."""
    try:
        return stat.S_ISREG(path.stat().st_mode)
    except OSError:
        return True


def _walk_files(folder: Path) -> tuple[list[Path], list[tuple[Path, str]]]:
    """The candidate files under ``folder``, and the folders that could not be read."""
    files: list[Path] = []
    errors: list[tuple[Path, str]] = []

    def unreadable(e: OSError) -> None:
        errors.append((Path(e.filename or folder), f"cannot read folder: {e.strerror or e}"))

    for dirpath, dirnames, filenames in os.walk(folder, onerror=unreadable):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            p = Path(dirpath) / name
            if is_candidate(str(p)) and _is_regular_or_broken(p):
                files.append(p)
    return files, errors


def _is_workload_folder(folder: Path) -> bool:
    """A folder with a card or a file that may be a trace in it, or only files (raises
    OSError if unreadable). Result files beside workload folders (``cclq record``'s CSV
    of every run) do not make their folder a workload."""
    if find_card(folder) is not None:
        return True
    entries = list(folder.iterdir())
    if any(p.is_file() and may_be_trace(str(p)) for p in entries):
        return True
    subfolders = any(p.is_dir() and not p.name.startswith(".") for p in entries)
    return not subfolders and any(p.is_file() and is_candidate(str(p)) for p in entries)


def _folder_workload(folder: Path) -> Workload:
    files, errors = _walk_files(folder)
    w = Workload(trace_id_for(folder.name), folder, files, find_card(folder), True, errors)
    _split_formats(w)
    return w


def plan_inputs(inputs: Iterable[str | Path]) -> list[Workload]:
    """The workloads the inputs name. A path that does not exist is a usage error; a
    folder that cannot be read, or a second workload whose name maps to a trace id that
    another input of this run already has, is a workload that fails alone."""
    workloads: list[Workload] = []
    for raw in inputs:
        path = Path(raw).expanduser()
        if not path.exists() and not path.is_symlink():
            raise UsageError(f"{show_path(raw)}: no such file or directory")
        path = path.resolve()
        if not path.is_dir():  # a file; one that is not regular fails alone in ingest()
            workloads.append(Workload(_loose_file_trace_id(path), path, [path], None, False))
            continue
        try:
            is_workload = _is_workload_folder(path)
            folders = [path] if is_workload else sorted(
                p for p in path.iterdir() if p.is_dir() and not p.name.startswith(".")
            )
        except OSError as e:
            workloads.append(Workload(trace_id_for(path.name), path, [], None, True,
                                      failure=f"{show_path(path)}: cannot read folder: {e.strerror or e}"))
            continue
        for folder in folders:
            try:
                workloads.append(_folder_workload(folder))
            except OSError as e:
                workloads.append(Workload(trace_id_for(folder.name), folder, [], None, True,
                                          failure=f"{show_path(folder)}: cannot read folder: {e.strerror or e}"))
    seen: dict[str, Path] = {}
    for w in workloads:
        if w.failure:
            continue
        first = seen.setdefault(w.trace, w.root)
        if first != w.root:
            w.failure = (f"{show_path(w.root)}: its trace id {w.trace!r} is already taken by {show_path(first)} "
                         "in this run (both names map to it); rename one of them")
    return workloads


def _card_warning(w: Workload) -> list[str]:
    """One warning for a card with template problems (``cclq cards check`` lists them)."""
    from cclq.card_check import check_card_file

    problems = check_card_file(w.card) if w.card is not None else []
    if not problems:
        return []
    first = problems[0]
    return [f"{show_path(w.card)}: {len(problems)} card problem(s), first {first.field}: {first.problem} "
            f"(`cclq cards check {show_path(w.root)}` lists them)"]


def _file_id(trace: str, relpath: str) -> str:
    return hashlib.blake2b(f"{trace}/{relpath}".encode(), digest_size=8).hexdigest()


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

    @property
    def ranks(self) -> list[int]:
        return sorted({rank for _table, rank, _tmp, _rows in self.parts} or {self.rank})

    def discard(self) -> None:
        for _table, _rank, tmp, _rows in self.parts:
            Path(tmp).unlink(missing_ok=True)


class _TableSink:
    """Writes a reader's batches of one table to temp data files: one file, or one per
    rank when the reader's file holds several (its batches then lead with ``rank``)."""

    def __init__(self, table: str, tmp_dir: str, file_id: str, trace: str, rank: int, multi_rank: bool) -> None:
        self.table = table
        self.multi_rank = multi_rank
        self._new = lambda r: DataFileWriter(
            Path(tmp_dir) / f"{file_id}.{os.getpid()}.{time.monotonic_ns()}.{table}.{r}.parquet",
            trace, r, TABLE_SCHEMAS[table])
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


_progress_queue: Any = None  # set in worker processes by _init_worker
_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


def _init_worker(progress_queue: Any, lock_fd: int | None, parent_pid: int) -> None:
    """Runs first in every parser process (forked from the ingest process).

    A worker must never outlive a killed ingest while holding the warehouse lock, or
    the next ingest waits forever. The fork copied the descriptor that holds the lock,
    and a flock lasts until the last descriptor of its open file description is
    closed: closing this copy (never ``flock(LOCK_UN)``, which would unlock the parent
    too) leaves the lock to the parent alone. On Linux the worker also asks to be sent
    SIGTERM when its parent dies, so no orphan keeps parsing.
    """
    global _progress_queue
    _progress_queue = progress_queue
    if lock_fd is not None:
        try:
            os.close(lock_fd)
        except OSError:
            pass
    _die_with_parent(parent_pid)


def _die_with_parent(parent_pid: int) -> None:
    """Linux only: SIGTERM this process when the thread that forked it exits.

    The pool forks its workers from the thread running ``ingest`` (ProcessPoolExecutor
    with fork starts every worker in ``submit``), which lives as long as the ingest.
    """
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
    except (OSError, AttributeError):  # no libc prctl: the closed lock fd still protects
        return
    if os.getppid() != parent_pid:  # the parent died before the request was made
        os._exit(1)


def _identity(path: str) -> tuple[int, int, int, int]:
    """What changes when a file is rewritten: (device, inode, size, mtime)."""
    st = os.stat(path)
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def parse_file(path: str, file_id: str, tmp_dir: str, trace: str, options: ReadOptions = ReadOptions()
               ) -> ParsedFile | TraceFileError:
    """Parses one file into temp Parquet files. Runs in a worker process.

    A file rewritten while it is read (its size, mtime or inode moved between the start
    and the end of the read) would mix two versions: it is read once more, then fails.
    ``options`` chooses the JSON reader and the bounds a file must keep.
    """
    started = time.perf_counter()
    for _attempt in range(2):
        try:
            before = _identity(path)
        except OSError as e:
            return TraceFileError(path, f"cannot read: {e.strerror or e}")
        parsed = _parse_once(path, file_id, tmp_dir, trace, options)
        if isinstance(parsed, TraceFileError):
            return parsed
        try:
            unchanged = _identity(path) == before
        except OSError:
            unchanged = False
        if unchanged:
            parsed.seconds = time.perf_counter() - started
            return parsed
        parsed.discard()
    return TraceFileError(path, "changed while it was being read (twice); ingest it again once it is written")


def _parse_once(path: str, file_id: str, tmp_dir: str, trace: str, options: ReadOptions
                ) -> ParsedFile | TraceFileError:
    writers: list[_TableSink] = []
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
            _local_progress(step)
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
        for attempt in range(3):  # the fast reader's helpers give up, then the fast reader
            writers[:] = [_TableSink(table, tmp_dir, file_id, trace, rank, prepared.ranks is not None)
                          for table in reader.tables]
            sinks = {w.table: w.write for w in writers}
            try:
                result = reader.read(read_path, detected, prepared, file_id, sinks, progress)
                break
            except ReadAgain as e:
                discard_all()
                if attempt == 2:
                    raise
                again.append(str(e))
        for note in again:
            if note:
                result.notes[note] += 1
        for w in writers:
            w.close()
        digest = result.content_hash if converted is None and result.content_hash else content_hash(path)
    except TraceFileError as e:
        discard_all()
        return e
    except MemoryError:
        discard_all()
        return TraceFileError(path, "out of memory while parsing")
    except Exception as e:  # the file boundary: whatever went wrong, this file fails alone
        discard_all()
        if is_disk_full(e):
            return DiskFullError(path, DISK_FULL)
        return TraceFileError(path, f"unexpected error while reading it ({type(e).__name__}: {e}); "
                                    "this is a bug in cclq, --debug shows where",
                              detail=traceback.format_exc())
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
    parts = [(w.table, r, str(f.path), f.rows) for w in writers for r, f in sorted(w.writers.items())]
    return ParsedFile(
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
        distributed_info=_json_or_none(info),
        device_properties=_json_or_none(result.metadata.get("deviceProperties")),
        decompressed_bytes=result.decompressed_bytes,
        base_time_ns=result.base_time_ns,
        ts_min_ns=result.ts_min_ns,
        ts_max_ns=result.ts_max_ns,
        content_hash=digest,
        seconds=0.0,
        warnings=warnings,
    )


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


def _json_or_none(value: Any) -> str | None:
    return None if value is None else json.dumps(value, default=str)


_local_progress_fn: Any = None


def _local_progress(n: int) -> None:
    if _local_progress_fn is not None:
        _local_progress_fn(n)


# ------------------------------------------------------------------------- commit
def _files_row(task: FileTask, parsed: ParsedFile) -> dict:
    dropped = sum(parsed.drops.values())
    return {
        "file_id": task.file_id,
        "trace": task.trace,
        "rank": parsed.rank,
        "path": str(task.path),
        "relpath": task.relpath,
        "size_bytes": task.size,
        "mtime_ns": task.mtime_ns,
        "content_hash": parsed.content_hash,
        "format": parsed.flavor,
        "parser": parsed.parser,
        "ingest_version": INGEST_VERSION,
        "cclq_version": cclq.__version__,
        "rank_source": parsed.rank_source,
        "world_size": parsed.world_size,
        "events_read": parsed.events_read,
        "events_written": parsed.events_written,
        "events_dropped": dropped,
        "drop_reasons": json.dumps(_by_reason(parsed.drops), sort_keys=True) if parsed.drops else None,
        "decompressed_bytes": parsed.decompressed_bytes,
        "base_time_ns": parsed.base_time_ns,
        "ts_min_ns": parsed.ts_min_ns,
        "ts_max_ns": parsed.ts_max_ns,
        "distributed_info": parsed.distributed_info,
        "device_properties": parsed.device_properties,
        "ingested_at": datetime.now(timezone.utc),
        "ingest_seconds": parsed.seconds,
    }


def _by_reason(drops: dict[tuple[str, str], int]) -> dict[str, int]:
    out: dict[str, int] = {}
    for (reason, _ph), n in drops.items():
        out[reason] = out.get(reason, 0) + n
    return out


def _stats_rows(task: FileTask, parsed: ParsedFile) -> list[dict]:
    base = {"file_id": task.file_id, "trace": task.trace, "rank": parsed.rank}
    return [
        {**base, "stat": reason, "ph": ph, "dropped": True, "count": n} for (reason, ph), n in sorted(parsed.drops.items())
    ] + [
        {**base, "stat": note, "ph": None, "dropped": False, "count": n} for note, n in sorted(parsed.notes.items())
    ]


def _check_rows(rows: list[dict], schema: pa.Schema) -> None:
    """Raises now, for this file alone, what would otherwise fail a whole batch's commit
    (a value that does not fit its catalog column)."""
    pa.Table.from_pylist(rows, schema=schema)


def _unchanged(task: FileTask, force: bool, checksum: bool) -> bool:
    prev = task.previous
    if force or prev is None or prev.get("ingest_version") != INGEST_VERSION:
        return False
    if prev["size_bytes"] != task.size:
        return False
    if prev["mtime_ns"] == task.mtime_ns and not checksum:
        return True
    try:
        return prev["content_hash"] == content_hash(str(task.path))
    except OSError:
        return False  # parse_file reports why it cannot be read


def ingest(
    inputs: Iterable[str | Path],
    warehouse: Warehouse,
    jobs: int | None = None,
    force: bool = False,
    reporter: Reporter | None = None,
    checksum: bool = False,
    options: ReadOptions = ReadOptions(),
    dask: str | None = None,
) -> IngestReport:
    """Ingests every workload under ``inputs``; see the module docstring.

    ``force`` re-ingests unchanged files, and lets a workload replace a trace of the
    same id that was ingested from another place. ``checksum`` compares content hashes
    instead of trusting an unchanged size and mtime (rsync's ``--checksum``). ``options``
    chooses the JSON reader and the bounds a file must keep (``cclq.formats.reading``).
    ``dask`` parses on a Dask cluster instead of local processes: ``local[:N]``, a
    scheduler address or a scheduler file (``cclq.distributed``); everything else stays here.
    """
    if dask is not None:
        from cclq.distributed import parse_cluster

        parse_cluster(dask)  # a bad --dask (or no Dask installed) fails before anything is done
    reporter = reporter or SilentReporter()
    workloads = plan_inputs(inputs)
    report = IngestReport(warehouse.root)
    with warehouse.lock():
        warehouse.clean_tmp()
        warehouse.collect_garbage()  # what a killed run renamed into place but never committed
        committer = _Committer(warehouse, warehouse.read_state(), report)
        tasks = committer.plan(workloads, force)
        committer.flush()  # files that left their folders, new cards: before any parse
        todo: list[FileTask] = []
        rankless: dict[str, list[str]] = {}  # trace -> files that state no rank (unchanged ones)
        for task in tasks:
            if _unchanged(task, force, checksum):
                report.outcomes.append(FileOutcome(str(task.path), task.trace, "unchanged", rank=task.previous["rank"],
                                                   size_bytes=task.size))
                if task.previous.get("rank_source") == "default":
                    rankless.setdefault(task.trace, []).append(str(task.path))
            else:
                todo.append(task)
        reporter.start(sum(t.size for t in todo), len(todo))
        results = _run_parsers(todo, warehouse, jobs, reporter, options, dask)
        done = 0
        try:
            for item in results:
                if item is not None:
                    task, parsed = item
                    done += 1
                    if isinstance(parsed, ParsedFile) and parsed.rank_source == "default":
                        committer.rankless.append((task, parsed))  # ranked after the files that state theirs
                        continue
                    reporter.file_done(committer.stage(task, parsed))
                if committer.due():
                    committer.flush()
                if committer.stopped:
                    break
        finally:
            results.close()  # a stopped run: no new parses
        for task in todo[done:]:
            report.outcomes.append(FileOutcome(str(task.path), task.trace, "failed",
                                               f"{show_path(task.path)}: not ingested: {committer.stopped}",
                                               size_bytes=task.size))
        for task, outcome in committer.stage_rankless():
            reporter.file_done(outcome)
            if outcome.status == "ingested":
                rankless.setdefault(task.trace, []).append(f"{show_path(task.path)}: no rank in the file and none "
                                                           f"in its name; guessed rank {outcome.rank}")
        committer.flush()
        reporter.finish()
        if not committer.stopped:
            report.compacted = _compact_small_files(warehouse, committer, report, jobs or os.cpu_count() or 1)
        # A guessed rank is noise for a workload of one file (rank 0 is the obvious
        # choice); with two or more, say which rank each got.
        for lines in rankless.values():
            if len(lines) > 1:
                report.warnings.extend(line for line in lines if "guessed rank" in line)
        warehouse.collect_garbage()
        warehouse.clean_tmp()  # what a dead parser process left behind
    for w in report.warnings:
        reporter.warn(w)
    return report


def _compact_small_files(warehouse: Warehouse, committer: _Committer, report: IngestReport,
                         jobs: int) -> list[Any]:
    """Compacts the traces this ingest wrote whose files are many and small (see
    cclq/compaction.py) in ``jobs`` processes, as one more commit; if that fails, the
    traces stay as ingested."""
    from cclq import compaction

    touched = {o.trace for o in report.outcomes if o.status == "ingested"}
    groups = compaction.plan(committer.committed, touched) if touched else {}
    if not groups:
        return []
    state = _copy(committer.committed)
    try:
        moves, done = compaction.rewrite(warehouse, state, groups, jobs=jobs)
        warehouse.commit(state, moves)
    except Exception as e:  # noqa: BLE001 - an optimisation: the ingest itself succeeded
        report.warnings.append(f"compacting small files did not work ({type(e).__name__}: {e}); "
                               "`cclq compact` tries again")
        return []
    committer.committed = state
    return done


def _held_elsewhere(w: Workload, files: dict[str, dict]) -> list[dict]:
    """Catalog rows of ``w``'s trace id that came from another place than ``w.root``."""
    def mine(row: dict) -> bool:
        if w.is_folder:
            return row["path"] == str(w.root / row["relpath"])
        return row["path"] == str(w.root)

    return [row for row in files.values() if row["trace"] in w.traces and not mine(row)]


def _clash_message(w: Workload, rows: list[dict]) -> str:
    row = rows[0]
    path, relpath = Path(row["path"]), Path(row["relpath"])
    root = path.parents[len(relpath.parts) - 1]  # the folder the relpath is relative to
    if trace_id_for(root.name) != w.trace:  # not a workload folder: a loose file
        root = path
    what = "folder" if w.is_folder else "file"
    return (f"{show_path(w.root)}: trace id {w.trace!r} is already taken by files from {show_path(root)}; "
            f"rename the {what}, or pass --force to replace it")


@dataclass
class _Staged:
    """A parsed file waiting in the batch for its commit."""

    task: FileTask
    outcome: FileOutcome
    apply: Callable[[CatalogState], None]  # puts its rows (and deferred changes) into a state
    moves: list[tuple[Path, str]]  # (temp data file, its path in the warehouse)


class _Committer:
    """Turns parse results into catalog snapshots, in path order (main process).

    ``committed`` is the current snapshot's state; ``working`` adds the batch staged
    since. Checks (rank claims) run against ``working``. ``flush`` publishes ``working``
    as a new snapshot; if that fails, each staged file is committed on its own, so a file
    that cannot be written fails alone. A full disk stops the run (``stopped``).
    """

    def __init__(self, warehouse: Warehouse, state: CatalogState, report: IngestReport) -> None:
        self.warehouse = warehouse
        self.report = report
        self.committed = state
        self.working = _copy(state)
        self.batch: list[_Staged] = []
        self.batch_started: float | None = None
        self.dirty = False  # changes outside the batch (removals, cards) wait in ``working``
        self.stopped: str | None = None
        # trace -> changes that wait for the workload's first committed file (--force)
        self.deferred: dict[str, Callable[[CatalogState], None]] = {}
        self._claims_index: dict[tuple[str, int], str] | None = None
        self.rankless: list[tuple[FileTask, ParsedFile]] = []  # parsed files that state no rank

    # -- planning -------------------------------------------------------------
    def plan(self, workloads: list[Workload], force: bool) -> list[FileTask]:
        """The files to look at; applies removals and card changes to ``working``."""
        tasks: list[FileTask] = []
        files = self.working.files
        for w in workloads:
            if w.failure:
                self.report.outcomes.append(FileOutcome(str(w.root), w.trace, "failed", w.failure))
                continue
            for where, problem in w.errors:
                self.report.outcomes.append(FileOutcome(str(where), w.trace, "failed", f"{show_path(where)}: {problem}"))
            elsewhere = _held_elsewhere(w, files)
            if elsewhere and not force:  # never replace another place's trace silently
                self.report.outcomes.append(FileOutcome(str(w.root), w.trace, "failed", _clash_message(w, elsewhere)))
                continue
            card_change = self._card_change(w) if (w.is_folder or elsewhere) else None
            if elsewhere:  # --force: the old files and card go with the first new file
                replacement = self._replacement(w, elsewhere, card_change)
                self.deferred.update(dict.fromkeys(w.traces, replacement))
            elif card_change is not None:
                card_change(self.working)
                self.dirty = True
            seen_ids: set[str] = set()
            for path in w.files:
                relpath = str(path.relative_to(w.root)) if w.is_folder else path.name
                trace = w.trace_of(path)
                fid = _file_id(trace, relpath)
                seen_ids.add(fid)
                try:
                    st = path.stat()
                except OSError as e:
                    self.report.outcomes.append(FileOutcome(str(path), w.trace, "failed",
                                                            f"{show_path(path)}: cannot read: {e.strerror or e}"))
                    continue
                if not stat.S_ISREG(st.st_mode):  # reading a FIFO would never end
                    self.report.outcomes.append(FileOutcome(
                        str(path), w.trace, "failed", f"{show_path(path)}: not a regular file (a pipe, socket or device)"))
                    continue
                previous = files.get(fid)
                if previous is not None and previous["path"] != str(path):
                    previous = None  # held by the place --force replaces: read it anew
                tasks.append(FileTask(path, trace, relpath, fid, st.st_size, st.st_mtime_ns, previous))
            # files that left the folder leave the warehouse; not when part of the folder
            # could not be read (they may be in there), nor for a --force replacement
            if w.is_folder and not w.errors and not elsewhere:
                for fid, row in list(files.items()):
                    if row["trace"] in w.traces and fid not in seen_ids:
                        self.working.drop_file(fid)
                        self._claims_index = None
                        self.dirty = True
                        self.report.outcomes.append(FileOutcome(row["path"], row["trace"], "removed",
                                                                "no longer in the folder"))
        return tasks

    def _card_change(self, w: Workload) -> Callable[[CatalogState], None] | None:
        """How the workload's card changes the catalog (None: it does not). The card is
        every trace's the workload fills (``<id>`` and ``<id>+nsys``)."""
        if not w.is_folder:
            return lambda state: state.cards.pop(w.trace, None)  # a loose file replacing a folder
        if w.card is None:
            new: dict[str, dict | None] = dict.fromkeys(w.traces)
        else:
            try:
                card = load_card(w.card)
                new = {t: card_table(t, card).to_pylist()[0] for t in w.traces}
            except ValueError as e:  # a bad card: warn, keep what the warehouse has
                self.report.warnings.append(f"{show_path(w.card)}: {e}; card ignored")
                return None
            self.report.warnings.extend(_card_warning(w))  # a card that breaks the template is kept, and said so
        if all(self.working.cards.get(t) == row for t, row in new.items()):
            return None

        def change(state: CatalogState) -> None:
            for t, row in new.items():
                if row is None:
                    state.cards.pop(t, None)
                else:
                    state.cards[t] = row
        return change

    def _replacement(self, w: Workload, elsewhere: list[dict],
                     card_change: Callable[[CatalogState], None] | None) -> Callable[[CatalogState], None]:
        ids = [row["file_id"] for row in elsewhere]
        removed = [FileOutcome(row["path"], row["trace"], "removed", f"replaced by {show_path(w.root)} (--force)")
                   for row in elsewhere]

        def apply(state: CatalogState) -> None:
            for fid in ids:
                state.drop_file(fid)
            if card_change is not None:
                card_change(state)
            if removed:  # reported once, with the first file that lands
                self.report.outcomes.extend(removed)
                removed.clear()
        return apply

    # -- staging --------------------------------------------------------------
    def stage_rankless(self) -> list[tuple[FileTask, FileOutcome]]:
        """Stages the files that state no rank, once every file that states one is staged:
        each gets the rank it had before if that is still free, else the lowest free rank
        of its trace (its data is rewritten with it when that is not the parse's 0)."""
        staged = []
        for task, parsed in sorted(self.rankless, key=lambda item: str(item[0].path)):
            if self.stopped:
                parsed.discard()
                outcome = FileOutcome(str(task.path), task.trace, "failed",
                                      f"{show_path(task.path)}: not ingested: {self.stopped}", size_bytes=task.size)
                self.report.outcomes.append(outcome)
                staged.append((task, outcome))
                continue
            tables = {table for table, _r, _tmp, _n in parsed.parts}
            taken = {r for (t, r, table), fid in self._claims().items()
                     if t == task.trace and table in tables and fid != task.file_id}
            rank = task.previous["rank"] if task.previous and task.previous["rank"] not in taken else 0
            while rank in taken:
                rank += 1
            if rank != parsed.rank:
                try:
                    parsed.parts = [(t, rank, str(rewrite_rank(Path(tmp), rank)), n) for t, _r, tmp, n in parsed.parts]
                    parsed.rank = rank
                except Exception as e:
                    parsed = DiskFullError(str(task.path), DISK_FULL) if is_disk_full(e) else TraceFileError(
                        str(task.path), f"could not be written to the warehouse: {type(e).__name__}: {e}")
            staged.append((task, self.stage(task, parsed)))
        self.rankless.clear()
        return staged

    def stage(self, task: FileTask, parsed: ParsedFile | TraceFileError) -> FileOutcome:
        """Checks one parse result and adds it to the batch (or fails it)."""
        path = str(task.path)
        outcome = self._check(task, parsed)
        if outcome is not None:
            if isinstance(parsed, ParsedFile):
                parsed.discard()
            self.report.outcomes.append(outcome)
            return outcome
        assert isinstance(parsed, ParsedFile)
        self.report.warnings.extend(parsed.warnings)
        try:
            row = _files_row(task, parsed)
            moves: list[tuple[Path, str]] = []
            parts: list[dict] = []
            for table, rank, tmp, rows in parsed.parts:
                rel = self.warehouse.new_data_path(table, task.trace, task.file_id)
                moves.append((Path(tmp), rel))
                parts.append({"file_id": task.file_id, "trace": task.trace, "rank": rank,
                              "table_name": table, "path": rel, "rows": rows})
            stats = _stats_rows(task, parsed)
            _check_rows([row], FILES_SCHEMA)
            _check_rows(parts, PARTS_SCHEMA)
            _check_rows(stats, STATS_SCHEMA)
        except Exception as e:  # this file fails; the run and the other files go on
            parsed.discard()
            outcome = FileOutcome(path, task.trace, "failed",
                                  f"{show_path(path)}: could not be written to the warehouse: {type(e).__name__}: {e}",
                                  size_bytes=task.size)
            self.report.outcomes.append(outcome)
            return outcome
        deferred = self.deferred.pop(task.trace, None)

        def apply(state: CatalogState) -> None:
            if deferred is not None:
                deferred(state)
            state.put_file(row, parts, stats)

        apply(self.working)
        self._claims_index = None if deferred is not None else self._claims_index
        if self._claims_index is not None:
            for key in [k for k, v in self._claims_index.items() if v == task.file_id]:
                del self._claims_index[key]
            self._claims_index.update({(p["trace"], p["rank"], p["table_name"]): task.file_id for p in parts
                                       if p["table_name"] in RANKED_TABLES})
        outcome = FileOutcome(path, task.trace, "ingested", rank=parsed.rank, format=parsed.flavor,
                              events=parsed.events_written, dropped=sum(parsed.drops.values()),
                              size_bytes=task.size, seconds=parsed.seconds)
        self.report.outcomes.append(outcome)
        self.batch.append(_Staged(task, outcome, apply, moves))
        if self.batch_started is None:
            self.batch_started = time.monotonic()
        return outcome

    def _check(self, task: FileTask, parsed: ParsedFile | TraceFileError) -> FileOutcome | None:
        """The outcome of a result that cannot be staged; None when it can."""
        path = str(task.path)
        if isinstance(parsed, UnsupportedFormat):
            return FileOutcome(path, task.trace, "skipped", parsed.problem, size_bytes=task.size)
        if isinstance(parsed, TraceFileError):
            if isinstance(parsed, DiskFullError):
                self.stopped = "the disk is full (no space left on device)"
            return FileOutcome(path, task.trace, "failed", parsed.message, size_bytes=task.size, detail=parsed.detail)
        claims = self._claims()
        for table, rank, _tmp, _rows in parsed.parts:
            if table not in RANKED_TABLES:
                continue
            holder = claims.get((task.trace, rank, table))
            if holder is not None and holder != task.file_id:
                return FileOutcome(
                    path, task.trace, "failed",
                    f"{show_path(path)}: rank {rank} of trace {task.trace!r} is already taken by "
                    f"{show_path(self.working.files[holder]['path'])}",
                    size_bytes=task.size,
                )
        return None

    def _claims(self) -> dict[tuple[str, int, str], str]:
        """(trace, rank, table) -> the file holding it, in ``working`` (built again after it
        is replaced). A rank is claimed per table: a rank's Kineto trace and its execution
        trace fill different tables."""
        if self._claims_index is None:
            self._claims_index = {(p["trace"], p["rank"], p["table_name"]): fid
                                  for fid, parts in self.working.parts.items() for p in parts
                                  if p["table_name"] in RANKED_TABLES}
        return self._claims_index

    # -- committing -----------------------------------------------------------
    def due(self) -> bool:
        return self.batch_started is not None and time.monotonic() - self.batch_started >= COMMIT_INTERVAL_S

    def flush(self) -> None:
        """Commits the batch (and any pending removals or cards) as one snapshot."""
        if not self.batch and not self.dirty:
            return
        batch, self.batch, self.batch_started = self.batch, [], None
        try:
            self.warehouse.commit(self.working, [m for s in batch for m in s.moves])
        except Exception as e:
            if is_disk_full(e) or not batch:
                self._fail(batch, e)
                self.working = _copy(self.committed)
                self._claims_index = None
                if is_disk_full(e):
                    self.stopped = "the disk is full (no space left on device)"
                elif self.dirty:
                    raise  # removals or cards that cannot be written: nothing else can be either
                return
            self._commit_one_by_one(batch)
            return
        self.committed = _copy(self.working)
        self.dirty = False

    def _commit_one_by_one(self, batch: list[_Staged]) -> None:
        """After a failed batch: each file on its own, so that only what cannot be written fails."""
        base = _copy(self.committed)  # with the batch's removals and cards, if any
        self.working = _copy(self.committed)
        for staged in batch:
            trial = _copy(base)
            staged.apply(trial)
            try:
                self.warehouse.commit(trial, [m for m in staged.moves if m[0].exists()])
            except Exception as e:
                self._fail([staged], e)
                if is_disk_full(e):
                    self.stopped = "the disk is full (no space left on device)"
                continue
            base = trial
        self.committed = _copy(base)
        self.working = _copy(base)
        self._claims_index = None
        self.dirty = False

    def _fail(self, batch: list[_Staged], e: Exception) -> None:
        problem = DISK_FULL if is_disk_full(e) else f"{type(e).__name__}: {e}"
        for staged in batch:
            staged.outcome.status = "failed"
            staged.outcome.message = f"{show_path(staged.task.path)}: could not be written to the warehouse: {problem}"
            for tmp, _rel in staged.moves:
                tmp.unlink(missing_ok=True)  # a data file already renamed into place is garbage


def _copy(state: CatalogState) -> CatalogState:
    """A state that can be edited without touching ``state`` (rows are never edited in
    place, only replaced, so the row dicts are shared)."""
    return CatalogState(dict(state.files), dict(state.parts), dict(state.stats), dict(state.cards))


def _run_parsers(
    todo: list[FileTask], warehouse: Warehouse, jobs: int | None, reporter: Reporter,
    options: ReadOptions = ReadOptions(), dask: str | None = None,
) -> Iterator[tuple[FileTask, ParsedFile | TraceFileError] | None]:
    """Yields (task, result) in task order; parses in processes when jobs > 1 (one file
    alone is read here, its chunks built by ``jobs`` helper processes), on a Dask cluster
    when ``dask`` names one (``cclq.distributed``). Yields None when it has waited
    ``COMMIT_INTERVAL_S`` for the next result, so that the caller can commit what it has
    while a big file is still being read.

    A parser process that dies (the OOM killer, kill -9) breaks the whole pool and
    every file it held. Those files are parsed again in a fresh pool, and the ones that
    were being read when it died ("suspects") one at a time, so that a second death
    names the file that causes it: that file fails alone (``PARSER_DIED``). Closing the
    generator cancels the parses that have not started.
    """
    global _local_progress_fn
    if dask is not None:
        from cclq.distributed import parse_on_dask

        yield from parse_on_dask(todo, warehouse, dask, reporter, options)
        return
    requested = jobs or os.cpu_count() or 1
    jobs = min(requested, max(len(todo), 1))
    tmp_dir = str(warehouse.tmp_dir)
    if jobs <= 1:
        if len(todo) == 1 and requested > 1:  # one big file: the fast reader builds chunks on every core
            options = replace(options, helpers=requested)
        _local_progress_fn = reporter.advance
        try:
            for task in todo:
                yield task, parse_file(str(task.path), task.file_id, tmp_dir, task.trace, options)
        finally:
            _local_progress_fn = None
        return
    import multiprocessing as mp
    from concurrent.futures import TimeoutError as FutureTimeout

    ctx = mp.get_context("fork")
    ready: dict[int, ParsedFile | TraceFileError] = {}  # by index in todo, until its turn
    deaths: dict[int, int] = {}  # index -> parser deaths while it was being read
    next_out = 0
    while next_out < len(todo):
        pending = [i for i in range(next_out, len(todo)) if i not in ready]
        suspects = [i for i in pending if deaths.get(i)]
        group = suspects or pending
        workers = 1 if suspects else min(jobs, len(group))
        # Largest files first, so that a big file is not the last to start while the
        # other workers sit idle; results are still committed in path order, which
        # decides which of two files claiming one (trace, rank) is the later one.
        order = sorted(group, key=lambda i: todo[i].size, reverse=True)
        futures: dict[int, Future] = {}
        # a fresh progress queue per pool: a killed worker may have died holding the old one's lock
        with _progress_relay(ctx, reporter) as progress_q, ProcessPoolExecutor(
            max_workers=workers, mp_context=ctx, initializer=_init_worker,
            initargs=(progress_q, warehouse.lock_fd, os.getpid()),
        ) as pool:
            for i in order:
                task = todo[i]
                futures[i] = pool.submit(_parse_in_worker, str(task.path), task.file_id, tmp_dir, task.trace, options)
            try:
                for i in sorted(group):
                    while True:
                        try:
                            ready[i] = futures[i].result(timeout=COMMIT_INTERVAL_S)
                            break
                        except FutureTimeout:
                            yield None
                    while next_out in ready:
                        yield todo[next_out], ready.pop(next_out)
                        next_out += 1
                continue
            except BrokenProcessPool:
                pass
            except GeneratorExit:
                pool.shutdown(wait=True, cancel_futures=True)
                raise
        # The pool broke; leaving the with-block waited for its processes to end.
        lost = [i for i in order if i >= next_out and i not in ready]
        for i in lost:
            f = futures[i]
            if f.done() and not f.cancelled() and f.exception() is None:  # finished before the break
                ready[i] = f.result()
        lost = [i for i in lost if i not in ready]
        # A marker left behind shows a file being read when the pool broke; without any
        # (a worker died outside a parse), the files the workers would have been reading.
        in_flight = [i for i in lost if _inflight_marker(tmp_dir, todo[i].file_id).exists()] or lost[:workers]
        for i in in_flight:
            deaths[i] = deaths.get(i, 0) + 1
            if deaths[i] >= 2:
                ready[i] = TraceFileError(str(todo[i].path), PARSER_DIED)
        for i in lost:  # the marker and the half-written events of the lost parses
            for leftover in Path(tmp_dir).glob(f"{todo[i].file_id}.*"):
                leftover.unlink(missing_ok=True)
        while next_out in ready:
            yield todo[next_out], ready.pop(next_out)
            next_out += 1


@contextmanager
def _progress_relay(ctx: Any, reporter: Reporter) -> Iterator[Any]:
    """A queue that parser processes put byte counts on, and a thread in this process
    that passes them to ``reporter`` (drained to the end when the block exits)."""
    progress_q = ctx.SimpleQueue()
    stop = threading.Event()

    def drain() -> None:
        while not stop.is_set() or not progress_q.empty():
            try:
                if progress_q.empty():
                    time.sleep(0.05)
                    continue
                reporter.advance(progress_q.get())
            except (EOFError, OSError, queue.Empty):
                return

    drainer = threading.Thread(target=drain, daemon=True)
    drainer.start()
    try:
        yield progress_q
    finally:
        stop.set()
        drainer.join(timeout=2)


def _inflight_marker(tmp_dir: str, file_id: str) -> Path:
    return Path(tmp_dir) / f"{file_id}.parsing"


def _parse_in_worker(path: str, file_id: str, tmp_dir: str, trace: str, options: ReadOptions
                     ) -> ParsedFile | TraceFileError:
    """``parse_file`` in a pool process, leaving a marker file while it runs: if the
    process dies, the marker tells ``_run_parsers`` which file it was reading."""
    marker = _inflight_marker(tmp_dir, file_id)
    marker.touch()
    try:
        return parse_file(path, file_id, tmp_dir, trace, options)
    finally:
        marker.unlink(missing_ok=True)
