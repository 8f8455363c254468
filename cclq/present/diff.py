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
* benchmark results: what the benchmark measured about itself (the ``results`` rows of
  a DDLB CSV, ``cclq record``'s ddlb_results.csv, a serving benchmark's JSON): per
  configuration (shape, dtype, world size) and result metric (``mean_time_ms``, ...)
  the value on A and on B, the change, and DDLB's ``valid`` on each side. When each
  side holds one configuration (two ``cclq record`` workloads) those two are compared,
  whatever differs between them (gloo against nccl, 4 kB against 1 MB), and the header
  names both; otherwise rows match by configuration, the implementation left out of it
  when each side holds one. A ``cclq record`` run on CPU has no GPU op: the table form then says so
  instead of printing empty op tables.
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
from cclq.query.trace_stats import OP_STATS_QUERY, BenchmarkResult, OpStat, benchmark_results, op_stats
from cclq.query.workloads import WorkloadInfo, load_workloads


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
            raise UsageError(
                f"no trace {part!r} in the warehouse", hint=did_you_mean(part, known, "`cclq traces` lists them")
            )
    if not out:
        raise UsageError(f"{spec!r} names no trace")
    return sorted(dict.fromkeys(out))


def _rel(a: float | None, b: float | None, unit: str = "") -> float | None:
    """(b - a) / |a|; none for a zero base, or for a rank id (its ratio means nothing)."""
    if a is None or b is None or a == 0 or unit == "rank":
        return None
    return (b - a) / abs(a)


VERDICT_STYLE = {"better": "green", "worse": "red"}  # how a verdict is coloured in the tables


def _verdict(polarity: str, a: float | None, b: float | None) -> str:
    """B against A, for a value whose better direction is ``polarity`` (higher, lower, neutral)."""
    if a is None or b is None or a == b or polarity == "neutral":
        return ""
    return "better" if (b > a) == (polarity == "higher") else "worse"


@dataclass
class DiffResult:
    a: list[str]
    b: list[str]
    basis: str  # "total" or "per rank": how op times are compared
    ranks: str  # which ranks the op part covers
    metrics: list[dict[str, Any]] = field(default_factory=list)
    op_groups: list[dict[str, Any]] = field(default_factory=list)  # per class and per collective type
    ops: list[dict[str, Any]] = field(default_factory=list)  # per op name, by |time change|
    results: list[dict[str, Any]] = field(default_factory=list)  # benchmark results rows, matched
    results_note: str = ""  # how results were matched (the two implementations when they differ)
    failed: list[dict[str, str]] = field(default_factory=list)  # metrics whose SQL failed: metric, reason
    # what was traced on each side (facts: hardware, world size, traced, framework) and
    # the facts in which A and B differ, said before the tables
    traced: dict[str, dict[str, str]] = field(default_factory=dict)
    differences: list[str] = field(default_factory=list)


def _side_facts(infos: list[WorkloadInfo]) -> dict[str, str]:
    """One side's hardware, world size, ranks traced (partial or whole) and framework, each
    the distinct values of its traces joined ('n/a' where nothing says)."""

    def join(values: list[Any]) -> str:
        shown = list(dict.fromkeys(str(v) for v in values if v not in (None, "")))
        return ", ".join(shown) if shown else "n/a"

    hardware = []
    for w in infos:
        model, count, source = w.hardware()
        hardware.append(f"{count} x {model}" if model and count else model)
    return {
        "hardware": join(hardware),
        "world size": join([w.info.get("world_size") for w in infos]),
        "partial": join([w.partial or "no" for w in infos]),
        "traced": join([w.traced() for w in infos]),
        "framework": join(
            [w.card.get("framework") or (f"{w.info['format']} trace" if w.info.get("format") else None) for w in infos]
        ),
    }


def what_differs(a: dict[str, str], b: dict[str, str]) -> list[str]:
    """'hardware: A 8 x A100, B 2 x V100' for each fact of ``_side_facts`` that differs
    (hardware, world size, partial status, framework): why op tables of two generations
    of GPUs or of a sample against a whole run disagree."""
    return [
        f"{key}: A {a[key]}, B {b[key]}"
        for key in ("hardware", "world size", "partial", "framework")
        if a[key] != b[key]
    ]


def _side_value(outcomes: list[Outcome]) -> tuple[float | None, str | None]:
    values = [o.value for o in outcomes if o.value is not None]
    if values:
        return statistics.fmean(values), None
    reasons = sorted({o.reason for o in outcomes if o.reason})
    return None, "; ".join(reasons) or "no value"


