"""The plotly figures HTA 0.5.0 draws when an analysis runs with ``visualize=True`` (its
default), drawn from the tables the analysis returns, with HTA's chart types, titles,
axes and labels (hta/analyzers/*.py).

``show`` displays a figure as HTA does, ``fig.show(renderer=...)`` (inline in Jupyter,
plotly's default renderer elsewhere), and, when the TraceAnalysis was given a
``figures_dir`` (or ``$CCLQ_FIGURES_DIR`` is set), also writes it there as a
self-contained HTML file (``<n>-<title>.html``): the figures of a script run outside a
notebook, as files. plotly comes with the ``hta`` extra.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from cclq.api.hta_frames import pandas, plotly_express, plotly_graph_objects


class Figures:
    """Where a TraceAnalysis shows its figures (see the module docstring)."""

    def __init__(self, folder: str | Path | None = None) -> None:
        env = os.environ.get("CCLQ_FIGURES_DIR")
        self.folder = Path(folder) if folder is not None else Path(env) if env else None
        self.shown: list[Any] = []  # every figure shown, in order (the last call's are at the end)

    def show(self, fig: Any, renderer: str | None = None) -> None:
        self.shown.append(fig)
        if self.folder is not None:
            self.folder.mkdir(parents=True, exist_ok=True)
            title = fig.layout.title.text or "figure"
            slug = re.sub(r"[^A-Za-z0-9]+", "_", title).strip("_")[:80] or "figure"
            fig.write_html(self.folder / f"{len(self.shown):03d}-{slug}.html", include_plotlyjs="cdn")
        fig.show(renderer=renderer or None)


def temporal(figures: Figures, frame: Any) -> None:
    px = plotly_express()
    fig = px.bar(
        frame,
        x="rank",
        y=["idle_time", "compute_time", "non_compute_time"],
        title="Temporal breakdown across ranks",
        labels={"rank": "Rank"},
    )
    fig.update_layout(yaxis_tickformat=".2%", yaxis_title="Percentage", legend_title="Time Breakdown")
    figures.show(fig)


def overlap(figures: Figures, frame: Any) -> None:
    px = plotly_express()
    fig = px.bar(
        frame,
        x="rank",
        y="comp_comm_overlap_ratio",
        title="Computation-Communication Overlap",
        labels={"rank": "Rank", "comp_comm_overlap_ratio": "Computation-Communication Overlap Percentage"},
    )
    fig.update_layout(yaxis_tickformat=".2%")
    figures.show(fig)


def kernel_breakdown(
    figures: Figures,
    kernel_type_df: Any,
    all_kernels: Any,
    per_type: dict[str, dict[int, Any]],
    n_ranks: int,
    renderer: str | None,
) -> None:
    px = plotly_express()
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    fig = px.pie(
        kernel_type_df[kernel_type_df["percentage"] > 0],
        values="percentage",
        names="kernel_type",
        height=500,
        title="Kernel Type Percentage Across All Ranks",
    )
    fig.update_layout(
        margin=dict(l=50, r=50, b=50, t=50), showlegend=True, legend=dict(yanchor="bottom", y=-0.4, xanchor="left", x=0)
    )
    figures.show(fig, renderer)
    for kernel, ranks in per_type.items():
        specs = [[{"type": "domain"}, {"type": "domain"}] for count, _ in enumerate(ranks) if count % 2 == 0]
        fig = make_subplots(rows=int((len(ranks) + 1) / 2), cols=2, specs=specs)
        for rank, table in ranks.items():
            fig.add_trace(
                go.Pie(labels=table["name"], values=table["sum"], title=f"Rank {rank}", automargin=False),
                int(rank / 2) + 1,
                int(rank % 2) + 1,
            )
        fig.update_layout(
            title_text=f'Kernel type "{kernel}" - kernel distribution on each rank',
            margin=dict(l=50, r=50, b=50, t=50),
            showlegend=True,
            height=400 * (1 + n_ranks / 2),
            legend=dict(yanchor="bottom", y=-0.1, xanchor="left", x=0),
        )
        figures.show(fig, renderer)
        kernel_df = all_kernels[all_kernels["kernel_type"].eq(kernel)]
        for name in kernel_df["name"].unique():
            if name != "others":
                _mean_bar(
                    figures, kernel_df[kernel_df["name"].eq(name)], name, f'Kernel type "{kernel}" - {name}', renderer
                )


def _mean_bar(figures: Figures, table: Any, name: str, title: str, renderer: str | None) -> None:
    px = plotly_express()
    fig = px.bar(
        table,
        x="rank",
        y="mean (us)",
        title=name,
        labels={"rank": "Rank", "mean (us)": "Mean Duration (us)"},
        error_y=table["max (us)"] - table["mean (us)"],
        error_y_minus=table["mean (us)"] - table["min (us)"],
    )
    fig.update_layout(title_text=title, xaxis=dict(tickmode="linear", tick0=0, dtick=1))
    figures.show(fig, renderer)


def idle_time(figures: Figures, frame: Any, rank: int, visualize_pctg: bool) -> None:
    px = plotly_express()
    fig = px.bar(
        frame,
        x="stream",
        y="idle_time_ratio" if visualize_pctg else "idle_time",
        color="idle_category",
        hover_data=["idle_time", "idle_time_ratio"],
        title=f"Idle time breakdown on rank {rank} per CUDA stream",
    )
    if visualize_pctg:
        fig.update_layout(yaxis_tickformat=".2%", yaxis_title="Percentage", legend_title="Idle Time Breakdown")
    else:
        fig.update_layout(yaxis_title="Idle time (us)", legend_title="Idle Time Breakdown")
    figures.show(fig)


def user_annotations(
    figures: Figures, all_df: Any, per_rank: dict[int, Any], n_ranks: int, renderer: str | None
) -> None:
    go = plotly_graph_objects()
    from plotly.subplots import make_subplots

    specs = [[{"type": "domain"}, {"type": "domain"}] for count, _ in enumerate(per_rank) if count % 2 == 0]
    fig = make_subplots(rows=int((len(per_rank) + 1) / 2), cols=2, specs=specs)
    for rank, table in per_rank.items():
        fig.add_trace(
            go.Pie(labels=table["name"], values=table["sum"], title=f"Rank {rank}", automargin=False),
            int(rank / 2) + 1,
            int(rank % 2) + 1,
        )
    fig.update_layout(
        title_text="User annotation distribution on each rank",
        margin=dict(l=50, r=50, b=50, t=50),
        showlegend=True,
        height=400 * (1 + n_ranks / 2),
        legend=dict(yanchor="bottom", y=-0.1, xanchor="left", x=0),
    )
    figures.show(fig, renderer)
    for name in all_df["name"].unique():
        if name != "others":
            _mean_bar(figures, all_df[all_df["name"].eq(name)], name, f"User annotation = {name}", renderer)


def launch_stats(figures: Figures, rank: int, df: Any, runtime_cutoff: int, launch_delay_cutoff: int) -> None:
    px = plotly_express()
    short = df[(df["cpu_duration"] <= runtime_cutoff) & (df["gpu_duration"] < df["cpu_duration"])]
    runtime = df[df["cpu_duration"] > runtime_cutoff]
    delay = df[df["launch_delay"] > launch_delay_cutoff]
    label = {"cpu_duration": "Cuda Runtime Event Duration (us)"}
    figures.show(
        px.histogram(
            short,
            x=short["cpu_duration"],
            labels=label,
            title="Short GPU kernels (gpu op duration < cpu op duration) on rank %d" % rank,  # noqa: UP031  HTA's own title and formatting (%d takes a float rank)
        )
    )
    figures.show(
        px.histogram(
            runtime,
            x=runtime["cpu_duration"],
            nbins=300,
            labels=label,
            title="Runtime Event Duration Outliers (duration > %s us)  on rank %d" % (runtime_cutoff, rank),  # noqa: UP031  HTA's own title and formatting (%d takes a float rank)
        )
    )
    figures.show(
        px.histogram(
            delay,
            x=delay["launch_delay"],
            nbins=300,
            labels={"launch_delay": "Launch Delay Duration (us)"},
            title="Launch Delay Outliers (duration > %s us) on rank %d" % (launch_delay_cutoff, rank),  # noqa: UP031  HTA's own title and formatting (%d takes a float rank)
        )
    )


def aten_op_delays(figures: Figures, rank: int, df: Any) -> None:
    go = plotly_graph_objects()
    fig = go.Figure(
        data=[
            go.Table(
                header={
                    "values": [
                        "ATen Operation",
                        "Kernel Sequence",
                        "Occurrence Count",
                        "Average ATen Op Launch Delay (us)",
                        "Average Runtime Delay (us)",
                    ]
                },
                cells={
                    "values": [
                        df["aten_op_name"],
                        df["kernel_sequence"],
                        df["occurrence_count"],
                        df["avg_aten_op_launch_delay"],
                        df["avg_runtime_delay"],
                    ],
                    "height": 30,
                    "align": "left",
                },
            )
        ]
    )
    fig.update_layout(
        title="ATen Operations, Associated Kernels, ATen and Runtime Delays for Rank %s" % rank,  # noqa: UP031  HTA's own title and formatting (%d takes a float rank)
        width=1500,
        height=1500,
        autosize=True,
        margin={"l": 10, "r": 10, "t": 40, "b": 10},
    )
    figures.show(fig)


def sequences(figures: Figures, top: Any, rank: int, top_k: int) -> None:
    px = plotly_express()
    vis = top.copy()
    vis["pattern"] = vis["pattern"].str.replace("|", "<br>", regex=False)
    fig = px.bar(
        vis,
        x=vis.index,
        y="count",
        hover_data=["pattern", "count"],
        title=f"Top {top_k} frequent patterns for rank {rank}",
        labels={"x": "Pattern Index", "count": "Pattern Count"},
    )
    fig.update_xaxes(type="category")
    figures.show(fig)


def stragglers(
    figures: Figures, metric: Any, metric_name: str, with_iteration: bool, n_iterations: int, data_columns: list[str]
) -> None:
    px = plotly_express()
    fig = px.bar(
        metric,
        x="rank",
        y=metric_name,
        facet_col="iteration" if with_iteration else None,
        color="is_straggler",
        color_discrete_map={"Yes": "red", "No": "blue"},
        hover_data=data_columns,
        width=300 * n_iterations,
        title="Potential Stragglers",
    )
    figures.show(fig)


def _simplify_name(name: str) -> str:
    """HTA's timeline label of a kernel (analyzers/timeline.py _simplify_name)."""
    for pattern in (r"\(.+\)", r"<[^<]+>?", r"^void\s+", r"\s+", r"autograd::engine::evaluate_function"):
        name = re.sub(pattern, "", name)
    return name if len(name) < 45 else name[:42] + "..."


