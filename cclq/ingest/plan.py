"""From the paths a user gives to workloads: which folder is one run, which is a
collection of runs, which file is a loose trace, and the trace id of each.

What a folder walk passes over, and says so (``Workload.skipped``, reported as "skipped"):

* a FIFO, socket or device: reading a FIFO would block the ingest forever, and a
  device is no trace;
* a symbolic link whose target is outside the input folder (the path given on the
  command line, resolved): an input folder is what the user chose to ingest, and a link
  out of it (``rank0.json -> /etc/shadow`` in an unpacked archive) is not followed.
  Links within the input folder are followed (a workload sharing a file with another);
  a link that leads nowhere fails alone with "cannot read". Folders reached through a
  link are not walked (``os.walk``'s default). A file or folder named on the command
  line is the user's own choice and is read wherever it is.

* a trace cclq wrote beside a user's (``generate_trace_with_counters``, the overlays of
  ``TraceAnalysis``) while that file is in the same walk: its first key
  ``cclqWrittenFrom`` names the file it was written from, whose rank it repeats; read
  again it would be refused as a second file for that rank, and a notebook run twice on
  one folder would fail. Copied away from its source, it is a trace like any other.

And it passes over the warehouse when it lies inside an input folder (``--warehouse
in/wh`` with input ``in``): its Parquet files are never input.
"""

from __future__ import annotations

import hashlib
import os
import re
import sqlite3
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from cclq.cards.check import CheckReport, check_card_file
from cclq.cards.load import find_card
from cclq.errors import UsageError, show_path
from cclq.formats.detect import (
    is_candidate,
    is_sqlite,
    is_trace_event_json,
    may_be_trace,
    written_by_cclq,
)

