"""``cclq report TRACE``: every metric of one run at once, grouped by category.

``collect_reports`` is shared with the board: it runs a set of metrics over every trace
of a connection in one process (each metric one query, or its cached result), splits
the results by trace (``cclq.query.outcomes``), and adds what the plots need from the views
(step durations, top ops, HTA's queue length, memory bandwidth and launch delays,
downsampled: ``cclq.query.hta_series``) and from the metric rows (per-rank straggler counts, the
temporal breakdown, bus bandwidth per message size, the critical path breakdown). ``report_dict`` is the JSON form
(``--format json``, and the board's stored data per workload); ``print_report`` the
table form.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TextIO

from cclq.present.units import for_people, people_text
from cclq.query.hta_series import QUERIES as HTA_QUERIES
from cclq.query.hta_series import hta_figure_data
from cclq.query.metrics import (
    MetricRun,
    batch_queries,
    run_metrics,
    shared_in_order,
    shared_views,
    start_on_lanes,
    uncached_queries,
)
from cclq.query.outcomes import Outcome, split_by_trace
from cclq.query.registry import CATEGORIES, MetricSpec
from cclq.query.session import Session
from cclq.query.trace_stats import OP_STATS_QUERY, STEP_DURATIONS_QUERY, op_stats, step_durations, top_ops
from cclq.query.workloads import WORKLOAD_QUERIES, WorkloadInfo, load_workloads

# Metrics the workload plots are drawn from (the board computes them besides the
# leaderboard's): per-rank bars, straggler counts, temporal breakdown, bus bandwidth.
FIGURE_METRICS = (
    "avg_step_time",
    "communication_fraction",
    "collective_skew",
    "hta_temporal_breakdown",
    "collective_busbw",
    "hta_critical_path_breakdown",
)
REPORT_VERSION = 4  # of the dict layout below; stored board data with another version is recomputed
# 2: figures gained "hta" (queue length, memory bandwidth, launch delays: cclq.query.hta_series)
# 3: figures gained "critical_path" (hta_critical_path_breakdown's rows)
# 4: "traced" (ranks traced of the world size, partial) and "hardware" (card, else the trace's GPUs)


@dataclass
class WorkloadReport:
    workload: WorkloadInfo
    outcomes: dict[str, Outcome]
    figures: dict[str, Any] = field(default_factory=dict)  # plot data (see _figure_data)
    assumptions: dict[str, str] = field(default_factory=dict)  # metric -> what its value takes for granted


def assumption_notes(
    specs: list[MetricSpec], workload: WorkloadInfo, has_gpu: bool, params: dict[str, str] | None
) -> dict[str, str]:
    """metric -> what its value takes for granted that this trace does not give (its
    header's ``assumes``): GPUs on a run without GPU kernels, a parameter's default
    standing for the hardware (bandwidth_utilization's 100 GB/s link) when neither
    ``--param`` nor the card set it."""
    notes: dict[str, str] = {}
    for spec in specs:
        said = []
        for what in spec.assumes:
            if what == "gpu":
                if not has_gpu:
                    said.append("assumes GPUs: this trace has no GPU kernel (a CPU-only run)")
                continue
            param = next((p for p in spec.params if p.name == what), None)
            if param is None or param.default is None or what in (params or {}):
                continue
            if param.card_column and workload.card.get(param.card_column) not in (None, ""):
                continue
            said.append(f"assumes {what} = {param.default} (the default; --param {what}=... sets it)")
        if said:
            notes[spec.name] = "; ".join(said)
    return notes


def _clean(v: Any) -> Any:
    """JSON-safe: NaN and infinities become null."""
    return None if isinstance(v, float) and not math.isfinite(v) else v


def _straggler_counts(outcome: Outcome | None) -> dict[str, Any] | None:
    """Per rank: how often it started a collective last (collective_skew's straggler_rank
    over the collectives seen on two or more ranks, the rows straggler_rank counts)."""
    if outcome is None or not outcome.rows or "straggler_rank" not in outcome.rows[0]:
        return None
    late: dict[int, int] = {}
    waited: dict[int, float] = {}
    matched = 0
    for r in outcome.rows:
        if r.get("ranks_seen") is None or r["ranks_seen"] < 2 or r.get("straggler_rank") is None:
            continue
        matched += 1
        rank = int(r["straggler_rank"])
        late[rank] = late.get(rank, 0) + 1
        waited[rank] = waited.get(rank, 0.0) + (r["value"] or 0.0)
    if not matched:
        return None
    return {"matched": matched, "late_count": sorted(late.items()), "late_skew_s": sorted(waited.items())}


def _rows(outcome: Outcome | None, columns: tuple[str, ...]) -> list[list[Any]] | None:
    if outcome is None or not outcome.applies or any(c not in outcome.rows[0] for c in columns):
        return None
    return [[_clean(r[c]) for c in columns] for r in outcome.rows if r["value"] is not None]


def _figure_data(
    outcomes: dict[str, Outcome], steps: list[tuple[int, int, float]], ops: dict[str, Any], hta: dict[str, Any]
) -> dict[str, Any]:
    return {
        "hta": hta,
        "steps": [list(s) for s in steps],
        "top_ops": ops,
        "straggler": _straggler_counts(outcomes.get("collective_skew")),
        "temporal": _rows(
            outcomes.get("hta_temporal_breakdown"),
            ("rank", "compute_time_us", "non_compute_time_us", "idle_time_us", "value"),
        ),
        "busbw": _rows(
            outcomes.get("collective_busbw"),
            ("coll_type", "size_bucket", "min_bytes", "max_bytes", "collectives", "value"),
        ),
        "critical_path": _rows(
            outcomes.get("hta_critical_path_breakdown"), ("rank", "bound_by", "duration_us", "percentage", "path_us")
        ),
    }


def collect_reports(
    session: Session,
    specs: list[MetricSpec],
    params: dict[str, str] | None = None,
    on_metric: Callable[[MetricRun], None] | None = None,
    on_shared: Callable[[list[str]], None] | None = None,
) -> dict[str, WorkloadReport]:
    """trace -> WorkloadReport for every trace the session sees. ``on_shared(names)``:
    the views the metrics and figures share, as they start to be computed (alongside the
    metrics that do not read them)."""
    # the figure queries read the views the metrics read: shared by all of them
    queries = batch_queries(session, specs, params, plan_first=True) + uncached_queries(
        session, [STEP_DURATIONS_QUERY, OP_STATS_QUERY, *HTA_QUERIES]
    )
    with shared_views(session, queries) as shared:
        if on_shared is not None:
            on_shared(shared_in_order(shared))
        # the figure queries and the workloads' facts run on the batch's lanes alongside the metrics
        workloads_run = start_on_lanes(session, "workloads", WORKLOAD_QUERIES, load_workloads)
        steps_run = start_on_lanes(session, "steps", [STEP_DURATIONS_QUERY[1]], step_durations)
        ops_run = start_on_lanes(session, "ops", [OP_STATS_QUERY[1]], op_stats)
        hta_run = start_on_lanes(
            session, "hta", [sql for _, sql in HTA_QUERIES], partial(hta_figure_data, shared=shared)
        )
        runs = run_metrics(session, specs, params, on_done=on_metric, plan_first=True, last=True)
        steps, ops, hta = steps_run.result(), ops_run.result(), hta_run.result()
        workloads = workloads_run.result()
    traces = sorted(workloads)
    outcomes = split_by_trace(runs, traces)
    return {
        t: WorkloadReport(
            workloads[t],
            outcomes[t],
            _figure_data(outcomes[t], steps.get(t, []), top_ops(ops.get(t, [])), hta.get(t, {})),
            assumption_notes(specs, workloads[t], any(s.source == "gpu" for s in ops.get(t, [])), params),
        )
        for t in traces
    }


def metric_entry(outcome: Outcome, rows: bool) -> dict[str, Any]:
    """One metric of one trace as a JSON object (``rows``: with every result row)."""
    spec = outcome.spec
    values = [r["value"] for r in outcome.rows if r["value"] is not None]
    entry: dict[str, Any] = {
        "metric": spec.name,
        "version": spec.version,
        "unit": spec.unit,
        "grain": spec.grain,
        "category": spec.category,
        "polarity": spec.polarity,
        "leaderboard": spec.leaderboard,
        "summary": spec.summary,
        "description": spec.description,
        "value": _clean(outcome.value),
        "reason": outcome.reason,
        "failed": outcome.failed,
        "rows_with_value": len(values),
        "rows_total": len(outcome.rows),
        # distinct (rank, step) among the rows with a value: tells "8 ranks" from "32 rows"
        "keys_with_value": len({(r.get("rank"), r.get("step")) for r in outcome.rows if r["value"] is not None}),
        "min": _clean(min(values)) if values else None,
        "max": _clean(max(values)) if values else None,
    }
    if spec.grain == "rank":
        entry["by_rank"] = [
            [r["rank"], _clean(r["value"]), r["reason"]] for r in outcome.rows if r.get("rank") is not None
        ]
    if rows:
        entry["rows"] = [{k: _clean(v) for k, v in r.items() if k not in ("trace", "unit")} for r in outcome.rows]
    return entry


def report_dict(report: WorkloadReport, rows: bool = True) -> dict[str, Any]:
    """The JSON form: the workload, then its metrics grouped by category (report order)."""
    w = report.workload
    groups = []
    for cat_id, title in CATEGORIES.items():
        outcomes = sorted((o for o in report.outcomes.values() if o.spec.category == cat_id), key=lambda o: o.spec.name)
        if outcomes:
            entries = [metric_entry(o, rows) for o in outcomes]
            for e in entries:
                if e["metric"] in report.assumptions and e["value"] is not None:
                    e["assumes"] = report.assumptions[e["metric"]]
            groups.append({"id": cat_id, "title": title, "metrics": entries})
    applies = sum(o.applies for o in report.outcomes.values())
    failed = sorted((o for o in report.outcomes.values() if o.failed), key=lambda o: o.spec.name)
    model, count, source = w.hardware()
    return {
        "report_version": REPORT_VERSION,
        "trace": w.trace,
        "headline": w.headline(),
        # what was traced: every number below covers these ranks only
        "traced": {
            "ranks_seen": w.info.get("ranks_seen"),
            "world_size": w.info.get("world_size"),
            "text": w.traced(),
            "partial": w.partial,
        },
        "hardware": {"model": model, "count": count, "source": source},
        "parallelism": w.parallelism(),
        "info": {k: _clean(v) for k, v in w.info.items()},
        "metadata": w.metadata(),
        "metrics_applied": applies,
        # a metric whose SQL failed is neither: listed with its error, never as "n/a"
        "metrics_not_applicable": len(report.outcomes) - applies - len(failed),
        "metrics_failed": [{"metric": o.spec.name, "reason": o.reason} for o in failed],
        "categories": groups,
        "figures": report.figures,
    }


def spread(entry: dict[str, Any]) -> str:
    """How the value summarises the rows: 'mean of 8 ranks (0.0125 .. 0.0199)'."""
    n = entry["rows_with_value"]
    if entry["value"] is None or n <= 1:
        return ""
    one_per_key = entry.get("keys_with_value") == n
    what = {"rank": "ranks", "step": "rank-steps"}.get(entry["grain"], "rows") if one_per_key else "rows"
    how = {"mean": "mean", "sum": "sum", "max": "max", "min": "min", "value": "first", "ratio": "pooled ratio"}[
        entry["summary"]
    ]
    text = f"{how} of {n} {what}"
    if entry["min"] is not None and entry["min"] != entry["max"]:
        text += f" ({people_text(entry['min'], entry['unit'])} .. {people_text(entry['max'], entry['unit'])})"
    return text


def print_report(data: dict[str, Any], out: TextIO, all_metrics: bool = False) -> None:
    """The table form: a heading, then one table per category, values in units for people
    (``cclq.present.units``; ``--format json`` has the exact ones). The metrics that do not
    apply are folded into one line with their count (``all_metrics``: a row each, with the
    reason)."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from cclq.present.render import cell

    console = Console(file=out, width=None if out.isatty() else 160, highlight=False)
    info = data["info"]
    console.print(cell(data["trace"], style="bold"), cell(f"  {data['headline']}") if data["headline"] else "")
    traced = data.get("traced") or {}
    partial = traced.get("partial")
    hw = data.get("hardware") or {}
    facts = [
        info.get("format"),
        traced.get("text") or f"{info.get('ranks_seen')} rank(s) of world size {info.get('world_size')}",
        f"{hw['count']} x {hw['model']} (from the trace's deviceProperties)"
        if hw.get("source") == "trace" and hw.get("count")
        else None,
        f"span {people_text(info['span_s'], 's')}" if info.get("span_s") is not None else None,
        f"{info.get('events'):,} events" if info.get("events") is not None else None,
        f"parallelism {data['parallelism']}" if data["parallelism"] else None,
    ]
    console.print(cell(", ".join(str(f) for f in facts if f)))
    if partial:
        console.print(Text(f"PARTIAL: {partial} traced; every number below covers those ranks only", style="bold"))
    console.print(
        f"{data['metrics_applied']} metrics apply, {data['metrics_not_applicable']} do not "
        + ("(value n/a with the reason)" if all_metrics else "(--all-metrics lists them with the reason)")
        + (f", {len(data['metrics_failed'])} FAILED" if data["metrics_failed"] else "")
    )
    folded: list[str] = []
    for group in data["categories"]:
        if not all_metrics:
            folded += [e["metric"] for e in group["metrics"] if e["value"] is None and not e["failed"]]
            group = {**group, "metrics": [e for e in group["metrics"] if e["value"] is not None or e["failed"]]}
            if not group["metrics"]:
                continue
        title = group["title"] + (f" (partial: {partial})" if partial else "")
        t = Table(title=title, title_justify="left", header_style="bold", show_lines=False)
        columns = [("metric", "left"), ("value", "right"), ("unit", "left"), ("over", "left")]
        for col, justify in columns + ([("note", "left")] if all_metrics else []):
            t.add_column(col, justify=justify, overflow="fold")  # type: ignore[arg-type]
        for e in group["metrics"]:
            if e["failed"]:
                t.add_row(
                    cell(e["metric"]),
                    Text("failed", style="bold red"),
                    cell(e["unit"]),
                    cell(e["reason"] or "", style="red"),
                    *([""] if all_metrics else []),
                )
            elif e["value"] is None:
                t.add_row(
                    cell(e["metric"]),
                    Text("n/a", style="dim"),
                    cell(e["unit"]),
                    "",
                    cell(e["reason"] or "", style="dim"),
                )
            else:
                number, unit = for_people(e["value"], e["unit"])
                over = "; ".join(x for x in (spread(e), e.get("assumes", "")) if x)
                t.add_row(cell(e["metric"]), number, cell(unit), cell(over), *([""] if all_metrics else []))
        console.print(t)
    if folded:
        console.print(
            Text(
                f"{len(folded)} not applicable: {', '.join(folded)} (--all-metrics shows them with the reason)",
                style="dim",
            )
        )