def _metric_rows(
    specs: list[MetricSpec], per_trace: dict[str, dict[str, Outcome]], a: list[str], b: list[str], same_ranks: bool
) -> list[dict[str, Any]]:
    rows = []
    for spec in specs:
        oa = [per_trace[t][spec.name] for t in a]
        ob = [per_trace[t][spec.name] for t in b]
        va, why_a = _side_value(oa)
        vb, why_b = _side_value(ob)
        if va is None and vb is None:
            continue  # applies to neither side
        note = "; ".join(f"{side}: {why}" for side, why in (("A", why_a), ("B", why_b)) if why)
        rows.append(
            {
                "metric": spec.name,
                "rank": None,
                "unit": spec.unit,
                "a": va,
                "b": vb,
                "delta": None if va is None or vb is None else vb - va,
                "rel": _rel(va, vb, spec.unit),
                "verdict": _verdict(spec.polarity, va, vb),
                "note": note,
            }
        )
        if spec.grain == "rank" and same_ranks and len(a) == len(b) == 1:
            ra, rb = oa[0].rank_values(), ob[0].rank_values()
            for rank in sorted(set(ra) | set(rb)):
                x, y = ra.get(rank), rb.get(rank)
                if x is None and y is None:
                    continue
                rows.append(
                    {
                        "metric": spec.name,
                        "rank": rank,
                        "unit": spec.unit,
                        "a": x,
                        "b": y,
                        "delta": None if x is None or y is None else y - x,
                        "rel": _rel(x, y, spec.unit),
                        "verdict": _verdict(spec.polarity, x, y),
                        "note": "",
                    }
                )
    return rows


