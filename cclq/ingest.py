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
   writes the catalog row. A bad file fails alone; the others go on.
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import re
import threading
import time
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol

import ijson
import pyarrow as pa

import cclq
from cclq.cards import CARD_FILE, card_table, load_card
from cclq.errors import TraceFileError, UnsupportedFormat, UsageError
from cclq.formats import xplane
from cclq.formats.chrome import NeedExactDecimals, needs_exact_decimals, read_chrome_json
from cclq.formats.detect import detect, is_candidate
from cclq.formats.source import Source, content_hash
from cclq.schema import INGEST_VERSION
from cclq.warehouse import Warehouse
from cclq.writer import EventFileWriter

FILES_SCHEMA = pa.schema(
    [
        ("file_id", pa.string()),
        ("trace", pa.string()),
        ("rank", pa.int32()),
        ("path", pa.string()),
        ("relpath", pa.string()),
        ("size_bytes", pa.int64()),
        ("mtime_ns", pa.int64()),
        ("content_hash", pa.string()),
        ("format", pa.string()),
        ("parser", pa.string()),
        ("ingest_version", pa.int32()),
        ("cclq_version", pa.string()),
        ("rank_source", pa.string()),
        ("world_size", pa.int32()),
        ("events_read", pa.int64()),
        ("events_written", pa.int64()),
        ("events_dropped", pa.int64()),
        ("drop_reasons", pa.string()),  # JSON {"<reason>": count}; by phase in ingest_stats
        ("decompressed_bytes", pa.int64()),
        ("base_time_ns", pa.int64()),
        ("ts_min_ns", pa.int64()),
        ("ts_max_ns", pa.int64()),
        ("distributed_info", pa.string()),
        ("device_properties", pa.string()),
        ("ingested_at", pa.timestamp("us", tz="UTC")),
        ("ingest_seconds", pa.float64()),
    ]
)

STATS_SCHEMA = pa.schema(
    [
        ("file_id", pa.string()),
        ("trace", pa.string()),
        ("rank", pa.int32()),
        ("stat", pa.string()),  # the reason, e.g. "E without B"
        ("ph", pa.string()),
        ("dropped", pa.bool_()),  # False: the event was kept but is worth knowing
        ("count", pa.int64()),
    ]
)

_TRACE_ID_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]+")
_RANK_IN_NAME = (
    re.compile(r"(?:rank|worker)[-_]?(\d+)", re.IGNORECASE),
    re.compile(r"[-_](\d+)(?:\.pt\.trace)?\.json(?:\.gz)?$", re.IGNORECASE),
)


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
    path: str
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


def _walk_files(folder: Path) -> list[Path]:
    files: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            p = Path(dirpath) / name
            if is_candidate(str(p)):
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
        if path.is_file():
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


_progress_queue: Any = None  # set in worker processes by _init_worker


def _init_worker(progress_queue: Any) -> None:
    global _progress_queue
    _progress_queue = progress_queue


def rank_from_name(name: str) -> int | None:
    for pattern in _RANK_IN_NAME:
        m = pattern.search(name)
        if m:
            return int(m.group(1))
    return None


def parse_file(path: str, file_id: str, tmp_dir: str) -> ParsedFile | TraceFileError:
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
        exact = needs_exact_decimals(detected.head)
        try:
            result, digest = _read(read_path, detected, file_id, writer, exact, progress)
        except NeedExactDecimals:
            # a float could not carry a timestamp exactly: start over with Decimals
            writer.discard()
            writer = EventFileWriter(tmp)
            result, digest = _read(read_path, detected, file_id, writer, True, progress)
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
        if isinstance(info.get("rank"), int):
            rank, rank_source = info["rank"], "distributedInfo"
        if isinstance(info.get("world_size"), int):
            world_size = info["world_size"]
    if rank is None:
        rank = rank_from_name(Path(path).name)
        rank_source = "file name"
    if rank is None:
        rank, rank_source = 0, "default"
        warnings.append(f"{path}: no distributedInfo.rank and no rank in the file name; using rank 0")
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
    )


