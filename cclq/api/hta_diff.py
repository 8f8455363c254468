"""HTA 0.5.0's ``hta.trace_diff``: ``TraceDiff``, ``LabeledTrace``, ``DeviceType``.

The comparison itself is the SQL macro ``hta_trace_diff`` (sql/views/hta_analyses.sql:
per name, counts and total µs of one rank and one iteration of each trace); this module
gives it HTA's shape: the two per-name summaries joined as HTA joins them (pandas' outer
concat keyed by the two labels, so the row order, the NaN -> 0 and the float64 of a side
missing names are HTA's), the label-prefixed columns, the differences, ``ops_diff``'s five
lists and the two bar charts. Both traces are ingested into the same warehouse (each
``LabeledTrace`` opens a ``TraceAnalysis`` on its folder) and compared in one session.

Not covered: several ranks or iterations on one side (a list of more than one), and
``LabeledTrace.extract_ops`` / ``get_ops_summary`` (HTA's frame-level helpers).
"""

from __future__ import annotations

import random
from enum import Enum
from pathlib import Path
from typing import Any

from cclq.api.hta import TraceAnalysis
from cclq.api.hta_frames import flatten_column_names, pandas, plotly_graph_objects
from cclq.api.hta_trace import Trace, shorten_name
from cclq.query.session import Session


class DeviceType(Enum):
    """Which events a comparison reads: CPU (stream -1), GPU (the others) or both."""

    CPU = 1
    GPU = 2
    ALL = 3


class LabeledTrace:
    """A trace folder (or the ``Trace`` of a ``TraceAnalysis``) with a label."""

    def __init__(self, label: str | None = None, t: Trace | None = None, trace_dir: str | None = None) -> None:
        self.label = label if label else f"t{random.randint(0, 10)}"
        if t is not None:
            self.t = t
        elif trace_dir is not None and Path(trace_dir).expanduser().is_dir():
            self.analysis = TraceAnalysis(trace_dir=trace_dir)
            self.t = self.analysis.t
        else:
            raise ValueError("either a trace object or a valid trace dir must be provided in LabeledTrace.__init__()")

    def ranks(self) -> list[int]:
        """All ranks of the trace."""
        return sorted(self.t.get_ranks())

    def iterations(self) -> list[int]:
        """The ProfilerStep numbers among the trace's names (HTA reads them from its symbol
        table, the last step included)."""
        names = self.t.symbol_table.get_sym_table()
        return sorted(int(s.replace("ProfilerStep#", "")) for s in names if s.startswith("ProfilerStep"))

    # what compare_traces needs of a side
    def _select(self, rank: int | list[int] | None, iteration: int | list[int] | None) -> tuple[int, int]:
        ranks = self.ranks()
        if rank is None:
            if not ranks:
                raise ValueError(f"Trace {self.label} doesn't have any rank.")
            rank = ranks[0]
        rank = _one(rank, "rank")
        if rank not in ranks:
            raise ValueError(f"Invalid argument rank={rank}.")
        iterations = self.iterations()
        if iteration is None:
            if not iterations:
                raise ValueError(f"Trace {self.label} doesn't have any iteration.")
            iteration = iterations[0]
        iteration = _one(iteration, "iteration")
        if iteration not in iterations:
            raise ValueError(f"Invalid argument iteration={iteration}.")
        return rank, iteration


def _one(value: int | list[int], what: str) -> int:
    if isinstance(value, list):
        if len(value) != 1:
            raise ValueError(f"cclq's TraceDiff compares one {what} of each trace, not {value}")
        return int(value[0])
    if not isinstance(value, int):
        raise ValueError(f"Invalid type for argument `{what}` {value}.")
    return value


def _labeled(t: LabeledTrace | Trace | str, default_label: str) -> LabeledTrace:
    if isinstance(t, str):
        return LabeledTrace(label=default_label, trace_dir=t)
    if isinstance(t, Trace):
        return LabeledTrace(label=default_label, t=t)
    if isinstance(t, LabeledTrace):
        return t
    raise ValueError(f"Invalid argument type for ({t}).")


