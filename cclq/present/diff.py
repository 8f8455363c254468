"""``cclq diff A B``: two runs (or two sets of runs) side by side.

Two parts, both computed in one process on one connection:

* metrics: every metric that applies to either side, its value on A and on B, the
  absolute change ``B - A``, the relative change ``(B - A) / |A|``, and whether that is
  better or worse by the metric's polarity. A side's value is the metric's summary for
  its trace (for a set of traces, the mean of their summaries). Per-rank metrics are
  also compared rank by rank when both sides are one trace with the same ranks.
* ops, in the spirit of HTA's trace diff: per kernel name (XLA op name for XLA
  profiles) the calls and total time on A and on B and the change, sorted by the size
  of the time change; names on one side only are marked ``only A`` / ``only B``. Also
  per kernel class and per collective type. When the two sides cover the same ranks
  (the same rank set on every trace) times are totals; otherwise they are divided by
  each side's rank count (per-rank means), so runs of different sizes compare.
  ``--rank R`` compares that rank alone on both sides.
"""

from __future__ import annotations

import fnmatch
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cclq.errors import UsageError
from cclq.query.metrics import MetricRun, batch_queries, run_metrics, shared_views, uncached_queries
from cclq.query.outcomes import Outcome, split_by_trace
from cclq.query.registry import MetricSpec, did_you_mean
from cclq.query.session import Session
from cclq.query.trace_stats import OP_STATS_QUERY, OpStat, op_stats
from cclq.query.workloads import load_workloads


def resolve_side(spec: str, known: list[str]) -> list[str]:
    """A side on the command line: a trace id, ids separated by commas, or glob patterns."""
    out: list[str] = []
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        if any(c in part for c in "*?["):
            matched = fnmatch.filter(known, part)
            if not matched:
                raise UsageError(f"no trace matches {part!r}", hint="`cclq traces` lists them")
            out += matched
        elif part in known:
            out.append(part)
        else:
            raise UsageError(f"no trace {part!r} in the warehouse",
                             hint=did_you_mean(part, known, "`cclq traces` lists them"))
    if not out:
        raise UsageError(f"{spec!r} names no trace")
    return sorted(dict.fromkeys(out))


def _rel(a: float | None, b: float | None, unit: str = "") -> float | None:
    """(b - a) / |a|; none for a zero base, or for a rank id (its ratio means nothing)."""
    if a is None or b is None or a == 0 or unit == "rank":
        return None
    return (b - a) / abs(a)


def _verdict(spec: MetricSpec, a: float | None, b: float | None) -> str:
    if a is None or b is None or a == b or spec.polarity == "neutral":
        return ""
    return "better" if (b > a) == (spec.polarity == "higher") else "worse"


@dataclass
class DiffResult:
    a: list[str]
    b: list[str]
    basis: str  # "total" or "per rank": how op times are compared
    ranks: str  # which ranks the op part covers
    metrics: list[dict[str, Any]] = field(default_factory=list)
    op_groups: list[dict[str, Any]] = field(default_factory=list)  # per class and per collective type
    ops: list[dict[str, Any]] = field(default_factory=list)  # per op name, by |time change|


def _side_value(outcomes: list[Outcome]) -> tuple[float | None, str | None]:
    values = [o.value for o in outcomes if o.value is not None]
    if values:
        return statistics.fmean(values), None
    reasons = sorted({o.reason for o in outcomes if o.reason})
    return None, "; ".join(reasons) or "no value"


def _metric_rows(specs: list[MetricSpec], per_trace: dict[str, dict[str, Outcome]], a: list[str], b: list[str],
                 same_ranks: bool) -> list[dict[str, Any]]:
    rows = []
    for spec in specs:
        oa = [per_trace[t][spec.name] for t in a]
        ob = [per_trace[t][spec.name] for t in b]
        va, why_a = _side_value(oa)
        vb, why_b = _side_value(ob)
        if va is None and vb is None:
            continue  # applies to neither side
        note = "; ".join(f"{side}: {why}" for side, why in (("A", why_a), ("B", why_b)) if why)
        rows.append({"metric": spec.name, "rank": None, "unit": spec.unit, "a": va, "b": vb,
                     "delta": None if va is None or vb is None else vb - va, "rel": _rel(va, vb, spec.unit),
                     "verdict": _verdict(spec, va, vb), "note": note})
        if spec.grain == "rank" and same_ranks and len(a) == len(b) == 1:
            ra, rb = oa[0].rank_values(), ob[0].rank_values()
            for rank in sorted(set(ra) | set(rb)):
                x, y = ra.get(rank), rb.get(rank)
                if x is None and y is None:
                    continue
                rows.append({"metric": spec.name, "rank": rank, "unit": spec.unit, "a": x, "b": y,
                             "delta": None if x is None or y is None else y - x, "rel": _rel(x, y, spec.unit),
                             "verdict": _verdict(spec, x, y), "note": ""})
    return rows


