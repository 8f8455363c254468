"""HTA 0.5.0's per-kernel analyses (hta/analyzers/cuda_kernel_analysis.py, straggler.py,
breakdown_analysis.get_gpu_kernels_with_user_annotations, cupti_counter_analysis.py) in
HTA's shapes: the launch / GPU pairs (view ``hta_kernel_launches``), the frequent kernel
sequences (macro ``hta_frequent_cuda_kernel_sequences``), the ATen op launch delays, the
straggler ranks and the kernels with their GPU user annotation (from the rank frames of
``ta.t``, with HTA's pandas steps), the CUPTI counters (view ``hta_cupti_counters``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from cclq.api import hta_figures
from cclq.api.hta_data import HtaData
from cclq.api.hta_figures import Figures
from cclq.api.hta_frames import pandas
from cclq.api.hta_trace import Trace, shorten_name
from cclq.present.chrome_trace import Event, write_trace
from cclq.sqltext import quote_literal

_KERNEL_LAUNCH = re.compile(r"(cuda.*LaunchKernel)|(cuLaunchKernel)|(^runFunction)")


def launch_stats(data: HtaData, rank: int, include_memory_events: bool) -> Any:
    """HTA's cuda_kernel_launch_stats frame of one rank: correlation, cpu_duration,
    gpu_duration, launch_delay per (launch call, GPU row) pair, in HTA's merge order."""
    pd = pandas()
    data.require_ranks(rank)
    memory = "" if include_memory_events else " AND NOT memory_launch"
    table = data.rows(
        "SELECT correlation, cpu_duration_us, gpu_duration_us, launch_delay_us FROM hta_kernel_launches "
        f"WHERE rank = ?{memory} ORDER BY cpu_row_order, gpu_row_order",
        "hta_events",
        params=[rank],
    )
    rows = table.to_pydict()
    return pd.DataFrame(
        {
            "correlation": pd.array(rows["correlation"], dtype=data.dtypes(rank).correlation),
            "cpu_duration": pd.array(rows["cpu_duration_us"], dtype="float64"),
            "gpu_duration": pd.array(rows["gpu_duration_us"], dtype="float64"),
            "launch_delay": pd.array(rows["launch_delay_us"], dtype="float64"),
        }
    )


def frequent_sequences(data: HtaData, operator_name: str, min_pattern_len: int, rank: int) -> Any:
    """HTA's get_frequent_cuda_kernel_sequences frame (pattern, count, GPU kernel duration
    (us), CPU op duration (us)), most frequent first; an empty frame (no columns) where
    none is found, as HTA returns it."""
    pd = pandas()
    # the macro reads the call stacks of every rank otherwise
    with data.only_rank(rank, "hta_events", "hta_call_stack"):
        table = data.rows(
            "SELECT pattern, count, gpu_kernel_duration_us, cpu_op_duration_us FROM "
            f"hta_frequent_cuda_kernel_sequences({quote_literal(operator_name)}, "
            f"min_pattern_len := {int(min_pattern_len)}) WHERE rank = ? ORDER BY count DESC, pattern",
            params=[rank],
        )
    if not table.num_rows:
        return pd.DataFrame()
    rows = table.to_pydict()
    return pd.DataFrame(
        {
            "pattern": pd.array(rows["pattern"], dtype=object),
            "count": pd.array(rows["count"], dtype="int64"),
            "GPU kernel duration (us)": pd.array(rows["gpu_kernel_duration_us"], dtype="float64"),
            "CPU op duration (us)": pd.array(rows["cpu_op_duration_us"], dtype="float64"),
        }
    )


