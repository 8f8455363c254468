"""What an ingest tells its caller: a ``Reporter`` for progress and warnings as it goes,
and the ``IngestReport`` of outcomes at the end."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol


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
    warehouse: Path | str  # a folder, or the URL of a warehouse on object storage
    outcomes: list[FileOutcome] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    compacted: list[Any] = field(default_factory=list)  # cclq.store.compaction.Compaction of the traces compacted
    # workload root (str of its resolved path) -> the trace id its files went to
    traces: dict[str, str] = field(default_factory=dict)

    @property
    def failed(self) -> list[FileOutcome]:
        return [o for o in self.outcomes if o.status == "failed"]

    def stale(self, held: set[str]) -> list[FileOutcome]:
        """The failures that leave old data in place: a file the catalog holds (``held``:
        its paths; the new version failed), or a folder (unreadable, so nothing was
        removed). A file that never ingested leaves no number behind."""
        return [o for o in self.failed if o.path in held or os.path.isdir(o.path)]


class IngestInterrupted(KeyboardInterrupt):
    """Ctrl-C during an ingest, after what was parsed so far was committed: ``report``
    holds the outcomes up to then (``committed_message`` says them in words)."""

    def __init__(self, report: IngestReport, not_done: list[FileOutcome]) -> None:
        super().__init__()
        self.report = report
        self.not_done = not_done

    def message(self) -> str:
        """What was committed, which traces are left partial, and how to finish."""
        done = [o for o in self.report.outcomes if o.status in ("ingested", "unchanged")]
        partial = sorted({o.trace for o in self.not_done})
        text = (
            f"interrupted: {sum(o.status == 'ingested' for o in done)} file(s) committed"
            f" ({len({o.trace for o in done})} trace(s) touched), {len(self.not_done)} not ingested"
        )
        if partial:
            text += f"; partial: {', '.join(partial)}"
        return text + "; run the same `cclq ingest` again to finish (committed files are skipped)"
