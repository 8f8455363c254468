"""Plot captions say what is highlighted and why (the straggler's red bar)."""

from __future__ import annotations

from cclq.present.board.figures import workload_figures


def _data(step_by_rank: list[float]) -> dict:
    by_rank = [[r, v, None] for r, v in enumerate(step_by_rank)]
    entry = {"metric": "avg_step_time", "unit": "s", "summary": "mean", "value": sum(step_by_rank) / len(step_by_rank),
             "reason": None, "by_rank": by_rank}
    return {"categories": [{"id": "step_time", "metrics": [entry]}], "info": {"ranks": [0, 1, 2]},
            # rank 2 started 5 of the 6 matched collectives last, rank 0 one
            "figures": {"straggler": {"matched": 6, "late_count": [[0, 1], [2, 5]], "late_skew_s": []},
                         "steps": [], "top_ops": None, "temporal": None, "busbw": None}}


def _caption(data: dict) -> str:
    (fig,) = [f for f in workload_figures(data) if f.key == "rank_step_time"]
    return fig.caption


def test_the_red_bar_is_explained_with_where_it_stands():
    # rank 2 arrives last and so waits least: the shortest step of the three
    text = _caption(_data([0.020, 0.018, 0.012]))
    assert "In red: rank 2, which started 5 of 6 matched collectives last (the straggler by collective_skew); " \
           "its avg_step_time is the lowest of the 3 ranks." in text
    assert "the highest of the 3 ranks" in _caption(_data([0.010, 0.011, 0.030]))
    assert "2nd highest of the 3 ranks" in _caption(_data([0.030, 0.010, 0.020]))


def test_kernel_names_are_shortened_with_the_full_name_on_hover():
    from cclq.present.board.figures import short_kernel_name, top_kernels_figure

    full = ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
            "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)")
    assert short_kernel_name(full) == "vectorized_elementwise_kernel"
    assert short_kernel_name("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)") \
        == "ncclDevKernel_AllReduce_Sum_f32_RING_LL"
    assert short_kernel_name("gemm_kernel") == "gemm_kernel"
    data = {"figures": {"top_ops": {"source": "gpu", "total_s": 2.0, "ops": [
        {"name": full, "class": "compute", "calls": 3, "ranks": 1, "total_s": 1.5}]}}}
    svg = top_kernels_figure(data).svg or ""
    assert ">vectorized_elementwise_kernel</text>" in svg
    assert "<title>void at::native::vectorized_elementwise_kernel&lt;4" in svg
