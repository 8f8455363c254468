"""``cclq.TraceAnalysis``: Holistic Trace Analysis 0.5.0's API over cclq's warehouse.

An HTA script runs after changing its import line (``from cclq import TraceAnalysis,
TimeSeriesTypes``): the constructor takes HTA's arguments and ingests the folder (a no-op
when it is unchanged); every public method of HTA's ``TraceAnalysis`` is here with HTA's
arguments and defaults, and returns what HTA returns: pandas objects with HTA's index,
column levels, dtypes and values, HTA's tuples, dicts and lists, None where HTA gives
None, and the figures HTA draws with ``visualize=True`` (its default). pandas and plotly
come with the ``hta`` extra (``pip install 'cclq[hta]'``). ``ta.t`` is HTA's ``Trace``
(``cclq.api.hta_trace``). ``cclq.open()`` stays the native face, with polars frames.

Where HTA fails on a trace (an exception, a failed assertion), cclq answers where it can;
docs/api.md lists each case. The mapping of methods to the views and metrics that answer
them is ``HTA_METHODS`` (and docs/api.md).
"""

from __future__ import annotations

import logging
import os
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from enum import Flag, auto
from itertools import chain
from pathlib import Path
from typing import Any

from cclq.api import hta_breakdown, hta_counters, hta_figures, hta_kernels
from cclq.api.hta_critical_path import CPGraph, critical_path, overlay
from cclq.api.hta_data import HtaData
from cclq.api.hta_figures import Figures
from cclq.api.hta_frames import pandas
from cclq.api.hta_trace import Trace
from cclq.api.workspace import Workspace, open
from cclq.errors import UsageError
from cclq.ingest.plan import plan_inputs
from cclq.present.chrome_trace import write_trace
from cclq.query.session import close_unused, open_database_soon
from cclq.store.objects import is_url, mirror_traces

__all__ = ["CPGraph", "HTA_METHODS", "TimeSeriesTypes", "TraceAnalysis"]

log = logging.getLogger("cclq")

CUDA_MAX_LAUNCH_QUEUE_PER_STREAM = 1024  # HTA's default max_queue_length
# A folder smaller than this is ingested in this process: there parser processes (a pool,
# or helpers for one file) cost more than they save. Measured in fresh processes, ingest
# time in-process vs default: alexnet (25 KB) 0.18 vs 0.30 s, nccl_data (750 KB) 0.30-0.52
# vs 0.41-0.74 s; at 1.4 MB (negative_queue_length) neither wins consistently.
SMALL_FOLDER_BYTES = 1 << 20

# HTA 0.5.0 method -> the cclq views and metrics that answer it (docs/api.md has the table)
HTA_METHODS: dict[str, str] = {
    "get_temporal_breakdown": "metric hta_temporal_breakdown",
    "get_comm_comp_overlap": "metric hta_comm_comp_overlap",
    "get_gpu_kernel_breakdown": "views hta_events (GPU rows), hta_gpu_merged",
    "get_idle_time_breakdown": "view hta_events (kernel rows with their launch's ts)",
    "get_gpu_user_annotation_breakdown": "view hta_events (annotation rows)",
    "get_gpu_kernels_with_user_annotations": "view hta_trace_frame",
    "get_queue_length_time_series": "view hta_queue_points",
    "get_queue_length_summary": "view hta_queue_points",
    "get_queue_length_summary_from_time_series": "the series given",
    "get_time_spent_blocked_on_full_queue": "the series given, view hta_events",
    "get_memory_bw_time_series": "view hta_events (MEMORY rows)",
    "get_memory_bw_summary": "view hta_events (MEMORY rows)",
    "get_cuda_kernel_launch_stats": "view hta_kernel_launches",
    "get_frequent_cuda_kernel_sequences": "macro hta_frequent_cuda_kernel_sequences",
    "get_aten_op_kernels_and_delay": "view hta_trace_frame",
    "get_potential_stragglers": "view hta_trace_frame",
    "get_profiler_steps": "view hta_profiler_steps",
    "get_cupti_counter_data_with_operators": "view hta_cupti_counters",
    "critical_path_analysis": "views hta_critical_path_rows, hta_critical_path_nodes, hta_critical_path_edges",
    "overlay_critical_path_analysis": "view hta_critical_path_edges, table events",
    "generate_trace_with_counters": "view hta_queue_points, hta_events, table events",
}