_TRACE_ID_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]+")


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
    # (path, why) for files passed over on purpose (special files, links leaving the input)
    skipped: list[tuple[Path, str]] = field(default_factory=list)
    failure: str | None = None  # the whole workload fails (a trace id clash in this run)
    # files that go to another trace than ``trace`` (see ``_split_formats``)
    file_traces: dict[Path, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # warnings for the user (a split, with its evidence)
    # exports split off as runs of their own (``_split_far_apart``), each its own trace
    runs: list[Path] = field(default_factory=list)

    def trace_of(self, path: Path) -> str:
        return self.file_traces.get(path, self.trace)

    def answer_trace(self) -> str:
        """The trace a call naming the whole folder answers for (``python -m cclq.main
        --trace DIR``, a pair of ``cclq board --config``): the workload's own trace when
        files go to it; when every trace file went to a run of its own (Nsight Systems
        exports recorded far apart), the run of the export CCL-Bench's tools read
        (``first_export``), as CCL-Bench answers for such a folder."""
        if not self.runs or any(p not in self.file_traces for p in self.files if is_trace_file(p)):
            return self.trace
        return self.file_traces[first_export(self.runs)]

    def runs_note(self) -> str | None:
        """For a folder of several runs, what a call naming it says on stderr: the runs,
        the one it answers for and why, and how to ask for another (None: one run)."""
        if not self.runs:
            return None
        answer = self.answer_trace()
        runs = ", ".join(f"{self.file_traces[p]} ({p.name})" for p in self.runs)
        chosen = next((p for p in self.runs if self.file_traces[p] == answer), None)
        if chosen is None:  # trace files of the folder's own go to its own trace
            return (
                f"{show_path(self.root)} also holds {len(self.runs)} Nsight Systems exports recorded far "
                f"apart, each a trace of its own: {runs}; the answer is {answer}'s"
            )
        other = next(p for p in self.runs if p != chosen)
        return (
            f"{show_path(self.root)} holds {len(self.runs)} runs, each a trace of its own: {runs}; the "
            f"answer is for {answer}, the export CCL-Bench's tools read ({chosen.name}); for another run "
            f"give its file, e.g. --trace {show_path(other)}"
        )

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


APART_NS = 86_400 * 10**9  # session starts a day apart: not one run


def first_export(paths: list[Path]) -> Path:
    """The Nsight Systems export CCL-Bench's tools read from a folder of several
    (``tools/nsys_utils.py``, ``find_sqlite_file``): the first ``.sqlite`` whose name
    does not contain "profiling", else the first. CCL-Bench takes them in ``os.listdir``
    order, which the file system decides; cclq takes them by name, the same on every
    copy of the folder."""
    return sorted(paths, key=lambda p: ("profiling" in p.name.lower(), p.name))[0]


def is_trace_file(path: Path) -> bool:
    """A file that fills a trace's events (not a card, results file or execution trace)."""
    return is_sqlite(str(path)) or is_trace_event_json(str(path))


def _session_start_ns(path: Path) -> int | None:
    """An Nsight Systems export's session start (epoch ns), or None if it cannot say."""
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            row = con.execute("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME LIMIT 1").fetchone()
        finally:
            con.close()
    except sqlite3.Error:
        return None
    return int(row[0]) if row and row[0] is not None else None


def _split_far_apart(w: Workload) -> None:
    """Nsight Systems exports in one folder whose sessions started more than a day
    apart are not one run (two exports 99 days apart, of different applications, once
    became one trace with a guessed rank and a span of 99 days): each export goes to a
    trace of its own, ``<id>+<file stem>``, and the user is told why."""
    starts = {p: t for p in w.files if is_sqlite(str(p)) and (t := _session_start_ns(p)) is not None}
    if len(starts) < 2 or max(starts.values()) - min(starts.values()) <= APART_NS:
        return
    first, last = min(starts, key=starts.__getitem__), max(starts, key=starts.__getitem__)
    days = (starts[last] - starts[first]) / 86_400e9
    for p in starts:
        w.file_traces[p] = f"{w.trace_of(p)}+{_loose_file_trace_id(p)}"
    w.runs = sorted(starts)
    w.notes.append(
        f"{show_path(w.root)}: its Nsight Systems exports started {days:.1f} days apart "
        f"({first.name} first, {last.name} last); they are not one run: each is a trace of its own "
        f"({', '.join(sorted(w.file_traces[p] for p in starts))})"
    )


# --------------------------------------------------------------------------- plan
def trace_id_for(name: str) -> str:
    """A path-safe trace id: the folder name, or a loose file's stem."""
    return _TRACE_ID_UNSAFE.sub("_", name).strip("._") or "trace"


def distinct_trace_id(w: Workload) -> str:
    """The id a workload gets when its name's id is held by another place (``python -m
    cclq.main``, which must answer for this folder and no other): the name plus a digest
    of the resolved path, so the same folder always gets the same id."""
    digest = hashlib.sha1(str(w.root).encode()).hexdigest()[:8]
    return f"{w.trace}-{digest}"


def rename_workload(w: Workload, trace: str) -> None:
    """Gives ``w`` (and its ``+nsys`` sibling files) the trace id ``trace``."""
    w.file_traces = {p: trace + t[len(w.trace) :] for p, t in w.file_traces.items()}
    w.trace = trace


def _loose_file_trace_id(path: Path) -> str:
    name = path.name
    for suffix in (".gz", ".json", ".trace", ".pt", ".sqlite"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    return trace_id_for(name)


_SPECIAL = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def _why_skip(path: Path, boundary: Path) -> str | None:
    """Why a file found in a folder is passed over (see the module docstring), or None
    when it may be read: a regular file, or a link that leads nowhere (which then fails
    alone with "cannot read")."""
    if path.is_symlink():
        target = Path(os.path.realpath(path))
        if not target.is_relative_to(boundary):
            return f"a symbolic link to {show_path(target)}, outside the input folder: not followed"
    try:
        mode = path.stat().st_mode
    except OSError:
        return None
    for test, what in _SPECIAL:
        if test(mode):
            return f"{what}, not a regular file"
    return None


def _walk_files(
    folder: Path, boundary: Path | None = None, avoid: Path | None = None
) -> tuple[list[Path], list[tuple[Path, str]], list[tuple[Path, str]]]:
    """The candidate files under ``folder``, the folders that could not be read, and the
    files passed over with why. ``boundary`` is the input folder links may not leave;
    ``avoid`` a folder never walked (the warehouse)."""
    files: list[Path] = []
    errors: list[tuple[Path, str]] = []
    skipped: list[tuple[Path, str]] = []
    boundary = boundary or folder

    def unreadable(e: OSError) -> None:
        errors.append((Path(e.filename or folder), f"cannot read folder: {e.strerror or e}"))

    for dirpath, dirnames, filenames in os.walk(folder, onerror=unreadable):
        dirnames[:] = sorted(
            d for d in dirnames if not d.startswith(".") and (avoid is None or Path(dirpath) / d != avoid)
        )
        for name in sorted(filenames):
            p = Path(dirpath) / name
            if not is_candidate(str(p)):
                continue
            why = _why_skip(p, boundary)
            if why is None:
                files.append(p)
            else:
                skipped.append((p, why))
    # traces cclq wrote beside one of these files (their source is among them)
    names = {p.name for p in files}
    derived = {
        p: source
        for p in files
        if (source := written_by_cclq(str(p))) is not None and source in names and source != p.name
    }
    for p, source in derived.items():
        skipped.append((p, f"written by cclq from {source} (counters or an overlay), not a trace of its own"))
    return [p for p in files if p not in derived], errors, skipped


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


def _folder_workload(folder: Path, boundary: Path, avoid: Path | None) -> Workload:
    files, errors, skipped = _walk_files(folder, boundary, avoid)
    w = Workload(trace_id_for(folder.name), folder, files, find_card(folder), True, errors, skipped)
    _split_formats(w)
    _split_far_apart(w)
    return w


def plan_inputs(inputs: Iterable[str | Path], warehouse: Path | None = None) -> list[Workload]:
    """The workloads the inputs name. A path that does not exist is a usage error; a
    folder that cannot be read, or a second workload whose name maps to a trace id that
    another input of this run already has, is a workload that fails alone. ``warehouse``
    (when it lies inside an input) is never walked."""
    avoid = Path(os.path.realpath(warehouse)) if warehouse is not None else None
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
            folders = (
                [path]
                if is_workload
                else sorted(
                    p
                    for p in path.iterdir()
                    if p.is_dir() and not p.name.startswith(".") and (avoid is None or p.resolve() != avoid)
                )
            )
        except OSError as e:
            workloads.append(
                Workload(
                    trace_id_for(path.name),
                    path,
                    [],
                    None,
                    True,
                    failure=f"{show_path(path)}: cannot read folder: {e.strerror or e}",
                )
            )
            continue
        for folder in folders:
            try:
                workloads.append(_folder_workload(folder, path, avoid))
            except OSError as e:
                workloads.append(
                    Workload(
                        trace_id_for(folder.name),
                        folder,
                        [],
                        None,
                        True,
                        failure=f"{show_path(folder)}: cannot read folder: {e.strerror or e}",
                    )
                )
    seen: dict[str, Path] = {}
    for w in workloads:
        if w.failure:
            continue
        first = seen.setdefault(w.trace, w.root)
        if first != w.root:
            w.failure = (
                f"{show_path(w.root)}: its trace id {w.trace!r} is already taken by {show_path(first)} "
                "in this run (both names map to it); rename one of them"
            )
    return workloads


def check_input_cards(paths: Iterable[Path]) -> CheckReport:
    """Checks card files given directly, and the card of every workload folder under
    folders (the same folders ``cclq ingest`` takes as workloads)."""
    report = CheckReport()
    folders: list[Path] = []
    for path in paths:
        if path.is_file():
            report.cards.append(path)
        else:
            folders.append(path)
    for workload in plan_inputs(folders) if folders else []:
        card = find_card(workload.root) if workload.is_folder else None
        if card is None:
            report.without_card.append(workload.root)
        else:
            report.cards.append(card)
    for card in report.cards:
        report.problems += check_card_file(card)
    return report
