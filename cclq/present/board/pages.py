"""The board's HTML: the leaderboard page and one page per workload.

Pages are plain HTML rendered here, with every piece of card or trace text escaped
(``html.escape``), so a model name like ``<script>`` stays text. The leaderboard rows
are in the page itself; ``assets/board.js`` only sorts and filters them. Plots are
inline SVG (``cclq.present.board.figures``). A workload page can also stand alone (``cclq
report --format html``): its stylesheet is then inlined.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from html import escape
from importlib import resources
from typing import Any

from cclq.present.board.figures import workload_figures
from cclq.present.render import format_number
from cclq.present.report import spread
from cclq.present.units import for_people
from cclq.query.registry import LEADERBOARD_CATEGORIES
from cclq.version import __version__

ASSETS = ("board.css", "board.js")
_NO_FAVICON = '<link rel="icon" href="data:,">'  # no favicon request, so no 404 in the console


def asset_text(name: str) -> str:
    return resources.files("cclq.present.board").joinpath("assets").joinpath(name).read_text()


def _e(value: Any) -> str:
    return escape("" if value is None else str(value), quote=True)


@dataclass(frozen=True)
class MetricColumn:
    name: str
    unit: str
    polarity: str
    group: str  # leaderboard category id
    description: str
    # shown before its category is opened (the header's ``leaderboard_headline``)
    headline: bool = False

    def ranked(self, value: float | None) -> bool:
        """Whether a value takes part in the ranking (place, tint, sort). Not applicable
        (None) never does, nor 0 in a communication column: a trace without
        communication did not communicate well, it did not communicate at all."""
        return value is not None and not (self.group == "communication" and value == 0)


@dataclass(frozen=True)
class CardColumn:
    key: str
    title: str
    numeric: bool = False
    default: bool = True  # shown before the Workload group is opened


CARD_COLUMNS = (
    CardColumn("workload", "Workload"),
    CardColumn("model", "Model"),
    CardColumn("phase", "Phase"),
    CardColumn("hardware", "Hardware"),
    CardColumn("devices", "Devices", numeric=True),
    CardColumn("framework", "Framework", default=False),
    CardColumn("parallelism", "Parallelism", default=False),
    CardColumn("comm_library", "Comm library", default=False),
)


def metric_lookup(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["metric"]: e for group in data["categories"] for e in group["metrics"]}


def _quality(columns: list[MetricColumn], lookups: dict[str, dict[str, dict[str, Any]]]) -> dict[tuple[str, str], str]:
    """(trace, metric) -> 'q-good' | 'q-poor' for the best and worst quarter of a column
    whose metric has a polarity (ties share their average place)."""
    out: dict[tuple[str, str], str] = {}
    for col in columns:
        if col.polarity not in ("higher", "lower"):
            continue
        values = [
            (trace, m[col.name]["value"])
            for trace, m in lookups.items()
            if col.name in m and col.ranked(m[col.name]["value"])
        ]
        if len(values) < 4:
            continue
        ordered = sorted(v for _, v in values)
        for trace, v in values:
            place = (bisect.bisect_left(ordered, v) + bisect.bisect_right(ordered, v) - 1) / 2 / (len(ordered) - 1)
            if col.polarity == "lower":
                place = 1 - place
            if place >= 0.75:
                out[(trace, col.name)] = "q-good"
            elif place <= 0.25:
                out[(trace, col.name)] = "q-poor"
    return out


def quarter_tints(workloads: list[dict[str, Any]], columns: list[MetricColumn]) -> dict[tuple[str, str], str]:
    """(trace, metric) -> 'q-good' | 'q-poor': the tints of the leaderboard page."""
    return _quality(columns, {w["trace"]: metric_lookup(w) for w in workloads})


def _breakable(text: Any) -> str:
    """Escaped text with a line-break opportunity after each ``_ + . -``: a long trace id
    or model name wraps between its parts (``dlrm_param_`` / ``8xV100``), not mid-word."""
    return "<wbr>".join(_e(part) for part in re.split(r"(?<=[_+.-])", "" if text is None else str(text)))


def _card_cells(w: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """card column key -> (cell HTML, sort key)."""
    m = w["metadata"]
    model = _breakable(m["model_family"]) + (' <span class="badge">MoE</span>' if m.get("moe") is True else "")
    phase = f'<span class="badge {_e(m["phase"])}">{_e(m["phase"])}</span>' if m["phase"] else ""
    devices = w["info"].get("world_size") if m["total_count"] == "" else m["total_count"]
    hw = w.get("hardware") or {}
    # without a card: the GPU model of the trace's deviceProperties (one device per rank)
    hardware = m["hardware_model"] or m["hardware_type"] or hw.get("model") or ""
    hw_title = (
        ' title="from the trace\'s deviceProperties (no workload card)"'
        if hardware and hw.get("source") == "trace"
        else ""
    )
    partial = (w.get("traced") or {}).get("partial")
    href = f"w/{_e(w['slug'])}.html"
    devices_html = _e(devices)
    workload_html = f'<a href="{href}">{_breakable(w["trace"])}</a>'
    if partial:  # the ranks traced of the run's, and a badge on the row: its numbers cover those only
        seen = (w.get("traced") or {}).get("ranks_seen")
        devices_html = f'<span title="{_e(partial)} traced">{_e(seen)} of {_e(devices)}</span>'
        workload_html += (
            f' <span class="badge partial" title="{_e(partial)} traced: every number covers those only">partial</span>'
        )
    return {
        "workload": (workload_html, w["trace"].lower()),
        "model": (model, str(m["model_family"]).lower()),
        "phase": (phase, str(m["phase"])),
        "hardware": (
            f"<span{hw_title}>{_breakable(hardware)}</span>" if hw_title else _breakable(hardware),
            str(hardware).lower(),
        ),
        "devices": (devices_html, "" if devices in (None, "") else str(devices)),
        "framework": (_e(m["framework"]), str(m["framework"]).lower()),
        "parallelism": (_e(w["parallelism"]), w["parallelism"].lower()),
        "comm_library": (_e(m["comm_library"]), str(m["comm_library"]).lower()),
    }


def _no_value(entry: dict[str, Any]) -> str:
    """A metric without a value: "failed" when its SQL did not run (never "n/a", which says
    the metric does not apply), else "n/a"; the reason on hover."""
    if entry.get("failed"):
        return f'<span class="na failed" title="{_e(entry["reason"] or "the metric failed")}">failed</span>'
    return f'<span class="na" title="{_e(entry["reason"] or "no value")}">n/a</span>'


def _metric_cell(
    entry: dict[str, Any] | None, col: MetricColumn, quality: str | None, group: str, partial: str | None = None
) -> str:
    """One leaderboard cell; ``group`` is the column's classes (its group, shown or not);
    ``partial`` ('1 of 64 ranks'): the value covers those ranks only, marked with a '*'."""
    if entry is None:
        return (
            f'<td class="num {group}" data-sort=""><span class="na" title="not computed for this workload">'
            "n/a</span></td>"
        )
    if entry["value"] is None:
        return f'<td class="num {group}" data-sort="">{_no_value(entry)}</td>'
    value = entry["value"]
    tip = f"{col.name} = {format_number(value)} {col.unit}"
    if extra := spread(entry):
        tip += f" ({extra})"
    if entry.get("assumes"):
        tip += f"; {entry['assumes']}"
    mark = ""
    if partial:
        tip += f"; partial: {partial} traced"
        mark = '<sup class="partial">*</sup>'

    cls = f"num {group} {quality}" if quality else f"num {group}"
    if not col.ranked(value):  # shown, but not ranked: sorts with n/a, last
        tip += " (no communication: not ranked)"
        return (
            f'<td class="{cls}" data-sort="" title="{_e(tip)}"><span class="v">{format_number(value)}</span>{mark}</td>'
        )
    return (
        f'<td class="{cls}" data-sort="{value!r}" title="{_e(tip)}">'
        f'<span class="v">{format_number(value)}</span>{mark}</td>'
    )


def page_html(title: str, body: str, css: str, scripts: str = "") -> str:
    """A whole page around ``body`` (the workload pages, the board, ``cclq diff --format html``)."""
    return _page(title, body, css, scripts)


def _page(title: str, body: str, css: str, scripts: str = "") -> str:
    return (
        f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">\n<title>{_e(title)}</title>\n'
        f"{_NO_FAVICON}\n{css}\n</head>\n<body>\n{body}\n{scripts}</body>\n</html>\n"
    )


def default_metrics(columns: list[MetricColumn], empty: set[str] | frozenset[str] = frozenset()) -> set[str]:
    """The metric columns shown before any category is opened: each category's headline
    numbers (the metric header's ``leaderboard_headline``: at most eight in all, so that
    the five default card columns and these fit a 1400 px window without scrolling
    sideways; tests/present/test_board_browser.py measures it), and,
    in a category where none of those has a value on this board (``empty``: columns n/a
    in every row), its first column that has one, so that a category with numbers never
    starts hidden (its heading, with "+N", shows only when one of its columns does)."""
    shown = {c.name for c in columns if c.headline}
    for gid in LEADERBOARD_CATEGORIES:
        group = [c for c in columns if c.group == gid]
        if group and all(c.name in empty for c in group if c.name in shown):
            with_value = [c for c in group if c.name not in empty]
            shown.add((with_value or group)[0].name)
    return shown


def empty_metrics(columns: list[MetricColumn], lookups: dict[str, dict[str, dict[str, Any]]]) -> set[str]:
    """Metric columns that are n/a in every row: hidden until "columns with no value" is
    ticked, since a column of n/a tells nothing about any workload on this board."""
    return {
        c.name
        for c in columns
        if not any((e := m.get(c.name)) is not None and e["value"] is not None for m in lookups.values())
    }


def header_label(name: str) -> str:
    """A metric's column heading: its name with spaces, so the browser wraps it between
    words (``communication fraction``); the exact name is in the heading's tooltip."""
    return _e(name.replace("_", " "))


