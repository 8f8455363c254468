"""A small SVG plotting module: bar charts and line/point charts as inline SVG text.

The board's plots need a handful of chart types and must work offline from the file
system, so they are drawn here in Python with no plotting library and no JavaScript:
bars (vertical or horizontal, grouped or stacked) and lines/points on linear or log2
axes. Every mark carries a ``<title>`` with its exact value, which the browser shows as
a tooltip, so a plot can be read to the same digits as ``cclq metric``. All text is
XML-escaped. Sizes are in SVG user units; the SVG scales to its container (viewBox).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from html import escape

from cclq.present.render import format_number

# Okabe-Ito: distinguishable with the common colour-vision deficiencies.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")
GRID = "#e3e6ea"
AXIS = "#8a9099"
TEXT = "#2b2f36"
FONT = "font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif"

Formatter = Callable[[float], str]


def _x(text: object) -> str:
    return escape(str(text), quote=True)


def _n(v: float) -> str:
    """A coordinate: two decimals at most."""
    return f"{v:.2f}".rstrip("0").rstrip(".")


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round tick values (1, 2, 2.5, 5 x 10^k steps) covering [lo, hi]."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return [0.0, 1.0]
    if hi <= lo:
        hi = lo + (abs(lo) or 1.0)
    raw = (hi - lo) / max(count, 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    start = math.floor(lo / step) * step
    count = max(1, math.ceil((hi - start) / step - 1e-9))
    return [round(start + k * step, 12) for k in range(count + 1)]


def short_number(v: float) -> str:
    """Tick labels: 3 significant digits, k/M/G for large values."""
    if v == 0:
        return "0"
    a = abs(v)
    for scale, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if a >= scale:
            return f"{v / scale:.3g}{suffix}"
    return f"{v:.3g}"


def byte_label(v: float) -> str:
    """256 B, 4 KiB, 1 MiB, 2 GiB."""
    for scale, suffix in ((2**40, "TiB"), (2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
        if v >= scale:
            return f"{v / scale:.3g} {suffix}"
    return f"{v:.3g} B"


def seconds_scale(largest: float) -> tuple[float, str]:
    """(factor, unit) to show seconds readably: s, ms or us."""
    if largest >= 1:
        return 1.0, "s"
    if largest >= 1e-3:
        return 1e3, "ms"
    return 1e6, "us"


@dataclass
class Series:
    """A named set of values: bar heights (one per label) or (x, y) points."""

    name: str
    values: Sequence[float | None] = ()
    points: Sequence[tuple[float, float]] = ()
    color: str | None = None
    tips: Sequence[str] = ()  # per value/point: extra tooltip text
    dashed: bool = False


@dataclass
class _Frame:
    width: float
    height: float
    left: float
    right: float
    top: float
    bottom: float
    parts: list[str] = field(default_factory=list)

    @property
    def plot_w(self) -> float:
        return self.width - self.left - self.right

    @property
    def plot_h(self) -> float:
        return self.height - self.top - self.bottom

    def text(
        self,
        x: float,
        y: float,
        s: str,
        anchor: str = "middle",
        size: int = 11,
        color: str = TEXT,
        extra: str = "",
        tip: str | None = None,
    ) -> None:
        title = f"<title>{_x(tip)}</title>" if tip else ""
        self.parts.append(
            f'<text x="{_n(x)}" y="{_n(y)}" text-anchor="{anchor}" font-size="{size}" '
            f'fill="{color}"{extra}>{title}{_x(s)}</text>'
        )

    def svg(self, label: str) -> str:
        return (
            f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {_n(self.width)} {_n(self.height)}" '
            f'width="{_n(self.width)}" height="{_n(self.height)}" role="img" aria-label="{_x(label)}" '
            f'style="{FONT};width:100%;height:auto">' + "".join(self.parts) + "</svg>"
        )


def _color(i: int, series: Series) -> str:
    return series.color or PALETTE[i % len(PALETTE)]


def _legend_rows(series: Sequence[Series], width: float, left: float) -> list[list[tuple[int, Series, float]]]:
    """Legend entries laid out in rows that fit the width: [(index, series, x)] per row."""
    rows: list[list[tuple[int, Series, float]]] = [[]]
    x = left
    for i, s in enumerate(series):
        w = 14 + 6.6 * len(s.name) + 16
        if rows[-1] and x + w > width - 8:
            rows.append([])
            x = left
        rows[-1].append((i, s, x))
        x += w
    return rows


def _legend(frame: _Frame, series: Sequence[Series], y: float) -> None:
    for k, row in enumerate(_legend_rows(series, frame.width, frame.left)):
        yy = y + 16 * k
        for i, s, x in row:
            frame.parts.append(
                f'<rect x="{_n(x)}" y="{_n(yy - 9)}" width="10" height="10" rx="2" fill="{_color(i, s)}"/>'
            )
            frame.text(x + 14, yy, s.name, anchor="start", size=11)


def _legend_height(series: Sequence[Series], width: float, left: float) -> float:
    return 0 if len(series) < 2 else 14 + 16 * len(_legend_rows(series, width, left))


def _y_axis(frame: _Frame, ticks: list[float], to_y: Callable[[float], float], fmt: Formatter, label: str) -> None:
    for t in ticks:
        y = to_y(t)
        frame.parts.append(
            f'<line x1="{_n(frame.left)}" x2="{_n(frame.width - frame.right)}" y1="{_n(y)}" '
            f'y2="{_n(y)}" stroke="{GRID}" stroke-width="1"/>'
        )
        frame.text(frame.left - 6, y + 4, fmt(t), anchor="end", size=10, color=AXIS)
    if label:
        cy = frame.top + frame.plot_h / 2
        frame.text(14, cy, label, size=11, color=AXIS, extra=f' transform="rotate(-90 14 {_n(cy)})"')


def bar_chart(
    labels: Sequence[str],
    series: Sequence[Series],
    *,
    value_label: str = "",
    category_label: str = "",
    stacked: bool = False,
    horizontal: bool = False,
    fmt: Formatter = short_number,
    tip_fmt: Formatter = format_number,
    width: float = 560,
    height: float | None = None,
    highlight: Sequence[int] = (),
    highlight_color: str = "#D55E00",
    reference: tuple[float, str] | None = None,
    max_value: float | None = None,
    label_width: float = 60,
    full_labels: Sequence[str] | None = None,
) -> str:
    """Bars per label, one bar per series side by side (or ``stacked``).

    ``full_labels``: what hovering a label or bar shows when ``labels`` are shortened
    (kernel names: the shortened name is drawn, the full one is in the tooltip).

    ``highlight`` draws the bars of those label indexes in ``highlight_color`` (e.g. the
    straggler rank); ``reference`` is a dashed line at a value with a label (a mean).
    ``None`` values draw nothing.
    """
    n = len(labels)
    legend = len(series) > 1
    top_pad = 12 + _legend_height(series, width, label_width if horizontal else 58)
    if horizontal:
        row = 18 if n <= 16 else max(6, 300 / n)
        height = height or top_pad + n * row + 40
        frame = _Frame(width, height, label_width, 20, top_pad, 34)
    else:
        height = height or 260 + top_pad - 12
        frame = _Frame(width, height, 58, 12, top_pad, 46)
    totals = []
    for i in range(n):
        vals = [v for v in (s.values[i] for s in series if i < len(s.values)) if v is not None]
        totals.append(sum(vals) if stacked else max(vals, default=0.0))
    top = max_value if max_value is not None else max([t for t in totals if t is not None] or [1.0]) or 1.0
    if reference is not None and max_value is None:
        top = max(top, reference[0])
    ticks = nice_ticks(0.0, top)
    top = max(top, ticks[-1])
    length = frame.plot_w if horizontal else frame.plot_h

    def scale(v: float) -> float:
        return v / top * length

    if horizontal:

        def to_x(v: float) -> float:
            return frame.left + scale(v)

        for t in ticks:
            x = to_x(t)
            frame.parts.append(
                f'<line x1="{_n(x)}" x2="{_n(x)}" y1="{_n(frame.top)}" '
                f'y2="{_n(frame.height - frame.bottom)}" stroke="{GRID}"/>'
            )
            frame.text(x, frame.height - frame.bottom + 14, fmt(t), size=10, color=AXIS)
        if value_label:
            frame.text(frame.left + frame.plot_w / 2, frame.height - 6, value_label, size=11, color=AXIS)
    else:
        _y_axis(frame, ticks, lambda v: frame.height - frame.bottom - scale(v), fmt, value_label)
    slot = (frame.plot_h if horizontal else frame.plot_w) / max(n, 1)
    groups = 1 if stacked else max(len(series), 1)
    bar = max(min(slot * 0.8 / groups, 48), 1.0)
    every = max(1, math.ceil(n / (frame.plot_h / 11 if horizontal else frame.plot_w / 30)))
    for i, label in enumerate(labels):
        full = full_labels[i] if full_labels is not None and i < len(full_labels) else label
        base = 0.0
        for j, s in enumerate(series):
            v = s.values[i] if i < len(s.values) else None
            if v is None or v < 0:
                continue
            off = 0 if stacked else j
            start = slot * i + (slot - bar * groups) / 2 + off * bar
            tip = f"{full}: {s.name + ' ' if s.name else ''}{tip_fmt(v)}"
            if s.tips and i < len(s.tips) and s.tips[i]:
                tip += f" ({s.tips[i]})"
            if horizontal:
                x, y, w, h = frame.left + scale(base), frame.top + start, scale(v), bar
            else:
                x, w, h = frame.left + start, bar, scale(v)
                y = frame.height - frame.bottom - scale(base) - h
            fill = highlight_color if i in highlight else _color(j, s)
            frame.parts.append(
                f'<rect x="{_n(x)}" y="{_n(y)}" width="{_n(max(w, 0.5))}" height="{_n(max(h, 0.5))}" '
                f'fill="{fill}"><title>{_x(tip)}</title></rect>'
            )
            if stacked:
                base += v
        if i % every == 0:
            if horizontal:
                frame.text(
                    frame.left - 6,
                    frame.top + slot * i + slot / 2 + 4,
                    _clip(label, int(label_width / 6.2)),
                    anchor="end",
                    size=10,
                    tip=full,
                )
            else:
                frame.text(frame.left + slot * i + slot / 2, frame.height - frame.bottom + 14, label, size=10)
    if category_label and not horizontal:
        frame.text(frame.left + frame.plot_w / 2, frame.height - 8, category_label, size=11, color=AXIS)
    if reference is not None and not horizontal:
        y = frame.height - frame.bottom - scale(reference[0])
        frame.parts.append(
            f'<line x1="{_n(frame.left)}" x2="{_n(frame.width - frame.right)}" y1="{_n(y)}" '
            f'y2="{_n(y)}" stroke="{TEXT}" stroke-width="1.2" stroke-dasharray="5 4">'
            f"<title>{_x(reference[1])}</title></line>"
        )
        frame.text(frame.width - frame.right - 2, y - 4, reference[1], anchor="end", size=10)
    if legend:
        _legend(frame, series, 16)
    axis_y = frame.height - frame.bottom
    if horizontal:
        frame.parts.append(
            f'<line x1="{_n(frame.left)}" x2="{_n(frame.left)}" y1="{_n(frame.top)}" '
            f'y2="{_n(axis_y)}" stroke="{AXIS}"/>'
        )
    else:
        frame.parts.append(
            f'<line x1="{_n(frame.left)}" x2="{_n(frame.width - frame.right)}" y1="{_n(axis_y)}" '
            f'y2="{_n(axis_y)}" stroke="{AXIS}"/>'
        )
    return frame.svg(value_label or "bar chart")


def _clip(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[: max(chars - 1, 1)] + "\u2026"


def _log2_ticks(lo: float, hi: float) -> list[float]:
    a, b = math.floor(math.log2(lo)), math.ceil(math.log2(hi))
    step = max(1, math.ceil((b - a) / 8))
    if step > 1:  # prefer powers of 1024 boundaries when the range is wide
        step = next(s for s in (2, 5, 10, 20) if s >= step)
    return [2.0**k for k in range(a - a % step, b + 1, step) if lo / 2 <= 2.0**k <= hi * 2] or [lo, hi]


MAX_MARKERS = 300  # per series: past this, points are drawn as the line alone


def downsample(
    points: Sequence[tuple[float, float, int]], to_x: Callable[[float], float], columns: int
) -> list[tuple[float, float, int]]:
    """The points (x, y, index) a screen can show: per pixel column of the plot, the
    first, the lowest and the highest point, in x order. A line through them draws what
    the line through every point draws (a spike stays a spike), with at most 3 points a
    column (200,000 steps made a 28 MB page of 200,000 circles that took 47 s)."""
    if len(points) <= 2 * columns:
        return list(points)
    buckets: dict[int, list[tuple[float, float, int]]] = {}
    for p in points:
        buckets.setdefault(int(to_x(p[0])), []).append(p)
    kept: list[tuple[float, float, int]] = []
    for _, members in sorted(buckets.items()):
        chosen = {members[0], min(members, key=lambda p: p[1]), max(members, key=lambda p: p[1])}
        kept.extend(sorted(chosen, key=lambda p: (p[0], p[2])))
    return kept


def line_chart(
    series: Sequence[Series],
    *,
    x_label: str = "",
    y_label: str = "",
    log_x: bool = False,
    log_y: bool = False,
    x_fmt: Formatter = short_number,
    y_fmt: Formatter = short_number,
    tip_x: Formatter = format_number,
    tip_y: Formatter = format_number,
    lines: bool = True,
    markers: bool = True,
    width: float = 560,
    height: float = 280,
    y_zero: bool = True,
) -> str:
    """Lines and/or points through each series' (x, y) points; x on a log2 axis with
    ``log_x``, y on a log10 axis with ``log_y`` (points <= 0 are left out of a log axis)."""

    def usable(x: float, y: float | None) -> bool:
        return y is not None and (x > 0 or not log_x) and (y > 0 or not log_y)

    pts = [(x, y) for s in series for x, y in s.points if usable(x, y)]
    top_pad = 12 + _legend_height(series, width, 58)
    frame = _Frame(width, height + top_pad - 12, 58, 14, top_pad, 46)
    if not pts:
        frame.text(width / 2, height / 2, "no data", color=AXIS)
        return frame.svg(y_label or "chart")
    xs = [p[0] for p in pts]
    ys = [p[1] for p in pts]
    if log_y:
        y_ticks = [10.0**k for k in range(math.floor(math.log10(min(ys))), math.ceil(math.log10(max(ys))) + 1)]
        if len(y_ticks) == 1:
            y_ticks.append(y_ticks[0] * 10)
        y_lo, y_hi = math.log10(y_ticks[0]), math.log10(y_ticks[-1])

        def fy(v: float) -> float:
            return math.log10(v)
    else:
        y_ticks = nice_ticks(0.0 if y_zero else min(ys), max(ys) if max(ys) > 0 else 1.0)
        y_lo, y_hi = y_ticks[0], y_ticks[-1]

        def fy(v: float) -> float:
            return v

    if log_x:
        lo, hi = min(xs), max(xs)
        if lo == hi:  # one x: a power of two either side, so it sits in the middle
            lo, hi = lo / 2, hi * 2
        x_ticks = _log2_ticks(lo, hi)
        x_lo, x_hi = math.log2(min(lo, x_ticks[0])), math.log2(max(hi, x_ticks[-1]))

        def fx(v: float) -> float:
            return math.log2(v)
    elif len(set(xs)) == 1:  # one x: centre it
        x_ticks = [xs[0]]
        x_lo, x_hi = xs[0] - 1, xs[0] + 1

        def fx(v: float) -> float:
            return v
    else:
        integral = all(float(x).is_integer() for x in xs)
        x_ticks = nice_ticks(min(xs), max(xs), count=min(8, max(len(set(xs)) - 1, 1)))
        if integral:  # steps, ranks: no 2.5 ticks
            x_ticks = [t for t in x_ticks if float(t).is_integer()]
        x_lo, x_hi = min(x_ticks[0], min(xs)), max(x_ticks[-1], max(xs))

        def fx(v: float) -> float:
            return v

    span_x = (x_hi - x_lo) or 1.0
    span_y = (y_hi - y_lo) or 1.0

    def to_x(v: float) -> float:
        return frame.left + (fx(v) - x_lo) / span_x * frame.plot_w

    def to_y(v: float) -> float:
        return frame.height - frame.bottom - (fy(v) - y_lo) / span_y * frame.plot_h

    _y_axis(frame, y_ticks, to_y, y_fmt, y_label)
    for t in x_ticks:
        x = to_x(t)
        if frame.left - 1 <= x <= frame.width - frame.right + 1:
            frame.parts.append(
                f'<line x1="{_n(x)}" x2="{_n(x)}" y1="{_n(frame.height - frame.bottom)}" '
                f'y2="{_n(frame.height - frame.bottom + 4)}" stroke="{AXIS}"/>'
            )
            frame.text(x, frame.height - frame.bottom + 16, x_fmt(t), size=10, color=AXIS)
    axis_y = frame.height - frame.bottom
    frame.parts.append(
        f'<line x1="{_n(frame.left)}" x2="{_n(frame.width - frame.right)}" y1="{_n(axis_y)}" '
        f'y2="{_n(axis_y)}" stroke="{AXIS}"/>'
    )
    if x_label:
        frame.text(frame.left + frame.plot_w / 2, frame.height - 8, x_label, size=11, color=AXIS)
    for i, s in enumerate(series):
        color = _color(i, s)
        ok = downsample(
            [(x, y, k) for k, (x, y) in enumerate(s.points) if usable(x, y)], to_x, max(int(frame.plot_w), 1)
        )
        if lines and len(ok) > 1:
            path = " ".join(f"{'M' if k == 0 else 'L'}{_n(to_x(x))},{_n(to_y(y))}" for k, (x, y, _) in enumerate(ok))
            dash = ' stroke-dasharray="4 3"' if s.dashed else ""
            frame.parts.append(
                f'<path d="{path}" fill="none" stroke="{color}" stroke-width="1.8"{dash}>'
                f"<title>{_x(s.name)}</title></path>"
            )
        if markers and (len(ok) <= MAX_MARKERS or not lines):
            ok = ok if len(ok) <= MAX_MARKERS else ok[:: math.ceil(len(ok) / MAX_MARKERS)]
            r = 3.2 if len(ok) < 200 else 2.0
            for x, y, k in ok:
                tip = f"{s.name + ': ' if s.name else ''}{tip_x(x)} -> {tip_y(y)}"
                if s.tips and k < len(s.tips) and s.tips[k]:
                    tip += f" ({s.tips[k]})"
                frame.parts.append(
                    f'<circle cx="{_n(to_x(x))}" cy="{_n(to_y(y))}" r="{r}" fill="{color}" '
                    f'fill-opacity="0.9"><title>{_x(tip)}</title></circle>'
                )
    if len(series) > 1:
        _legend(frame, series, 16)
    return frame.svg(y_label or "chart")