def overlay_sequences(
    data: HtaData,
    trace: Trace,
    operator_name: str,
    min_pattern_len: int,
    rank: int,
    top: Any,
    out: Path,
    compress_other_kernels: bool,
) -> None:
    """HTA's overlaid trace of get_frequent_cuda_kernel_sequences: every event of a
    ``top`` pattern's occurrences gets ``args.Patterns`` = {pattern: count} of the top
    patterns it is in; with ``compress_other_kernels`` the other complete events lose
    their args and their names become symbol ids (the "PyTorch Profiler" span's args map
    them back), as HTA writes it."""
    counts = dict(zip(top["pattern"], top["count"]))
    with data.only_rank(rank, "hta_events", "hta_call_stack"):
        table = data.rows(
            "SELECT pattern, stack_idx FROM hta_frequent_cuda_kernel_sequence_roots("
            f"{quote_literal(operator_name)}, min_pattern_len := {int(min_pattern_len)}) WHERE rank = ?",
            params=[rank],
        )
    active: dict[int, dict[str, int]] = {}
    for pattern, stack in zip(table.column("pattern").to_pylist(), table.column("stack_idx").to_pylist()):
        if pattern in counts:
            for idx in stack:
                active.setdefault(idx, {})[pattern] = int(counts[pattern])
    symbols = trace.symbol_table.get_sym_id_map()
    file_id = data.rows("SELECT file_id FROM files WHERE rank = ?", params=[rank]).column(0)[0].as_py()

    def mark(event: Event) -> Event:
        patterns = active.get(event["__idx"])
        if patterns is not None:
            event.setdefault("args", {})["Patterns"] = patterns
        elif compress_other_kernels and event.get("ph") == "X":
            event["args"] = {}
        if compress_other_kernels:
            if "PyTorch Profiler" in str(event.get("name", "")) and event.get("pid") == "Spans":
                event["args"] = {str(i): name for name, i in symbols.items()}
            elif not event.get("args", True) and event.get("name") in symbols:
                event["name"] = str(symbols[event["name"]])
        return event

    write_trace(data.session, file_id, out, mark, written_from=Path(trace.trace_files[rank]).name)


def aten_op_kernels_and_delay(trace: Trace, ranks: list[int], sort_by: list[str]) -> dict[int, Any]:
    """HTA's get_aten_op_kernels_and_delay: per rank, for each launch call the deepest
    ``aten::`` op that wraps it (any thread; the latest start, the first of those in frame
    order), the kernel it launched, and per (op, kernel sequence) the occurrences and the
    mean delays. HTA quirks kept: the launches of the ranks before are counted again in
    each rank's table (HTA's list is not reset per rank); a launch whose kernel is not in
    the frame fails the call, as HTA's ``.item()`` does."""
    pd = pandas()
    names = trace.symbol_table.get_sym_table()
    launch_stats: list[dict[str, Any]] = []
    out: dict[int, Any] = {}
    for rank in ranks:
        frame = trace.get_trace(rank)
        s_name = frame["name"].map(lambda i: names[i])
        is_aten = s_name.str.startswith("aten::").to_numpy()
        aten = frame.loc[is_aten, ["tid", "ts", "dur"]].assign(s_name=s_name.to_numpy()[is_aten])
        launch_ids = {i for i, s in enumerate(names) if _KERNEL_LAUNCH.match(s)}
        launches = frame[frame["name"].isin(launch_ids)]
        kernels = frame[frame["stream"] != -1]
        by_launch: dict[int, list[int]] = {}
        for pos, link in enumerate(kernels["index_correlation"].to_numpy()):
            by_launch.setdefault(int(link), []).append(pos)
        a_ts, a_end = aten["ts"].to_numpy(), (aten["ts"] + aten["dur"]).to_numpy()
        a_tid, a_name = aten["tid"].tolist(), aten["s_name"].tolist()
        l_ts, l_dur = launches["ts"].to_numpy(), launches["dur"].to_numpy()
        wrapping = latest_enclosing(a_ts, a_end, l_ts, l_ts + l_dur)
        k_ts, k_name = kernels["ts"].tolist(), kernels["name"].tolist()
        for ts, best, idx, correlation in zip(
            l_ts.tolist(), wrapping.tolist(), launches["index"].tolist(), launches["correlation"].tolist()
        ):
            if best < 0:
                continue
            matched = by_launch.get(int(idx), [])
            if len(matched) != 1:
                raise ValueError("can only convert an array of size 1 to a Python scalar")
            k_pos = matched[0]
            launch_stats.append(
                {
                    "thread_id": a_tid[best],
                    "aten_op_name": a_name[best],
                    "aten_op_start": a_ts[best],
                    "runtime_start": ts,
                    "device_start": k_ts[k_pos],
                    "aten_op_delay": ts - a_ts[best],
                    "runtime_delay": k_ts[k_pos] - ts,
                    "correlation_id": correlation,
                    "kernel_name": names[k_name[k_pos]],
                }
            )
        # HTA groups the launches by the op that wraps them (agg(list) per group: ~27 us a
        # group in pandas, 1.4 s on a 54 MB trace); the same groups in their sorted order
        if not launch_stats:  # HTA's groupby of an empty frame: no such column
            raise KeyError("thread_id")
        firsts: dict[tuple[Any, Any, Any], list[Any]] = {}
        for stat in launch_stats:
            key = (stat["thread_id"], stat["aten_op_name"], stat["aten_op_start"])
            group = firsts.get(key)
            if group is None:
                firsts[key] = [[stat["kernel_name"]], stat["aten_op_delay"], stat["runtime_delay"]]
            else:
                group[0].append(stat["kernel_name"])
        keys = sorted(firsts)
        grouped = pd.DataFrame(
            {
                "aten_op_name": [k[1] for k in keys],
                "kernel_sequence": [" -> ".join(firsts[k][0]) for k in keys],
                "first_launch_delay": [firsts[k][1] for k in keys],
                "first_runtime_delay": [firsts[k][2] for k in keys],
            }
        )
        final = (
            grouped.groupby(["aten_op_name", "kernel_sequence"])
            .agg(
                occurrence_count=("first_runtime_delay", "count"),
                avg_aten_op_launch_delay=("first_launch_delay", "mean"),
                avg_runtime_delay=("first_runtime_delay", "mean"),
            )
            .reset_index()
        ).sort_values(sort_by, ascending=False)
        final["avg_runtime_delay"] = final["avg_runtime_delay"].round(3)
        final["avg_aten_op_launch_delay"] = final["avg_aten_op_launch_delay"].round(3)
        out[rank] = final
    return out