def gpu_kernel_timeline(
    figures: Figures, title: str, df: Any, names: list[str], ranks: list[Any], duration_threshold: int = 1000
) -> None:
    """HTA's plot_timeline_gpu_kernels: the kernels of ``df`` (HTA's frame rows with a
    ``rank`` column) as a timeline, one row per (rank, stream), kernels shorter than
    ``duration_threshold`` µs drawn that long."""
    pd = pandas()
    px = plotly_express()

    def unique(col: str) -> list[Any]:
        return sorted(v for v in df[col].unique().tolist() if v not in [-1])

    events = df.loc[
        df["rank"].isin(ranks) & df["iteration"].isin(unique("iteration")) & df["stream"].isin(unique("stream"))
    ].copy()
    events["s_name"] = events["name"].apply(lambda i: names[i]).apply(_simplify_name)
    events["s_cat"] = events["cat"].apply(lambda i: names[i])
    events["calibrated_start_global"] = pd.to_datetime(events["ts"], unit="us")
    events["calibrated_end_global"] = pd.to_datetime(
        events["ts"] + events["dur"].apply(lambda x: x if x >= duration_threshold else duration_threshold), unit="us"
    )
    events["label"] = events["s_name"]
    events["task"] = "rank " + events["rank"].astype("str") + " stream " + events["stream"].astype("str")
    events = events.sort_values(by=["rank", "stream", "ts"])
    shown_ranks = sorted(events["rank"].unique()) if "rank" in events.columns else []
    hover = sorted(set(events.columns) & {"rank", "stream", "iteration", "s_cat", "cat", "s_name", "name", "dur"})
    fig = px.timeline(
        events,
        x_start="calibrated_start_global",
        x_end="calibrated_end_global",
        y="task",
        hover_data=hover,
        category_orders={"task": sorted(events["task"].unique())},
        color="label",
        color_discrete_sequence=px.colors.qualitative.D3,
        width=1600,
        height=200 + 120 * len(shown_ranks),
        title=title,
    )
    figures.show(fig)
