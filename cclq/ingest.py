"""``cclq ingest``: from folders of trace files to the Parquet warehouse.

1. ``plan_inputs`` turns the command-line paths into workloads (trace id, files,
   card). A folder holding trace files (or a card) is one workload named after the
   folder; a folder holding only folders is a collection of workloads; a loose file
   is a workload of its own named after the file.
2. Files whose size and mtime (or, failing that, content hash) match the catalog
   are skipped: re-ingesting unchanged input is a no-op.
3. The rest are parsed, in parallel processes with ``jobs > 1``, each into a temp
   Parquet file. Parsing never touches the catalog.
4. The main process commits the results in path order: it checks that no other
   file already holds the same (trace, rank), renames the events into place and
   writes the catalog row. A bad file fails alone; the others go on, also when a
   parser process dies (see ``_run_parsers``) or a commit fails.

A trace id belongs to one place: a workload whose id the catalog holds for files
from another folder (or another loose file) fails instead of replacing them, unless
``force`` says to replace them.
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
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol

import pyarrow as pa

import cclq
from cclq.cards import CARD_FILE, card_table, load_card
from cclq.errors import TraceFileError, UnsupportedFormat, UsageError
from cclq.formats import xplane
from cclq.formats.reading import ReadAgain, ReadOptions, parser_name, read_trace_file
from cclq.formats.detect import detect, is_candidate
from cclq.formats.source import content_hash
from cclq.schema import INGEST_VERSION
from cclq.warehouse import FILES_SCHEMA, STATS_SCHEMA, Warehouse  # noqa: F401  (re-exported)
from cclq.writer import EventFileWriter

_TRACE_ID_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]+")
# A number in a file name is a rank only below this bound: bigger ones are timestamps
# (``trace_1694128201545.json``) or pids, and ranks are int32 in the catalog.
MAX_RANK_IN_NAME = 1_000_000
# Tried in order; the first rule that finds a plausible number wins.
_RANK_IN_NAME = (
    re.compile(r"(?:rank|worker)[-_]?(\d+)", re.IGNORECASE),
    re.compile(r"[-_](\d+)(?:\.pt\.trace)?\.json(?:\.gz)?$", re.IGNORECASE),
    # xprof writes one file per host: t1v-n-abc-w-1.trace.json.gz, host1.xplane.pb. The
    # lookahead leaves out "<ip>_<port>.xplane.pb", whose number is a port, not a rank.
    re.compile(r"^(?!\d+\.\d+\.\d+\.\d+_\d+\.)(?:.*[-_A-Za-z])(\d+)\.(?:trace\.json(?:\.gz)?|xplane\.pb)$",
               re.IGNORECASE),
)
PARSER_DIED = "the parser process died while reading it (out of memory?)"


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


@dataclass
class FileTask:
    path: Path
    trace: str
    relpath: str
    file_id: str
    size: int
    mtime_ns: int
    previous: dict | None


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


@dataclass
class IngestReport:
    warehouse: Path
    outcomes: list[FileOutcome] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def failed(self) -> list[FileOutcome]:
        return [o for o in self.outcomes if o.status == "failed"]


# --------------------------------------------------------------------------- plan
def trace_id_for(name: str) -> str:
    """A partition-safe trace id: the folder name, or a loose file's stem."""
    safe = _TRACE_ID_UNSAFE.sub("_", name).strip("._") or "trace"
    return safe


def _loose_file_trace_id(path: Path) -> str:
    name = path.name
    for suffix in (".gz", ".json", ".trace", ".pt"):
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


def _walk_files(folder: Path) -> list[Path]:
    files: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            p = Path(dirpath) / name
            if is_candidate(str(p)) and _is_regular_or_broken(p):
                files.append(p)
    return files


def _is_workload_folder(folder: Path) -> bool:
    if (folder / CARD_FILE).is_file():
        return True
    return any(p.is_file() and is_candidate(str(p)) for p in folder.iterdir())