def latest_enclosing(starts: Any, ends: Any, q_starts: Any, q_ends: Any) -> Any:
    """For each query interval, the index of the interval that encloses it (``start <=
    q_start`` and ``end >= q_end``) with the latest start, the lowest index among those
    starting together; -1 where none does. HTA scans back from each launch through every
    earlier op, quadratic where launches have no wrapping op (8.2 s of a 54 MB trace);
    this is a binary-lifting search over the ops sorted by (start, index descending): the
    answer is the last position at or before the query's start whose end reaches the
    query's end, found by skipping blocks of 2^j positions whose largest end falls short.
    """
    import numpy as np  # with pandas, in the hta extra

    n = len(starts)
    answer = np.full(len(q_starts), -1, dtype=np.int64)
    if n == 0 or len(q_starts) == 0:
        return answer
    order = np.lexsort((-np.arange(n), starts))  # by start, then index descending
    s_sorted, e_sorted = starts[order], ends[order]
    # block_max[j][p]: the largest end in positions (p - 2^j, p], clipped at 0
    block_max = [e_sorted]
    while (1 << len(block_max)) <= n:
        half = 1 << (len(block_max) - 1)
        prev = block_max[-1]
        block_max.append(np.concatenate([np.maximum.accumulate(prev[:half]), np.maximum(prev[half:], prev[:-half])]))
    cur = np.searchsorted(s_sorted, q_starts, side="right") - 1  # the last op starting at or before
    for j in range(len(block_max) - 1, -1, -1):
        alive = cur >= 0
        skip = np.zeros(len(cur), dtype=bool)
        skip[alive] = block_max[j][cur[alive]] < q_ends[alive]
        cur = np.where(skip, cur - (1 << j), cur)
    found = cur >= 0
    found[found] = e_sorted[cur[found]] >= q_ends[found]
    answer[found] = order[cur[found]]
    return answer