def _group_css(group_ids: list[str]) -> str:
    """The show/hide rules of the leaderboard, one set per column group (the categories
    come from the registry, so they are written here rather than in board.css): a
    category unticked hides its columns; its extra columns show once it is opened."""
    rules = ["table.board:not(.show-empty) .empty-col { display: none; }"]
    for gid in group_ids:
        g = _e(gid)
        rules.append(f"table.board.hide-{g} .g-{g} {{ display: none; }}")
        rules.append(f"table.board:not(.more-{g}) .more.g-{g} {{ display: none; }}")
    return "<style>\n" + "\n".join(rules) + "\n</style>"


def index_page(workloads: list[dict[str, Any]], columns: list[MetricColumn], generated_at: str, source: str) -> str:
    """The leaderboard: one row per workload, card columns, then metric columns grouped by
    category. A few columns per group show by default (``CardColumn.default``,
    ``default_metrics``); a group's heading opens the rest ("+N"), a checkbox per
    category hides it, and a column with no value in any row is hidden until asked for.
    The script (assets/board.js) keeps each group heading's span equal to its shown
    columns; the spans written here are those of the default view."""
    lookups = {w["trace"]: metric_lookup(w) for w in workloads}
    quality = _quality(columns, lookups)
    empty = empty_metrics(columns, lookups)
    shown = default_metrics(columns, empty)

    def classes(group: str, default: bool, is_empty: bool) -> str:
        return f"g-{_e(group)}" + ("" if default else " more") + (" empty-col" if is_empty else "")

    groups = [("workload", "Workload", [(c.default, False) for c in CARD_COLUMNS])]
    for gid, title in LEADERBOARD_CATEGORIES.items():
        cols = [(c.name in shown, c.name in empty) for c in columns if c.group == gid]
        if cols:
            groups.append((gid, title, cols))
    group_cells = []
    for gid, title, cols in groups:
        span = sum(d and not e for d, e in cols)
        extra = sum(not d for d, _ in cols)
        more = (
            f' <button type="button" class="more-btn" data-group="{_e(gid)}" aria-expanded="false" '
            f'title="show all {len(cols)} columns of {_e(title)}">+{extra}</button>'
            if extra
            else ""
        )
        hidden = "" if span else " hidden"
        group_cells.append(
            f'<th colspan="{max(span, 1)}" class="g-{_e(gid)}" data-group="{_e(gid)}"{hidden}>{_e(title)}{more}</th>'
        )
    group_row = "".join(group_cells)
    col_cells = []
    for i, c in enumerate(CARD_COLUMNS):
        first = " first" if i == 0 else (" wrap" if c.key in ("model", "hardware") else "")
        col_cells.append(
            f'<th data-col="{i}" data-type="{"num" if c.numeric else "text"}" '
            f'class="{classes("workload", c.default, False)}{first}">'
            f'<button type="button">{_e(c.title)}<span class="arrow"></span></button></th>'
        )
    for j, mc in enumerate(columns, start=len(CARD_COLUMNS)):
        better = {"higher": "higher is better", "lower": "lower is better"}.get(mc.polarity, "")
        title = f"{mc.name}: {mc.description}" + (f" ({better})" if better else "")
        if mc.name in empty:
            title += "; no workload on this board has a value"
        arrow = {"higher": "\u2191 ", "lower": "\u2193 "}.get(mc.polarity, "")
        col_cells.append(
            f'<th data-col="{j}" data-type="num" data-better="{_e(mc.polarity)}" data-metric="{_e(mc.name)}" '
            f'class="metric {classes(mc.group, mc.name in shown, mc.name in empty)}" title="{_e(title)}">'
            f'<button type="button">{header_label(mc.name)}'
            f'<span class="arrow"></span><span class="unit">{arrow}{_e(mc.unit)}</span></button></th>'
        )
    body_rows = []
    for w in workloads:
        cells = _card_cells(w)
        tds = []
        for i, c in enumerate(CARD_COLUMNS):
            html, key = cells[c.key]
            cls = " ".join(
                x
                for x in (
                    "first" if i == 0 else "",
                    "num" if c.numeric else "",
                    "wrap" if c.key in ("model", "hardware") else "",
                    "" if c.default else "more g-workload",
                )
                if x
            )
            tds.append(f'<td class="{cls}" data-sort="{_e(key)}">{html}</td>')
        for mc in columns:
            tds.append(
                _metric_cell(
                    lookups[w["trace"]].get(mc.name),
                    mc,
                    quality.get((w["trace"], mc.name)),
                    classes(mc.group, mc.name in shown, mc.name in empty),
                    (w.get("traced") or {}).get("partial"),
                )
            )
        m = w["metadata"]
        search = " ".join(
            str(x)
            for x in (
                w["trace"],
                m["model_family"],
                m["phase"],
                m["hardware_type"],
                m["hardware_model"],
                m["framework"],
                m["comm_library"],
                w["parallelism"],
                m["description"],
            )
            if x
        ).lower()
        body_rows.append(f'<tr data-trace="{_e(w["trace"])}" data-search="{_e(search)}">{"".join(tds)}</tr>')
    table = (
        f'<div class="table-wrap"><table class="board" id="leaderboard">\n<thead><tr class="groups">{group_row}'
        f'</tr>\n<tr class="cols">{"".join(col_cells)}</tr></thead>\n<tbody>\n'
        + "\n".join(body_rows)
        + "\n</tbody></table></div>"
    )
    if not workloads:
        table = '<div class="empty">The warehouse holds no traces yet: <code>cclq ingest DIR</code> first.</div>'
    n_metrics = len(columns)
    toggles = "".join(
        f'<label><input type="checkbox" data-group="{_e(gid)}" checked> {_e(title)}</label>'
        for gid, title, _ in groups[1:]
    )
    if empty and workloads:
        toggles += (
            f'<label title="{_e(", ".join(sorted(empty)))}"><input type="checkbox" id="show-empty"> '
            f"columns with no value ({len(empty)})</label>"
        )
    counts = f"{len(workloads)} workloads &middot; {n_metrics} leaderboard metrics"
    search = (
        '<input type="search" id="filter" placeholder="Filter: model, phase, hardware, framework ..." '
        'aria-label="Filter workloads">'
    )
    body = f"""<header class="top">
<h1>cclq benchmark board</h1>
<div class="sub">{counts} &middot; generated {_e(generated_at)}
 from <code>{_e(source)}</code></div>
</header>
<main>
<div class="toolbar">
{search}
<span class="count" id="count">{len(workloads)} workloads</span>
<span class="groups" id="groups">{toggles}</span>
<span class="legend">Click a column to sort (best first); +N in a category's heading shows all its columns.
<span style="background:var(--good-bg)">best quarter</span>
<span style="background:var(--poor-bg)">worst quarter</span> n/a: hover for the reason</span>
</div>
{table}
</main>
<footer>cclq {_e(__version__)} &middot; values are each metric's one-number summary per workload (the number
<code>python -m cclq.main</code> prints), 6 significant digits as <code>cclq metric</code> prints them &middot;
machine form: <a href="benchmark_data.json">benchmark_data.json</a> (CCL-Bench's website format)</footer>"""
    css = '<link rel="stylesheet" href="assets/board.css">\n' + _group_css([g for g, _, _ in groups])
    return _page("cclq benchmark board", body, css, '<script src="assets/board.js"></script>\n')


