"""HTA 0.5.0's augmented counters (hta/analyzers/trace_counters.py): the queue length and
memory bandwidth time series of a rank, their summaries, and the time spent blocked on a
full launch queue.

The change points come from the views (``hta_queue_points``: a +1 at each launch call with
a GPU partner, a -1 at that GPU row's start; ``hta_events``' MEMORY rows for the
bandwidth); the series are then put together as HTA does it, with pandas: the points in
HTA's concatenation order, ``sort_values("ts")`` (numpy's unstable sort, so that points at
one timestamp come out in the order HTA's own sort gives them with the same numpy), a
running sum per stream / memory kind. The summaries are HTA's own pandas steps
(``describe()`` of each series), applied to the frames a script passes, as HTA does.
"""

from __future__ import annotations

from typing import Any

from cclq.api.hta_data import HtaData
from cclq.api.hta_frames import pandas
from cclq.present.chrome_trace import id_value

_CPU_ROWS = 1 << 40  # hta_events.row_order of a CPU row of a filtered rank is event_idx + 2^40


def queue_length_series(data: HtaData, ranks: list[int]) -> dict[int, Any]:
    """rank -> HTA's queue length series (ts, pid, tid, stream, queue_length; index: the
    event index of the point's row), for the ranks that have one."""
    pd = pandas()
    data.require_ranks(*ranks)
    if not ranks:
        return {}
    table = data.rows(
        "SELECT rank, stream, pid, tid, ts_us, delta, part, row_order, row_order2, copy_no FROM hta_queue_points "
        "WHERE list_contains(?, rank) ORDER BY rank, part, row_order, row_order2, copy_no",
        "hta_events",
        params=[[int(r) for r in ranks]],
    )
    rows = table.to_pydict()
    origin = data.origin_us
    out: dict[int, Any] = {}
    for rank in ranks:
        pick = [i for i, r in enumerate(rows["rank"]) if r == rank]
        if not pick:
            continue
        dtypes = data.dtypes(rank)
        index = [rows["row_order"][i] % _CPU_ROWS for i in pick]  # the event index of the point's row
        frame = pd.DataFrame(
            {
                "index": pd.array(index, dtype=dtypes.index),
                "ts": pd.array([_time(rows["ts_us"][i] - origin) for i in pick], dtype="int64"),
                "pid": pd.array([id_value(rows["pid"][i]) for i in pick], dtype=object),
                "tid": pd.array([id_value(rows["tid"][i]) for i in pick], dtype=object),
                "stream": pd.array([rows["stream"][i] for i in pick], dtype=dtypes.stream),
                "queue": pd.array([rows["delta"][i] for i in pick], dtype="int64"),
            }
        )
        merged = frame.sort_values(by="ts").set_index("index")
        parts = []
        for _, stream_df in merged.groupby("stream"):
            stream_df["queue_length"] = stream_df["queue"].cumsum()
            parts.append(stream_df)
        out[rank] = pd.concat(parts)[["ts", "pid", "tid", "stream", "queue_length"]]
    return out


def queue_length_summary(series: dict[int, Any]) -> Any:
    """HTA's get_queue_length_summary_from_time_series: describe() of each rank's series per
    stream (it adds a rank column to the frames it is given, as HTA does)."""
    pd = pandas()
    results = []
    for rank, rank_df in series.items():
        rank_df["rank"] = rank
        results.append(rank_df[["rank", "stream", "queue_length"]].groupby(["rank", "stream"]).describe())
    return pd.concat(results) if results else None


def time_blocked_on_full_queue(data: HtaData, series: dict[int, Any], max_queue_length: int) -> Any:
    """HTA's get_time_spent_blocked_on_full_queue over the series a script passes."""
    pd = pandas()
    result = {}
    durations = _rank_durations(data)
    for rank, ql in series.items():
        for stream in ql.stream.unique():
            df = ql.loc[ql.stream == stream].copy()
            df["dur"] = df.ts.shift(-1) - df.ts
            df = df.loc[ql.queue_length >= max_queue_length]
            if df.empty:
                continue
            total = df.dur.sum()
            result[rank] = [stream, total, total * 1.0 / durations[rank]]
    frame = pd.DataFrame.from_dict(
        result,
        orient="index",
        columns=["stream", "duration_at_max_queue_length", "relative_duration_at_max_queue_length"],
    )
    return frame.reset_index(names="rank")