def _read(path: str, detected: Any, file_id: str, writer: EventFileWriter, exact: bool,
          progress: Any) -> tuple[Any, str]:
    with Source(path, progress) as source:
        result = read_chrome_json(source, detected, file_id, writer.write, exact=exact)
        return result, source.finish_hash()


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
        "parser": f"chrome_json/ijson-{ijson.backend}",
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
) -> IngestReport:
    """Ingests every workload under ``inputs``; see the module docstring."""
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
        for w in workloads:
            if w.is_folder:
                try:
                    cards[w.trace] = None if w.card is None else card_table(w.trace, load_card(w.card))
                except ValueError as e:  # a bad card: warn, keep what the warehouse has
                    report.warnings.append(f"{w.card}: {e}; card ignored")
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
                tasks.append(FileTask(path, w.trace, relpath, fid, st.st_size, st.st_mtime_ns, catalog.get(fid)))
            if w.is_folder:  # files that left the folder leave the warehouse
                for fid, row in list(catalog.items()):
                    if row["trace"] == w.trace and fid not in seen_ids:
                        warehouse.remove_file(row)
                        del catalog[fid]
                        removed_ids.add(fid)
                        report.outcomes.append(FileOutcome(row["path"], w.trace, "removed", "no longer in the folder"))
        warehouse.write_cards(cards)

        todo: list[FileTask] = []
        for task in tasks:
            if _unchanged(task, force):
                report.outcomes.append(FileOutcome(str(task.path), task.trace, "unchanged", rank=task.previous["rank"],
                                                   size_bytes=task.size))
            else:
                todo.append(task)
        reporter.start(sum(t.size for t in todo), len(todo))
        claims = {(row["trace"], row["rank"]): fid for fid, row in catalog.items()}
        for task, parsed in _run_parsers(todo, warehouse, jobs, reporter):
            outcome = _commit(task, parsed, warehouse, claims, report)
            report.outcomes.append(outcome)
            reporter.file_done(outcome)
        reporter.finish()
        if any(o.status in ("ingested", "removed") for o in report.outcomes):
            warehouse.clear_cache()  # stale entries could never be hit again
        current = {fid: row for fid, row in warehouse.read_catalog().items() if fid not in removed_ids}
        warehouse.compact_catalog(current, force=bool(removed_ids))
    for w in report.warnings:
        reporter.warn(w)
    return report


def _commit(
    task: FileTask,
    parsed: ParsedFile | TraceFileError,
    warehouse: Warehouse,
    claims: dict[tuple[str, int], str],
    report: IngestReport,
) -> FileOutcome:
    path = str(task.path)
    if isinstance(parsed, UnsupportedFormat):
        return FileOutcome(path, task.trace, "skipped", parsed.problem, size_bytes=task.size)
    if isinstance(parsed, TraceFileError):
        return FileOutcome(path, task.trace, "failed", parsed.message, size_bytes=task.size)
    report.warnings.extend(parsed.warnings)
    holder = claims.get((task.trace, parsed.rank))
    if holder is not None and holder != task.file_id:
        Path(parsed.tmp_events).unlink(missing_ok=True)
        other = next((o.path for o in report.outcomes if o.trace == task.trace and o.rank == parsed.rank), holder)
        return FileOutcome(
            path, task.trace, "failed",
            f"{path}: rank {parsed.rank} of trace {task.trace!r} is already taken by {other}",
            size_bytes=task.size,
        )
    if task.previous is not None:
        claims.pop((task.previous["trace"], task.previous["rank"]), None)
    claims[(task.trace, parsed.rank)] = task.file_id
    warehouse.commit_file(Path(parsed.tmp_events), _files_row(task, parsed), _stats_table(task, parsed), task.previous)
    return FileOutcome(
        path, task.trace, "ingested", rank=parsed.rank, format=parsed.flavor, events=parsed.events_written,
        dropped=sum(parsed.drops.values()), size_bytes=task.size, seconds=parsed.seconds,
    )


def _run_parsers(
    todo: list[FileTask], warehouse: Warehouse, jobs: int | None, reporter: Reporter
) -> Iterable[tuple[FileTask, ParsedFile | TraceFileError]]:
    """Yields (task, result) in task order; parses in processes when jobs > 1."""
    global _local_progress_fn
    jobs = min(jobs or os.cpu_count() or 1, max(len(todo), 1))
    tmp_dir = str(warehouse.tmp_dir)
    if jobs <= 1:
        _local_progress_fn = reporter.advance
        try:
            for task in todo:
                yield task, parse_file(str(task.path), task.file_id, tmp_dir)
        finally:
            _local_progress_fn = None
        return
    import multiprocessing as mp

    ctx = mp.get_context("fork")
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
        with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx, initializer=_init_worker,
                                 initargs=(progress_q,)) as pool:
            # Largest files first, so that a big file is not the last to start while the
            # other workers sit idle; results are still committed in path order, which
            # decides which of two files claiming one (trace, rank) is the later one.
            futures = {id(t): pool.submit(parse_file, str(t.path), t.file_id, tmp_dir)
                       for t in sorted(todo, key=lambda t: t.size, reverse=True)}
            for task in todo:
                yield task, futures[id(task)].result()
    finally:
        stop.set()
        drainer.join(timeout=2)
