"""``cclq.TraceAnalysis``: Holistic Trace Analysis' method names over cclq.

For people switching from HTA: ``TraceAnalysis(trace_dir=...)`` ingests the folder (a
no-op when it is unchanged) and each method runs the ``hta_*`` metric that reproduces
HTA 0.5.0's analysis, returning a polars DataFrame with the columns HTA returns
(``.to_pandas()`` gives HTA's pandas form). The mapping, method by method, is in
``HTA_METHODS`` and docs/hta.md; HTA's analyses that have no metric yet are not
offered (calling one raises ``AttributeError``), never approximated.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from cclq.api.workspace import Workspace, open
from cclq.errors import UsageError
from cclq.ingest.plan import plan_inputs


@dataclass(frozen=True)
class HtaMethod:
    """One HTA method: the metric that computes it and HTA's name for it."""

    hta_name: str
    metric: str
    hta_columns: tuple[str, ...]


# HTA 0.5.0 method -> cclq metric; the columns are HTA's, in HTA's order.
HTA_METHODS: dict[str, HtaMethod] = {
    m.hta_name: m for m in (
        HtaMethod("get_temporal_breakdown", "hta_temporal_breakdown",
                  ("rank", "idle_time(us)", "compute_time(us)", "non_compute_time(us)", "kernel_time(us)",
                   "idle_time_pctg", "compute_time_pctg", "non_compute_time_pctg")),
        HtaMethod("get_comm_comp_overlap", "hta_comm_comp_overlap", ("rank", "comp_comm_overlap_pctg")),
        HtaMethod("get_gpu_kernel_type_breakdown", "hta_kernel_type_breakdown", ("kernel_type", "sum", "percentage")),
        HtaMethod("get_idle_time_breakdown", "hta_idle_time_breakdown",
                  ("rank", "stream", "idle_category", "idle_time", "idle_time_ratio")),
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

    def _rows(self, method: str) -> pl.DataFrame:
        return self.workspace.metric(HTA_METHODS[method].metric, traces=[self.trace])

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

    def get_idle_time_breakdown(self, ranks: Sequence[int] | None = None) -> pl.DataFrame:
        """Per rank and stream, GPU idle time by category (host_wait, kernel_wait, other),
        in µs and as a share of the stream's idle time, in HTA's long form. ``ranks``:
        HTA's default is rank 0 only; None here means HTA's default."""
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
