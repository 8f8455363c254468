"""The plots of a workload page, drawn from its report data (``cclq.present.report.report_dict``).

Each figure is drawn from metric results (per-rank values, straggler counts from
``collective_skew``, ``hta_temporal_breakdown``, ``collective_busbw``) or from the
views (steps, top kernels, HTA's queue length, memory bandwidth and launch delays) that
``cclq.present.report`` collected; a figure without data is
kept with the reason instead of a picture, so a page never breaks.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from cclq.present.board.svg import (
    Series,
    bar_chart,
    byte_label,
    line_chart,
    seconds_scale,
    short_number,
)
from cclq.present.render import format_number

# Kernel classes (kernel_class_rules) and XLA op kinds, coloured the same everywhere.
CLASS_COLORS = {
    "compute": "#0072B2",
    "comm": "#E69F00",
    "memcpy": "#009E73",
    "memset": "#CC79A7",
    "sync": "#999999",
    "other": "#56B4E9",
}
TEMPORAL = (("compute", "#0072B2"), ("non-compute", "#E69F00"), ("idle", "#BBBBBB"))


@dataclass
class Figure:
    key: str
    title: str
    caption: str
    svg: str | None  # None: not available, ``caption`` says why


def _metric(data: dict[str, Any], name: str) -> dict[str, Any] | None:
    for group in data["categories"]:
        for entry in group["metrics"]:
            if entry["metric"] == name:
                return entry
    return None


def _straggler_rank(data: dict[str, Any]) -> int | None:
    straggler = (data.get("figures") or {}).get("straggler")
    if not straggler:
        return None
    counts = straggler["late_count"]
    # straggler_rank's rule: most collectives started last, ties to the lowest rank
    return min(counts, key=lambda rc: (-rc[1], rc[0]))[0]


def _worst(values: list[float], polarity: str | None) -> int | None:
    """Index of the worst value by the metric's polarity (the highest step time, the
    highest communication share); None when no value is worse than another or the
    metric has no polarity. Ties go to the first (lowest) rank."""
    if len(values) < 2 or min(values) == max(values) or polarity not in ("higher", "lower"):
        return None
    worst = max(values) if polarity == "lower" else min(values)
    return values.index(worst)


def _per_rank(data: dict[str, Any], name: str, title: str, key: str) -> Figure:
    """A metric's value per rank as bars. The red bar is the rank with the worst value
    (for step time: the slowest rank, the highest step time), which a reader looks for
    first; the collective straggler (who starts collectives last) has its own plot and
    is named in the caption, since a rank that arrives last waits least and its own
    step can be short."""
    entry = _metric(data, name)
    if entry is None:
        return Figure(key, title, f"{name} was not computed for this board.", None)
    rows = [(r, v) for r, v, _ in entry.get("by_rank", []) if v is not None]
    if not rows:
        return Figure(key, title, f"n/a: {entry['reason'] or 'no value'}", None)
    ranks = [r for r, _ in rows]
    values = [v for _, v in rows]
    polarity = entry.get("polarity") or ("lower" if entry["unit"] == "s" else None)
    worst = _worst(values, polarity)
    highlight = [] if worst is None else [worst]
    how = entry["summary"]
    if entry["unit"] == "s":
        factor, unit = seconds_scale(max(values))
        reference = (entry["value"] * factor, f"{how} {format_number(entry['value'])} s") if how == "mean" else None
        svg = bar_chart(
            [str(r) for r in ranks],
            [Series(f"{name} ({unit})", [v * factor for v in values])],
            value_label=f"{name} ({unit})",
            category_label="rank",
            highlight=highlight,
            tip_fmt=lambda v: f"{format_number(v / factor)} s",
            reference=reference,
        )
    else:
        reference = (entry["value"], f"{how} {format_number(entry['value'])}") if how == "mean" else None
        svg = bar_chart(
            [str(r) for r in ranks],
            [Series(name, values)],
            value_label=f"{name} ({entry['unit']})",
            category_label="rank",
            highlight=highlight,
            reference=reference,
        )
    how_words = "pooled ratio" if entry["summary"] == "ratio" else entry["summary"]
    caption = (
        f"{name} per rank; the workload's value is the {how_words} over ranks, "
        f"{format_number(entry['value'])} {entry['unit']}."
    )
    if worst is not None:
        extreme = "highest" if polarity == "lower" else "lowest"
        mean = sum(values) / len(values)
        off = abs(values[worst] - mean) / mean if mean else 0.0
        caption += (
            f" In red: rank {ranks[worst]}, the {extreme} {name} of the {len(values)} ranks "
            f"({format_number(values[worst])} {entry['unit']}, {off:.0%} "
            f"{'above' if values[worst] >= mean else 'below'} the mean of the ranks;"
            f" {polarity} is better)."
        )
    straggler = _straggler_rank(data)
    if straggler is not None and straggler in ranks:
        caption += " " + _straggler_words(data, straggler, name, values[ranks.index(straggler)], values)
    return Figure(key, title, caption, svg)


def _straggler_words(data: dict[str, Any], rank: int, name: str, value: float, values: list[float]) -> str:
    """Where the collective straggler (the rank that started the most collectives last,
    collective_skew) stands among the ranks here, which need not be the worst (a rank
    that arrives last waits least, so its step can be short)."""
    straggler = (data.get("figures") or {}).get("straggler") or {}
    late = dict(straggler.get("late_count") or []).get(rank, 0)
    matched = straggler.get("matched", 0)
    order = sorted(values)
    if len(values) < 2 or order[0] == order[-1]:
        where = "the same as the other ranks'"
    elif value == order[0]:
        where = f"the lowest of the {len(values)} ranks"
    elif value == order[-1]:
        where = f"the highest of the {len(values)} ranks"
    else:
        where = f"{_place(sorted(values, reverse=True).index(value) + 1)} highest of the {len(values)} ranks"
    return (
        f"Rank {rank} started {late} of {matched} matched collectives last (the straggler by "
        f"collective_skew, see its plot); its {name} is {where}."
    )


def _place(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def straggler_figure(data: dict[str, Any]) -> Figure:
    title = "Straggler: who starts collectives last"
    straggler = (data.get("figures") or {}).get("straggler")
    if not straggler:
        entry = _metric(data, "collective_skew")
        reason = entry["reason"] if entry and entry["reason"] else "no collective seen on two or more ranks"
        return Figure("straggler", title, f"n/a: {reason}", None)
    counts = dict(straggler["late_count"])
    ranks = sorted(set(data["info"].get("ranks") or []) | set(counts))
    rank = _straggler_rank(data)
    svg = bar_chart(
        [str(r) for r in ranks],
        [Series("collectives started last", [counts.get(r, 0) for r in ranks])],
        value_label="collectives started last",
        category_label="rank",
        highlight=[ranks.index(rank)] if rank in ranks else [],
        fmt=lambda v: f"{v:g}",
        tip_fmt=lambda v: f"{v:g}",
    )
    share = counts.get(rank, 0) / straggler["matched"]
    return Figure(
        "straggler",
        title,
        f"Of {straggler['matched']} collectives matched across ranks (collective_skew), rank {rank} "
        f"started last in {counts.get(rank, 0)} ({share:.0%}): straggler_rank = {rank}.",
        svg,
    )


def step_timeline(data: dict[str, Any]) -> Figure:
    title = "Step time, step by step"
    steps = (data.get("figures") or {}).get("steps") or []
    if not steps:
        entry = _metric(data, "avg_step_time")
        return Figure("steps", title, f"n/a: {entry['reason'] if entry and entry['reason'] else 'no steps'}", None)
    factor, unit = seconds_scale(max(d for _, _, d in steps))
    by_rank: dict[int, list[tuple[float, float]]] = {}
    for rank, step, dur in steps:
        by_rank.setdefault(rank, []).append((step, dur * factor))
    if len(by_rank) <= 8:
        series = [Series(f"rank {r}", points=pts) for r, pts in sorted(by_rank.items())]
        how = "one line per rank"
    else:
        by_step: dict[int, list[float]] = {}
        for _, step, dur in steps:
            by_step.setdefault(step, []).append(dur * factor)
        ordered = sorted(by_step.items())
        series = [
            Series("max over ranks", points=[(s, max(v)) for s, v in ordered], color="#D55E00"),
            Series("median", points=[(s, statistics.median(v)) for s, v in ordered], color="#0072B2"),
            Series("min", points=[(s, min(v)) for s, v in ordered], color="#009E73", dashed=True),
        ]
        how = f"min, median and max over {len(by_rank)} ranks"
    svg = line_chart(
        series,
        x_label="step (ProfilerStep#N)",
        y_label=f"step time ({unit})",
        x_fmt=lambda v: f"{v:g}",
        tip_x=lambda v: f"step {v:g}",
        tip_y=lambda v: f"{format_number(v / factor)} s",
    )
    drawn = (
        ""
        if max(len(s.points) for s in series) <= 2 * 500
        else (
            f" {max(len(s.points) for s in series):,} steps a line: drawn as the first, lowest and highest step of "
            "each pixel column (every spike stays), without a marker per step; the workload's data file has them all."
        )
    )
    return Figure(
        "steps",
        title,
        f"Duration of every recorded step ({how}). avg_step_time drops the first and "
        f"last step when there are more than two.{drawn}",
        svg,
    )


def _shares_per_rank(labels: list[str], series: list[Series], value_label: str) -> str:
    """One horizontal bar a rank, its parts stacked to 100%: how the time splits."""
    return bar_chart(
        labels,
        series,
        stacked=True,
        horizontal=True,
        max_value=100,
        value_label=value_label,
        fmt=lambda v: f"{v:g}%",
        tip_fmt=lambda v: f"{v:.2f}%",
        label_width=70,
    )


def temporal_figure(data: dict[str, Any]) -> Figure:
    title = "Where GPU time goes: compute, non-compute, idle"
    rows = (data.get("figures") or {}).get("temporal")
    if not rows:
        entry = _metric(data, "hta_temporal_breakdown")
        return Figure(
            "temporal", title, f"n/a: {entry['reason'] if entry and entry['reason'] else 'not computed'}", None
        )
    rows = sorted(rows)
    labels = [f"rank {r}" for r, *_ in rows]
    series = []
    for k, (name, color) in enumerate(TEMPORAL):
        values = [100 * row[1 + k] / row[4] if row[4] else None for row in rows]
        tips = [f"{format_number(row[1 + k])} us of {format_number(row[4])} us" for row in rows]
        series.append(Series(name, values, color=color, tips=tips))
    svg = _shares_per_rank(labels, series, "% of GPU span")
    return Figure(
        "temporal",
        title,
        "hta_temporal_breakdown per rank (HTA 0.5.0's window): compute kernels, "
        "other GPU work not under compute (communication, memory), and idle time, as shares of the "
        "span from the first to the last GPU activity.",
        svg,
    )


def busbw_figure(data: dict[str, Any]) -> Figure:
    title = "Collective bus bandwidth vs message size"
    rows = (data.get("figures") or {}).get("busbw")
    if not rows:
        entry = _metric(data, "collective_busbw")
        return Figure("busbw", title, f"n/a: {entry['reason'] if entry and entry['reason'] else 'not computed'}", None)
    by_type: dict[str, list[tuple[float, float, str]]] = {}
    for coll_type, bucket, lo, hi, n, value in rows:
        tip = f"{n} collectives, {byte_label(lo)} .. {byte_label(hi)}"
        by_type.setdefault(coll_type, []).append((max(float(bucket), 1.0), value, tip))
    series = []
    for coll_type, pts in sorted(by_type.items()):
        pts.sort()
        series.append(Series(coll_type, points=[(x, y) for x, y, _ in pts], tips=[t for _, _, t in pts]))
    values = [y for s in series for _, y in s.points if y and y > 0]
    wide = bool(values) and max(values) / min(values) > 100  # orders of magnitude apart: log scale
    svg = line_chart(
        series,
        x_label="message size (power-of-two bucket)",
        y_label="median busbw (GB/s" + (", log scale)" if wide else ")"),
        log_x=True,
        log_y=wide,
        x_fmt=byte_label,
        tip_x=byte_label,
        y_fmt=(lambda v: f"{v:g}") if wide else short_number,
    )
    return Figure(
        "busbw",
        title,
        "collective_busbw: median bus bandwidth (nccl-tests' busbw, GB = 1e9 B) of the "
        "collectives of each type and power-of-two message-size bucket, every rank pooled.",
        svg,
    )


def short_kernel_name(name: str) -> str:
    """A kernel name a person can read in a plot label: without ``void``, template
    arguments (``<...>``), the argument list and namespaces, e.g.
    ``void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>(int, ...)``
    -> ``vectorized_elementwise_kernel``. The full name stays in the tooltip."""
    text = name.strip()
    if text.startswith("void "):
        text = text[5:]
    out, depth = [], 0
    for ch in text:  # drop what is inside <...> and (...), nested
        if ch in "<(":
            depth += 1
        elif ch in ">)" and depth:
            depth -= 1
        elif depth == 0:
            out.append(ch)
    short = "".join(out).strip().rsplit("::", 1)[-1].strip()
    return short or name


def top_kernels_figure(data: dict[str, Any]) -> Figure:
    top = (data.get("figures") or {}).get("top_ops") or {}
    ops = top.get("ops") or []
    xla = top.get("source") == "xla"
    title = "Top XLA device ops" if xla else "Top kernels"
    if not ops:
        return Figure("top_ops", title, "n/a: no GPU kernels and no XLA device ops in this trace", None)
    total = top["total_s"]
    factor, unit = seconds_scale(max(op["total_s"] for op in ops))
    classes = list(dict.fromkeys(op["class"] for op in ops))
    series = [
        Series(
            cls,
            [op["total_s"] * factor if op["class"] == cls else None for op in ops],
            color=CLASS_COLORS.get(cls),
            tips=[
                f"{op['calls']} calls on {op['ranks']} rank(s), {op['total_s'] / total:.1%} of the time"
                if total
                else ""
                for op in ops
            ],
        )
        for cls in classes
    ]
    names = [op["name"] if xla else short_kernel_name(op["name"]) for op in ops]
    svg = bar_chart(
        names,
        series,
        stacked=True,
        horizontal=True,
        label_width=300,
        full_labels=[op["name"] for op in ops],
        value_label=f"total time, all ranks ({unit})",
        tip_fmt=lambda v: f"{format_number(v / factor)} s",
        width=640,
    )
    shown = sum(op["total_s"] for op in ops)
    what = "XLA device op" if xla else "GPU kernel"
    return Figure(
        "top_ops",
        title,
        f"The {len(ops)} {what} names with the most time, summed over ranks: "
        f"{shown / total:.0%} of all {what} time ({format_number(total)} s). Colour: "
        f"{'op kind' if xla else 'kernel class'}.",
        svg,
    )


def _hta(data: dict[str, Any], key: str) -> Any:
    return ((data.get("figures") or {}).get("hta") or {}).get(key)


def _peak_series_figure(
    data: dict[str, Any], key: str, title: str, y_label: str, what: str, series_name: Any
) -> Figure:
    entry = _hta(data, key)
    if not entry or not entry.get("series"):
        return Figure(key, title, f"n/a: no {what} in HTA's window of this trace", None)
    pts = [p for s in entry["series"].values() for p in s]
    factor, unit = seconds_scale(max(t for t, _ in pts) / 1e6 or 1e-6)
    series = [
        Series(series_name(name), points=[(t / 1e6 * factor, v) for t, v in points])
        for name, points in entry["series"].items()
    ]
    svg = line_chart(
        series,
        x_label=f"time since the first point ({unit})",
        y_label=y_label,
        markers=False,
        tip_x=lambda v: f"{format_number(v)} {unit}",
    )
    return Figure(
        key,
        title,
        f"Rank {entry['rank']}: the highest value in each of 300 equal time bins "
        f"(HTA's series changes at every {what}).",
        svg,
    )


def queue_length_figure(data: dict[str, Any]) -> Figure:
    return _peak_series_figure(
        data,
        "queue_length",
        "Launch queue length over time (HTA)",
        "outstanding GPU operations",
        "launch and GPU start",
        lambda s: f"stream {s}",
    )


def memory_bw_figure(data: dict[str, Any]) -> Figure:
    return _peak_series_figure(
        data,
        "memory_bw",
        "Memory copy bandwidth over time (HTA)",
        "bandwidth (GB/s)",
        "memcpy or memset start and end",
        str,
    )


def launch_delay_figure(data: dict[str, Any]) -> Figure:
    title = "Kernel launch delay distribution (HTA)"
    buckets = _hta(data, "launch_delay")
    if not buckets:
        return Figure("launch_delay", title, "n/a: no kernel launches HTA 0.5.0 counts in this trace", None)
    counts = dict(buckets)
    top = max(counts)
    labels = ["< 1 us"] + [f"{2 ** (k - 1):g}-{2**k:g} us" for k in range(1, top + 1)]
    svg = bar_chart(
        labels,
        [Series("launches", [counts.get(k, 0) for k in range(top + 1)])],
        value_label="launches",
        category_label="launch delay",
        width=640,
    )
    return Figure(
        "launch_delay",
        title,
        "hta_kernel_launches over all ranks: time from the end of each "
        "launch call to the start of its GPU operation (0 when it started first), in power-of-two "
        "buckets.",
        svg,
    )


# HTA's classes of the critical path's time (hta_critical_path_breakdown), in bar order
CRITICAL_PATH = (
    ("cpu_bound", "CPU", "#D55E00"),
    ("gpu_compute_bound", "GPU compute", "#0072B2"),
    ("gpu_communication_bound", "GPU communication", "#E69F00"),
    ("gpu_kernel_launch_overhead", "launch delay", "#CC79A7"),
    ("gpu_kernel_kernel_overhead", "gap between kernels", "#BBBBBB"),
)


def critical_path_figure(data: dict[str, Any]) -> Figure:
    title = "Critical path of one iteration, by what bounds it (HTA)"
    rows = (data.get("figures") or {}).get("critical_path")
    if not rows:
        entry = _metric(data, "hta_critical_path_breakdown")
        return Figure(
            "critical_path", title, f"n/a: {entry['reason'] if entry and entry['reason'] else 'not computed'}", None
        )
    ranks = sorted({r[0] for r in rows})
    share = {(r[0], r[1]): r[3] for r in rows}
    took = {(r[0], r[1]): r[2] for r in rows}
    total = {r[0]: r[4] for r in rows}
    series = [
        Series(
            label,
            [share.get((rank, key)) for rank in ranks],
            color=color,
            tips=[
                f"{format_number(took.get((rank, key)) or 0)} us of {format_number(total[rank])} us" for rank in ranks
            ],
        )
        for key, label, color in CRITICAL_PATH
        if any((rank, key) in share for rank in ranks)
    ]
    svg = _shares_per_rank([f"rank {r}" for r in ranks], series, "% of the critical path")
    return Figure(
        "critical_path",
        title,
        "hta_critical_path_breakdown per rank: the longest chain of dependent "
        "CPU operators, launches and GPU kernels in the first ProfilerStep (HTA 0.5.0's graph), its "
        "time split by what it waits on: the CPU, GPU kernels, launch delays, gaps between kernels.",
        svg,
    )


def workload_figures(data: dict[str, Any]) -> list[Figure]:
    """Every plot of a workload page, in page order."""
    return [
        _per_rank(data, "avg_step_time", "Step time per rank", "rank_step_time"),
        _per_rank(data, "communication_fraction", "Communication share per rank", "rank_comm"),
        straggler_figure(data),
        step_timeline(data),
        temporal_figure(data),
        busbw_figure(data),
        top_kernels_figure(data),
        queue_length_figure(data),
        launch_delay_figure(data),
        memory_bw_figure(data),
        critical_path_figure(data),
    ]