def _aggregate(
    stats: list[OpStat], key: Callable[[OpStat], tuple[Any, ...] | None], scale: float
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


def _compare(
    a: dict[tuple[Any, ...], list[float]], b: dict[tuple[Any, ...], list[float]], names: tuple[str, ...]
) -> list[dict[str, Any]]:
    rows = []
    for key in set(a) | set(b):
        ca, ta = a.get(key, [0.0, 0.0])
        cb, tb = b.get(key, [0.0, 0.0])
        status = "both" if key in a and key in b else ("only A" if key in a else "only B")
        rows.append(
            {
                **dict(zip(names, key)),
                "calls_a": ca,
                "calls_b": cb,
                "time_a_s": ta,
                "time_b_s": tb,
                "delta_s": tb - ta,
                "rel": _rel(ta, tb) if key in a else None,
                "status": status,
            }
        )
    rows.sort(key=lambda r: (-abs(r["delta_s"]), *(str(r[n]) for n in names)))
    return rows


def _result_polarity(metric: str, unit: str | None) -> str:
    """Times are better lower, throughputs higher; anything else has no direction."""
    if unit in ("ms", "s", "us", "ns"):
        return "lower"
    if unit == "TFLOPS" or (unit or "").endswith("/s") or "throughput" in metric:
        return "higher"
    return "neutral"


def _config(r: BenchmarkResult, with_impl: bool = True, with_shape: bool = True) -> tuple[Any, ...]:
    shape = (r.m, r.n, r.k, r.dtype, r.world_size) if with_shape else (None,) * 5
    return (r.benchmark, r.implementation if with_impl else None, *shape)


def _config_text(key: tuple[Any, ...]) -> str:
    _, _, m, n, k, dtype, world = key
    parts = [f"m={m} n={n} k={k}" if m is not None else "", dtype or "", f"np={world}" if world is not None else ""]
    return " ".join(p for p in parts if p)


def _describe(key: tuple[Any, ...]) -> str:
    return " ".join(p for p in (key[1] or "", _config_text(key)) if p)


def _valid(values: list[bool | None]) -> bool | None:
    """A side's validation verdict: False when any run failed it, True when all passed."""
    known = [v for v in values if v is not None]
    return None if not known else all(known)


def compare_results(a: list[BenchmarkResult], b: list[BenchmarkResult]) -> tuple[list[dict[str, Any]], str]:
    """Matches the two sides' benchmark results by configuration and metric (several runs
    of one on a side: their mean). Returns the rows and a note on how they were matched."""
    configs_a, configs_b = {_config(r) for r in a}, {_config(r) for r in b}
    impls_a = sorted({r.implementation or "" for r in a})
    impls_b = sorted({r.implementation or "" for r in b})
    note = ""
    if len(configs_a) == 1 and len(configs_b) == 1:
        # one configuration a side (two `cclq record` workloads): those two are compared
        with_impl = with_shape = False
        (ca,), (cb,) = configs_a, configs_b
        if ca != cb:
            note = f"A: {_describe(ca)}; B: {_describe(cb)}"
    else:
        with_shape = True
        with_impl = not (len(impls_a) == 1 and len(impls_b) == 1)
        if not with_impl and impls_a != impls_b:
            note = f"implementation A: {impls_a[0]}; B: {impls_b[0]}"

    def side(rows: list[BenchmarkResult]) -> dict[tuple[Any, ...], dict[str, Any]]:
        out: dict[tuple[Any, ...], dict[str, Any]] = {}
        for r in rows:
            e = out.setdefault(
                (*_config(r, with_impl, with_shape), r.metric), {"values": [], "valid": [], "unit": r.unit}
            )
            if r.value is not None:
                e["values"].append(r.value)
            e["valid"].append(r.valid)
        return out

    sa, sb = side(a), side(b)
    valid_a = {k[:-1]: _valid(v["valid"]) for k, v in sa.items()}
    valid_b = {k[:-1]: _valid(v["valid"]) for k, v in sb.items()}
    rows = []
    for key in sorted(set(sa) | set(sb), key=lambda k: tuple("" if x is None else str(x) for x in k)):
        ea, eb = sa.get(key), sb.get(key)
        va = statistics.fmean(ea["values"]) if ea and ea["values"] else None
        vb = statistics.fmean(eb["values"]) if eb and eb["values"] else None
        unit = (ea or eb or {}).get("unit")
        verdict = _verdict(_result_polarity(key[-1], unit), va, vb)
        rows.append(
            {
                "benchmark": key[0],
                "implementation": key[1],
                "config": _config_text(key[:-1]),
                "metric": key[-1],
                "unit": unit,
                "a": va,
                "b": vb,
                "delta": None if va is None or vb is None else vb - va,
                "rel": _rel(va, vb),
                "verdict": verdict,
                "valid_a": valid_a.get(key[:-1]),
                "valid_b": valid_b.get(key[:-1]),
                "status": "both" if ea and eb else ("only A" if ea else "only B"),
            }
        )
    if len(configs_a) == 1 and configs_a == configs_b:
        for row in rows:  # the one configuration of both sides
            row["config"], row["implementation"] = _config_text(next(iter(configs_a))), impls_a[0] or None
    return rows, note


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
    for label, key in (
        ("class", lambda s: (s.op_class,)),
        ("collective", lambda s: (s.coll_type,) if s.coll_type else None),
    ):
        for row in _compare(_aggregate(side_a, key, scale_a), _aggregate(side_b, key, scale_b), ("name",)):
            groups.append({"group": label, **row})
    ops = _compare(
        _aggregate(side_a, lambda s: (s.name, s.op_class), scale_a),
        _aggregate(side_b, lambda s: (s.name, s.op_class), scale_b),
        ("name", "class"),
    )
    results = benchmark_results(session)
    result_rows, note = compare_results(
        [r for t in a for r in results.get(t, [])], [r for t in b for r in results.get(t, [])]
    )
    failed = [{"metric": name, "reason": run.error} for name, run in sorted(runs.items()) if run.error]
    facts_a, facts_b = _side_facts([workloads[t] for t in a]), _side_facts([workloads[t] for t in b])
    return DiffResult(
        a,
        b,
        basis,
        ranks,
        metrics,
        groups,
        ops,
        result_rows,
        note,
        failed,
        {"A": facts_a, "B": facts_b},
        what_differs(facts_a, facts_b),
    )


# ----------------------------------------------------------------------- output
DIFF_COLUMNS = (
    "part",
    "name",
    "rank",
    "unit",
    "group",
    "class",
    "a",
    "b",
    "delta",
    "rel",
    "verdict",
    "calls_a",
    "calls_b",
    "valid_a",
    "valid_b",
    "status",
    "note",
)


def long_rows(result: DiffResult) -> list[dict[str, Any]]:
    """Every row of the three parts in one long table (``part`` says which): CSV's form."""
    out = []
    for m in result.metrics:
        out.append(
            {
                "part": "metric",
                "name": m["metric"],
                "rank": m["rank"],
                "unit": m["unit"],
                "a": m["a"],
                "b": m["b"],
                "delta": m["delta"],
                "rel": m["rel"],
                "verdict": m["verdict"],
                "note": m["note"],
            }
        )
    for g in result.op_groups:
        out.append(
            {
                "part": "op_group",
                "name": g["name"],
                "unit": "s",
                "group": g["group"],
                "a": g["time_a_s"],
                "b": g["time_b_s"],
                "delta": g["delta_s"],
                "rel": g["rel"],
                "calls_a": g["calls_a"],
                "calls_b": g["calls_b"],
                "status": g["status"],
                "note": result.basis,
            }
        )
    for o in result.ops:
        out.append(
            {
                "part": "op",
                "name": o["name"],
                "unit": "s",
                "class": o["class"],
                "a": o["time_a_s"],
                "b": o["time_b_s"],
                "delta": o["delta_s"],
                "rel": o["rel"],
                "calls_a": o["calls_a"],
                "calls_b": o["calls_b"],
                "status": o["status"],
                "note": result.basis,
            }
        )
    for f in result.failed:
        out.append({"part": "metric", "name": f["metric"], "status": "failed", "note": f["reason"]})
    for r in result.results:
        out.append(
            {
                "part": "result",
                "name": r["metric"],
                "unit": r["unit"],
                "group": r["config"],
                "class": r["implementation"],
                "a": r["a"],
                "b": r["b"],
                "delta": r["delta"],
                "rel": r["rel"],
                "verdict": r["verdict"],
                "valid_a": r["valid_a"],
                "valid_b": r["valid_b"],
                "status": r["status"],
                "note": result.results_note,
            }
        )
    return [{c: r.get(c) for c in DIFF_COLUMNS} for r in out]


def long_table(result: DiffResult) -> Any:  # noqa: ANN401 - a pyarrow Table
    """``long_rows`` with a column type each (numbers as numbers, the rest text): the
    CSV and Parquet of ``cclq diff``. Imports pyarrow, which only these formats need."""
    import pyarrow as pa

    types = {
        "rank": pa.int64(),
        "a": pa.float64(),
        "b": pa.float64(),
        "delta": pa.float64(),
        "rel": pa.float64(),
        "calls_a": pa.float64(),
        "calls_b": pa.float64(),
        "valid_a": pa.bool_(),
        "valid_b": pa.bool_(),
    }
    schema = pa.schema([(c, types.get(c, pa.string())) for c in DIFF_COLUMNS])
    return pa.Table.from_pylist(long_rows(result), schema=schema)


def diff_dict(result: DiffResult) -> dict[str, Any]:
    return {
        "a": result.a,
        "b": result.b,
        "traced": result.traced,
        "differences": result.differences,
        "op_basis": result.basis,
        "op_ranks": result.ranks,
        "metrics": result.metrics,
        "op_groups": result.op_groups,
        "ops": result.ops,
        "results": result.results,
        "results_note": result.results_note,
        "failed": result.failed,
    }


def _yes_no(valid: bool | None) -> str:
    return "" if valid is None else ("yes" if valid else "NO")


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
    for side, traces in (("A", result.a), ("B", result.b)):
        facts = result.traced.get(side, {})
        line = Text(f"{side}: ", style="bold") + cell(", ".join(traces))
        if facts:
            line += cell(f"  ({facts['traced']}; {facts['hardware']}; {facts['framework']})")
        console.print(line)
        if facts.get("partial", "no") != "no":
            console.print(
                Text(f"{side} is PARTIAL ({facts['partial']} traced): its numbers cover those ranks only", style="bold")
            )
    if result.differences:  # before any table: what makes the numbers not like for like
        console.print(Text("A and B differ in what was traced:", style="bold"))
        for d in result.differences:
            console.print(cell(f"  {d}"))
    if result.metrics:
        partial = "; ".join(
            f"{s} partial: {f['partial']}" for s, f in result.traced.items() if f.get("partial", "no") != "no"
        )
        t = Table(
            title="metrics: B against A" + (f" ({partial})" if partial else ""),
            title_justify="left",
            header_style="bold",
        )
        for col, just in (
            ("metric", "left"),
            ("rank", "right"),
            ("unit", "left"),
            ("A", "right"),
            ("B", "right"),
            ("B - A", "right"),
            ("change", "right"),
            ("", "left"),
            ("note", "left"),
        ):
            t.add_column(col, justify=just, overflow="fold")  # type: ignore[arg-type]
        for m in result.metrics:
            style = VERDICT_STYLE.get(m["verdict"], "")
            row(
                t,
                m["metric"] if m["rank"] is None else "",
                "" if m["rank"] is None else str(m["rank"]),
                m["unit"],
                f(m["a"]) if m["a"] is not None else Text("n/a", style="dim"),
                f(m["b"]) if m["b"] is not None else Text("n/a", style="dim"),
                f(m["delta"]),
                Text(_pct(m["rel"]), style=style),
                Text(m["verdict"], style=style),
                Text(m["note"], style="dim"),
            )
        console.print(t)
    else:
        console.print("metrics: none applies to either side")
    for f_ in result.failed:  # never shown as n/a: the metric did not run
        console.print(Text("failed: ", style="bold red") + cell(f"{f_['metric']}: {f_['reason']}"))
    if result.results:
        title = "benchmark results: B against A" + (f" ({result.results_note})" if result.results_note else "")
        r_t = Table(title=title, title_justify="left", header_style="bold")
        wheres = [" ".join(p for p in (r["implementation"] or "", r["config"]) if p) for r in result.results]
        columns = ("configuration",) * any(wheres) + (
            "metric",
            "unit",
            "A",
            "B",
            "B - A",
            "change",
            "",
            "valid A",
            "valid B",
        )
        for col in columns:
            r_t.add_column(
                col, justify="left" if col in ("configuration", "metric", "unit", "") else "right", overflow="fold"
            )
        for where, r in zip(wheres, result.results):
            style = VERDICT_STYLE.get(r["verdict"], "")
            row(
                r_t,
                *((where,) if any(wheres) else ()),
                r["metric"],
                r["unit"] or "",
                f(r["a"]) if r["a"] is not None else Text("only B" if r["status"] == "only B" else "n/a", style="dim"),
                f(r["b"]) if r["b"] is not None else Text("only A" if r["status"] == "only A" else "n/a", style="dim"),
                f(r["delta"]),
                Text(_pct(r["rel"]), style=style),
                Text(r["verdict"], style=style),
                _yes_no(r["valid_a"]),
                _yes_no(r["valid_b"]),
            )
        console.print(r_t)
    if not result.ops:
        console.print(
            "ops: no GPU kernel and no XLA device op on either side (a CPU run, e.g. `cclq record` "
            "on gloo, records none), so there is no op time to compare"
            + ("; the benchmark results above are what the runs measured." if result.results else ".")
        )
        return
    partial = "; ".join(
        f"{s} partial: {f['partial']}" for s, f in result.traced.items() if f.get("partial", "no") != "no"
    )
    g = Table(
        title=f"op time by kernel class and collective type ({result.ranks}" + (f"; {partial})" if partial else ")"),
        title_justify="left",
        header_style="bold",
    )
    for col in ("group", "name", "calls A", "calls B", "time A (s)", "time B (s)", "B - A (s)", "change", ""):
        g.add_column(col, justify="left" if col in ("group", "name", "") else "right")
    for r in result.op_groups:
        row(
            g,
            r["group"],
            str(r["name"]),
            f(r["calls_a"]),
            f(r["calls_b"]),
            f(r["time_a_s"]),
            f(r["time_b_s"]),
            f(r["delta_s"]),
            _pct(r["rel"]),
            "" if r["status"] == "both" else r["status"],
        )
    console.print(g)
    only_a = sum(o["status"] == "only A" for o in result.ops)
    only_b = sum(o["status"] == "only B" for o in result.ops)
    k = Table(
        title=f"ops with the largest time change (top {min(top, len(result.ops))} of {len(result.ops)} names; "
        f"{only_a} only in A, {only_b} only in B)",
        title_justify="left",
        header_style="bold",
    )
    for col in ("name", "class", "calls A", "calls B", "time A (s)", "time B (s)", "B - A (s)", "change", ""):
        k.add_column(
            col,
            justify="left" if col in ("name", "class", "") else "right",
            overflow="fold",
            max_width=70 if col == "name" else None,
        )
    for o in result.ops[:top]:
        name = o["name"] if len(o["name"]) <= 100 else o["name"][:99] + "\u2026"  # CSV/JSON keep it whole
        row(
            k,
            name,
            o["class"],
            f(o["calls_a"]),
            f(o["calls_b"]),
            f(o["time_a_s"]),
            f(o["time_b_s"]),
            f(o["delta_s"]),
            _pct(o["rel"]),
            "" if o["status"] == "both" else o["status"],
        )
    console.print(k)
