"""A workload of 200,000 ProfilerSteps made a 28 MB page with 200,000 SVG circles in 47 s:
plots are drawn at what a screen shows (per pixel column: first, lowest, highest)."""

from __future__ import annotations

import re
import time

from cclq.present.board.figures import step_timeline
from cclq.present.board.svg import Series, line_chart


def test_two_hundred_thousand_steps_draw_a_small_plot_quickly():
    steps = [[0, i, 0.1 + (0.5 if i == 123_457 else 0.0) + (i % 7) * 1e-3] for i in range(200_000)]
    start = time.perf_counter()
    fig = step_timeline({"figures": {"steps": steps}, "metrics": []})
    seconds = time.perf_counter() - start
    assert fig.svg is not None
    assert len(fig.svg) < 200_000, len(fig.svg)
    assert fig.svg.count("<circle") <= 300
    assert seconds < 5
    assert "200,000 steps a line" in fig.caption
    # the one slow step is still drawn: its y is the highest of the path
    path = re.search(r'<path d="([^"]+)"', fig.svg).group(1)
    ys = [float(p.split(",")[1]) for p in path.replace("M", " ").replace("L", " ").split()]
    assert min(ys) < max(ys) - 100  # a spike of 5x the step time reaches far above the rest


def test_a_short_series_keeps_every_point_and_marker():
    svg = line_chart([Series("a", points=[(i, i * i) for i in range(50)])])
    assert svg.count("<circle") == 50
