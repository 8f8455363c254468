"""HTA 0.5.0's breakdowns (hta/analyzers/breakdown_analysis.py, communication_analysis.py)
in HTA's shapes: the temporal breakdown and the overlap from their metrics; the kernel
and annotation breakdowns and the idle time from the rows HTA analyses (``hta_events``,
``hta_gpu_rows``, ``hta_gpu_merged``), put together with HTA's own pandas steps, so that
row order, index, dtypes and HTA's rounding are its own (ties in its unstable sorts come
out as HTA's do under the same numpy).
"""

from __future__ import annotations

from typing import Any

from cclq.api.hta_data import HtaData
from cclq.api.hta_frames import pandas

KERNEL_CATS = ("kernel", "Kernel", "gpu_memset", "Memset", "gpu_memcpy", "Memcpy", "mtia_ccp_events")
IDLE_CATEGORIES = {0: "host_wait", 1: "kernel_wait", 2: "other"}


def temporal_breakdown(data: HtaData) -> Any:
    """HTA's get_temporal_breakdown table (metric hta_temporal_breakdown), ranks in order."""
    pd = pandas()
    rows = sorted(data.metric("hta_temporal_breakdown").to_pylist(), key=lambda r: r["rank"])
    rows = [r for r in rows if r["kernel_time_us"] is not None]
    frame = pd.DataFrame(
        {
            "rank": pd.array([r["rank"] for r in rows], dtype="int64"),
            "idle_time(us)": pd.array([r["idle_time_us"] for r in rows], dtype="float64"),
            "compute_time(us)": pd.array([r["compute_time_us"] for r in rows], dtype="float64"),
            "non_compute_time(us)": pd.array([r["non_compute_time_us"] for r in rows], dtype="float64"),
            "kernel_time(us)": pd.array([r["kernel_time_us"] for r in rows], dtype="float64"),
        }
    )
    for part in ("idle_time", "compute_time", "non_compute_time"):
        frame[part] = frame[f"{part}(us)"] / frame["kernel_time(us)"]
        frame[f"{part}_pctg"] = round(100 * frame[part], 2)
    return frame


def comm_comp_overlap(data: HtaData) -> Any:
    """HTA's get_comm_comp_overlap table, with its ratio column (its figure's y)."""
    pd = pandas()
    rows = sorted(data.metric("hta_comm_comp_overlap").to_pylist(), key=lambda r: r["rank"])
    frame = pd.DataFrame(
        {
            "rank": pd.array([r["rank"] for r in rows], dtype="int64"),
            "comp_comm_overlap_ratio": pd.array(
                [float("nan") if not r["comm_us"] else r["overlap_us"] / r["comm_us"] for r in rows], dtype="float64"
            ),
        }
    )
    frame["comp_comm_overlap_pctg"] = round(100 * frame["comp_comm_overlap_ratio"], 2)
    return frame


def _empty_stats_frame(pd: Any, *text_columns: str) -> Any:
    """The empty frame HTA starts its per-name statistics from (its columns and dtypes,
    which ``pd.concat`` keeps when no rank adds a row): name, sum, max, min, std, mean,
    then ``text_columns`` and rank."""
    columns = {"name": "str", "sum": "int", "max": "int", "min": "int", "std": "float", "mean": "int"}
    columns.update(dict.fromkeys(text_columns, "str"))
    columns["rank"] = "int"
    return pd.DataFrame({name: pd.Series(dtype=dtype) for name, dtype in columns.items()})


def _gpu_rows(data: HtaData, columns: str, where: str = "true") -> Any:
    """The GPU rows (stream <> -1) of every rank in HTA's frame order, one per copy."""
    pd = pandas()
    table = data.rows(
        f"SELECT {columns} FROM hta_events AS e, range(e.copies) WHERE e.stream <> -1 AND ({where}) "
        "ORDER BY e.rank, e.row_order",
        "hta_events",
    )
    return pd.DataFrame(table.to_pydict())


