"""``cclq.TraceAnalysis``: Holistic Trace Analysis' method names over cclq.

For people switching from HTA: ``TraceAnalysis(trace_dir=...)`` ingests the folder (a
no-op when it is unchanged) and each method runs the ``hta_*`` metric that reproduces
HTA 0.5.0's analysis, returning a polars DataFrame with the columns HTA returns
(``.to_pandas()`` gives HTA's pandas form). The mapping, method by method, is in
``HTA_METHODS`` and docs/api.md; HTA's analyses that have no metric yet are not
offered (calling one raises ``AttributeError``), never approximated.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from cclq.api.workspace import Workspace, open
from cclq.errors import UsageError
from cclq.ingest.plan import plan_inputs
from cclq.query.session import Session
from cclq.sqltext import quote_literal


@dataclass(frozen=True)
class HtaMethod:
    """One HTA method: the metric that computes it and HTA's name for it."""

    hta_name: str
    metric: str
    hta_columns: tuple[str, ...]


# pandas' describe() columns, as HTA's summaries have them (flattened: HTA's frames have a
# two-level column index such as ("queue_length", "mean") and (rank, stream) as the index)
DESCRIBE = ("count", "mean", "std", "min", "25%", "50%", "75%", "max")
# HTA's name/duration aggregation (kernel and user-annotation breakdowns)
BREAKDOWN = ("name", "sum (us)", "max (us)", "min (us)", "stddev", "mean (us)", "rank")
STATS = (("mean", "mean"), ("std", "std"), ("min", "min"), ("p25", "25%"), ("p50", "50%"), ("p75", "75%"),
         ("max", "max"))

# HTA 0.5.0 method (with the argument that selects a second table) -> the cclq metric, or
# view / macro for get_cuda_kernel_launch_stats (view hta_kernel_launches; its summary is the
# metric hta_cuda_kernel_launch_stats), get_frequent_cuda_kernel_sequences (macro) and
# get_profiler_steps (view); the columns are HTA's, in HTA's order.
HTA_METHODS: dict[str, HtaMethod] = {
    m.hta_name: m for m in (
        HtaMethod("get_temporal_breakdown", "hta_temporal_breakdown",
                  ("rank", "idle_time(us)", "compute_time(us)", "non_compute_time(us)", "kernel_time(us)",
                   "idle_time_pctg", "compute_time_pctg", "non_compute_time_pctg")),
        HtaMethod("get_comm_comp_overlap", "hta_comm_comp_overlap", ("rank", "comp_comm_overlap_pctg")),
        HtaMethod("get_gpu_kernel_type_breakdown", "hta_kernel_type_breakdown", ("kernel_type", "sum", "percentage")),
        HtaMethod("get_idle_time_breakdown", "hta_idle_time_breakdown",
                  ("rank", "stream", "idle_category", "idle_time", "idle_time_ratio")),
        HtaMethod("get_idle_time_breakdown(show_idle_interval_stats=True)", "hta_idle_interval_stats",
                  ("idle_category", "rank", "stream", *DESCRIBE)),
        HtaMethod("get_gpu_kernel_breakdown", "hta_kernel_breakdown", BREAKDOWN[:-1] + ("kernel_type", "rank")),
        HtaMethod("get_queue_length_summary", "hta_queue_length_summary", ("rank", "stream", *DESCRIBE)),
        HtaMethod("get_time_spent_blocked_on_full_queue", "hta_time_blocked_on_full_queue",
                  ("rank", "stream", "duration_at_max_queue_length", "relative_duration_at_max_queue_length")),
        HtaMethod("get_memory_bw_summary", "hta_memory_bw_summary", ("rank", "name", *DESCRIBE)),
        HtaMethod("get_cuda_kernel_launch_stats", "hta_kernel_launches",
                  ("correlation", "cpu_duration", "gpu_duration", "launch_delay")),
        HtaMethod("get_gpu_user_annotation_breakdown", "hta_gpu_user_annotation_breakdown", BREAKDOWN),
        HtaMethod("get_gpu_user_annotation_breakdown(use_gpu_annotation=False)", "hta_cpu_user_annotation_breakdown",
                  BREAKDOWN),
        HtaMethod("get_frequent_cuda_kernel_sequences", "hta_frequent_cuda_kernel_sequences",
                  ("pattern", "count", "GPU kernel duration (us)", "CPU op duration (us)")),
        HtaMethod("get_profiler_steps", "hta_profiler_steps", ("profiler_step",)),
        HtaMethod("critical_path_analysis", "hta_critical_path_breakdown", ("bound_by", "percentage")),
        HtaMethod("get_cupti_counter_data_with_operators", "hta_cupti_counters",
                  ("name", "cat", "ts", "dur", "op_stack", "top_level_op", "bottom_level_op")),
    )
}


