"""Metric results split by trace: each trace's one-number summary, reason and rows.

Report, diff and board show metrics workload by workload, but compute them the fast
way: every metric once over all their traces on one connection
(``cclq.query.metrics.run_metrics``, cached). This module splits those result tables by
trace and reduces each trace's rows to the metric's declared ``summary``, the same
number ``python -m cclq.main`` prints, so every presentation shows the same value.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cclq.query.metrics import MetricRun, summarize_rows
from cclq.query.registry import MetricSpec

# Columns every result table has (``cclq.query.metrics._run_query`` puts them first).
FIXED_COLUMNS = ("trace", "rank", "step", "value", "unit", "reason")


@dataclass
class Outcome:
    """One metric for one trace."""

    spec: MetricSpec
    value: float | None  # the summary (mean over ranks, the value, ...), None if it does not apply
    reason: str | None  # why there is no value
    rows: list[dict[str, Any]] = field(default_factory=list)  # the trace's result rows, all columns
    failed: bool = False  # the metric itself failed (its SQL did not run), not this trace

    @property
    def applies(self) -> bool:
        return self.value is not None

    def rank_values(self) -> dict[int, float | None]:
        """rank -> value for a rank-grain metric (the rows that have a rank)."""
        return {r["rank"]: r["value"] for r in self.rows if r.get("rank") is not None}


def split_by_trace(runs: dict[str, MetricRun], traces: list[str]) -> dict[str, dict[str, Outcome]]:
    """trace -> metric name -> Outcome, for every trace in ``traces`` and every run."""
    out: dict[str, dict[str, Outcome]] = {t: {} for t in traces}
    for name, run in runs.items():
        # decided from the catalog: the trace cannot meet the metric's `applies_if` facts
        for t in traces:
            if t in run.not_applicable:
                out[t][name] = Outcome(run.spec, None, run.not_applicable[t])
        if run.table is None:
            for t in traces:
                if t not in run.not_applicable:
                    why = f"the metric failed: {run.error}" if run.error else "no result rows for this trace"
                    out[t][name] = Outcome(run.spec, None, why, failed=run.error is not None)
            continue
        by_trace: dict[str, list[dict[str, Any]]] = {}
        for row in run.table.to_pylist():
            by_trace.setdefault(row["trace"], []).append(row)
        for t in traces:
            if t in run.not_applicable:
                continue
            rows = by_trace.get(t, [])
            if not rows:
                out[t][name] = Outcome(run.spec, None, "no result rows for this trace")
                continue
            value, reason = summarize_rows(run.spec, rows)
            out[t][name] = Outcome(run.spec, value, reason, rows)
    return out