def _aggregate(stats: list[OpStat], key: Callable[[OpStat], tuple[Any, ...] | None], scale: float
               ) -> dict[tuple[Any, ...], list[float]]:
    out: dict[tuple[Any, ...], list[float]] = {}
    for s in stats:
        k = key(s)
        if k is None:
            continue
        entry = out.setdefault(k, [0.0, 0.0])
        entry[0] += s.calls / scale
        entry[1] += s.total_ns / 1e9 / scale
    return out


def _compare(a: dict[tuple[Any, ...], list[float]], b: dict[tuple[Any, ...], list[float]],
             names: tuple[str, ...]) -> list[dict[str, Any]]:
    rows = []
    for key in set(a) | set(b):
        ca, ta = a.get(key, [0.0, 0.0])
        cb, tb = b.get(key, [0.0, 0.0])
        status = "both" if key in a and key in b else ("only A" if key in a else "only B")
        rows.append({**dict(zip(names, key)), "calls_a": ca, "calls_b": cb, "time_a_s": ta, "time_b_s": tb,
                     "delta_s": tb - ta, "rel": _rel(ta, tb) if key in a else None, "status": status})
    rows.sort(key=lambda r: (-abs(r["delta_s"]), *(str(r[n]) for n in names)))
    return rows


def diff(
    session: Session,
    specs: list[MetricSpec],
    a: list[str],
    b: list[str],
    params: dict[str, str] | None = None,
    rank: int | None = None,
    on_metric: Callable[[MetricRun], None] | None = None,
) -> DiffResult:
    """Compares side ``a`` with side ``b`` (trace ids; the session must see both)."""
    both = set(a) & set(b)
    if both:
        raise UsageError(f"{', '.join(sorted(both))} is on both sides of the diff")
    workloads = load_workloads(session)
    rank_sets_a = sorted(tuple(workloads[t].info.get("ranks") or []) for t in a)
    rank_sets_b = sorted(tuple(workloads[t].info.get("ranks") or []) for t in b)
    same_ranks = rank_sets_a == rank_sets_b
    if rank is not None:
        missing = [t for t in a + b if rank not in (workloads[t].info.get("ranks") or [])]
        if missing:
            raise UsageError(f"rank {rank} is not in {', '.join(missing)}")
    # the op statistics read the views the metrics read: shared by both
    queries = batch_queries(session, specs, params, plan_first=True) + uncached_queries(session, [OP_STATS_QUERY])
    with shared_views(session, queries):
        runs = run_metrics(session, specs, params, on_done=on_metric, plan_first=True)
        stats = op_stats(session)
    per_trace = split_by_trace(runs, sorted(set(a) | set(b)))
    metrics = _metric_rows(specs, per_trace, a, b, same_ranks or rank is not None)
    if rank is not None:  # per-rank metrics of that rank only
        metrics = [m for m in metrics if m["rank"] in (None, rank)]
    side_a = [s for t in a for s in stats.get(t, []) if rank is None or s.rank == rank]
    side_b = [s for t in b for s in stats.get(t, []) if rank is None or s.rank == rank]
    if rank is not None:
        basis, scale_a, scale_b, ranks = "total", 1.0, 1.0, f"rank {rank} on both sides"
    elif same_ranks:
        n = sum(len(r) for r in rank_sets_a)
        basis, scale_a, scale_b, ranks = "total", 1.0, 1.0, f"the same {n} rank(s) on both sides"
    else:
        na, nb = sum(len(r) for r in rank_sets_a) or 1, sum(len(r) for r in rank_sets_b) or 1
        basis, scale_a, scale_b = "per rank", float(na), float(nb)
        ranks = f"A has {na} rank(s), B {nb}: times and calls are per-rank means"
    groups = []
    for label, key in (("class", lambda s: (s.op_class,)),
                       ("collective", lambda s: (s.coll_type,) if s.coll_type else None)):
        for row in _compare(_aggregate(side_a, key, scale_a), _aggregate(side_b, key, scale_b), ("name",)):
            groups.append({"group": label, **row})
    ops = _compare(_aggregate(side_a, lambda s: (s.name, s.op_class), scale_a),
                   _aggregate(side_b, lambda s: (s.name, s.op_class), scale_b), ("name", "class"))
    return DiffResult(a, b, basis, ranks, metrics, groups, ops)


# ----------------------------------------------------------------------- output
DIFF_COLUMNS = ("part", "name", "rank", "unit", "group", "class", "a", "b", "delta", "rel", "verdict",
                "calls_a", "calls_b", "status", "note")