class TimeSeriesTypes(Flag):
    """HTA's choice of counters for generate_trace_with_counters."""

    QUEUE_LENGTH = auto()
    MEMCPY_BANDWIDTH = auto()


class TraceAnalysis:
    """HTA's ``TraceAnalysis`` over cclq (see the module docstring).

    ``trace_files`` ({rank: file}, relative to ``trace_dir`` or absolute) and
    ``trace_dir`` as HTA takes them (the files must be trace files of that folder, each with
    the rank cclq reads from it; the analyses see only those ranks); ``include_last_profiler_step``
    as HTA. cclq's own: ``warehouse`` (a path or a ``cclq.open()`` workspace; default
    ``$CCLQ_WAREHOUSE``, else ``./.cclq/warehouse``), ``jobs`` (ingest processes),
    ``figures_dir`` (also write every figure there as HTML; default ``$CCLQ_FIGURES_DIR``).
    """

    def __init__(
        self,
        trace_files: dict[int, str] | None = None,
        trace_dir: str | Path = "",
        include_last_profiler_step: bool | None = False,
        *,
        warehouse: str | Path | Workspace | None = None,
        jobs: int | None = None,
        figures_dir: str | Path | None = None,
    ) -> None:
        if isinstance(trace_files, (str, Path)) and not trace_dir:  # cclq's older TraceAnalysis(trace_dir)
            trace_dir, trace_files = trace_files, None
        folder = (
            mirror_traces(str(trace_dir))
            if is_url(trace_dir)  # s3://: a local copy of what changed
            else Path(trace_dir or os.getcwd()).expanduser()
        )
        workloads = plan_inputs([folder])
        if len(workloads) != 1:
            raise UsageError(f"{folder} holds {len(workloads)} workloads; give one trace folder")
        started = time.perf_counter()
        self.workspace = warehouse if isinstance(warehouse, Workspace) else open(warehouse)
        if jobs is None and sum(p.stat().st_size for p in workloads[0].files) < SMALL_FOLDER_BYTES:
            jobs = 1  # parsed here: starting parser processes would take longer than the parse
        # a folder parsed here (one file is always: its chunks on threads) has the session's
        # DuckDB start while the trace is read; not beside parser processes, which fork (a
        # DuckDB's threads would be forked too)
        in_process = jobs == 1 or len(workloads[0].files) == 1
        database = open_database_soon() if in_process else None
        try:
            report = self.workspace.ingest(folder, jobs=jobs)
            ingested = time.perf_counter()
            wanted = (
                None
                if trace_files is None
                else {(Path(p) if Path(p).is_absolute() else folder / p).resolve() for p in trace_files.values()}
            )
            # with trace_files, only those files matter (HTA reads no other): another file of the
            # folder that fails (a trace HTA wrote beside them, for the same rank) is passed over
            failed = [o for o in report.failed if wanted is None or Path(o.path).resolve() in wanted]
            if failed:
                raise UsageError("; ".join(o.message for o in failed))
        except BaseException:
            if database is not None:
                close_unused(database)
            raise
        self.trace_id = workloads[0].trace
        self._data = HtaData(self.workspace, self.trace_id, bool(include_last_profiler_step), database)
        files = self._files(folder, trace_files)
        if trace_files is not None:
            self._data.restrict(sorted(files))
        self.t = Trace(self._data, folder, files)
        self.figures = Figures(figures_dir)
        # where the constructor's time went (cclq bench --hta-all reports it)
        self.timings = {"ingest": ingested - started, "session": time.perf_counter() - ingested}

    def _files(self, folder: Path, trace_files: dict[int, str] | None) -> dict[int, Path]:
        """rank -> file of the ingested folder; ``trace_files`` checked against it."""
        rows = self._data.rows("SELECT rank, path FROM files WHERE format <> 'nsys' ORDER BY rank").to_pylist()
        ingested = {int(r["rank"]): Path(r["path"]) for r in rows}
        if trace_files is None:
            return ingested
        given = {
            int(rank): (Path(p) if Path(p).is_absolute() else folder / p).resolve() for rank, p in trace_files.items()
        }
        by_path = {p.resolve(): rank for rank, p in ingested.items()}
        for rank, path in given.items():
            if path not in by_path:
                raise UsageError(
                    f"trace_files: {path} is not a trace file of {folder} (cclq ingests trace_dir: "
                    "the files must be in it)"
                )
            if by_path[path] != rank:
                raise UsageError(f"trace_files: {path} is rank {by_path[path]} by its own content, not {rank}")
        return {rank: ingested[rank] for rank in given}

    def close(self) -> None:
        """Closes the query session (also done when the object is garbage-collected)."""
        self._data.close()

    @property
    def trace(self) -> str:
        """The trace id in the warehouse (cclq's own)."""
        return self.trace_id

    # -- breakdowns ------------------------------------------------------------------
    def get_temporal_breakdown(self, visualize: bool = True) -> Any:
        """Per rank: GPU idle, compute and non-compute time (µs) and their percentages."""
        frame = hta_breakdown.temporal_breakdown(self._data)
        if visualize:
            hta_figures.temporal(self.figures, frame)
        return frame[
            [
                "rank",
                "idle_time(us)",
                "compute_time(us)",
                "non_compute_time(us)",
                "kernel_time(us)",
                "idle_time_pctg",
                "compute_time_pctg",
                "non_compute_time_pctg",
            ]
        ]

    def get_comm_comp_overlap(self, visualize: bool = True) -> Any:
        """Per rank: the percentage of communication time overlapped by computation."""
        frame = hta_breakdown.comm_comp_overlap(self._data)
        if visualize:
            hta_figures.overlap(self.figures, frame)
        return frame[["rank", "comp_comm_overlap_pctg"]]

    def get_gpu_kernel_breakdown(
        self,
        visualize: bool = True,
        duration_ratio: float = 0.8,
        num_kernels: int = 10,
        include_memory_kernels: bool = True,
        image_renderer: str = "",
    ) -> tuple[Any, Any]:
        """(kernel_type_df, kernel_df): time per kernel type (and overlap of types) over
        every rank with its percentage; per rank, type and kernel name, the sum, max,
        min, stddev and mean of durations (names past the cut as "others")."""
        type_df, kernel_df, per_type = hta_breakdown.kernel_breakdown(
            self._data, duration_ratio, num_kernels, include_memory_kernels
        )
        if visualize:
            hta_figures.kernel_breakdown(
                self.figures, type_df, kernel_df, per_type, len(self._data.ranks), image_renderer
            )
        return type_df, kernel_df

    def get_gpu_kernel_type_breakdown(self) -> Any:
        """The first table of get_gpu_kernel_breakdown alone (cclq's own shortcut)."""
        return self.get_gpu_kernel_breakdown(visualize=False)[0]

    def get_idle_time_breakdown(
        self,
        ranks: list[int] | None = None,
        streams: list[int] | None = None,
        visualize: bool = True,
        visualize_pctg: bool = True,
        show_idle_interval_stats: bool = False,
        consecutive_kernel_delay: int = 30,
    ) -> tuple[Any, Any]:
        """(idle time per rank, stream and category with its ratio; describe() of the idle
        intervals per category, or None without ``show_idle_interval_stats``)."""
        pd = pandas()
        if not ranks:
            ranks = [0]
        tables, stats = [], []
        for rank in ranks:
            table, interval = hta_breakdown.idle_time_breakdown(
                self._data, rank, streams, consecutive_kernel_delay, show_idle_interval_stats
            )
            if visualize:  # HTA draws the streams as text, and leaves them so in its table
                table["stream"] = table.stream.astype(str)
                hta_figures.idle_time(self.figures, table, rank, visualize_pctg)
            tables.append(table.round(2))
            if interval is not None:
                stats.append(interval)
        return pd.concat(tables), pd.concat(stats) if show_idle_interval_stats else None

    def get_gpu_user_annotation_breakdown(
        self,
        use_gpu_annotation: bool = True,
        visualize: bool = True,
        duration_ratio: float = 0.8,
        num_kernels: int = 1000,
        allowlist_patterns: list[str] | None = None,
        image_renderer: str | None = None,
    ) -> Any:
        """Per rank and user annotation (GPU side, or the CPU side with
        ``use_gpu_annotation=False``): the sum, max, min, stddev and mean of durations;
        None where the trace has no such annotation."""
        category = "gpu_user_annotation" if use_gpu_annotation else "user_annotation"
        if category not in self.t.symbol_table.get_sym_id_map():  # HTA's test: no row names it
            return None
        allow = self.t.symbol_table.find_matched_symbols(allowlist_patterns) if allowlist_patterns else None
        table, per_rank = hta_breakdown.annotation_breakdown(self._data, category, duration_ratio, num_kernels, allow)
        if visualize:
            hta_figures.user_annotations(self.figures, table, per_rank, len(self._data.ranks), image_renderer)
        return table

    def get_gpu_kernels_with_user_annotations(
        self, rank: int, expand_names: bool = True, shortern_names: bool = True
    ) -> Any:
        """Every GPU kernel of ``rank`` with the leaf-most GPU user annotation overlapping
        it (HTA's spelling ``shortern_names`` kept)."""
        return hta_kernels.kernels_with_user_annotations(self.t, rank, expand_names, shortern_names)

    # -- counters --------------------------------------------------------------------
    def get_queue_length_time_series(self, ranks: list[int] | None = None) -> dict[int, Any]:
        """rank -> the queue length of each CUDA stream at every change (ts, pid, tid,
        stream, queue_length)."""
        return hta_counters.queue_length_series(self._data, ranks or [0])

    def get_queue_length_summary(self, ranks: list[int] | None = None) -> Any:
        """describe() of each stream's queue length series, per rank and stream."""
        return hta_counters.queue_length_summary(self.get_queue_length_time_series(ranks or [0]))

    def get_queue_length_summary_from_time_series(self, queue_length_dict: dict[int, Any]) -> Any:
        """get_queue_length_summary from series get_queue_length_time_series gave."""
        return hta_counters.queue_length_summary(queue_length_dict)

    def get_time_spent_blocked_on_full_queue(
        self, queue_length_dict: dict[int, Any] | None = None, max_queue_length: int = CUDA_MAX_LAUNCH_QUEUE_PER_STREAM
    ) -> Any:
        """Per rank, a stream whose queue reached ``max_queue_length`` and the time it
        stayed there (µs, and relative to the rank's trace)."""
        if queue_length_dict is None:  # cclq's older signature took none: rank 0's series
            queue_length_dict = self.get_queue_length_time_series()
        return hta_counters.time_blocked_on_full_queue(self._data, queue_length_dict, max_queue_length)

    def get_memory_bw_time_series(self, ranks: list[int] | None = None) -> dict[int, Any]:
        """rank -> the bandwidth of memcpy / memset operations at every change (ts, pid,
        name, memory_bw_gbps)."""
        return hta_counters.memory_bw_series(self._data, ranks or [0])

    def get_memory_bw_summary(self, ranks: list[int] | None = None) -> Any:
        """describe() of each memory operation kind's bandwidth above 0, per rank."""
        return hta_counters.memory_bw_summary(self.get_memory_bw_time_series(ranks or [0]))

    def generate_trace_with_counters(
        self,
        time_series: TimeSeriesTypes | None = None,
        ranks: list[int] | None = None,
        output_suffix: str = "_with_counters",
    ) -> None:
        """Writes each rank's trace with the counters as Chrome counter events beside its
        file (``<file>_with_counters.json.gz``), as HTA does."""
        ranks = ranks or [0]
        time_series = time_series or (TimeSeriesTypes.QUEUE_LENGTH | TimeSeriesTypes.MEMCPY_BANDWIDTH)
        output_suffix = output_suffix or "_with_counters"
        # per rank, its series' events, made one at a time as write_trace writes them
        events: dict[int, list[Iterable[dict[str, Any]]]] = defaultdict(list)

        def add(series: dict[int, Any], counter_name: str, counter_col: str) -> None:
            for rank, frame in series.items():
                frame = frame.rename(columns={"stream": "id"})
                events[rank].append(self.t.time_series_events(frame, counter_name, counter_col))

        if TimeSeriesTypes.QUEUE_LENGTH in time_series:
            add(hta_counters.queue_length_series(self._data, ranks), "Queue Length", "queue_length")
        if TimeSeriesTypes.MEMCPY_BANDWIDTH in time_series:
            add(hta_counters.memory_bw_series(self._data, ranks), "Memcpy BW", "memory_bw_gbps")
        for rank, extra in events.items():
            source = self.t.trace_files[rank]
            out = Path(source.replace(".json", f"{output_suffix}.json"))
            file_id = self._data.rows("SELECT file_id FROM files WHERE rank = ?", params=[rank]).column(0)[0].as_py()
            write_trace(self._data.session, file_id, out, None, chain(*extra), written_from=Path(source).name)

    # -- kernels -----------------------------------------------------------------------
    def get_cuda_kernel_launch_stats(
        self,
        ranks: list[int] | None = None,
        runtime_cutoff: int = 50,
        launch_delay_cutoff: int = 100,
        include_memory_events: bool = True,
        visualize: bool = True,
    ) -> dict[int, Any]:
        """rank -> per launch call and its GPU operation: correlation, the call's and the
        operation's durations and the launch delay (µs)."""
        out = {}
        for rank in ranks or [0]:
            frame = hta_kernels.launch_stats(self._data, rank, include_memory_events)
            if visualize:
                hta_figures.launch_stats(self.figures, rank, frame, runtime_cutoff, launch_delay_cutoff)
            out[rank] = frame
        return out

    def get_frequent_cuda_kernel_sequences(
        self,
        operator_name: str,
        output_dir: str,
        min_pattern_len: int = 3,
        rank: int = 0,
        top_k: int = 5,
        visualize: bool = False,
        compress_other_kernels: bool = True,
    ) -> Any:
        """Per pattern (an operator named like ``operator_name`` and the kernels its
        subtree launches): how often it occurs and its GPU and CPU time (µs)."""
        pd = pandas()
        if not operator_name:
            return pd.DataFrame()
        out_dir = Path(output_dir).expanduser()
        if not out_dir.is_dir() or not os.access(out_dir, os.W_OK):
            log.error("Argument output_dir `%s` is not a valid output path: not a writable folder", output_dir)
            return pd.DataFrame()
        frame = hta_kernels.frequent_sequences(self._data, operator_name, min_pattern_len, rank)
        if not len(frame):
            return frame
        top_k = min(top_k, len(frame))
        hta_kernels.overlay_sequences(
            self._data,
            self.t,
            operator_name,
            min_pattern_len,
            rank,
            frame[:top_k],
            out_dir / f"overlaid_{Path(self.t.trace_files[rank]).name}",
            compress_other_kernels,
        )
        if visualize:
            hta_figures.sequences(self.figures, frame[:top_k], rank, top_k)
        return frame

    def get_aten_op_kernels_and_delay(
        self,
        ranks: list[int] | None = None,
        sort_by: list[str] | None = None,
    ) -> dict[int, Any]:
        """rank -> per ATen op and the kernels it launches: occurrences, mean delay from the
        op's start to its first launch, and from that launch to the kernel (µs)."""
        result = hta_kernels.aten_op_kernels_and_delay(self.t, ranks or [0], sort_by or ["occurrence_count"])
        for rank, frame in result.items():
            hta_figures.aten_op_delays(self.figures, rank, frame)  # HTA always draws it
        return result

    def get_potential_stragglers(
        self,
        profiler_steps: list[int] | None = None,
        num_candidates: int = 2,
        visualize: bool = False,
        straggler_identification_impl: Callable[..., Any] | None = None,
    ) -> list[int]:
        """The ranks that may be stragglers (their last long NCCL kernel of an iteration
        starts latest most often)."""
        available = self.get_profiler_steps()
        valid = available if profiler_steps is None else [i for i in profiler_steps if i in available]
        if not valid:
            raise ValueError(
                f"invalid value for argument: profiler_steps={profiler_steps}; available profiler steps={available}"
            )
        if straggler_identification_impl is not None:
            pd = pandas()
            ranks = self.t.get_ranks()
            df = pd.concat(
                [self.t.get_trace(r) for r in ranks], axis=0, keys=ranks, names=["rank", "idx"]
            ).reset_index()
            counts = straggler_identification_impl(
                df.loc[df["iteration"].isin(valid)], self.t.symbol_table, max(num_candidates, 1), visualize
            )
            return list(counts.sort_values(ascending=False)[: max(num_candidates, 1)].index.tolist())
        stragglers, (metric, name, with_iteration, n_iterations) = hta_kernels.potential_stragglers(
            self.t, valid, max(num_candidates, 1), self.figures if visualize else None
        )
        if visualize:
            shown = metric.copy()
            shown["is_straggler"] = shown["is_straggler"].apply(lambda x: "Yes" if x > 0 else "No")
            columns = ["rank", "iteration", name] if with_iteration else ["rank", name]
            hta_figures.stragglers(self.figures, shown, name, with_iteration, n_iterations, columns)
        return stragglers

    def get_profiler_steps(self) -> list[int]:
        """The ProfilerStep numbers of the rows HTA analyses (its tail filter drops the last)."""
        rows = self._data.rows(
            "SELECT DISTINCT profiler_step FROM hta_profiler_steps ORDER BY profiler_step", "hta_iterations"
        )
        return [int(v) for v in rows.column(0).to_pylist()]

    def get_cupti_counter_data_with_operators(self, ranks: list[int] | None = None) -> list[Any]:
        """Per rank in CUPTI profiler mode: its kernels with their operator stack and one
        column per counter."""
        if "cuda_profiler_range" not in self.t.symbol_table.get_sym_id_map():  # HTA's test: no such row
            return []
        return hta_kernels.cupti_counters(self._data, ranks or [0])

    # -- critical path -------------------------------------------------------------------
    def critical_path_analysis(
        self, rank: int, annotation: str = "ProfilerStep", instance_id: int | tuple[int, int] | None = 0
    ) -> tuple[CPGraph, bool] | None:
        """(the critical path of the window, success) for ``rank``: the window is the
        ``instance_id``-th row whose name contains ``annotation`` (or a (first, last)
        range of them; annotation "" is the whole rank). None where no name contains the
        annotation, as HTA."""
        return critical_path(self._data, self.t, rank, annotation, instance_id)

    def overlay_critical_path_analysis(
        self,
        rank: int,
        critical_path_graph: CPGraph,
        output_dir: str,
        only_show_critical_events: bool = True,
        show_all_edges: bool = False,
    ) -> str:
        """Writes the rank's trace with the critical path overlaid; returns its path."""
        return overlay(self._data, self.t, critical_path_graph, output_dir, only_show_critical_events, show_all_edges)
