"""What ``cclq ingest`` shows on stderr: a progress bar with MB/s, then a summary.

On a terminal the bars redraw in place and vanish when done (rich redraws ten times a
second: bytes done of the total, MB/s and the time left, inside a file too, as the parser
reports each MB); when stderr is not a terminal (a pipe, a CI log) nothing can redraw, so
each bar becomes one plain line per step instead (per file, per metric: counts and
seconds) and a closing line, and ingest adds a line of bytes done of the total and the
rate every ``$CCLQ_PROGRESS_INTERVAL`` seconds (10) while a file is being parsed, so a log
shows what is happening while it happens. Rich is imported only for a terminal and for
the ingest summary's table (its import is ~25 ms of a report's start).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from functools import lru_cache
from typing import TYPE_CHECKING

from cclq.errors import show_path
from cclq.ingest.report import FileOutcome, IngestReport
from cclq.present.render import cell, clean

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress, TaskID


@lru_cache(maxsize=1)
def _stderr() -> Console:
    from rich.console import Console

    return Console(stderr=True)


def _on_terminal() -> bool:
    """Whether stderr can redraw a bar. Without a TTY (and without rich's FORCE_TERMINAL
    or TTY_COMPATIBLE, which make it draw anyway) rich is not even imported."""
    if not sys.stderr.isatty() and not os.environ.get("FORCE_TERMINAL") and not os.environ.get("TTY_COMPATIBLE"):
        return False
    return _stderr().is_terminal


# Seconds between two lines of bytes done when stderr is not a terminal (tests set less)
INTERVAL_ENV = "CCLQ_PROGRESS_INTERVAL"
DEFAULT_INTERVAL_S = 10.0


def progress_interval() -> float:
    """``$CCLQ_PROGRESS_INTERVAL`` in seconds when it is a positive number, else 10."""
    try:
        value = float(os.environ.get(INTERVAL_ENV, ""))
    except ValueError:
        return DEFAULT_INTERVAL_S
    return value if value > 0 else DEFAULT_INTERVAL_S


def _line(text: str) -> None:
    """One progress line on stderr, written at once (for logs: not a terminal); control
    characters from file or metric names shown as escapes."""
    print(clean(text), file=sys.stderr, flush=True)


class IngestProgress:
    """A ``cclq.ingest.report.Reporter`` drawing one bar over all bytes to parse."""

    def __init__(self, enabled: bool = True, interval_s: float | None = None) -> None:
        self.enabled = enabled
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        self._done = 0
        self._files = 0
        self._lines = False  # stderr is not a terminal: a line per file
        self._start = 0.0
        # not a terminal: bytes done, the total and the rate every interval (a thread)
        self._interval = progress_interval() if interval_s is None else interval_s
        self._bytes = 0
        self._total = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    def start(self, total_bytes: int, files: int) -> None:
        self._files = files
        if not self.enabled or files == 0:
            return
        if not _on_terminal():
            self._lines, self._start, self._total = True, time.perf_counter(), total_bytes
            _line(f"ingest: {files} file(s) to parse, {total_bytes / 1e6:.1f} MB")
            self._stop.clear()
            self._ticker = threading.Thread(target=self._tick, name="cclq-ingest-progress", daemon=True)
            self._ticker.start()
            return
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
            TransferSpeedColumn,
        )

        self._progress = Progress(
            TextColumn("ingest {task.description}"),
            BarColumn(),
            DownloadColumn(),
            TransferSpeedColumn(),
            TimeRemainingColumn(),
            console=_stderr(),
            transient=True,
        )
        self._task = self._progress.add_task(f"0/{files} files", total=total_bytes)
        self._progress.start()

    def advance(self, nbytes: int) -> None:
        with self._lock:
            self._bytes += nbytes
        if self._progress is not None and self._task is not None:
            self._progress.advance(self._task, nbytes)

    def file_done(self, outcome: FileOutcome) -> None:
        with self._lock:  # the count and its line at once: no bytes line between them (_tick)
            self._done += 1
            if self._lines:
                events = f", {outcome.events:,} events" if outcome.events else ""
                _line(
                    f"ingest {self._done}/{self._files} {outcome.trace}/{outcome.path.rsplit('/', 1)[-1]}: "
                    f"{outcome.status}{events}, {outcome.seconds:.2f} s "
                    f"({time.perf_counter() - self._start:.1f} s in all)"
                )
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, description=f"{self._done}/{self._files} files")

    def warn(self, message: str) -> None:
        print(f"cclq: warning: {message}", file=sys.stderr)

    def _tick(self) -> None:
        """Not a terminal: every interval until ``finish``, one line of bytes done of the
        total, the rate since the start and the files done (a file of a GB takes a minute
        or more: without it a log says nothing meanwhile)."""
        while not self._stop.wait(self._interval):
            with self._lock:  # its files done, then the line, before a file's own count and line
                _line(self._bytes_text())

    def bytes_line(self) -> str:
        """``ingest: 412.3 of 1000.0 MB (41%), 45.2 MB/s, 0/1 files done, 9.1 s``."""
        with self._lock:
            return self._bytes_text()

    def _bytes_text(self) -> str:
        """``bytes_line`` with the lock held."""
        done = self._bytes
        elapsed = max(time.perf_counter() - self._start, 1e-9)
        share = f" ({100 * done / self._total:.0f}%)" if self._total else ""
        return (
            f"ingest: {done / 1e6:.1f} of {self._total / 1e6:.1f} MB{share}, {done / 1e6 / elapsed:.1f} MB/s, "
            f"{self._done}/{self._files} files done, {elapsed:.1f} s"
        )

    def finish(self) -> None:
        if self._ticker is not None:
            self._stop.set()
            self._ticker.join()
            self._ticker = None
        if self._progress is not None:
            self._progress.stop()
            self._progress = None


def print_summary(report: IngestReport) -> None:
    """A table of the files parsed, then one line per file skipped, and totals (stderr).

    Not on a terminal (a pipe, a log) the table takes the width its cells need instead
    of 80 columns, so no file name or trace id is folded over several lines."""
    from rich.console import Console
    from rich.table import Table

    out = _stderr() if _on_terminal() else Console(stderr=True, width=1000, soft_wrap=True)
    if not report.outcomes:
        out.print("nothing to ingest")
        return
    parsed = [o for o in report.outcomes if o.status in ("ingested", "unchanged")]
    if parsed:
        t = Table(title=f"ingest into {report.warehouse}", header_style="bold")
        for col in ("trace", "rank", "file", "status", "events", "dropped", "MB", "s"):
            numeric = col in ("rank", "events", "dropped", "MB", "s")
            # names fold onto more lines rather than vanish into "…" on a narrow terminal
            t.add_column(
                col, justify="right" if numeric else "left", no_wrap=numeric or col == "status", overflow="fold"
            )
        for o in parsed:  # file names and messages are data: never markup, control characters escaped
            t.add_row(
                cell(o.trace),
                "" if o.rank is None else str(o.rank),
                cell(o.path.rsplit("/", 1)[-1]),
                o.status,
                f"{o.events:,}" if o.events else "",
                f"{o.dropped:,}" if o.dropped else "",
                f"{o.size_bytes / 1e6:.1f}",
                f"{o.seconds:.2f}" if o.seconds else "",
            )
        out.print(t)
    for o in report.outcomes:
        if o.status in ("skipped", "removed"):
            out.print(
                cell(
                    f"{o.status}: {o.message}"
                    if o.message.startswith(show_path(o.path))
                    else f"{o.status}: {show_path(o.path)}: {o.message}"
                ),
                highlight=False,
                soft_wrap=True,
            )
    counts: dict[str, int] = {}
    for o in report.outcomes:
        counts[o.status] = counts.get(o.status, 0) + 1
    if report.compacted:
        before = sum(c.files_before for c in report.compacted)
        after = sum(c.files_after for c in report.compacted)
        out.print(
            f"compacted {len({c.trace for c in report.compacted})} trace(s) of small files: "
            f"{before} data files -> {after}",
            highlight=False,
        )
    total_mb = sum(o.size_bytes for o in report.outcomes if o.status == "ingested") / 1e6
    out.print(
        ", ".join(f"{n} {status}" for status, n in sorted(counts.items())) + f" ({total_mb:.1f} MB parsed)",
        highlight=False,
    )


class StepProgress:
    """A bar over a known number of steps (metrics, pages) on stderr, gone when done.

    ``advance(label)`` moves it on and shows what was just finished.
    """

    def __init__(self, title: str, total: int, enabled: bool = True) -> None:
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        self._title = title
        self._total = total
        self._enabled = enabled and total > 0
        self._lines = False  # stderr is not a terminal: a line per step
        self._done = 0
        self._start = self._last = 0.0

    def __enter__(self) -> StepProgress:
        if self._enabled and not _on_terminal():
            self._lines = True
            self._start = self._last = time.perf_counter()
        elif self._enabled:
            from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

            self._progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                TextColumn("{task.completed}/{task.total}"),
                TimeRemainingColumn(),
                console=_stderr(),
                transient=True,
            )
            self._task = self._progress.add_task(self._title, total=self._total)
            self._progress.start()
        return self

    def advance(self, label: str = "") -> None:
        if self._lines:
            self._done += 1
            now = time.perf_counter()
            _line(f"{self._title} {self._done}/{self._total}{' ' + label if label else ''} ({now - self._last:.2f} s)")
            self._last = now
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, advance=1, description=f"{self._title} {label}" if label else self._title)

    def stage(self, text: str) -> None:
        """A stage before or between the steps, as one line when not a terminal (``metrics:
        20 views shared in 1.2 s``); the next step's seconds count from here."""
        if self._lines:
            _line(f"{self._title}: {text}")
            self._last = time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        if self._lines:
            self._lines = False
            _line(f"{self._title}: {self._done}/{self._total} done in {time.perf_counter() - self._start:.1f} s")
        if self._progress is not None:
            self._progress.stop()
            self._progress = None


class CountedProgress:
    """A ``StepProgress`` whose total is learnt on the first ``update(done, total)``
    (Dask partitions: how many there are is decided once the cluster is known)."""

    def __init__(self, title: str, enabled: bool = True) -> None:
        self._title = title
        self._enabled = enabled
        self._bar: StepProgress | None = None
        self._done = 0

    def __enter__(self) -> CountedProgress:
        return self

    def update(self, done: int, total: int) -> None:
        if self._bar is None:
            self._bar = StepProgress(self._title, total, enabled=self._enabled).__enter__()
        for _ in range(done - self._done):
            self._bar.advance()
        self._done = done

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.__exit__(*exc)
            self._bar = None