def memory_bw_series(data: HtaData, ranks: list[int]) -> dict[int, Any]:
    """rank -> HTA's memory bandwidth series (ts, pid, name, memory_bw_gbps), for the ranks
    that have MEMORY rows."""
    pd = pandas()
    data.require_ranks(*ranks)
    table = data.rows(
        "SELECT e.rank, e.pid, e.ts_us, e.dur_us, hta_memory_kind(e.name) AS kind, e.memory_bw_gbps "
        "FROM hta_events AS e, range(e.copies) "
        "WHERE e.stream <> -1 AND e.kernel_type = 'MEMORY' AND list_contains(?, e.rank) "
        "ORDER BY e.rank, e.row_order",
        "hta_events",
        params=[[int(r) for r in ranks]],
    )
    rows = table.to_pydict()
    origin = data.origin_us
    out: dict[int, Any] = {}
    for rank in ranks:
        pick = [i for i, r in enumerate(rows["rank"]) if r == rank]
        if not pick:
            continue
        mem = pd.DataFrame(
            {
                "ts": pd.array([_time(rows["ts_us"][i] - origin) for i in pick], dtype="int64"),
                "name": pd.array([rows["kind"][i] for i in pick], dtype=object),
                "dur": pd.array([rows["dur_us"][i] for i in pick], dtype="float64"),
                "pid": pd.array([id_value(rows["pid"][i]) for i in pick], dtype=object),
                "memory_bw_gbps": pd.array([rows["memory_bw_gbps"][i] for i in pick], dtype="float64"),
            }
        )
        mem.loc[mem.dur == 0, ["dur"]] = 1
        starts = mem[["ts", "name", "pid", "memory_bw_gbps"]]
        ends = mem[["ts", "name", "dur", "pid", "memory_bw_gbps"]].copy()
        ends.ts = ends.ts + ends.dur
        ends.memory_bw_gbps = -ends.memory_bw_gbps
        series = pd.concat([starts, ends[["ts", "pid", "name", "memory_bw_gbps"]]], ignore_index=True).sort_values(
            by="ts"
        )
        parts = []
        for _, kind_df in series.groupby("name"):
            kind_df.memory_bw_gbps = kind_df.memory_bw_gbps.cumsum()
            parts.append(kind_df)
        if parts:
            out[rank] = pd.concat(parts)[["ts", "pid", "name", "memory_bw_gbps"]]
    return out


def memory_bw_summary(series: dict[int, Any]) -> Any:
    """HTA's get_memory_bw_summary: describe() of the points above 0 GB/s per memory kind."""
    pd = pandas()
    results = []
    for rank, rank_df in series.items():
        rank_df["rank"] = rank
        rank_df = rank_df[rank_df.memory_bw_gbps > 0]
        results.append(rank_df[["rank", "name", "memory_bw_gbps"]].groupby(["rank", "name"]).describe())
    return pd.concat(results) if results else None


def _rank_durations(data: HtaData) -> dict[int, Any]:
    """HTA's Trace.get_trace_duration of each rank: last ts - first ts of its rows."""
    rows = data.rows("SELECT rank, max(ts_us) - min(ts_us) AS d FROM hta_events GROUP BY rank", "hta_events")
    return {int(r): _time(d) for r, d in zip(rows.column("rank").to_pylist(), rows.column("d").to_pylist())}


def _time(us: float) -> Any:
    """A time in µs as HTA's int64 ts column holds it (whole µs: HTA's ts are integers)."""
    return int(us) if float(us).is_integer() else us