def _kv(pairs: list[tuple[str, Any]]) -> str:
    items = "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in pairs if v not in (None, "", [], {}))
    return f'<dl class="kv">{items}</dl>' if items else '<p class="desc">none</p>'


_CARD_LABELS = (
    ("model_family", "model"),
    ("phase", "phase"),
    ("precision", "precision"),
    ("moe", "MoE"),
    ("granularity", "granularity"),
    ("batch_size", "batch size"),
    ("seq_len", "sequence length"),
    ("input_len", "input length"),
    ("output_len", "output length"),
    ("dataset", "dataset"),
    ("hardware_type", "device type"),
    ("hardware_model", "device model"),
    ("total_count", "devices"),
    ("count_per_node", "devices per node"),
    ("network_topology", "network"),
    ("bandwidth_scaleout", "scale-out Gbps"),
    ("bandwidth_scaleup", "scale-up Gbps"),
    ("framework", "framework"),
    ("compiler", "compiler"),
    ("comm_library", "comm library"),
    ("comm_library_ver", "library version"),
    ("trace_types", "trace types"),
    ("hf_url", "model link"),
    ("trace_url", "trace link"),
)


def _card_box(data: dict[str, Any]) -> str:
    m = data["metadata"]
    pairs = [
        (label, ", ".join(map(str, m[k])) if isinstance(m[k], list) else m[k])
        for k, label in _CARD_LABELS
        if not (k == "moe" and m[k] is False)
    ]
    if data["parallelism"]:
        pairs.insert(3, ("parallelism", data["parallelism"]))
    return f'<div class="box"><h2>Workload card</h2>{_kv(pairs)}</div>'