def aggregate_by_name(
    frame: Any, num_kernels: int = 10, duration_ratio: float = 0.8, allowlist_names: list[str] | None = None
) -> Any:
    """HTA's _aggr_gpu_kernel_time: sum / max / min / mean / std of ``dur`` per name, and
    past ``num_kernels`` names its "others" bucket (a quantile of the cumulative sums)."""
    out = frame.groupby(by=["name"])["dur"].agg(["sum", "max", "min", "mean", "std"])
    out = out.reset_index()
    out = out.sort_values(by=["sum"], ascending=False, ignore_index=True)
    out = out.fillna({"std": 0})
    if out.shape[0] > num_kernels:
        keep = out.name.isin(allowlist_names) if allowlist_names is not None else out["sum"] < 0
        out["cumsum"] = out["sum"].cumsum()
        quantiles = out["cumsum"].quantile(duration_ratio)
        out.loc[~keep & (out["cumsum"] > quantiles), "name"] = "others"
        out.loc[~keep & (out.index >= num_kernels), "name"] = "others"
        out = out.groupby(by=["name"])["sum"].agg(["sum", "max", "min", "mean", "std"])
        out = out.reset_index()
        out = out.fillna({"std": 0})
    return out


_RENAMED = {"sum": "sum (us)", "mean": "mean (us)", "max": "max (us)", "min": "min (us)", "std": "stddev"}


def kernel_breakdown(
    data: HtaData, duration_ratio: float, num_kernels: int, include_memory_kernels: bool
) -> tuple[Any, Any, dict[str, dict[int, Any]]]:
    """HTA's get_gpu_kernel_breakdown pair (kernel_type_df, kernel_df) and the per-type,
    per-rank tables its figures draw."""
    pd = pandas()
    types = ["COMPUTATION", "COMMUNICATION"] + (["MEMORY"] if include_memory_kernels else [])
    gpu = _gpu_rows(
        data,
        "e.rank, e.name, e.dur_us AS dur, e.kernel_type",
        "e.kernel_type IN ('COMPUTATION', 'COMMUNICATION', 'MEMORY')",
    )
    all_kernels = _empty_stats_frame(pd, "kernel_type")
    per_type: dict[str, dict[int, Any]] = {}
    for rank in data.ranks:
        mine = gpu[gpu["rank"] == rank] if len(gpu) else gpu
        for kernel_type in types:
            rows = (
                mine[mine["kernel_type"] == kernel_type]
                if len(mine)
                else pd.DataFrame({"name": pd.Series(dtype="str"), "dur": pd.Series(dtype="float")})
            )
            agg = aggregate_by_name(rows, num_kernels=num_kernels, duration_ratio=duration_ratio)
            per_type.setdefault(kernel_type, {})[rank] = agg
            agg["kernel_type"] = kernel_type
            agg["rank"] = int(rank)
            all_kernels = pd.concat([all_kernels, agg], ignore_index=True)
    sums = _kernel_type_sums(data, types)
    kernel_type_df = pd.DataFrame(
        {"kernel_type": pd.Series(list(sums), dtype="str"), "sum": pd.Series(list(sums.values()), dtype="int64")}
    )
    kernel_type_df = kernel_type_df.groupby(by=["kernel_type"])["sum"].agg(["sum"])
    kernel_type_df = kernel_type_df.reset_index()
    kernel_type_df = kernel_type_df.sort_values(by=["sum"], ignore_index=True, ascending=False)
    kernel_type_df["percentage"] = (kernel_type_df["sum"] / kernel_type_df["sum"].sum()) * 100
    kernel_type_df = kernel_type_df.round({"percentage": 1})
    all_kernels = all_kernels.sort_values(by=["kernel_type", "name", "rank"], ignore_index=True)
    all_kernels = all_kernels.rename(columns=_RENAMED)
    return kernel_type_df, all_kernels, per_type


def _kernel_type_sums(data: HtaData, types: list[str]) -> dict[str, int]:
    """HTA's _get_gpu_kernel_type_time summed over the ranks: µs per combination of the
    kernel types running at once (a sweep over each type's merged intervals)."""
    bits = {t: 1 << i for i, t in enumerate(types)}
    table = data.rows(
        "SELECT rank, key, ts_us, end_us FROM hta_gpu_merged WHERE list_contains(?, key) ORDER BY rank, key, seq",
        "hta_gpu_rows",
        params=[types],
    )
    rows = table.to_pydict()
    sums: dict[str, int] = {}
    for rank in data.ranks:
        points: list[tuple[float, int]] = []
        for key, ts, end, r in zip(rows["key"], rows["ts_us"], rows["end_us"], rows["rank"]):
            if r == rank:
                points.append((ts, bits[key]))
                points.append((end, -bits[key]))
        points.sort(key=lambda p: p[0])
        running = 0
        for i, (time, delta) in enumerate(points):
            running += delta
            if running <= 0 or i + 1 == len(points):
                continue
            label = " overlapping ".join(t for t in types if running & bits[t])
            sums[label] = sums.get(label, 0) + int(points[i + 1][0] - time)
    return sums


