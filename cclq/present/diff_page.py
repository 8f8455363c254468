"""``cclq diff A B --format html``: the diff as one page to show a team.

What the table form says (what was traced on each side and what differs, the metrics
B against A, op time by class and collective type, the ops that changed most), then
the report's plots (``cclq.present.board.figures``: the same figures ``cclq report
--format html`` draws) of every trace of A beside those of B, figure by figure. Self-
contained: the board's stylesheet inline, the plots inline SVG, no script.
"""

from __future__ import annotations

from html import escape
from typing import Any

from cclq.present.board.figures import workload_figures
from cclq.present.board.pages import asset_text, page_html
from cclq.present.diff import DiffResult
from cclq.present.render import format_number
from cclq.version import __version__


def _e(value: Any) -> str:
    return escape("" if value is None else str(value), quote=True)


def _num(v: float | None) -> str:
    return "" if v is None else _e(format_number(v))


def _pct(rel: float | None) -> str:
    return "" if rel is None else f"{rel:+.1%}"


def _table(caption: str, head: list[str], rows: list[list[str]], numeric: set[int]) -> str:
    th = "".join(f"<th{' class=num' if i in numeric else ''}>{_e(h)}</th>" for i, h in enumerate(head))
    body = "".join(
        "<tr>" + "".join(f"<td{' class=num' if i in numeric else ''}>{c}</td>" for i, c in enumerate(r)) + "</tr>"
        for r in rows
    )
    return (
        f'<div class="metric-group"><h3>{_e(caption)}</h3><table class="metrics"><thead><tr>{th}</tr></thead>'
        f"<tbody>{body}</tbody></table></div>"
    )


def _facts(result: DiffResult) -> str:
    rows = []
    for side, traces in (("A", result.a), ("B", result.b)):
        f = result.traced.get(side, {})
        partial = f.get("partial", "no")
        rows.append(
            [
                f"<b>{side}</b>",
                _e(", ".join(traces)),
                _e(f.get("traced")),
                _e(f.get("hardware")),
                _e(f.get("world size")),
                _e(f.get("framework")),
                f'<span class="badge partial">partial: {_e(partial)}</span>' if partial != "no" else "whole",
            ]
        )
    out = _table(
        "what was traced", ["side", "traces", "traced", "hardware", "world size", "framework", "partial"], rows, set()
    )
    if result.differences:
        items = "".join(f"<li>{_e(d)}</li>" for d in result.differences)
        out = f'<p class="partial-note"><strong>A and B differ in what was traced:</strong></p><ul>{items}</ul>' + out
    return out


def _partial_suffix(result: DiffResult) -> str:
    marks = [f"{s} partial: {f['partial']}" for s, f in result.traced.items() if f.get("partial", "no") != "no"]
    return f" ({'; '.join(marks)})" if marks else ""


def _metrics(result: DiffResult) -> str:
    rows = []
    for m in result.metrics:
        rows.append(
            [
                _e(m["metric"] if m["rank"] is None else ""),
                _e("" if m["rank"] is None else m["rank"]),
                _e(m["unit"]),
                _num(m["a"]) if m["a"] is not None else '<span class="na">n/a</span>',
                _num(m["b"]) if m["b"] is not None else '<span class="na">n/a</span>',
                _num(m["delta"]),
                _pct(m["rel"]),
                _e(m["verdict"]),
                _e(m["note"]),
            ]
        )
    for f in result.failed:
        rows.append([_e(f["metric"]), "", "", "", "", "", "", "failed", _e(f["reason"])])
    return _table(
        "metrics: B against A" + _partial_suffix(result),
        ["metric", "rank", "unit", "A", "B", "B - A", "change", "", "note"],
        rows,
        {1, 3, 4, 5, 6},
    )


def _ops(result: DiffResult, top: int) -> str:
    if not result.ops:
        return "<p>No GPU kernel and no XLA device op on either side: no op time to compare.</p>"

    def cells(r: dict[str, Any]) -> list[str]:
        return [
            _num(r["calls_a"]),
            _num(r["calls_b"]),
            _num(r["time_a_s"]),
            _num(r["time_b_s"]),
            _num(r["delta_s"]),
            _pct(r["rel"]),
            _e("" if r["status"] == "both" else r["status"]),
        ]

    groups = [[_e(r["group"]), _e(r["name"]), *cells(r)] for r in result.op_groups]
    ops = [[_e(o["name"]), _e(o["class"]), *cells(o)] for o in result.ops[:top]]
    head = ["calls A", "calls B", "time A (s)", "time B (s)", "B - A (s)", "change", ""]
    return _table(
        f"op time by kernel class and collective type ({result.ranks}){_partial_suffix(result)}",
        ["group", "name", *head],
        groups,
        {2, 3, 4, 5, 6, 7},
    ) + _table(
        f"ops with the largest time change (top {min(top, len(result.ops))} of {len(result.ops)})",
        ["name", "class", *head],
        ops,
        {2, 3, 4, 5, 6, 7},
    )


def _plots(result: DiffResult, reports: dict[str, dict[str, Any]]) -> str:
    """The report's figures, A's traces beside B's, one row per figure."""
    sides = [
        (side, t, workload_figures(reports[t]))
        for side, traces in (("A", result.a), ("B", result.b))
        for t in traces
        if t in reports
    ]
    if not sides:
        return ""
    rows = []
    for i, first in enumerate(sides[0][2]):
        cells = []
        for side, trace, figures in sides:
            f = figures[i]
            picture = f.svg if f.svg is not None else f'<div class="unavailable">{_e(f.caption)}</div>'
            caption = f"<figcaption>{_e(f.caption)}</figcaption>" if f.svg is not None else ""
            cells.append(
                f'<figure class="plot" id="fig-{_e(f.key)}-{side}-{_e(trace)}" '
                f'data-available="{str(f.svg is not None).lower()}"><h3>{side}: {_e(trace)}</h3>'
                f"{picture}{caption}</figure>"
            )
        rows.append(f'<h3>{_e(first.title)}</h3><div class="figures">{"".join(cells)}</div>')
    return f"<section><h2>Plots (as in <code>cclq report</code>)</h2>{''.join(rows)}</section>"


def diff_page(result: DiffResult, reports: dict[str, dict[str, Any]], top: int = 30) -> str:
    """The page; ``reports``: trace -> ``report_dict`` of each trace of both sides."""
    title = f"{', '.join(result.a)} vs {', '.join(result.b)}"
    body = f"""<header class="top"><h1>{_e(title)}</h1>
<div class="sub">cclq diff: B against A</div></header>
<main>
<section>{_facts(result)}</section>
<section><h2>Metrics</h2>{_metrics(result)}</section>
<section><h2>Ops</h2>{_ops(result, top)}</section>
{_plots(result, reports)}
</main>
<footer>cclq {_e(__version__)} &middot; <code>cclq diff</code> in a terminal shows the same tables.</footer>"""
    return page_html(f"{title} - cclq diff", body, f"<style>\n{asset_text('board.css')}</style>")
