"""Plot captions say what is highlighted and why: the red bar of a per-rank plot is the rank
with the worst value (the slowest: highest step time), and the collective straggler is named
with where it stands."""

from __future__ import annotations

from cclq.present.board.figures import workload_figures


def _data(step_by_rank: list[float], polarity: str | None = "lower") -> dict:
    by_rank = [[r, v, None] for r, v in enumerate(step_by_rank)]
    entry = {
        "metric": "avg_step_time",
        "unit": "s",
        "summary": "mean",
        "value": sum(step_by_rank) / len(step_by_rank),
        "reason": None,
        "by_rank": by_rank,
        "polarity": polarity,
    }
    return {
        "categories": [{"id": "step_time", "metrics": [entry]}],
        "info": {"ranks": [0, 1, 2]},
        # rank 2 started 5 of the 6 matched collectives last, rank 0 one
        "figures": {
            "straggler": {"matched": 6, "late_count": [[0, 1], [2, 5]], "late_skew_s": []},
            "steps": [],
            "top_ops": None,
            "temporal": None,
            "busbw": None,
        },
    }


def _figure(data: dict):
    (fig,) = [f for f in workload_figures(data) if f.key == "rank_step_time"]
    return fig


def _caption(data: dict) -> str:
    return _figure(data).caption


def _red_bars(svg: str) -> list[str]:
    """The rank labels of the bars drawn in the highlight colour (svg.bar_chart's default)."""
    import re

    bars = re.findall(r'<rect[^>]*fill="([^"]+)"[^>]*>\s*<title>([^<]*)</title>', svg)
    return [title for fill, title in bars if fill == "#D55E00"]


def test_the_red_bar_is_the_slowest_rank_and_the_caption_says_so():
    # rank 1 has the highest step time: 0.030 s; the mean of the ranks is 0.02 s, so 50 % above it
    data = _data([0.010, 0.030, 0.020])
    text = _caption(data)
    assert (
        "In red: rank 1, the highest avg_step_time of the 3 ranks (0.03 s, 50% above the mean of the ranks; "
        "lower is better)." in text
    )
    red = _red_bars(_figure(data).svg or "")
    assert len(red) == 1 and red[0].startswith("1: "), red  # the bar of rank 1


def test_the_collective_straggler_is_named_with_where_it_stands():
    # rank 2 arrives last and so waits least: the shortest step of the three; it is not the red bar
    text = _caption(_data([0.020, 0.018, 0.012]))
    assert "In red: rank 0, the highest avg_step_time" in text
    assert (
        "Rank 2 started 5 of 6 matched collectives last (the straggler by collective_skew, see its plot); "
        "its avg_step_time is the lowest of the 3 ranks." in text
    )
    assert "the highest of the 3 ranks" in _caption(_data([0.010, 0.011, 0.030]))
    assert "2nd highest of the 3 ranks" in _caption(_data([0.030, 0.010, 0.020]))


def test_no_red_bar_when_the_ranks_are_equal():
    data = _data([0.02, 0.02, 0.02])
    assert "In red" not in _caption(data)
    assert _red_bars(_figure(data).svg or "") == []


def test_kernel_names_are_shortened_with_the_full_name_on_hover():
    from cclq.present.board.figures import short_kernel_name, top_kernels_figure

    full = (
        "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
        "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)"
    )
    assert short_kernel_name(full) == "vectorized_elementwise_kernel"
    assert (
        short_kernel_name("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)")
        == "ncclDevKernel_AllReduce_Sum_f32_RING_LL"
    )
    assert short_kernel_name("gemm_kernel") == "gemm_kernel"
    data = {
        "figures": {
            "top_ops": {
                "source": "gpu",
                "total_s": 2.0,
                "ops": [{"name": full, "class": "compute", "calls": 3, "ranks": 1, "total_s": 1.5}],
            }
        }
    }
    svg = top_kernels_figure(data).svg or ""
    assert ">vectorized_elementwise_kernel</text>" in svg
    assert "<title>void at::native::vectorized_elementwise_kernel&lt;4" in svg