def _trace_box(data: dict[str, Any]) -> str:
    i = data["info"]
    ranks = i.get("ranks") or []
    shown = ", ".join(map(str, ranks[:16])) + (" ..." if len(ranks) > 16 else "")
    traced = data.get("traced") or {}
    hw = data.get("hardware") or {}
    pairs = [
        ("format", i.get("format")),
        ("ranks seen", f"{i.get('ranks_seen')} ({shown})"),
        ("world size", i.get("world_size")),
        ("traced", f"{traced['text']}{' (PARTIAL)' if traced.get('partial') else ''}" if traced.get("text") else None),
        ("GPUs (deviceProperties)", f"{hw['count']} x {hw['model']}" if hw.get("source") == "trace" else None),
        ("files", i.get("files")),
        ("events", f"{i['events']:,}" if isinstance(i.get("events"), int) else i.get("events")),
        ("span", f"{format_number(i['span_s'])} s" if i.get("span_s") is not None else None),
        (
            "metrics",
            f"{data['metrics_applied']} of the "
            f"{data['metrics_applied'] + data['metrics_not_applicable']} computed apply",
        ),
    ]
    return f'<div class="box"><h2>Trace</h2>{_kv(pairs)}</div>'


def _metric_tables(data: dict[str, Any]) -> str:
    out = []
    for group in data["categories"]:
        rows = []
        for e in group["metrics"]:
            name = f'<code title="{_e(e["description"])}">{_e(e["metric"])}</code>'
            if e["value"] is None:
                value = _no_value(e)
                note = _e(e["reason"])
            else:
                number, unit = for_people(e["value"], e["unit"])
                value = f'<span title="{_e(format_number(e["value"]))} {_e(e["unit"])}">{_e(number)}</span>'
                note = _e("; ".join(x for x in (spread(e), e.get("assumes", "")) if x))
            rows.append(
                f'<tr data-metric="{_e(e["metric"])}"><td>{name}</td><td class="num">{value}</td>'
                f'<td>{_e(e["unit"] if e["value"] is None else unit)}</td><td class="note">{note}</td></tr>'
            )
        partial = (data.get("traced") or {}).get("partial")
        heading = group["title"] + (f" (partial: {partial})" if partial else "")
        out.append(
            f'<div class="metric-group"><h3>{_e(heading)}</h3><table class="metrics">'
            '<colgroup><col class="c-metric"><col class="c-value"><col class="c-unit"><col></colgroup>'
            "<thead><tr>"
            '<th>metric</th><th class="num">value</th><th>unit</th><th>over / why n/a</th></tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table></div>"
        )
    return "\n".join(out)