def plan_inputs(inputs: Iterable[str | Path]) -> list[Workload]:
    workloads: list[Workload] = []
    for raw in inputs:
        path = Path(raw).expanduser()
        if not path.exists():
            raise UsageError(f"{raw}: no such file or directory")
        path = path.resolve()
        if not path.is_dir():  # a file; one that is not regular fails alone in ingest()
            workloads.append(Workload(_loose_file_trace_id(path), path, [path], None, False))
            continue
        folders = [path] if _is_workload_folder(path) else sorted(
            p for p in path.iterdir() if p.is_dir() and not p.name.startswith(".")
        )
        for folder in folders:
            card = folder / CARD_FILE
            workloads.append(
                Workload(trace_id_for(folder.name), folder, _walk_files(folder), card if card.is_file() else None, True)
            )
    seen: dict[str, Path] = {}
    for w in workloads:
        if w.trace in seen and seen[w.trace] != w.root:
            raise UsageError(f"two inputs map to the same trace id {w.trace!r}: {seen[w.trace]} and {w.root}")
        seen[w.trace] = w.root
    return workloads


def _file_id(trace: str, relpath: str) -> str:
    return hashlib.blake2b(f"{trace}/{relpath}".encode(), digest_size=8).hexdigest()


# -------------------------------------------------------------------------- parse
@dataclass
class ParsedFile:
    """What a worker hands back to the committing process (picklable)."""

    tmp_events: str
    rank: int
    rank_source: str
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
    parser: str = ""  # files.parser: the reader that produced the rows


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


def rank_from_name(name: str) -> int | None:
    """The rank a file name gives: the first rule with a plausible number wins."""
    for pattern in _RANK_IN_NAME:
        for m in pattern.finditer(name):
            rank = int(m.group(1))
            if rank < MAX_RANK_IN_NAME:
                return rank
    return None


def parse_file(path: str, file_id: str, tmp_dir: str, options: ReadOptions = ReadOptions()
               ) -> ParsedFile | TraceFileError:
    """Parses one file into a temp Parquet file. Runs in a worker process."""
    started = time.perf_counter()
    tmp = Path(tmp_dir) / f"{file_id}.{os.getpid()}.{time.monotonic_ns()}.parquet"
    writer = EventFileWriter(tmp)
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

    converted: str | None = None  # the trace-viewer JSON xprof made from an xplane.pb
    try:
        detected = detect(path)
        read_path = path
        if detected.kind == "xplane":
            converted = read_path = xplane.convert(path, tmp_dir)
            detected = detect(read_path)
            scale = budget / max(os.path.getsize(read_path), 1)
        again: list[str] = []
        while True:
            try:
                result, digest = read_trace_file(read_path, detected, file_id, writer.write, options, progress)
                break
            except ReadAgain as e:  # the fast reader gave the file up: read it again from the start
                writer.discard()
                writer = EventFileWriter(tmp)
                options = e.options
                again.append(e.note)
        for note in again:
            result.notes[note] += 1
        writer.close()
        if converted is not None:
            digest = content_hash(path)  # the catalog identifies the xplane.pb, not the JSON
    except TraceFileError as e:
        writer.discard()
        return e
    except MemoryError:
        writer.discard()
        return TraceFileError(path, "out of memory while parsing")
    except BaseException:
        writer.discard()
        raise
    finally:
        if pending and _progress_queue is not None:
            _progress_queue.put(pending)
        if converted is not None:
            xplane.cleanup(converted)

    warnings: list[str] = []
    notes = dict(result.notes)
    if converted is not None:
        notes["xplane.pb converted to trace-viewer JSON with xprof"] = 1
    elif detected.flavor == "xprof" and result.events_read >= xplane.TRACE_VIEWER_MAX_EVENTS:
        warnings.append(xplane.truncation_warning(path, result.events_read))
    info = result.metadata.get("distributedInfo")
    rank: int | None = None
    world_size: int | None = None
    if isinstance(info, dict):
        if _is_int32(info.get("rank")) and info["rank"] >= 0:
            rank, rank_source = info["rank"], "distributedInfo"
        if _is_int32(info.get("world_size")):
            world_size = info["world_size"]
    if rank is None:
        rank = rank_from_name(Path(path).name)
        rank_source = "file name"
    if rank is None:  # ingest() warns when two files of a workload end up here
        rank, rank_source = 0, "default"
    return ParsedFile(
        tmp_events=str(tmp),
        rank=rank,
        rank_source=rank_source,
        flavor=detected.flavor,
        events_read=result.events_read,
        events_written=result.rows_written,
        drops=dict(result.drops),
        notes=notes,
        world_size=world_size,
        distributed_info=json.dumps(info) if info is not None else None,
        device_properties=json.dumps(result.metadata["deviceProperties"])
        if "deviceProperties" in result.metadata
        else None,
        decompressed_bytes=result.decompressed_bytes,
        base_time_ns=result.base_time_ns,
        ts_min_ns=result.ts_min_ns,
        ts_max_ns=result.ts_max_ns,
        content_hash=digest,
        seconds=time.perf_counter() - started,
        warnings=warnings,
        parser=parser_name(result),
    )