def kernels_with_user_annotations(trace: Trace, rank: int, expand_names: bool, shorten_names: bool) -> Any:
    """HTA's get_gpu_kernels_with_user_annotations: every GPU kernel of ``rank`` (HTA's
    GPUKernelFilter) with the leaf-most GPU user annotation of its (pid, tid) that
    overlaps it (``user_annotation``, a symbol id, -1 for none). As in HTA, it sets the
    rank frame's ``end`` to the aligned ts + dur and adds its ``user_annotation`` column."""
    table = trace.symbol_table
    anno_id = table.get_sym_id_map().get("gpu_user_annotation", -1)
    if anno_id == -1:  # HTA adds the columns, then finds no annotation
        trace.edit_frame(rank, _add_annotation_columns)
        return None
    frame = trace.get_trace(rank)
    _add_annotation_columns(frame)
    annos = frame[frame.cat == anno_id][["pid", "tid", "ts", "end", "dur", "name"]].sort_values("dur", ascending=False)
    syncs = {table.get_sym_id_map().get(n, -2) for n in ("Event Sync", "Context Sync")}
    gpu = frame[(frame["stream"].ge(0) & frame["correlation"].ge(0)) | frame["name"].isin(syncs)].copy()
    gpu = gpu.reset_index(drop=True)
    k_ts, k_end = gpu["ts"].to_numpy(), gpu["end"].to_numpy()
    labels = gpu["user_annotation"].to_numpy().copy()
    for p in annos[["pid", "tid"]].drop_duplicates().to_dict("records"):
        pid, tid = p["pid"], p["tid"]
        mine = annos[(annos["pid"] == pid) & (annos["tid"] == tid)]
        same_track = ((gpu["pid"] == pid) & (gpu["tid"] == tid)).to_numpy()
        for a_ts, a_end, a_name in zip(mine["ts"].tolist(), mine["end"].tolist(), mine["name"].tolist()):
            # [ts, end) intervals overlap as pandas 2's IntervalIndex.overlaps says (HTA 0.5.0's
            # pandas): a zero-length kernel strictly inside an annotation is in it
            labels[same_track & (a_ts < k_end) & (k_ts < a_end)] = a_name
    gpu["user_annotation"] = labels
    if expand_names:
        symbols = table.get_sym_table()
        names = [shorten_name(s) for s in symbols] if shorten_names else symbols

        def sym(i: int) -> str:
            return names[i] if i >= 0 else ""

        gpu["s_name"] = gpu["name"].apply(sym)
        gpu["s_cat"] = gpu["cat"].apply(sym)
        gpu["s_user_annotation"] = gpu["user_annotation"].apply(sym)
    return gpu


def _add_annotation_columns(frame: Any) -> None:
    """What HTA's get_gpu_kernels_with_user_annotations adds to the rank's frame: ``end``
    (aligned ts + dur) and ``user_annotation`` (-1, no annotation)."""
    frame["end"] = frame["ts"] + frame["dur"]
    frame["user_annotation"] = -1


