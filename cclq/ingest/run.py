"""``cclq ingest``: from folders of trace files to the Parquet warehouse.

1. ``plan_inputs`` turns the command-line paths into workloads (trace id, files,
   card). A folder holding trace files (or a card) is one workload named after the
   folder; a folder holding only folders is a collection of workloads; a loose file is
   a workload of its own named after the file. A folder that cannot be read, or a
   second folder whose name maps to a trace id already planned, fails alone.
2. Files whose size and mtime (or, failing that, content hash; always the hash with
   ``checksum``) match the catalog are skipped: re-ingesting unchanged input is a no-op.
3. The rest are parsed, in parallel processes with ``jobs > 1`` (or on a Dask cluster:
   ``cclq.ingest.dask``), each by the reader of its format (``cclq.formats``) into temp
   Parquet files. The reader says the file's rank before its first row is written:
   every row carries its trace and rank. Consecutive small files of one trace are parsed
   by one task into one temp file per table (``parse_group``; ``_units`` forms the groups),
   so that a trace of small files needs no compaction, and is committed as one unit.
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

import os
import queue
import threading
import time
from collections.abc import Generator, Iterable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from cclq.errors import TraceFileError, show_path
from cclq.formats.base import (
    ReadOptions,
)
from cclq.ingest.commit import COMMIT_INTERVAL_S, Committer, copy_state, is_unchanged
from cclq.ingest.parse import (
    GROUP_BYTES,
    PARSER_DIED,
    SMALL_FILE_BYTES,
    FileTask,
    ParsedFile,
    inflight_marker,
    init_worker,
    parse_file,
    parse_group,
    parse_group_in_worker,
    parse_in_worker,
)
from cclq.ingest.plan import plan_inputs
from cclq.ingest.refusals import refusal, remember, still_refused
from cclq.ingest.report import FileOutcome, IngestInterrupted, IngestReport, Reporter, SilentReporter
from cclq.store.warehouse import (
    Warehouse,
)

# A batch of parsed files is committed once it is this old (or at the end): one snapshot


def is_up_to_date(
    inputs: Iterable[str | Path], warehouse: Warehouse, distinct_ids: bool = False, traces: dict[str, str] | None = None
) -> bool:
    """Whether an ingest of ``inputs`` would change nothing: every file unchanged (size and
    mtime as the catalog has them), none gone, no card changed, no folder unreadable.
    Takes no lock and writes nothing: for a reader of a read-only warehouse.
    ``distinct_ids`` and ``traces`` as in ``ingest`` (``traces`` is filled in)."""
    if not warehouse.exists():
        return False
    workloads = plan_inputs(inputs, warehouse.root)
    if any(w.failure or w.errors for w in workloads):
        return False
    report = IngestReport(str(warehouse))  # the folder, or the URL
    committer = Committer(warehouse, warehouse.read_state(), report)
    tasks = committer.plan(workloads, force=False, distinct=distinct_ids)
    tasks, passed = still_refused(tasks, warehouse, committer.working, False, False)
    report.outcomes += passed
    if traces is not None:
        traces.update(report.traces)
    if committer.dirty or committer.deferred or report.outcomes and any(o.status != "skipped" for o in report.outcomes):
        return False
    return all(is_unchanged(task, False, False) for task in tasks)


def ingest(
    inputs: Iterable[str | Path],
    warehouse: Warehouse,
    jobs: int | None = None,
    force: bool = False,
    reporter: Reporter | None = None,
    checksum: bool = False,
    options: ReadOptions = ReadOptions(),
    dask: str | None = None,
    distinct_ids: bool = False,
) -> IngestReport:
    """Ingests every workload under ``inputs``; see the module docstring.

    ``force`` re-ingests unchanged files, and lets a workload replace a trace of the
    same id that was ingested from another place. ``checksum`` compares content hashes
    instead of trusting an unchanged size and mtime (rsync's ``--checksum``). ``options``
    chooses the JSON reader and the bounds a file must keep (``cclq.formats.chrome.reader``).
    ``dask`` parses on a Dask cluster instead of local processes: ``local[:N]``, a
    scheduler address or a scheduler file (``cclq.ingest.dask``); everything else stays here.
    ``distinct_ids``: a workload whose name's trace id is held by files from another place
    gets its own id (name plus a digest of its path; ``report.traces`` says which) instead
    of failing; ``python -m cclq.main`` asks for it, since it must answer for its folder.
    """
    if dask is not None:
        from cclq.ingest.dask import parse_cluster

        parse_cluster(dask)  # a bad --dask (or no Dask installed) fails before anything is done
    reporter = reporter or SilentReporter()
    workloads = plan_inputs(inputs, warehouse.root)
    report = IngestReport(str(warehouse))  # the folder, or the URL
    with warehouse.lock():  # which sweeps what a killed writer left (``Warehouse.lock``)
        committer = Committer(warehouse, warehouse.read_state(), report)
        tasks = committer.plan(workloads, force, distinct_ids)
        tasks, passed = still_refused(tasks, warehouse, committer.working, force, checksum)
        report.outcomes += passed
        todo: list[FileTask] = []
        rankless: dict[str, list[str]] = {}  # trace -> files that state no rank (unchanged ones)
        for task in tasks:
            if task.previous is not None and is_unchanged(task, force, checksum):
                report.outcomes.append(
                    FileOutcome(
                        str(task.path), task.trace, "unchanged", rank=task.previous["rank"], size_bytes=task.size
                    )
                )
                if task.previous.get("rank_source") == "default":
                    rankless.setdefault(task.trace, []).append(str(task.path))
            else:
                todo.append(task)
        reporter.start(sum(t.size for t in todo), len(todo))
        results = _run_parsers(todo, warehouse, jobs, reporter, options, dask)
        if dask is not None and todo:
            # the cluster's first item: its workers checked (a refusal raises here), nothing
            # parsed yet; so a refused ingest commits nothing, not even the cards
            next(results, None)
        committer.flush()  # files that left their folders, new cards: before any parse
        done = 0
        try:
            for item in results:
                if item is not None:
                    done += len(item)
                    ranked = []
                    for task, parsed in item:
                        if isinstance(parsed, ParsedFile) and parsed.rank_source == "default":
                            committer.rankless.append((task, parsed))  # ranked after the files that state theirs
                        else:
                            ranked.append((task, parsed))
                    for outcome in committer.stage_results(ranked):
                        reporter.file_done(outcome)
                if committer.due():
                    committer.flush()
                if committer.stopped:
                    break
        except KeyboardInterrupt:
            # Ctrl-C: commit what was parsed (readers see a whole snapshot either way),
            # then say what was committed and that a re-run finishes the rest
            results.close()
            try:
                committer.flush()
            except Exception:  # noqa: BLE001 - nothing more to do on the way out
                pass
            staged = {o.path for o in report.outcomes}
            not_done = [
                FileOutcome(str(t.path), t.trace, "failed", f"{show_path(t.path)}: not ingested: interrupted")
                for t in todo
                if str(t.path) not in staged
            ]
            raise IngestInterrupted(report, not_done) from None
        finally:
            results.close()  # a stopped run: no new parses
        for task in todo[done:]:
            report.outcomes.append(
                FileOutcome(
                    str(task.path),
                    task.trace,
                    "failed",
                    f"{show_path(task.path)}: not ingested: {committer.stopped}",
                    size_bytes=task.size,
                )
            )
        for task, outcome in committer.stage_rankless():
            reporter.file_done(outcome)
            if outcome.status == "ingested":
                rankless.setdefault(task.trace, []).append(
                    f"{show_path(task.path)}: no rank in the file and none in its name; guessed rank {outcome.rank}"
                )
        committer.flush()
        remember(
            warehouse,
            {t.file_id: refusal(t, h, held, why) for t, h, held, why in committer.refused},
            set(committer.committed.files),
        )
        reporter.finish()
        if not committer.stopped:
            report.compacted = _compact_small_files(warehouse, committer, report, jobs or os.cpu_count() or 1)
        # A guessed rank is noise for a workload of one file (rank 0 is the obvious
        # choice); with two or more, say which rank each got.
        for lines in rankless.values():
            if len(lines) > 1:
                report.warnings.extend(line for line in lines if "guessed rank" in line)
        report.warnings.extend(
            far_apart_warnings(
                committer.committed.files.values(), {o.trace for o in report.outcomes if o.status == "ingested"}
            )
        )
        warehouse.collect_garbage()
        warehouse.clean_tmp()  # what a dead parser process left behind
    for w in report.warnings:
        reporter.warn(w)
    return report


FAR_APART_NS = 86_400 * 10**9  # file clocks a day apart: not one run


def far_apart_warnings(files: Iterable[dict], traces: set[str]) -> list[str]:
    """Warnings for traces whose files start more than a day apart (two runs in one
    folder, e.g. two Nsight Systems exports recorded months apart), with the evidence:
    the earliest and the latest file and their start times. `cclq traces` flags them."""
    by_trace: dict[str, list[tuple[int, str]]] = {}
    for row in files:
        if row["trace"] in traces and row.get("ts_min_ns") is not None:
            by_trace.setdefault(row["trace"], []).append((row["ts_min_ns"], row["path"]))
    out = []
    for trace, starts in sorted(by_trace.items()):
        (first_ns, first), (last_ns, last) = min(starts), max(starts)
        if last_ns - first_ns > FAR_APART_NS:
            days = (last_ns - first_ns) / 86_400e9
            out.append(
                f"trace {trace!r}: its files start {days:.1f} days apart ({show_path(first)} at "
                f"{_utc(first_ns)}, {show_path(last)} at {_utc(last_ns)}); they are probably not one run: "
                "put each run in a folder of its own"
            )
    return out


def _utc(ns: int) -> str:
    from datetime import datetime, timezone

    return datetime.fromtimestamp(ns / 1e9, tz=timezone.utc).isoformat(timespec="seconds")


def _compact_small_files(warehouse: Warehouse, committer: Committer, report: IngestReport, jobs: int) -> list[Any]:
    """Compacts the traces this ingest wrote whose files are many and small (see
    cclq/store/compaction.py) in ``jobs`` processes, as one more commit; if that fails, the
    traces stay as ingested."""
    from cclq.store import compaction

    touched = {o.trace for o in report.outcomes if o.status == "ingested"}
    groups = compaction.plan(committer.committed, touched) if touched else {}
    if not groups:
        return []
    state = copy_state(committer.committed)
    try:
        moves, done = compaction.rewrite(warehouse, state, groups, jobs=jobs)
        warehouse.commit(state, moves)
    except Exception as e:  # noqa: BLE001 - an optimisation: the ingest itself succeeded
        report.warnings.append(
            f"compacting small files did not work ({type(e).__name__}: {e}); `cclq compact` tries again"
        )
        return []
    committer.committed = state
    return done


Results = list[tuple[FileTask, ParsedFile | TraceFileError]]


def _units(todo: list[FileTask], indices: Iterable[int], jobs: int) -> list[list[int]]:
    """The parse tasks: runs of consecutive small files of one trace (up to
    ``GROUP_BYTES``), each parsed by one ``parse_group``, and every other file alone.
    With fewer units than ``jobs``, the largest groups are halved until every worker has
    one (a single workload of a few small files still uses every core)."""
    units: list[list[int]] = []
    held = 0
    for i in sorted(indices):
        task = todo[i]
        small = task.size <= SMALL_FILE_BYTES
        if (
            small
            and units
            and units[-1][-1] == i - 1
            and todo[i - 1].trace == task.trace
            and todo[i - 1].size <= SMALL_FILE_BYTES
            and held + task.size <= GROUP_BYTES
        ):
            units[-1].append(i)
            held += task.size
        else:
            units.append([i])
            held = task.size
    while units and len(units) < jobs:
        largest = max(units, key=len)
        if len(largest) < 2:
            break
        at = units.index(largest)
        units[at : at + 1] = [largest[: len(largest) // 2], largest[len(largest) // 2 :]]
    return units


def _run_parsers(
    todo: list[FileTask],
    warehouse: Warehouse,
    jobs: int | None,
    reporter: Reporter,
    options: ReadOptions = ReadOptions(),
    dask: str | None = None,
) -> Generator[Results | None, None, None]:
    """Yields lists of (task, result), in task order (the files of a group of small files,
    ``_units``, always in one list: they share data files); parses in processes when
    jobs > 1 (one file alone is read here, its chunks built by ``jobs`` helper processes),
    on a Dask cluster when ``dask`` names one (``cclq.ingest.dask``; one file at a time).
    Yields None when it has waited ``COMMIT_INTERVAL_S`` for the next result, so that the
    caller can commit what it has while a big file is still being read.

    A parser process that dies (the OOM killer, kill -9) breaks the whole pool and
    every file it held. Those files are parsed again in a fresh pool, and the ones that
    were being read when it died ("suspects") one at a time, so that a second death
    names the file that causes it: that file fails alone (``PARSER_DIED``). Closing the
    generator cancels the parses that have not started.
    """
    if dask is not None:
        from cclq.ingest.dask import parse_on_dask

        for item in parse_on_dask(todo, warehouse, dask, reporter, options):
            yield None if item is None else [item]
        return
    requested = jobs or os.cpu_count() or 1
    jobs = min(requested, max(len(todo), 1))
    tmp_dir = str(warehouse.tmp_dir)
    if jobs <= 1:
        if len(todo) == 1 and requested > 1:  # one big file: the fast reader builds chunks on every core
            options = replace(options, threads=requested)
        for unit in _units(todo, range(len(todo)), 1):
            tasks = [todo[i] for i in unit]
            if len(tasks) == 1:
                task = tasks[0]
                yield [(task, parse_file(str(task.path), task.file_id, tmp_dir, task.trace, options, reporter.advance))]
            else:
                yield list(
                    zip(
                        tasks,
                        parse_group(
                            [(str(t.path), t.file_id, t.trace) for t in tasks], tmp_dir, options, reporter.advance
                        ),
                    )
                )
        return
    # here, not above: a small folder is parsed in this process (TraceAnalysis), and the
    # process pool's imports (multiprocessing, tempfile, subprocess) were 9 ms of its start
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures import TimeoutError as FutureTimeout
    from concurrent.futures.process import BrokenProcessPool

    ctx = mp.get_context("fork")
    ready: dict[int, ParsedFile | TraceFileError] = {}  # by index in todo, until its turn
    deaths: dict[int, int] = {}  # index -> parser deaths while it was being read
    next_out = 0
    while next_out < len(todo):
        pending = [i for i in range(next_out, len(todo)) if i not in ready]
        suspects = [i for i in pending if deaths.get(i)]
        group = suspects or pending
        workers = 1 if suspects else min(jobs, len(group))
        # Largest first, so that a big file is not the last to start while the other
        # workers sit idle; results are still committed in path order, which decides
        # which of two files claiming one (trace, rank) is the later one.
        units = [[i] for i in group] if suspects else _units(todo, group, workers)
        order = sorted(units, key=lambda u: sum(todo[i].size for i in u), reverse=True)
        futures: dict[int, Future[Any]] = {}  # file index -> its unit's parse
        unit_of: dict[int, list[int]] = {}
        # a fresh progress queue per pool: a killed worker may have died holding the old one's lock
        with (
            _progress_relay(ctx, reporter) as progress_q,
            ProcessPoolExecutor(
                max_workers=workers,
                mp_context=ctx,
                initializer=init_worker,
                initargs=(progress_q, warehouse.lock_fd, os.getpid()),
            ) as pool,
        ):
            for unit in order:
                tasks = [todo[i] for i in unit]
                future: Future[Any]
                if len(tasks) == 1:
                    task = tasks[0]
                    future = pool.submit(parse_in_worker, str(task.path), task.file_id, tmp_dir, task.trace, options)
                else:
                    future = pool.submit(
                        parse_group_in_worker, [(str(t.path), t.file_id, t.trace) for t in tasks], tmp_dir, options
                    )
                for i in unit:
                    futures[i], unit_of[i] = future, unit
            try:
                for i in sorted(group):
                    if i in ready:  # came with its group
                        continue
                    while True:
                        try:
                            result = futures[i].result(timeout=COMMIT_INTERVAL_S)
                            break
                        except FutureTimeout:
                            yield None
                    _take(ready, unit_of[i], result)
                    out = []
                    while next_out in ready:
                        out.append((todo[next_out], ready.pop(next_out)))
                        next_out += 1
                    if out:
                        yield out
                continue
            except BrokenProcessPool:
                pass
            except GeneratorExit:
                pool.shutdown(wait=True, cancel_futures=True)
                raise
        # The pool broke; leaving the with-block waited for its processes to end.
        lost = [i for i in group if i >= next_out and i not in ready]
        for i in lost:
            f = futures[i]
            if i not in ready and f.done() and not f.cancelled() and f.exception() is None:  # finished before the break
                _take(ready, unit_of[i], f.result())
        lost = [i for i in lost if i not in ready]
        # A marker left behind shows a file being read when the pool broke; without any
        # (a worker died outside a parse), the files the workers would have been reading.
        in_flight = [i for i in lost if inflight_marker(tmp_dir, todo[i].file_id).exists()] or lost[:workers]
        for i in in_flight:
            deaths[i] = deaths.get(i, 0) + 1
            if deaths[i] >= 2:
                ready[i] = TraceFileError(str(todo[i].path), PARSER_DIED)
        for i in lost:  # the marker and the half-written events of the lost parses
            for leftover in Path(tmp_dir).glob(f"{todo[i].file_id}.*"):
                leftover.unlink(missing_ok=True)
        out = []
        while next_out in ready:
            out.append((todo[next_out], ready.pop(next_out)))
            next_out += 1
        if out:
            yield out


def _take(
    ready: dict[int, ParsedFile | TraceFileError],
    unit: list[int],
    result: ParsedFile | TraceFileError | list[ParsedFile | TraceFileError],
) -> None:
    """A unit's result(s) into ``ready``, by file index."""
    results = result if isinstance(result, list) else [result]
    for i, r in zip(unit, results):
        ready[i] = r


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
