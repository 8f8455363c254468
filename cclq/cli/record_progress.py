"""What ``cclq record`` shows on stderr: a bar over configurations, a line per problem,
and the summary table (data, to stdout) the command prints at the end."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from cclq.record.runner import ConfigOutcome

_stderr = Console(stderr=True)


class RecordProgress:
    """A ``cclq.record.runner.RecordReporter``: one bar over the configurations; failures and
    invalid results are printed as they happen, above the bar."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self._progress: Progress | None = None
        self._task: TaskID | None = None

    def start(self, total: int) -> None:
        if not self.enabled or total == 0:
            return
        self._progress = Progress(
            TextColumn("record"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.description}"),
            console=_stderr,
            transient=True,
        )
        self._task = self._progress.add_task("", total=total)
        self._progress.start()

    def run_started(self, name: str) -> None:
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, description=name)

    def run_done(self, outcome: ConfigOutcome) -> None:
        if outcome.status == "failed":
            _stderr.print(
                f"cclq: error: {outcome.name}: {outcome.reason}", markup=False, highlight=False, soft_wrap=True
            )
        elif outcome.reason:
            _stderr.print(
                f"cclq: warning: {outcome.name}: invalid result: {outcome.reason}",
                markup=False,
                highlight=False,
                soft_wrap=True,
            )
        if self._progress is not None and self._task is not None:
            self._progress.advance(self._task)

    def finish(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None


def summary_table(outcomes: list[ConfigOutcome]) -> pa.Table:
    """One row per configuration: where it went, its DDLB numbers, or why it failed."""
    rows: list[dict[str, Any]] = []
    for o in outcomes:
        row = o.row or {}
        rows.append(
            {
                "workload": o.name,
                "status": o.status,
                "implementation": o.run.label,
                "sizes": " ".join(f"{k}={v}" for k, v in o.run.sizes.items()),
                "dtype": o.run.dtype,
                "mean_time_ms": row.get("mean_time (ms)"),
                "std_time_ms": row.get("std_time"),
                "tflops": row.get("Throughput (TFLOPS)"),
                "valid": row.get("valid"),
                "reason": o.reason,
                "seconds": round(o.seconds, 2),
            }
        )
    schema = pa.schema(
        [
            ("workload", pa.string()),
            ("status", pa.string()),
            ("implementation", pa.string()),
            ("sizes", pa.string()),
            ("dtype", pa.string()),
            ("mean_time_ms", pa.float64()),
            ("std_time_ms", pa.float64()),
            ("tflops", pa.float64()),
            ("valid", pa.bool_()),
            ("reason", pa.string()),
            ("seconds", pa.float64()),
        ]
    )
    return pa.Table.from_pylist(rows, schema=schema)