def potential_stragglers(
    trace: Trace, steps: list[int], num_candidates: int, figures: Figures | None = None
) -> tuple[list[int], Any]:
    """HTA's get_potential_stragglers with its default identification
    (find_stragglers_with_late_start_comm_kernels): the ranks whose last long
    ``ncclKernel`` starts latest most often; and the metric frame its figure draws.
    With ``figures``, HTA's two timelines as it draws them: the long communication
    kernels, then the candidate kernels the metric reads."""
    pd = pandas()
    names = trace.symbol_table.get_sym_table()
    ranks = trace.get_ranks()
    # the columns read below and by the timelines, not every rank's whole frame copied
    # (HTA concatenates them all: 260 MB at the peak of 8 ranks of 54 MB)
    used = ["cat", "name", "ts", "dur", "stream", "iteration"]
    df_all = pd.concat(
        [trace.get_trace(r)[used] for r in ranks], axis=0, keys=ranks, names=["rank", "idx"]
    ).reset_index()
    df = df_all.loc[df_all["iteration"].isin(steps)]
    comm_ids = [i for i, s in enumerate(names) if s.startswith("ncclKernel")]
    iterations = sorted(df["iteration"].unique())
    df = df.loc[df["iteration"].isin(iterations)]
    t_min = df["ts"].min()
    mean_iter_time = ((df["ts"] + df["dur"]).max() - t_min) / float(len(iterations))
    long_comm = df.loc[
        (df["stream"] > 0) & (df["iteration"] > 0) & (df["dur"] >= mean_iter_time * 0.01) & (df["name"].isin(comm_ids))
    ]
    if figures is not None:
        shown_ranks = sorted(v for v in df["rank"].unique().tolist() if v != -1)
        hta_figures.gpu_kernel_timeline(
            figures,
            "Timeline of Communication Kernels Longer Than 1.00% of Iteration Time\n",
            long_comm,
            names,
            shown_ranks,
            duration_threshold=2000,
        )
    last = long_comm.groupby(["rank", "stream", "iteration", "name"], as_index=False).last()
    metric_name = "normalized_start_time"
    last[metric_name] = (last["ts"] - t_min) / mean_iter_time
    last["duration"] = last["dur"] / mean_iter_time
    spread = last.groupby(["stream", "iteration", "name"])["duration"].std().groupby(["stream", "name"]).mean()
    if not spread.notna().any():  # HTA fails here too (numpy's argmax of nothing, or a NaN to unpack)
        raise ValueError(
            "get_potential_stragglers: no ncclKernel* kernel of 1% of an iteration or more runs on "
            "two or more ranks in the selected steps: no spread of their durations to rank them by"
        )
    stream, name = spread.idxmax()
    metric_df = last.loc[last["stream"].eq(stream) & last["name"].eq(name)]
    if figures is not None:
        listed = sorted(v for v in df["iteration"].unique().tolist() if v != -1)
        hta_figures.gpu_kernel_timeline(
            figures, f"Timeline of Candidate Kernels (Iterations={listed})", metric_df, names, shown_ranks
        )
    n = max(num_candidates, 1)
    n_iterations = metric_df["iteration"].nunique()
    if n_iterations <= 1:
        metric = metric_df[["rank", metric_name]].copy()
        threshold = metric.sort_values(by=metric_name, ascending=False)[metric_name].tolist()[n - 1]
        metric["is_straggler"] = metric[metric_name].apply(lambda x: 1 if x >= threshold else 0)
        counts = metric[["rank", "is_straggler"]].copy().set_index("rank")["is_straggler"]
    else:
        metric = metric_df[["rank", "iteration", metric_name]].copy()
        metric["is_straggler"] = 0
        for iteration, group in metric.groupby("iteration"):
            if iteration < 0:
                continue
            threshold = group.sort_values(by=metric_name, ascending=False)[metric_name].tolist()[n - 1]
            metric.loc[group.index, "is_straggler"] = group[metric_name].apply(lambda x: 1 if x >= threshold else 0)  # noqa: B023  called in this iteration
        counts = metric.groupby("rank")["is_straggler"].sum()
    stragglers = counts.sort_values(ascending=False)[:num_candidates].index.tolist()
    return stragglers, (metric, metric_name, n_iterations > 1, n_iterations)


def cupti_counters(data: HtaData, ranks: list[int]) -> list[Any]:
    """HTA's get_cupti_counter_data_with_operators: one frame per rank whose profiler-range
    kernels pair up with its launches (name, cat, ts, dur, op_stack, top_level_op,
    bottom_level_op, a column per counter)."""
    table = data.rows(
        "SELECT rank, kernel_no, name, cat, ts_us AS ts, dur_us AS dur, op_stack, top_level_op, bottom_level_op, "
        "counters FROM hta_cupti_counters ORDER BY rank, kernel_no",
        "hta_events",
    )
    rows = table.to_pylist()
    frames = []
    for rank in ranks:
        mine = [r for r in rows if r["rank"] == rank]
        if not mine:
            continue
        counters = [json.loads(r["counters"]) for r in mine]
        keys = list(dict.fromkeys(k for c in counters for k in c))
        data_cols: dict[str, Any] = {
            c: [r[c] for r in mine] for c in ("name", "cat", "ts", "dur", "op_stack", "top_level_op", "bottom_level_op")
        }
        for k in keys:
            data_cols[k] = [c.get(k) for c in counters]
        frames.append(pandas().DataFrame(data_cols))
    return frames