def long_rows(result: DiffResult) -> list[dict[str, Any]]:
    """Every row of the three parts in one long table (``part`` says which): CSV's form."""
    out = []
    for m in result.metrics:
        out.append({"part": "metric", "name": m["metric"], "rank": m["rank"], "unit": m["unit"], "a": m["a"],
                    "b": m["b"], "delta": m["delta"], "rel": m["rel"], "verdict": m["verdict"], "note": m["note"]})
    for g in result.op_groups:
        out.append({"part": "op_group", "name": g["name"], "unit": "s", "group": g["group"], "a": g["time_a_s"],
                    "b": g["time_b_s"], "delta": g["delta_s"], "rel": g["rel"], "calls_a": g["calls_a"],
                    "calls_b": g["calls_b"], "status": g["status"], "note": result.basis})
    for o in result.ops:
        out.append({"part": "op", "name": o["name"], "unit": "s", "class": o["class"], "a": o["time_a_s"],
                    "b": o["time_b_s"], "delta": o["delta_s"], "rel": o["rel"], "calls_a": o["calls_a"],
                    "calls_b": o["calls_b"], "status": o["status"], "note": result.basis})
    return [{c: r.get(c) for c in DIFF_COLUMNS} for r in out]


def diff_dict(result: DiffResult) -> dict[str, Any]:
    return {"a": result.a, "b": result.b, "op_basis": result.basis, "op_ranks": result.ranks,
            "metrics": result.metrics, "op_groups": result.op_groups, "ops": result.ops}


def _pct(rel: float | None) -> str:
    return "" if rel is None else f"{rel:+.1%}"


def print_diff(result: DiffResult, out: Any, top: int = 30) -> None:
    """The table form: metrics, then time by kernel class / collective type, then the ops
    with the largest time change."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from cclq.present.render import cell
    from cclq.present.render import format_number as num

    def f(v: float | None) -> str:
        return "" if v is None else num(v)

    def row(table: Table, *cells: Any) -> None:  # names and notes come from traces: never markup
        table.add_row(*(cell(c) for c in cells))

    console = Console(file=out, width=None if out.isatty() else 170, highlight=False)
    console.print(Text("A: ", style="bold") + cell(", ".join(result.a)))
    console.print(Text("B: ", style="bold") + cell(", ".join(result.b)))
    t = Table(title="metrics: B against A", title_justify="left", header_style="bold")
    for col, just in (("metric", "left"), ("rank", "right"), ("unit", "left"), ("A", "right"), ("B", "right"),
                      ("B - A", "right"), ("change", "right"), ("", "left"), ("note", "left")):
        t.add_column(col, justify=just, overflow="fold")  # type: ignore[arg-type]
    for m in result.metrics:
        style = {"better": "green", "worse": "red"}.get(m["verdict"], "")
        row(t, m["metric"] if m["rank"] is None else "", "" if m["rank"] is None else str(m["rank"]), m["unit"],
            f(m["a"]) if m["a"] is not None else Text("n/a", style="dim"),
            f(m["b"]) if m["b"] is not None else Text("n/a", style="dim"),
            f(m["delta"]), Text(_pct(m["rel"]), style=style), Text(m["verdict"], style=style),
            Text(m["note"], style="dim"))
    console.print(t)
    g = Table(title=f"op time by kernel class and collective type ({result.ranks})", title_justify="left",
              header_style="bold")
    for col in ("group", "name", "calls A", "calls B", "time A (s)", "time B (s)", "B - A (s)", "change", ""):
        g.add_column(col, justify="left" if col in ("group", "name", "") else "right")
    for r in result.op_groups:
        row(g, r["group"], str(r["name"]), f(r["calls_a"]), f(r["calls_b"]), f(r["time_a_s"]), f(r["time_b_s"]),
            f(r["delta_s"]), _pct(r["rel"]), "" if r["status"] == "both" else r["status"])
    console.print(g)
    only_a = sum(o["status"] == "only A" for o in result.ops)
    only_b = sum(o["status"] == "only B" for o in result.ops)
    k = Table(title=f"ops with the largest time change (top {min(top, len(result.ops))} of {len(result.ops)} names; "
                    f"{only_a} only in A, {only_b} only in B)", title_justify="left", header_style="bold")
    for col in ("name", "class", "calls A", "calls B", "time A (s)", "time B (s)", "B - A (s)", "change", ""):
        k.add_column(col, justify="left" if col in ("name", "class", "") else "right",
                     overflow="fold", max_width=70 if col == "name" else None)
    for o in result.ops[:top]:
        name = o["name"] if len(o["name"]) <= 100 else o["name"][:99] + "\u2026"  # CSV/JSON keep it whole
        row(k, name, o["class"], f(o["calls_a"]), f(o["calls_b"]), f(o["time_a_s"]), f(o["time_b_s"]),
            f(o["delta_s"]), _pct(o["rel"]), "" if o["status"] == "both" else o["status"])
    console.print(k)