def _is_int32(value: Any) -> bool:
    return type(value) is int and -(2**31) <= value < 2**31


_local_progress_fn: Any = None


def _local_progress(n: int) -> None:
    if _local_progress_fn is not None:
        _local_progress_fn(n)


# ------------------------------------------------------------------------- commit
def _files_row(task: FileTask, parsed: ParsedFile) -> pa.Table:
    dropped = sum(parsed.drops.values())
    row = {
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
    return pa.Table.from_pylist([row], schema=FILES_SCHEMA)


def _by_reason(drops: dict[tuple[str, str], int]) -> dict[str, int]:
    out: dict[str, int] = {}
    for (reason, _ph), n in drops.items():
        out[reason] = out.get(reason, 0) + n
    return out


def _stats_table(task: FileTask, parsed: ParsedFile) -> pa.Table:
    rows = [
        {"file_id": task.file_id, "trace": task.trace, "rank": parsed.rank, "stat": reason, "ph": ph,
         "dropped": True, "count": n}
        for (reason, ph), n in sorted(parsed.drops.items())
    ] + [
        {"file_id": task.file_id, "trace": task.trace, "rank": parsed.rank, "stat": note, "ph": None,
         "dropped": False, "count": n}
        for note, n in sorted(parsed.notes.items())
    ]
    return pa.Table.from_pylist(rows, schema=STATS_SCHEMA)


def _unchanged(task: FileTask, force: bool) -> bool:
    prev = task.previous
    if force or prev is None or prev.get("ingest_version") != INGEST_VERSION:
        return False
    if prev["size_bytes"] == task.size and prev["mtime_ns"] == task.mtime_ns:
        return True
    return prev["size_bytes"] == task.size and prev["content_hash"] == content_hash(str(task.path))


def ingest(
    inputs: Iterable[str | Path],
    warehouse: Warehouse,
    jobs: int | None = None,
    force: bool = False,
    reporter: Reporter | None = None,
    options: ReadOptions = ReadOptions(),
) -> IngestReport:
    """Ingests every workload under ``inputs``; see the module docstring.

    ``force`` re-ingests unchanged files, and lets a workload replace a trace of the
    same id that was ingested from another place. ``options`` chooses the reader and
    the bounds a file must keep (``cclq.formats.reading.ReadOptions``).
    """
    reporter = reporter or SilentReporter()
    workloads = plan_inputs(inputs)
    report = IngestReport(warehouse.root)
    with warehouse.lock():
        warehouse.clean_tmp()
        catalog = warehouse.read_catalog()
        warehouse.sweep_orphans(catalog)
        tasks: list[FileTask] = []
        removed_ids: set[str] = set()
        cards: dict[str, pa.Table | None] = {}

        def remove(row: dict, why: str) -> None:
            warehouse.remove_file(row)
            del catalog[row["file_id"]]
            removed_ids.add(row["file_id"])
            report.outcomes.append(FileOutcome(row["path"], row["trace"], "removed", why))

        for w in workloads:
            elsewhere = _held_elsewhere(w, catalog)
            if elsewhere and not force:  # never replace another place's trace silently
                report.outcomes.append(FileOutcome(str(w.root), w.trace, "failed", _clash_message(w, elsewhere)))
                continue
            for row in elsewhere:
                remove(row, f"replaced by {w.root} (--force)")
            if w.is_folder:
                try:
                    cards[w.trace] = None if w.card is None else card_table(w.trace, load_card(w.card))
                except ValueError as e:  # a bad card: warn, keep what the warehouse has
                    report.warnings.append(f"{w.card}: {e}; card ignored")
            elif elsewhere:
                cards[w.trace] = None  # the card of the folder it replaced
            seen_ids: set[str] = set()
            for path in w.files:
                relpath = str(path.relative_to(w.root)) if w.is_folder else path.name
                fid = _file_id(w.trace, relpath)
                seen_ids.add(fid)
                try:
                    st = path.stat()
                except OSError as e:
                    report.outcomes.append(FileOutcome(str(path), w.trace, "failed", f"{path}: cannot read: {e.strerror}"))
                    continue
                if not stat.S_ISREG(st.st_mode):  # reading a FIFO would never end
                    report.outcomes.append(FileOutcome(
                        str(path), w.trace, "failed", f"{path}: not a regular file (a pipe, socket or device)"))
                    continue
                tasks.append(FileTask(path, w.trace, relpath, fid, st.st_size, st.st_mtime_ns, catalog.get(fid)))
            if w.is_folder:  # files that left the folder leave the warehouse
                for fid, row in list(catalog.items()):
                    if row["trace"] == w.trace and fid not in seen_ids:
                        remove(row, "no longer in the folder")
        warehouse.write_cards(cards)

        todo: list[FileTask] = []
        default_rank: dict[str, list[str]] = {}  # trace -> files that got rank 0 for want of one
        for task in tasks:
            if _unchanged(task, force):
                report.outcomes.append(FileOutcome(str(task.path), task.trace, "unchanged", rank=task.previous["rank"],
                                                   size_bytes=task.size))
                if task.previous.get("rank_source") == "default":
                    default_rank.setdefault(task.trace, []).append(str(task.path))
            else:
                todo.append(task)
        reporter.start(sum(t.size for t in todo), len(todo))
        committer = _Committer(warehouse, report, removed_ids,
                               claims={(row["trace"], row["rank"]): fid for fid, row in catalog.items()})
        for task, parsed in _run_parsers(todo, warehouse, jobs, reporter, options):
            outcome = committer.commit(task, parsed)
            report.outcomes.append(outcome)
            reporter.file_done(outcome)
            if isinstance(parsed, ParsedFile) and parsed.rank_source == "default":
                default_rank.setdefault(task.trace, []).append(str(task.path))
        reporter.finish()
        # Rank 0 by default is noise for a workload of one file; with two or more, all
        # but one fail on the rank and this says why.
        for paths in default_rank.values():
            if len(paths) > 1:
                report.warnings.extend(
                    f"{p}: no distributedInfo.rank and no rank in the file name; using rank 0" for p in paths)
        if any(o.status in ("ingested", "removed") for o in report.outcomes):
            warehouse.clear_cache()  # stale entries could never be hit again
        current = {fid: row for fid, row in warehouse.read_catalog().items() if fid not in removed_ids}
        warehouse.compact_catalog(current, force=bool(removed_ids))
        warehouse.clean_tmp()  # what a dead parser process left behind
    for w in report.warnings:
        reporter.warn(w)
    return report


def _held_elsewhere(w: Workload, catalog: dict[str, dict]) -> list[dict]:
    """Catalog rows of ``w``'s trace id that came from another place than ``w.root``."""
    def mine(row: dict) -> bool:
        if w.is_folder:
            return row["path"] == str(w.root / row["relpath"])
        return row["path"] == str(w.root)

    return [row for row in catalog.values() if row["trace"] == w.trace and not mine(row)]


def _clash_message(w: Workload, rows: list[dict]) -> str:
    row = rows[0]
    path, relpath = Path(row["path"]), Path(row["relpath"])
    root = path.parents[len(relpath.parts) - 1]  # the folder the relpath is relative to
    if trace_id_for(root.name) != w.trace:  # not a workload folder: a loose file
        root = path
    what = "folder" if w.is_folder else "file"
    return (f"{w.root}: trace id {w.trace!r} is already taken by files from {root}; "
            f"rename the {what}, or pass --force to replace it")


class _Committer:
    """Makes parsed files visible, one at a time and in path order (main process)."""

    def __init__(self, warehouse: Warehouse, report: IngestReport, removed_ids: set[str],
                 claims: dict[tuple[str, int], str]) -> None:
        self.warehouse = warehouse
        self.report = report
        self.removed_ids = removed_ids  # file ids whose compacted catalog row must go
        self.claims = claims  # (trace, rank) -> the file id holding it

    def commit(self, task: FileTask, parsed: ParsedFile | TraceFileError) -> FileOutcome:
        path = str(task.path)
        if isinstance(parsed, UnsupportedFormat):
            return FileOutcome(path, task.trace, "skipped", parsed.problem, size_bytes=task.size)
        if isinstance(parsed, TraceFileError):
            return FileOutcome(path, task.trace, "failed", parsed.message, size_bytes=task.size)
        self.report.warnings.extend(parsed.warnings)
        holder = self.claims.get((task.trace, parsed.rank))
        if holder is not None and holder != task.file_id:
            Path(parsed.tmp_events).unlink(missing_ok=True)
            other = next((o.path for o in self.report.outcomes if o.trace == task.trace and o.rank == parsed.rank),
                         holder)
            return FileOutcome(
                path, task.trace, "failed",
                f"{path}: rank {parsed.rank} of trace {task.trace!r} is already taken by {other}",
                size_bytes=task.size,
            )
        try:
            self._write(task, parsed)
        except Exception as e:  # this file fails; the run and the other files go on
            return FileOutcome(path, task.trace, "failed",
                               f"{path}: could not be written to the warehouse: {type(e).__name__}: {e}",
                               size_bytes=task.size)
        return FileOutcome(
            path, task.trace, "ingested", rank=parsed.rank, format=parsed.flavor, events=parsed.events_written,
            dropped=sum(parsed.drops.values()), size_bytes=task.size, seconds=parsed.seconds,
        )

    def _write(self, task: FileTask, parsed: ParsedFile) -> None:
        """Commits one file. If its catalog rows cannot be built, nothing is touched (like
        a parse error); if the commit fails half-way, the file is taken out of the
        warehouse entirely (a later run ingests it again). Either way the error is raised."""
        fid, previous = task.file_id, task.previous
        try:
            files_row, stats = _files_row(task, parsed), _stats_table(task, parsed)
        except Exception:
            Path(parsed.tmp_events).unlink(missing_ok=True)
            raise
        try:
            self.warehouse.commit_file(Path(parsed.tmp_events), files_row, stats, previous)
        except Exception:
            partitions = [self.warehouse.partition_file(task.trace, parsed.rank, fid)]
            if previous is not None:
                partitions.append(self.warehouse.partition_file(previous["trace"], previous["rank"], fid))
            self.warehouse.discard_commit(fid, partitions)
            Path(parsed.tmp_events).unlink(missing_ok=True)
            self.removed_ids.add(fid)
            for key in [k for k, v in self.claims.items() if v == fid]:
                del self.claims[key]
            raise
        if previous is not None:
            self.claims.pop((previous["trace"], previous["rank"]), None)
        self.claims[(task.trace, parsed.rank)] = fid
        self.removed_ids.discard(fid)  # replaced (--force) and written again: keep the new row


def _run_parsers(
    todo: list[FileTask], warehouse: Warehouse, jobs: int | None, reporter: Reporter,
    options: ReadOptions = ReadOptions(),
) -> Iterator[tuple[FileTask, ParsedFile | TraceFileError]]:
    """Yields (task, result) in task order; parses in processes when jobs > 1 (one file
    alone is read here, its chunks built by ``jobs`` helper processes).

    A parser process that dies (the OOM killer, kill -9) breaks the whole pool and
    every file it held. Those files are parsed again in a fresh pool, and the ones that
    were being read when it died ("suspects") one at a time, so that a second death
    names the file that causes it: that file fails alone (``PARSER_DIED``).
    """
    global _local_progress_fn
    requested = jobs or os.cpu_count() or 1
    jobs = min(requested, max(len(todo), 1))
    tmp_dir = str(warehouse.tmp_dir)
    if jobs <= 1:
        if len(todo) == 1 and requested > 1:  # one big file: the fast reader builds chunks on every core
            options = replace(options, helpers=requested)
        _local_progress_fn = reporter.advance
        try:
            for task in todo:
                yield task, parse_file(str(task.path), task.file_id, tmp_dir, options)
        finally:
            _local_progress_fn = None
        return
    import multiprocessing as mp

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
                futures[i] = pool.submit(_parse_in_worker, str(todo[i].path), todo[i].file_id, tmp_dir, options)
            try:
                for i in sorted(group):
                    ready[i] = futures[i].result()
                    while next_out in ready:
                        yield todo[next_out], ready.pop(next_out)
                        next_out += 1
                continue
            except BrokenProcessPool:
                pass
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


def _parse_in_worker(path: str, file_id: str, tmp_dir: str, options: ReadOptions) -> ParsedFile | TraceFileError:
    """``parse_file`` in a pool process, leaving a marker file while it runs: if the
    process dies, the marker tells ``_run_parsers`` which file it was reading."""
    marker = _inflight_marker(tmp_dir, file_id)
    marker.touch()
    try:
        return parse_file(path, file_id, tmp_dir, options)
    finally:
        marker.unlink(missing_ok=True)