def _partial_note(data: dict[str, Any]) -> str:
    """A partial trace's banner: every number of the page covers the ranks traced only."""
    partial = (data.get("traced") or {}).get("partial")
    if not partial:
        return ""
    return (
        f'<p class="partial-note"><strong>Partial:</strong> {_e(partial)} traced; every number on this page '
        "covers those ranks only.</p>\n"
    )


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def _tiles(data: dict[str, Any], columns: list[MetricColumn], standing: dict[str, tuple[int, int]]) -> str:
    """The leaderboard numbers of this workload, with its place among the board's workloads."""
    lookup = metric_lookup(data)
    partial = (data.get("traced") or {}).get("partial")
    tiles = []
    for c in columns:
        e = lookup.get(c.name)
        if e is None:
            continue
        if e["value"] is None:
            value = _no_value(e)
        else:
            number, unit = for_people(e["value"], c.unit)
            value = (
                f'<span title="{_e(format_number(e["value"]))} {_e(c.unit)}">{_e(number)}</span> '
                f'<span class="unit">{_e(unit)}</span>'
            )
        place = ""
        if c.name in standing and e["value"] is not None:
            k, n = standing[c.name]
            place = f'<div class="place">{_ordinal(k)} of {n}, {c.polarity} is better</div>'
        if partial and e["value"] is not None:
            place += f'<div class="place partial">partial: {_e(partial)}</div>'
        tiles.append(
            f'<div class="tile" data-metric="{_e(c.name)}" title="{_e(c.description)}">'
            f'<div class="name">{_e(c.name).replace("_", "_<wbr>")}</div><div class="value">{value}</div>'
            f"{place}</div>"
        )
    return f'<div class="tiles">{"".join(tiles)}</div>' if tiles else ""


