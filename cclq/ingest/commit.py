"""The committing side of an ingest: parsed files checked against the catalog (ranks,
trace ids, cards) and committed in batches, each one new catalog snapshot."""

from __future__ import annotations

import hashlib
import json
import shutil
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa

from cclq.cards.load import card_table, load_card
from cclq.errors import TraceFileError, UnsupportedFormat, show_path
from cclq.formats.source import content_hash
from cclq.ingest.parse import DISK_FULL, DiskFullError, FileTask, ParsedFile
from cclq.ingest.plan import Workload, distinct_trace_id, rename_workload, trace_id_for
from cclq.ingest.report import FileOutcome, IngestReport
from cclq.schema import INGEST_VERSION, RANKED_TABLES
from cclq.store.catalog import FILES_SCHEMA, PARTS_SCHEMA, STATS_SCHEMA, CatalogState
from cclq.store.durable import is_disk_full
from cclq.store.warehouse import Warehouse
from cclq.store.writer import keep_input_files, rewrite_rank
from cclq.version import __version__

# A batch of parsed files is committed at least this often (seconds)
COMMIT_INTERVAL_S = 1.0
# ... unless a commit takes longer than 1/COMMIT_COST_RATIO of that: a commit writes the
# whole catalog (a row per input file), so with thousands of small files committed each
# second the commits alone grew with the square of the file count. The batch then waits
# COMMIT_COST_RATIO times the last commit's duration, keeping commits near 5% of the run.
COMMIT_COST_RATIO = 20.0

# why a run stops ingesting after a full disk (``Committer.stopped``)
DISK_FULL_STOP = "the disk is full (no space left on device)"


def _card_warning(w: Workload, card: dict) -> list[str]:
    """One warning for a card with template problems (``cclq cards check`` lists them)."""
    from cclq.cards.check import check_card_file

    if w.card is None:
        return []
    problems = check_card_file(w.card, card)
    if not problems:
        return []
    first = problems[0]
    return [
        f"{show_path(w.card)}: {len(problems)} card problem(s), first {first.field}: {first.problem} "
        f"(`cclq cards check {show_path(w.root)}` lists them)"
    ]


def _file_id(trace: str, relpath: str) -> str:
    return hashlib.blake2b(f"{trace}/{relpath}".encode(), digest_size=8).hexdigest()


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
        "cclq_version": __version__,
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
        {**base, "stat": reason, "ph": ph, "dropped": True, "count": n}
        for (reason, ph), n in sorted(parsed.drops.items())
    ] + [{**base, "stat": note, "ph": None, "dropped": False, "count": n} for note, n in sorted(parsed.notes.items())]


def _check_rows(rows: list[dict], schema: pa.Schema) -> None:
    """Raises now, for this file alone, what would otherwise fail a whole batch's commit
    (a value that does not fit its catalog column)."""
    if rows:
        pa.Table.from_pylist(rows, schema=schema)


def is_unchanged(task: FileTask, force: bool, checksum: bool) -> bool:
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
    return (
        f"{show_path(w.root)}: trace id {w.trace!r} is already taken by files from {show_path(root)}; "
        f"rename the {what}, or pass --force to replace it"
    )


@dataclass
class _Staged:
    """Parsed files waiting in the batch for their commit: one file, or the files of a
    group that share data files (``parse_group``), which are committed or fail together."""

    outcomes: list[FileOutcome]
    apply: Callable[[CatalogState], None]  # puts its rows (and deferred changes) into a state
    moves: list[tuple[Path, str]]  # (temp data file, its path in the warehouse)