class TraceAnalysis:
    """A trace folder analysed as HTA's ``TraceAnalysis`` would, through cclq's warehouse.

    ``trace_dir``: one workload folder (one file per rank). ``warehouse``: where it is
    ingested (default ``$CCLQ_WAREHOUSE``, else ``./.cclq/warehouse``).
    """

    def __init__(self, trace_dir: str | Path, warehouse: str | Path | Workspace | None = None,
                 jobs: int | None = None) -> None:
        workloads = plan_inputs([trace_dir])
        if len(workloads) != 1:
            raise UsageError(f"{trace_dir} holds {len(workloads)} workloads; give one trace folder")
        self.workspace = warehouse if isinstance(warehouse, Workspace) else open(warehouse)
        report = self.workspace.ingest(trace_dir, jobs=jobs)
        if report.failed:
            raise UsageError("; ".join(o.message for o in report.failed))
        self.trace = workloads[0].trace

    def _rows(self, method: str, **params: Any) -> pl.DataFrame:
        given: dict[str, Any] = {k: str(v) for k, v in params.items()}
        return self.workspace.metric(HTA_METHODS[method].metric, traces=[self.trace], **given)

    def _metric_rows(self, metric: str, ranks: Sequence[int] | None, keep: str = "value",
                     **params: Any) -> pl.DataFrame:
        """A metric's rows of this trace for ``ranks`` (None: HTA's default, rank 0), those
        with a ``keep`` column (rows without one only say why a rank has none)."""
        given: dict[str, Any] = {k: str(v) for k, v in params.items()}
        rows = self.workspace.metric(metric, traces=[self.trace], **given)
        return rows.filter(pl.col(keep).is_not_null() & pl.col("rank").is_in(list(ranks or [0])))

    def _view(self, query: str) -> pl.DataFrame:
        """A query over the views, in a session that sees only this trace."""
        with Session(self.workspace.warehouse, traces=[self.trace], settings=self.workspace.settings) as s:
            frame = pl.from_arrow(s.execute(query).to_arrow_table())
        assert isinstance(frame, pl.DataFrame)
        return frame

    def get_temporal_breakdown(self, visualize: bool = False) -> pl.DataFrame:
        """Per rank: idle, compute and non-compute time of the GPU in µs and in percent."""
        rows = self._rows("get_temporal_breakdown")
        return rows.select(
            pl.col("rank").cast(pl.Int64),
            pl.col("idle_time_us").round(0).cast(pl.Int64).alias("idle_time(us)"),
            pl.col("compute_time_us").round(0).cast(pl.Int64).alias("compute_time(us)"),
            pl.col("non_compute_time_us").round(0).cast(pl.Int64).alias("non_compute_time(us)"),
            pl.col("kernel_time_us").round(0).cast(pl.Int64).alias("kernel_time(us)"),
            "idle_time_pctg", "compute_time_pctg", "non_compute_time_pctg",
        ).sort("rank")

    def get_comm_comp_overlap(self, visualize: bool = False) -> pl.DataFrame:
        """Per rank: the share of communication time overlapped by computation, percent
        (HTA rounds it to 2 decimals; NULL where a rank has no communication)."""
        rows = self._rows("get_comm_comp_overlap")
        return rows.select(pl.col("rank").cast(pl.Int64),
                           pl.col("value").round(2).alias("comp_comm_overlap_pctg")).sort("rank")

    def get_gpu_kernel_type_breakdown(self) -> pl.DataFrame:
        """The ``kernel_type_df`` half of HTA's ``get_gpu_kernel_breakdown``: µs per kernel
        type (and overlap of types) over every rank, with its percentage."""
        rows = self._rows("get_gpu_kernel_type_breakdown")
        return (rows.select("kernel_type", pl.col("value").cast(pl.Int64).alias("sum"), "percentage")
                .sort(["sum", "kernel_type"], descending=[True, False]))

    def get_idle_time_breakdown(self, ranks: Sequence[int] | None = None, streams: Sequence[int] | None = None,
                                visualize: bool = False, show_idle_interval_stats: bool = False,
                                ) -> pl.DataFrame | tuple[pl.DataFrame, pl.DataFrame]:
        """Per rank and stream, GPU idle time by category (host_wait, kernel_wait, other),
        in µs and as a share of the stream's idle time, in HTA's long form. ``ranks``:
        HTA's default is rank 0 only; None here means HTA's default. With
        ``show_idle_interval_stats`` the pair HTA returns: that and describe() of the gaps
        per category (hta_idle_interval_stats, rounded to 2 decimals as HTA rounds them);
        without, the first table alone (HTA returns (table, None))."""
        table = self._idle_time_breakdown(ranks)
        if streams is not None:
            table = table.filter(pl.col("stream").is_in(list(streams)))
        if not show_idle_interval_stats:
            return table
        stats = self._metric_rows("hta_idle_interval_stats", ranks, keep="idle_category").select(
            "idle_category", pl.col("rank").cast(pl.Int64), pl.col("stream").cast(pl.Int64),
            pl.col("count").cast(pl.Int64), *[pl.col(c).alias(h) for c, h in STATS])
        if streams is not None:
            stats = stats.filter(pl.col("stream").is_in(list(streams)))
        return table, stats.sort(["rank", "stream", "idle_category"])

    def _idle_time_breakdown(self, ranks: Sequence[int] | None) -> pl.DataFrame:
        rows = self._rows("get_idle_time_breakdown").filter(pl.col("rank").is_in(list(ranks or [0])))
        parts = []
        for category in ("host_wait", "kernel_wait", "other"):
            parts.append(rows.select(
                pl.col("rank").cast(pl.Int64), pl.col("stream").cast(pl.Int64),
                pl.lit(category).alias("idle_category"),
                pl.col(f"{category}_us").round(0).cast(pl.Int64).alias("idle_time"),
                pl.col(f"{category}_ratio").round(2).alias("idle_time_ratio"),  # HTA rounds it so
            ))
        # HTA lists only the categories a stream has gaps of (NULL here)
        return pl.concat(parts).drop_nulls("idle_time").sort(["rank", "stream", "idle_category"])

    def get_gpu_kernel_breakdown(self, visualize: bool = False, duration_ratio: float = 0.8, num_kernels: int = 10,
                                 include_memory_kernels: bool = True) -> tuple[pl.DataFrame, pl.DataFrame]:
        """HTA's pair: (kernel_type_df, kernel_df). kernel_df: per rank, kernel type and
        kernel name (the names past HTA's ``duration_ratio`` / ``num_kernels`` cut as
        "others"), the sum, max, min, standard deviation and mean of their durations (µs)."""
        rows = self._rows("get_gpu_kernel_breakdown", duration_ratio=duration_ratio, num_kernels=num_kernels,
                          include_memory_kernels=int(include_memory_kernels))
        kernels = _breakdown(rows.filter(pl.col("value").is_not_null()), with_type=True)
        return self.get_gpu_kernel_type_breakdown(), kernels

    def get_gpu_user_annotation_breakdown(self, use_gpu_annotation: bool = True, visualize: bool = False,
                                          duration_ratio: float = 0.8, num_kernels: int = 1000,
                                          ) -> pl.DataFrame | None:
        """Per rank and user annotation (GPU-side ``gpu_user_annotation`` rows, or with
        ``use_gpu_annotation=False`` the CPU-side ``user_annotation`` rows): the sum, max,
        min, standard deviation and mean of their durations (µs), names past HTA's cut as
        "others". None where the trace has no such annotation, as HTA."""
        method = ("get_gpu_user_annotation_breakdown" if use_gpu_annotation
                  else "get_gpu_user_annotation_breakdown(use_gpu_annotation=False)")
        rows = self._rows(method, duration_ratio=duration_ratio, num_kernels=num_kernels)
        rows = rows.filter(pl.col("value").is_not_null())
        return _breakdown(rows, with_type=False) if len(rows) else None

    def get_queue_length_summary(self, ranks: Sequence[int] | None = None) -> pl.DataFrame:
        """Per rank and CUDA stream, describe() of HTA's queue length series (outstanding
        launches). Where two points of a stream share a timestamp HTA's own order of them is
        not defined (its unstable sort); the values here are those of a stable order (see
        the metric hta_queue_length_summary)."""
        rows = self._metric_rows("hta_queue_length_summary", ranks)
        return rows.select(pl.col("rank").cast(pl.Int64), pl.col("stream").cast(pl.Int64),
                           pl.col("count").cast(pl.Int64), *[pl.col(c).alias(h) for c, h in STATS]
                           ).sort(["rank", "stream"])

    def get_time_spent_blocked_on_full_queue(self, queue_length_dict: Any = None, max_queue_length: int = 1024,
                                             ranks: Sequence[int] | None = None) -> pl.DataFrame:
        """Per rank, the stream HTA reports and the time its launch queue stayed at
        ``max_queue_length`` or more (µs, and as a share of the rank's trace). HTA takes the
        series of get_queue_length_time_series; here ``ranks`` says which (default rank 0)
        and ``queue_length_dict`` is not used."""
        rows = self._metric_rows("hta_time_blocked_on_full_queue", ranks, max_queue_length=max_queue_length)
        return rows.filter(pl.col("hta_reports")).select(
            pl.col("rank").cast(pl.Int64), pl.col("stream").cast(pl.Int64),
            pl.col("duration_at_max_queue_length_us").alias("duration_at_max_queue_length"),
            "relative_duration_at_max_queue_length").sort("rank")

    def get_memory_bw_summary(self, ranks: Sequence[int] | None = None) -> pl.DataFrame:
        """Per rank and memory operation kind (Memcpy HtoD, ..., Memset), describe() of HTA's
        bandwidth series over its points above 0 GB/s (ties: see hta_memory_bw_summary)."""
        rows = self._metric_rows("hta_memory_bw_summary", ranks)
        return rows.select(pl.col("rank").cast(pl.Int64), "name", pl.col("count").cast(pl.Int64),
                           *[pl.col(c).alias(h) for c, h in STATS]).sort(["rank", "name"])

    def get_cuda_kernel_launch_stats(self, ranks: Sequence[int] | None = None, runtime_cutoff: int = 50,
                                     launch_delay_cutoff: int = 100, include_memory_events: bool = True,
                                     visualize: bool = False) -> dict[int, pl.DataFrame]:
        """rank -> one row per launch call and its GPU operation: correlation, the call's
        and the operation's durations and the launch delay (µs), as HTA's dict. (The cutoffs
        only draw HTA's plot; hta_cuda_kernel_launch_stats counts the outliers.)"""
        memory = "" if include_memory_events else " AND NOT memory_launch"
        rows = self._view(
            "SELECT rank, correlation, cpu_duration_us AS cpu_duration, gpu_duration_us AS gpu_duration, "
            f"launch_delay_us AS launch_delay FROM hta_kernel_launches WHERE trace = {quote_literal(self.trace)}"
            f"{memory} ORDER BY rank, correlation")
        return {rank: rows.filter(pl.col("rank") == rank).drop("rank") for rank in (ranks or [0])}

    def get_frequent_cuda_kernel_sequences(self, operator_name: str, output_dir: str | None = None,
                                           min_pattern_len: int = 3, rank: int = 0, top_k: int = 5,
                                           visualize: bool = False, compress_other_kernels: bool = True,
                                           ) -> pl.DataFrame:
        """Per pattern (an operator named like ``operator_name`` and the GPU kernels its
        subtree launches, joined by "|"): how often it occurs and the GPU and CPU time it
        takes (µs), most frequent first, on ``rank``. HTA also writes a trace with the top_k
        patterns overlaid into ``output_dir``; cclq does not (the argument is accepted)."""
        rows = self._view(
            "SELECT pattern, count, gpu_kernel_duration_us, cpu_op_duration_us FROM "
            f"hta_frequent_cuda_kernel_sequences({quote_literal(operator_name)}, "
            f"min_pattern_len := {int(min_pattern_len)}) "
            f"WHERE trace = {quote_literal(self.trace)} AND rank = {int(rank)} ORDER BY count DESC, pattern")
        return rows.rename({"gpu_kernel_duration_us": "GPU kernel duration (us)",
                            "cpu_op_duration_us": "CPU op duration (us)"})

    def get_profiler_steps(self) -> list[int]:
        """The ProfilerStep numbers of the rows HTA analyses (its tail filter drops the last)."""
        rows = self._view(f"SELECT profiler_step FROM hta_profiler_steps WHERE trace = {quote_literal(self.trace)} "
                          "ORDER BY profiler_step")
        return [int(v) for v in rows["profiler_step"]]

    def get_cupti_counter_data_with_operators(self, ranks: Sequence[int] | None = None) -> list[pl.DataFrame]:
        """HTA's CUPTI counter analysis: for each of ``ranks`` (default [0]) whose
        profiler-range kernels pair up with its kernel launches (view hta_cupti_counters),
        a frame of the kernels with their operator stack and one column per counter
        measured on them; a rank whose counts differ has no frame, as in HTA."""
        rows = self._view(
            "SELECT rank, kernel_no, name, cat, ts_us AS ts, dur_us AS dur, op_stack, top_level_op, "
            f"bottom_level_op, counters FROM hta_cupti_counters WHERE trace = {quote_literal(self.trace)} "
            "ORDER BY rank, kernel_no")
        frames = []
        for rank in ranks or [0]:
            mine = rows.filter(pl.col("rank") == rank)
            if len(mine):
                counters = mine["counters"].str.json_decode(infer_schema_length=None).struct.unnest()
                frames.append(pl.concat([mine.drop("rank", "kernel_no", "counters"), counters], how="horizontal"))
        return frames

    def critical_path_analysis(self, rank: int, annotation: str = "ProfilerStep",
                               instance_id: int | None = 0) -> tuple[CriticalPath, bool]:
        """HTA's critical path of one iteration on ``rank``: the first ProfilerStep
        (annotation "ProfilerStep", instance 0: the window hta_critical_path_breakdown
        analyses; other windows are refused, not approximated). Returns (path, success) as
        HTA does; ``path.summary()`` is HTA's CPGraph.summary(): bound_by, percentage."""
        if annotation != "ProfilerStep" or instance_id not in (0, None):
            raise UsageError("critical_path_analysis: cclq analyses the first ProfilerStep only "
                             "(annotation='ProfilerStep', instance_id=0)")
        rows = self._rows("critical_path_analysis", only_rank=rank).filter(pl.col("rank") == rank)
        found = rows.filter(pl.col("bound_by").is_not_null())
        reason = next((r for r in rows["reason"] if r), None) if len(rows) else f"no rank {rank} in {self.trace}"
        return CriticalPath(rank, found.select("bound_by", "duration_us", "edges", "percentage", "path_us"),
                            None if len(found) else reason), bool(len(found))


@dataclass(frozen=True)
class CriticalPath:
    """What HTA's CPGraph summarises: the share of the critical path per bound_by class
    (hta_critical_path_breakdown). ``reason``: why there is none (HTA fails there)."""

    rank: int
    classes: pl.DataFrame
    reason: str | None

    def summary(self) -> pl.DataFrame:
        """HTA's CPGraph.summary(): bound_by, percentage of the path's duration."""
        return self.classes.select("bound_by", "percentage").sort("bound_by")


def _breakdown(rows: pl.DataFrame, with_type: bool) -> pl.DataFrame:
    """HTA's name/duration aggregation columns from a breakdown metric's rows."""
    columns = [
        "name",
        pl.col("sum_us").alias("sum (us)"), pl.col("max_us").alias("max (us)"), pl.col("min_us").alias("min (us)"),
        pl.col("std_us").alias("stddev"), pl.col("mean_us").alias("mean (us)"),
    ]
    if with_type:
        columns.append("kernel_type")
    columns.append(pl.col("rank").cast(pl.Int64))
    return rows.select(columns).sort(["rank", "sum (us)", "name"], descending=[False, True, False])