def _columns_of(data: dict[str, Any]) -> list[MetricColumn]:
    """The leaderboard metrics of one workload's data, in leaderboard order (a page
    without a board around it, such as ``cclq report --format html``)."""
    order = list(LEADERBOARD_CATEGORIES)
    entries = [e for e in metric_lookup(data).values() if e.get("leaderboard") in LEADERBOARD_CATEGORIES]
    entries.sort(key=lambda e: (order.index(e["leaderboard"]), e["metric"]))
    return [MetricColumn(e["metric"], e["unit"], e["polarity"], e["leaderboard"], e["description"]) for e in entries]


def workload_page(
    data: dict[str, Any],
    standalone: bool = False,
    columns: list[MetricColumn] | None = None,
    standing: dict[str, tuple[int, int]] | None = None,
) -> str:
    """A workload's page: card, trace facts, the leaderboard numbers (``columns``, with the
    place among all workloads in ``standing``), plots, then every computed metric."""
    figures = []
    for f in workload_figures(data):
        picture = f.svg if f.svg is not None else f'<div class="unavailable">{_e(f.caption)}</div>'
        caption = f"<figcaption>{_e(f.caption)}</figcaption>" if f.svg is not None else ""
        figures.append(
            f'<figure class="plot" id="fig-{_e(f.key)}" data-available="{str(f.svg is not None).lower()}">'
            f"<h3>{_e(f.title)}</h3>{picture}{caption}</figure>"
        )
    description = data["metadata"].get("description")
    crumb = "" if standalone else '<div class="crumb"><a href="../index.html">&larr; leaderboard</a></div>'
    body = f"""<header class="top">
{crumb}<h1>{_e(data["trace"])}</h1>
<div class="sub">{_e(data["headline"])}</div>
{f'<p class="desc">{_e(description)}</p>' if description else ""}
</header>
<main>
{_partial_note(data)}{_tiles(data, columns if columns is not None else _columns_of(data), standing or {})}
<div class="facts">{_card_box(data)}{_trace_box(data)}</div>
<section><h2>Plots</h2><div class="figures">
{"".join(figures)}
</div></section>
<section><h2>Every metric computed for this workload</h2>
{_metric_tables(data)}
</section>
</main>
<footer>cclq {_e(__version__)} &middot; <code>cclq report {_e(data["trace"])}</code> shows every metric in the
terminal; hover a value or a bar for its exact number and an n/a for its reason.</footer>"""
    css = (
        f"<style>\n{asset_text('board.css')}</style>"
        if standalone
        else '<link rel="stylesheet" href="../assets/board.css">'
    )
    return _page(f"{data['trace']} - cclq", body, css)