def idle_time_breakdown(
    data: HtaData, rank: int, streams: list[int] | None, consecutive_kernel_delay: int, show_idle_interval_stats: bool
) -> tuple[Any, Any]:
    """HTA's BreakdownAnalysis.get_idle_time_breakdown for one rank: (per stream and
    category idle time and ratio, rounded to 2 decimals; describe() of the gaps)."""
    pd = pandas()
    data.require_ranks(rank)
    cats = ", ".join(f"'{c}'" for c in KERNEL_CATS)
    kernels = _gpu_rows(
        data,
        "e.stream, e.ts_us AS ts, e.dur_us AS dur, e.ts_runtime_us AS ts_runtime",
        f"e.rank = {int(rank)} AND e.cat IN ({cats})",
    )
    stream_dtype = data.dtypes(rank).stream
    if len(kernels):
        kernels["stream"] = kernels["stream"].astype(stream_dtype)
        kernels["ts_runtime"] = kernels["ts_runtime"].astype("float64")
    if not streams:
        streams = list(kernels.stream.unique()) if len(kernels) else []
    results, stats = [], []
    for stream in streams:
        s = kernels[kernels.stream == stream].copy().sort_values(by="ts")
        s["end_ts"] = s.ts + s.dur
        s["prev_end_ts"] = s.end_ts.shift(1)
        s["idle_interval"] = s["ts"] - s["prev_end_ts"]
        s["idle_category"] = 2
        host_wait = s["ts_runtime"] > s["prev_end_ts"]
        s.loc[host_wait, "idle_category"] = 0
        s.loc[~host_wait & (s["idle_interval"] < consecutive_kernel_delay), "idle_category"] = 1
        groups = s.groupby("idle_category")
        if show_idle_interval_stats:
            described = groups.idle_interval.describe()
            described.insert(0, "stream", stream)
            stats.append(described)
        result = pd.DataFrame(groups.idle_interval.sum())
        total = result.idle_interval.sum()
        result["stream"] = stream
        result["idle_time_ratio"] = result["idle_interval"] / total
        result = result.rename(columns={"idle_interval": "idle_time"})
        results.append(result)
    result_df = pd.concat(results)  # none: pandas' "No objects to concatenate", as HTA raises
    result_df = result_df.rename(mapper=IDLE_CATEGORIES, axis=0).reset_index()
    result_df["rank"] = rank
    interval_stats = None
    if show_idle_interval_stats:
        interval_stats = pd.concat(stats).round(2)
        interval_stats.insert(0, "rank", rank)
        interval_stats = interval_stats.rename(mapper=IDLE_CATEGORIES, axis=0)
    return result_df[["rank", "stream", "idle_category", "idle_time", "idle_time_ratio"]], interval_stats


def annotation_breakdown(
    data: HtaData, category: str, duration_ratio: float, num_kernels: int, allowlist_names: list[str] | None
) -> tuple[Any, dict[int, Any]]:
    """HTA's get_gpu_user_annotation_breakdown table and its per-rank tables, over the
    rows of ``category`` (gpu_user_annotation or user_annotation; the caller returns None,
    as HTA, where no row names it)."""
    pd = pandas()
    table = data.rows(
        "SELECT e.rank, e.name, e.dur_us AS dur FROM hta_events AS e, range(e.copies) "
        "WHERE e.cat = ? ORDER BY e.rank, e.row_order",
        "hta_events",
        params=[category],
    )
    rows = pd.DataFrame(table.to_pydict())
    all_df = _empty_stats_frame(pd)
    per_rank: dict[int, Any] = {}
    for rank in data.ranks:
        mine = (
            rows[rows["rank"] == rank][["name", "dur"]]
            if len(rows)
            else pd.DataFrame({"name": pd.Series(dtype="str"), "dur": pd.Series(dtype="float")})
        )
        agg = aggregate_by_name(
            mine, num_kernels=num_kernels, duration_ratio=duration_ratio, allowlist_names=allowlist_names
        )
        agg["rank"] = int(rank)
        per_rank[rank] = agg
        all_df = pd.concat([all_df, agg], ignore_index=True)
    all_df = all_df.sort_values(by=["rank", "name"], ignore_index=True).rename(columns=_RENAMED)
    return all_df, per_rank