class TraceDiff:
    """HTA's comparisons of two traces (class methods, as HTA's)."""

    @classmethod
    def compare_traces(
        cls,
        control: LabeledTrace | Trace | str,
        test: LabeledTrace | Trace | str,
        control_rank: int | list[int] | None = None,
        test_rank: int | list[int] | None = None,
        control_iteration: int | list[int] | None = None,
        test_iteration: int | list[int] | None = None,
        device_type: DeviceType = DeviceType.ALL,
        use_short_name: bool = False,
    ) -> Any:
        """Per operator or kernel name: its count and total duration (µs) in each trace,
        their differences (test - control) and ``counts_change_categories`` ('+', '-', '=')."""
        pd = pandas()
        c, t = _labeled(control, "Control"), _labeled(test, "Test")
        if c.label == t.label:
            t.label = f"{t.label}_control_test"  # HTA renames it twice; the second wins
        c_rank, c_iter = c._select(control_rank, control_iteration)
        t_rank, t_iter = t._select(test_rank, test_iteration)
        c_data, t_data = c.t.data, t.t.data
        session = Session(
            c_data.workspace.warehouse,
            traces=sorted({c_data.trace, t_data.trace}),
            settings=c_data.workspace.settings,
            cache=False,
        )
        try:
            table = session.arrow(
                "SELECT * FROM hta_trace_diff(?, ?, control_rank := ?, test_rank := ?, control_iteration := ?, "
                "test_iteration := ?, device := ?) ORDER BY name",
                [c_data.trace, t_data.trace, c_rank, t_rank, c_iter, t_iter, device_type.name],
            )
        finally:
            session.close()
        rows = table.to_pydict()
        key = "short_name" if use_short_name else "name"

        def side(prefix: str) -> Any:
            names = [n for n, k in zip(rows["name"], rows[f"{prefix}_counts"]) if k > 0]
            keep = [k > 0 for k in rows[f"{prefix}_counts"]]
            frame = pd.DataFrame(
                {
                    key: [shorten_name(n) for n in names] if use_short_name else names,
                    "counts": pd.array([v for v, k in zip(rows[f"{prefix}_counts"], keep) if k], dtype="int64"),
                    "total_duration": pd.array(
                        [v for v, k in zip(rows[f"{prefix}_total_duration"], keep) if k], dtype="float64"
                    ),
                }
            )
            return frame.groupby(key)[["counts", "total_duration"]].sum()

        comp = pd.concat([side("control"), side("test")], axis=1, join="outer", keys=[c.label, t.label])
        comp.fillna(0, inplace=True)
        flatten_column_names(comp)
        comp["diff_counts"] = comp[f"{t.label}_counts"] - comp[f"{c.label}_counts"]
        comp["diff_duration"] = comp[f"{t.label}_total_duration"] - comp[f"{c.label}_total_duration"]
        comp["counts_change_categories"] = comp["diff_counts"].apply(lambda v: "+" if v > 0 else "-" if v < 0 else "=")
        return comp

    @classmethod
    def ops_diff(
        cls,
        control: LabeledTrace | Trace | str,
        test: LabeledTrace | Trace | str,
        control_rank: int | list[int] | None = None,
        test_rank: int | list[int] | None = None,
        control_iteration: int | list[int] | None = None,
        test_iteration: int | list[int] | None = None,
        device_type: DeviceType = DeviceType.ALL,
    ) -> dict[str, list[str]]:
        """The names added, deleted, increased, decreased and unchanged in the test trace."""
        c, t = _labeled(control, "Control"), _labeled(test, "Test")
        df = cls.compare_traces(c, t, control_rank, test_rank, control_iteration, test_iteration, device_type)
        col_c, col_t = f"{c.label}_counts", f"{t.label}_counts"
        return {
            "added": df.loc[df[col_c].eq(0) & df[col_t].gt(0)].index.tolist(),
            "deleted": df.loc[df[col_c].gt(0) & df[col_t].eq(0)].index.tolist(),
            "increased": df.loc[df[col_c].gt(0) & df["diff_counts"].gt(0)].index.tolist(),
            "decreased": df.loc[df[col_t].gt(0) & df["diff_counts"].lt(0)].index.tolist(),
            "unchanged": df.loc[df[col_t].gt(0) & df["diff_counts"].eq(0)].index.tolist(),
        }

    @classmethod
    def visualize_counts_diff(cls, df: Any, show_image: bool = True, export_image_path: str | None = None) -> None:
        """HTA's grouped bars of the two counts and their difference per name."""
        cls._bars(df, "counts", "diff_counts", {"title_text": "Ops Count Comparison"}, show_image, export_image_path)

    @classmethod
    def visualize_duration_diff(cls, df: Any, show_image: bool = True, export_image_path: str | None = None) -> None:
        """HTA's grouped bars of the two total durations and their difference per name."""
        cls._bars(
            df,
            "total_duration",
            "diff_duration",
            {
                "title_text": "Ops Duration Comparison",
                "yaxis_title": "Total Duration (us)",
                "autosize": True,
                "width": 1000,
                "height": 1000,
            },
            show_image,
            export_image_path,
        )

    @staticmethod
    def _bars(
        df: Any, column: str, diff: str, layout: dict[str, Any], show_image: bool, export_image_path: str | None
    ) -> None:
        go = plotly_graph_objects()

        labels = [col.replace("_total_duration", "") for col in df.columns if col.endswith("_total_duration")]
        assert len(labels) >= 2
        fig = go.Figure(
            data=[
                go.Bar(name=labels[0], x=df.index, y=df[f"{labels[0]}_{column}"]),
                go.Bar(name=labels[1], x=df.index, y=df[f"{labels[1]}_{column}"]),
                go.Bar(name="Difference", x=df.index, y=df[diff]),
            ]
        )
        fig.update_layout(barmode="group", **layout)
        if show_image:
            fig.show()
        if export_image_path:
            fig.write_image(export_image_path)