class Committer:
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
        self.working = copy_state(state)
        self.batch: list[_Staged] = []
        self.batch_started: float | None = None
        self.dirty = False  # changes outside the batch (removals, cards) wait in ``working``
        self.stopped: str | None = None
        # trace -> changes that wait for the workload's first committed file (--force)
        self.deferred: dict[str, Callable[[CatalogState], None]] = {}
        self._claims_index: dict[tuple[str, int, str], str] | None = None
        self.rankless: list[tuple[FileTask, ParsedFile]] = []  # parsed files that state no rank
        # files refused for a rank another file holds: (task, its content hash, the holder's row, why)
        self.refused: list[tuple[FileTask, str, dict, str]] = []
        self.commit_seconds = 0.0  # how long the last commit took (``due``)

    # -- planning -------------------------------------------------------------
    def plan(self, workloads: list[Workload], force: bool, distinct: bool = False) -> list[FileTask]:
        """The files to look at; applies removals and card changes to ``working``.
        ``distinct``: a workload whose id another place holds takes a distinct id
        (``distinct_trace_id``) instead of failing."""
        tasks: list[FileTask] = []
        files = self.working.files
        for w in workloads:
            if w.failure:
                self.report.outcomes.append(FileOutcome(str(w.root), w.trace, "failed", w.failure))
                continue
            self.report.warnings.extend(w.notes)
            for where, problem in w.errors:
                self.report.outcomes.append(
                    FileOutcome(str(where), w.trace, "failed", f"{show_path(where)}: {problem}")
                )
            for where, why in w.skipped:  # special files, links leaving the input folder
                self.report.outcomes.append(FileOutcome(str(where), w.trace, "skipped", f"{show_path(where)}: {why}"))
            elsewhere = _held_elsewhere(w, files)
            if elsewhere and distinct and not force:
                rename_workload(w, distinct_trace_id(w))
                elsewhere = _held_elsewhere(w, files)
            self.report.traces[str(w.root)] = w.trace
            if elsewhere and not force:  # never replace another place's trace silently
                self.report.outcomes.append(FileOutcome(str(w.root), w.trace, "failed", _clash_message(w, elsewhere)))
                continue
            card_change = self._card_change(w, force) if (w.is_folder or elsewhere) else None
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
                    self.report.outcomes.append(
                        FileOutcome(str(path), w.trace, "failed", f"{show_path(path)}: cannot read: {e.strerror or e}")
                    )
                    continue
                if not stat.S_ISREG(st.st_mode):  # reading a FIFO would never end
                    self.report.outcomes.append(
                        FileOutcome(
                            str(path),
                            w.trace,
                            "failed",
                            f"{show_path(path)}: not a regular file (a pipe, socket or device)",
                        )
                    )
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
                        self.report.outcomes.append(
                            FileOutcome(row["path"], row["trace"], "removed", "no longer in the folder")
                        )
        return tasks

    def _card_change(self, w: Workload, force: bool = False) -> Callable[[CatalogState], None] | None:
        """How the workload's card changes the catalog (None: it does not). The card is
        every trace's the workload fills (``<id>`` and ``<id>+nsys``). A card that breaks
        the template is kept and said so, once: when it is new or changed (or with
        --force), not on every re-ingest of a folder whose card did not change."""
        if not w.is_folder:

            def drop_card(state: CatalogState) -> None:  # a loose file replacing a folder
                state.cards.pop(w.trace, None)

            return drop_card
        if w.card is None:
            new: dict[str, dict | None] = dict.fromkeys(w.traces)
        else:
            try:
                card = load_card(w.card)
                new = {t: card_table(t, card).to_pylist()[0] for t in w.traces}
            except ValueError as e:  # a bad card: warn, keep what the warehouse has
                self.report.warnings.append(f"{show_path(w.card)}: {e}; card ignored")
                return None
        unchanged = all(self.working.cards.get(t) == row for t, row in new.items())
        if w.card is not None and (force or not unchanged):
            self.report.warnings.extend(_card_warning(w, card))  # a card that breaks the template is kept, and said so
        if unchanged:
            return None

        def change(state: CatalogState) -> None:
            for t, row in new.items():
                if row is None:
                    state.cards.pop(t, None)
                else:
                    state.cards[t] = row

        return change

    def _replacement(
        self, w: Workload, elsewhere: list[dict], card_change: Callable[[CatalogState], None] | None
    ) -> Callable[[CatalogState], None]:
        ids = [row["file_id"] for row in elsewhere]
        removed = [
            FileOutcome(row["path"], row["trace"], "removed", f"replaced by {show_path(w.root)} (--force)")
            for row in elsewhere
        ]

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
                outcome = self._stopped_outcome(task)
                self.report.outcomes.append(outcome)
                staged.append((task, outcome))
                continue
            tables = {table for table, _r, _tmp, _n in parsed.parts}
            taken = {
                r
                for (t, r, table), fid in self._claims().items()
                if t == task.trace and table in tables and fid != task.file_id
            }
            rank = task.previous["rank"] if task.previous and task.previous["rank"] not in taken else 0
            while rank in taken:
                rank += 1
            result: ParsedFile | TraceFileError = parsed
            if rank != parsed.rank:
                try:
                    parsed.parts = [
                        (t, rank, str(rewrite_rank(self._local_temp(parsed, tmp), rank)), n)
                        for t, _r, tmp, n in parsed.parts
                    ]
                    parsed.rank = rank
                except Exception as e:  # noqa: BLE001 - the file boundary: this file fails alone
                    result = (
                        DiskFullError(str(task.path), DISK_FULL)
                        if is_disk_full(e)
                        else TraceFileError(
                            str(task.path), f"could not be written to the warehouse: {type(e).__name__}: {e}"
                        )
                    )
            staged.append((task, self.stage(task, result)))
        self.rankless.clear()
        return staged

    def _local_temp(self, parsed: ParsedFile, tmp: str) -> Path:
        """A part's temp data file on this machine: one a Dask worker put in object
        storage is copied down (the copy then moves as a local parse's would; the object
        is garbage)."""
        rel = parsed.placed.pop(tmp, None)
        if rel is None:
            return Path(tmp)
        self.warehouse.ensure_local([rel])
        local = self.warehouse.tmp_path()
        shutil.copyfile(self.warehouse.root / rel, local)
        return local

    def stage(self, task: FileTask, parsed: ParsedFile | TraceFileError) -> FileOutcome:
        """Checks one parse result and adds it to the batch (or fails it)."""
        return self.stage_results([(task, parsed)])[0]

    def stage_results(self, results: list[tuple[FileTask, ParsedFile | TraceFileError]]) -> list[FileOutcome]:
        """``stage`` for results in path order; the files that share data files (a group
        of small files) are staged as one unit (``_stage_unit``)."""
        outcomes: list[FileOutcome] = []
        unit: list[tuple[FileTask, ParsedFile | TraceFileError]] = []
        paths: set[str] = set()
        for task, parsed in results:
            shared = set(parsed.shared) if isinstance(parsed, ParsedFile) else set()
            if unit and not (shared & paths):
                outcomes.extend(self._stage_unit(unit))
                unit, paths = [], set()
            unit.append((task, parsed))
            paths |= shared
        if unit:
            outcomes.extend(self._stage_unit(unit))
        return outcomes

    def _stage_unit(self, unit: list[tuple[FileTask, ParsedFile | TraceFileError]]) -> list[FileOutcome]:
        """Stages files that share data files (or one file): each is checked alone; the
        shared files lose the rows of those that fail (``keep_input_files``), and the rest
        wait in the batch as one ``_Staged``, one move per data file."""
        rels: dict[str, str] = {}  # shared temp file -> its data path
        outcomes: list[FileOutcome] = []
        staged: list[_Staged] = []
        for task, parsed in unit:
            outcome, one = self._stage_one(task, parsed, rels)
            outcomes.append(outcome)
            if one is not None:
                staged.append(one)
        shared = {p for _t, parsed in unit if isinstance(parsed, ParsedFile) for p in parsed.shared}
        if shared:
            written = {t.file_id for t, parsed in unit if isinstance(parsed, ParsedFile) and parsed.shared}
            kept = {t.file_id for (t, _p), o in zip(unit, outcomes) if o.status == "ingested"} & written
            if kept != written:
                try:
                    for tmp in shared:
                        if kept:
                            keep_input_files(Path(tmp), kept)
                        else:
                            Path(tmp).unlink(missing_ok=True)
                except Exception as e:  # noqa: BLE001 - the shared files cannot be rewritten: their files fail
                    self._unstage(kept, staged, e)
                    return outcomes
        if staged:
            moves = list({tmp: (tmp, rel) for s in staged for tmp, rel in s.moves}.values())
            applies = [s.apply for s in staged]

            def apply(state: CatalogState) -> None:
                for one in applies:
                    one(state)

            self.batch.append(_Staged([o for s in staged for o in s.outcomes], apply, moves))
            if self.batch_started is None:
                self.batch_started = time.monotonic()
        return outcomes

    def _unstage(self, file_ids: set[str], staged: list[_Staged], e: Exception) -> None:
        """Fails staged files with ``e``: ``working`` gets back their committed rows."""
        self._fail(staged, e)
        for fid in file_ids:
            if fid in self.committed.files:
                self.working.put_file(
                    self.committed.files[fid], self.committed.parts.get(fid, []), self.committed.stats.get(fid, [])
                )
            else:
                self.working.drop_file(fid)
        self._claims_index = None

    def _stage_one(
        self, task: FileTask, parsed: ParsedFile | TraceFileError, rels: dict[str, str]
    ) -> tuple[FileOutcome, _Staged | None]:
        """Checks one parse result and puts it into ``working``; its ``_Staged`` (None: it
        failed). ``rels``: data paths already given to shared temp files."""
        path = str(task.path)
        if self.stopped:  # a full disk before it, in its group of small files
            outcome: FileOutcome | None = self._stopped_outcome(task)
        else:
            outcome = self._check(task, parsed)
        if outcome is not None:
            if isinstance(parsed, ParsedFile):
                parsed.discard()
            self.report.outcomes.append(outcome)
            return outcome, None
        assert isinstance(parsed, ParsedFile)
        self.report.warnings.extend(parsed.warnings)
        try:
            row = _files_row(task, parsed)
            moves: list[tuple[Path, str]] = []
            parts: list[dict] = []
            for table, rank, tmp, rows in parsed.parts:
                if tmp in parsed.placed:  # already in the warehouse's object storage
                    rel = parsed.placed[tmp]
                elif tmp in parsed.shared:
                    if tmp not in rels:
                        rels[tmp] = self.warehouse.new_data_path(table, task.trace, "group")
                    rel = rels[tmp]
                else:
                    rel = self.warehouse.new_data_path(table, task.trace, task.file_id)
                if tmp not in parsed.placed:
                    moves.append((Path(tmp), rel))
                parts.append(
                    {
                        "file_id": task.file_id,
                        "trace": task.trace,
                        "rank": rank,
                        "table_name": table,
                        "path": rel,
                        "rows": rows,
                    }
                )
            stats = _stats_rows(task, parsed)
            _check_rows([row], FILES_SCHEMA)
            _check_rows(parts, PARTS_SCHEMA)
            _check_rows(stats, STATS_SCHEMA)
        except Exception as e:  # noqa: BLE001 - this file fails; the run and the other files go on
            parsed.discard()
            outcome = FileOutcome(
                path,
                task.trace,
                "failed",
                f"{show_path(path)}: could not be written to the warehouse: {type(e).__name__}: {e}",
                size_bytes=task.size,
            )
            self.report.outcomes.append(outcome)
            return outcome, None
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
            self._claims_index.update(
                {
                    (p["trace"], p["rank"], p["table_name"]): task.file_id
                    for p in parts
                    if p["table_name"] in RANKED_TABLES
                }
            )
        outcome = FileOutcome(
            path,
            task.trace,
            "ingested",
            rank=parsed.rank,
            format=parsed.flavor,
            events=parsed.events_written,
            dropped=sum(parsed.drops.values()),
            size_bytes=task.size,
            seconds=parsed.seconds,
        )
        self.report.outcomes.append(outcome)
        return outcome, _Staged([outcome], apply, moves)

    def _stopped_outcome(self, task: FileTask) -> FileOutcome:
        """A file not ingested because the run stopped (``stopped``) before it."""
        message = f"{show_path(task.path)}: not ingested: {self.stopped}"
        return FileOutcome(str(task.path), task.trace, "failed", message, size_bytes=task.size)

    def _check(self, task: FileTask, parsed: ParsedFile | TraceFileError) -> FileOutcome | None:
        """The outcome of a result that cannot be staged; None when it can."""
        path = str(task.path)
        if isinstance(parsed, UnsupportedFormat):
            return FileOutcome(path, task.trace, "skipped", parsed.problem, size_bytes=task.size)
        if isinstance(parsed, TraceFileError):
            if isinstance(parsed, DiskFullError):
                self.stopped = DISK_FULL_STOP
            return FileOutcome(path, task.trace, "failed", parsed.message, size_bytes=task.size, detail=parsed.detail)
        claims = self._claims()
        for table, rank, _tmp, _rows in parsed.parts:
            if table not in RANKED_TABLES:
                continue
            holder = claims.get((task.trace, rank, table))
            if holder is not None and holder != task.file_id:
                held = self.working.files[holder]
                reason = f"rank {rank} of trace {task.trace!r} is already taken by {show_path(held['path'])}"
                self.refused.append((task, parsed.content_hash, held, reason))  # cclq.ingest.refusals
                return FileOutcome(path, task.trace, "failed", f"{show_path(path)}: {reason}", size_bytes=task.size)
        return None

    def _claims(self) -> dict[tuple[str, int, str], str]:
        """(trace, rank, table) -> the file holding it, in ``working`` (built again after it
        is replaced). A rank is claimed per table: a rank's Kineto trace and its execution
        trace fill different tables."""
        if self._claims_index is None:
            self._claims_index = {
                (p["trace"], p["rank"], p["table_name"]): fid
                for fid, parts in self.working.parts.items()
                for p in parts
                if p["table_name"] in RANKED_TABLES
            }
        return self._claims_index

    # -- committing -----------------------------------------------------------
    def due(self) -> bool:
        wait = max(COMMIT_INTERVAL_S, COMMIT_COST_RATIO * self.commit_seconds)
        return self.batch_started is not None and time.monotonic() - self.batch_started >= wait

    def flush(self) -> None:
        """Commits the batch (and any pending removals or cards) as one snapshot."""
        if not self.batch and not self.dirty:
            return
        batch, self.batch, self.batch_started = self.batch, [], None
        started = time.monotonic()
        try:
            self.warehouse.commit(self.working, [m for s in batch for m in s.moves])
            self.commit_seconds = time.monotonic() - started
        except Exception as e:
            if is_disk_full(e) or not batch:
                self._fail(batch, e)
                self.working = copy_state(self.committed)
                self._claims_index = None
                if self.dirty and not is_disk_full(e):
                    raise  # removals or cards that cannot be written: nothing else can be either
                return
            self._commit_one_by_one(batch)
            return
        self.committed = copy_state(self.working)
        self.dirty = False

    def _commit_one_by_one(self, batch: list[_Staged]) -> None:
        """After a failed batch: each file on its own, so that only what cannot be written fails."""
        base = copy_state(self.committed)  # with the batch's removals and cards, if any
        self.working = copy_state(self.committed)
        for staged in batch:
            trial = copy_state(base)
            staged.apply(trial)
            try:
                self.warehouse.commit(trial, [m for m in staged.moves if m[0].exists()])
            except Exception as e:  # noqa: BLE001 - the file boundary: only this file's commit fails
                self._fail([staged], e)
                continue
            base = trial
        self.committed = copy_state(base)
        self.working = copy_state(base)
        self._claims_index = None
        self.dirty = False

    def _fail(self, batch: list[_Staged], e: Exception) -> None:
        """Fails the staged files with ``e`` and removes their data files; a full disk
        stops the run."""
        if is_disk_full(e):
            self.stopped = DISK_FULL_STOP
        problem = DISK_FULL if is_disk_full(e) else f"{type(e).__name__}: {e}"
        for staged in batch:
            for outcome in staged.outcomes:
                outcome.status = "failed"
                outcome.message = f"{show_path(outcome.path)}: could not be written to the warehouse: {problem}"
            for tmp, _rel in staged.moves:
                tmp.unlink(missing_ok=True)  # a data file already renamed into place is garbage


def copy_state(state: CatalogState) -> CatalogState:
    """A state that can be edited without touching ``state`` (rows are never edited in
    place, only replaced, so the row dicts are shared)."""
    return CatalogState(dict(state.files), dict(state.parts), dict(state.stats), dict(state.cards))
