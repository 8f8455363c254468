"""``cclq.TraceAnalysis`` against HTA 0.5.0's own outputs (../shared/golden/hta), table for
table: the columns HTA returns, in its order, and every value of its CSVs. (The whole API,
call by call against HTA itself or its recorded answers: test_hta_script.py.)"""

from __future__ import annotations

import csv
import math
from pathlib import Path

import polars as pl
import pytest
from helpers.paths import GOLDEN, SHARED_TRACES, require_shared

import cclq

pd = pytest.importorskip("pandas")

FOLDERS = [
    "alexnet",
    "amd_mi250",
    "df_index_resolver",
    "mtia_single_rank",
    "nccl_data",
    "negative_queue_length",
    "ns_resolution",
    "trace_filter_2rank",
]


def _golden(folder: str, name: str) -> tuple[list[str], list[dict[str, str]]]:
    with open(GOLDEN / folder / f"{name}.csv", newline="") as f:
        reader = csv.DictReader(f)
        rows = list(reader)
        return list(reader.fieldnames or []), rows


def _same(actual: object, expected: str) -> bool:
    if expected == "":
        return actual is None or (isinstance(actual, float) and math.isnan(actual))
    if isinstance(actual, str):
        return actual == expected
    return actual is not None and math.isclose(float(actual), float(expected), rel_tol=1e-9, abs_tol=1e-9)


def _records(frame: pd.DataFrame) -> list[dict]:
    return [
        {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()}
        for r in frame.to_dict("records")
    ]


def _assert_table(frame: pd.DataFrame, folder: str, name: str, key: list[str]) -> None:
    columns, rows = _golden(folder, name)
    assert list(frame.columns) == columns, name
    got = sorted(_records(frame), key=lambda r: [str(r[k]) for k in key])
    want = sorted(rows, key=lambda r: [r[k] for k in key])
    assert len(got) == len(want), (name, got, want)
    for g, w in zip(got, want):
        bad = {c: (g[c], w[c]) for c in columns if not _same(g[c], w[c])}
        assert not bad, (name, bad)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> cclq.Workspace:
    require_shared()
    return cclq.open(tmp_path_factory.mktemp("ta") / "wh")


@pytest.mark.slow
@pytest.mark.parametrize("folder", FOLDERS)
def test_trace_analysis_returns_htas_tables(folder: str, workspace: cclq.Workspace) -> None:
    ta = cclq.TraceAnalysis(trace_dir=SHARED_TRACES / f"hta_{folder}", warehouse=workspace)
    _assert_table(ta.get_temporal_breakdown(visualize=False), folder, "temporal_breakdown", ["rank"])
    _assert_table(ta.get_comm_comp_overlap(visualize=False), folder, "comm_comp_overlap", ["rank"])
    _assert_table(ta.get_gpu_kernel_type_breakdown(), folder, "kernel_type_breakdown", ["kernel_type"])
    # the golden files asked HTA for every rank (its default is rank 0 alone)
    ranks = ta.t.get_ranks()
    idle, _ = ta.get_idle_time_breakdown(ranks=ranks, visualize=False)
    _assert_table(idle, folder, "idle_time_breakdown", ["rank", "stream", "idle_category"])


def test_every_public_method_of_htas_trace_analysis_is_there() -> None:
    """HTA 0.5.0's public methods (hta/trace_analysis.py), by name."""
    hta_methods = {
        "get_comm_comp_overlap",
        "get_profiler_steps",
        "get_potential_stragglers",
        "get_gpu_kernel_breakdown",
        "get_gpu_kernels_with_user_annotations",
        "get_gpu_user_annotation_breakdown",
        "get_temporal_breakdown",
        "get_frequent_cuda_kernel_sequences",
        "get_aten_op_kernels_and_delay",
        "get_cuda_kernel_launch_stats",
        "generate_trace_with_counters",
        "get_queue_length_summary",
        "get_queue_length_summary_from_time_series",
        "get_queue_length_time_series",
        "get_time_spent_blocked_on_full_queue",
        "get_memory_bw_summary",
        "get_memory_bw_time_series",
        "get_idle_time_breakdown",
        "get_cupti_counter_data_with_operators",
        "critical_path_analysis",
        "overlay_critical_path_analysis",
    }
    assert hta_methods <= set(dir(cclq.TraceAnalysis))
    with pytest.raises(AttributeError):
        cclq.nothing_here  # noqa: B018


# ---------------------------------------------------------------------------------------
# The analyses beyond the four breakdowns, against the same goldens as the metrics
# (tests/query/test_hta_analyses.py): here the point is HTA's method names, arguments and
# columns; where HTA's unstable sort leaves ties undefined (order_sensitive in the metric)
# only the order-independent numbers are compared, as there.
# ---------------------------------------------------------------------------------------

HTA_GOLDEN = Path(__file__).resolve().parents[1] / "hta_golden"
DESCRIBE = ["count", "mean", "std", "min", "25%", "50%", "75%", "max"]


def _golden_describe(folder: str, name: str, keys: list[str]) -> list[dict[str, str]]:
    """A pandas describe() of a groupby as HTA's CSV holds it: two header rows, an index row."""
    with open(GOLDEN / folder / f"{name}.csv", newline="") as f:
        lines = list(csv.reader(f))
    if len(lines) < 3:
        return []
    return [dict(zip([*keys, *lines[1][len(keys) :]], row)) for row in lines[3:]]


def _ordered(ws: cclq.Workspace, metric: str, folder: str, key: str) -> set[tuple[int, str]]:
    rows = ws.metric(metric, traces=[f"hta_{folder}"]).filter(pl.col("order_sensitive"))
    return {(r["rank"], str(r[key])) for r in rows.iter_rows(named=True)}


@pytest.fixture(scope="module")
def analyses(workspace: cclq.Workspace) -> dict[str, cclq.TraceAnalysis]:
    return {f: cclq.TraceAnalysis(trace_dir=SHARED_TRACES / f"hta_{f}", warehouse=workspace) for f in FOLDERS}


@pytest.mark.slow
@pytest.mark.parametrize("folder", FOLDERS)
def test_counter_summaries_are_htas(
    folder: str, analyses: dict[str, cclq.TraceAnalysis], workspace: cclq.Workspace
) -> None:
    ta = analyses[folder]
    ranks = ta.t.get_ranks()
    for method, name, key, metric, value in (
        (ta.get_queue_length_summary, "queue_length_summary", "stream", "hta_queue_length_summary", "queue_length"),
        (ta.get_memory_bw_summary, "memory_bw_summary", "name", "hta_memory_bw_summary", "memory_bw_gbps"),
    ):
        frame = method(ranks=ranks)
        golden = _golden_describe(folder, name, ["rank", key])
        if frame is None or len(frame) == 0:  # no series (HTA: None, or an empty describe())
            assert not golden, name
            continue
        assert list(frame.columns) == [(value, d) for d in DESCRIBE] and frame.index.names == ["rank", key]
        ties = _ordered(workspace, metric, folder, key)
        got = {(int(r), str(k)): row for (r, k), row in frame[value].iterrows()}
        assert sorted(got) == sorted((int(g["rank"]), g[key]) for g in golden), name
        for g in golden:
            row = got[(int(g["rank"]), g[key])]
            columns = ["min", "max"] if (int(g["rank"]), g[key]) in ties else DESCRIBE
            bad = {c: (row[c], g[c]) for c in columns if not _same(row[c], g[c])}
            assert not bad, (name, g[key], bad)
    blocked = ta.get_time_spent_blocked_on_full_queue(ta.get_queue_length_time_series(ranks=ranks))
    assert list(blocked.columns) == [
        "rank",
        "stream",
        "duration_at_max_queue_length",
        "relative_duration_at_max_queue_length",
    ]
    assert len(blocked) == len(_golden(folder, "time_blocked_on_full_queue")[1]) == 0  # no queue reaches 1024


@pytest.mark.slow
@pytest.mark.parametrize("folder", FOLDERS)
def test_breakdowns_and_launches_are_htas(folder: str, analyses: dict[str, cclq.TraceAnalysis]) -> None:
    ta = analyses[folder]
    ranks = ta.t.get_ranks()
    _, stats = ta.get_idle_time_breakdown(ranks=ranks, show_idle_interval_stats=True, visualize=False)
    _assert_table(
        stats.reset_index()[["idle_category", "rank", "stream", *DESCRIBE]],
        folder,
        "idle_interval_stats",
        ["rank", "stream", "idle_category"],
    )
    _, kernels = ta.get_gpu_kernel_breakdown(visualize=False)
    _assert_table(kernels, folder, "kernel_breakdown", ["rank", "kernel_type", "name"])
    cpu = ta.get_gpu_user_annotation_breakdown(use_gpu_annotation=False, visualize=False)
    _assert_table(cpu, folder, "cpu_user_annotation_breakdown", ["rank", "name"])
    gpu_golden = HTA_GOLDEN / folder / "gpu_user_annotation_breakdown.csv"
    gpu = ta.get_gpu_user_annotation_breakdown(visualize=False)
    if gpu_golden.exists():
        with open(gpu_golden, newline="") as f:
            rows = list(csv.DictReader(f))
        assert gpu is not None and list(gpu.columns) == list(rows[0])
        assert sorted(zip(gpu["name"], gpu["sum (us)"])) == sorted((r["name"], float(r["sum (us)"])) for r in rows)
    else:
        assert gpu is None  # HTA returns None without gpu_user_annotation rows
    launches = ta.get_cuda_kernel_launch_stats(ranks=ranks, visualize=False)
    _, golden = _golden(folder, "cuda_kernel_launch_stats")
    got = sorted((rank, *r) for rank, frame in launches.items() for r in frame.itertuples(index=False))
    assert all(
        list(f.columns) == ["correlation", "cpu_duration", "gpu_duration", "launch_delay"] for f in launches.values()
    )
    assert got == sorted(
        (
            int(g["rank"]),
            int(g["correlation"]),
            float(g["cpu_duration"]),
            float(g["gpu_duration"]),
            float(g["launch_delay"]),
        )
        for g in golden
    )
    assert ta.get_profiler_steps() == [int(r["profiler_step"]) for r in _golden(folder, "profiler_steps")[1]]


@pytest.mark.slow
@pytest.mark.parametrize("folder", FOLDERS)
def test_sequences_and_critical_path_are_htas(
    folder: str, analyses: dict[str, cclq.TraceAnalysis], tmp_path: Path
) -> None:
    ta = analyses[folder]
    rank = min(ta.t.get_ranks())
    for path in sorted((HTA_GOLDEN / folder).glob("frequent_cuda_kernel_sequences_*.csv")):
        op = path.stem.removeprefix("frequent_cuda_kernel_sequences_").replace("aten_", "aten::", 1)
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
        frame = ta.get_frequent_cuda_kernel_sequences(op, output_dir=str(tmp_path), rank=rank)
        assert list(frame.columns) == list(rows[0])
        # negative_queue_length: HTA's call stack nests wrongly and counts the pattern once
        # where it occurs 4 times (tests/query/test_hta_analyses.py works it out)
        want = [(r["pattern"], 4 if folder == "negative_queue_length" else int(r["count"])) for r in rows]
        assert sorted(zip(frame["pattern"], frame["count"])) == sorted(want)
    golden = HTA_GOLDEN / folder / "critical_path_summary.csv"
    if not golden.exists():  # HTA fails there (the .error file says how)
        return
    path, ok = ta.critical_path_analysis(rank=rank, annotation="ProfilerStep", instance_id=0)
    with open(golden, newline="") as f:
        want = {r["bound_by"]: float(r["percentage"]) for r in csv.DictReader(f)}
    summary = path.summary()
    assert ok and summary.name == "duration" and summary.index.name == "bound_by"  # HTA's Series
    got = summary.to_dict()
    assert sorted(got) == sorted(want)
    assert all(math.isclose(got[k], v, rel_tol=1e-9, abs_tol=1e-12) for k, v in want.items())


@pytest.mark.slow
def test_critical_path_of_any_window(analyses: dict[str, cclq.TraceAnalysis]) -> None:
    """instance_id picks the ProfilerStep (a pair: a range of them); a window past the last
    is an error that says how many there are; an annotation no name has gives None, as HTA."""
    ta = analyses["ns_resolution"]
    steps = ta.get_profiler_steps()
    assert len(steps) >= 2
    first, ok1 = ta.critical_path_analysis(0, "ProfilerStep", 0)
    second, ok2 = ta.critical_path_analysis(0, "ProfilerStep", 1)
    both, ok3 = ta.critical_path_analysis(0, "ProfilerStep", (0, 1))
    assert ok1 and ok2 and ok3
    # the events on the second path start once the second ProfilerStep row (frame order) has
    # started, and some of them before it ends (its kernels may run after it)
    frame = ta.t.get_trace(0)
    names = frame["name"].map(lambda n: ta.t.symbol_table.get_sym_table()[n])
    step = frame[names.str.contains("ProfilerStep")].iloc[1]
    on_path = frame[frame["index"].isin(second.critical_path_events_set)]
    assert len(on_path) and (on_path["ts"] >= step["ts"]).all() and (on_path["ts"] < step["ts"] + step["dur"]).any()
    assert not frame[frame["index"].isin(first.critical_path_events_set)]["ts"].ge(step["ts"] + step["dur"]).any()
    assert sum(e.weight for e in both.path_edges) >= sum(e.weight for e in first.path_edges)
    with pytest.raises(ValueError, match="instance 99"):
        ta.critical_path_analysis(0, "ProfilerStep", 99)
    assert ta.critical_path_analysis(0, "NoSuchAnnotation", 0) is None


def test_cupti_counters_by_hand(tmp_path: Path) -> None:
    """HTA's get_cupti_counter_data_with_operators on a trace in CUPTI profiler mode, worked
    by hand: rank 0's two profiler-range kernels pair with its two launches by order (the
    first inside aten::linear > aten::addmm, the second outside any operator); rank 1 has
    one launch more than kernels, so HTA gives it no frame; a trace without profiler-range
    events gives none."""
    from cclq.synth.kineto import KinetoTraceBuilder

    us = 1000
    counters = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
    for rank in (0, 1):
        b = KinetoTraceBuilder(rank=rank, world_size=2)
        b.cpu_op("aten::linear", ts=0, dur=50 * us)
        b.cpu_op("aten::addmm", ts=5 * us, dur=25 * us)
        b.kernel(
            "gemm_k",
            ts=40 * us,
            dur=4 * us,
            launch_ts=10 * us,
            cat="cuda_profiler_range",
            args={counters: 61.5, "dram__bytes_read.sum": 4096},
        )
        b.kernel(
            "relu_k",
            ts=60 * us,
            dur=2 * us,
            launch_ts=55 * us,
            cat="cuda_profiler_range",
            args={counters: 12.25, "dram__bytes_read.sum": 1024},
        )
        if rank == 1:
            b.runtime("cudaLaunchKernel", ts=70 * us, dur=3 * us)
        b.write(tmp_path / "in" / "cupti" / f"rank{rank}.json")
    plain = KinetoTraceBuilder(rank=0)
    plain.kernel("gemm_k", ts=40 * us, dur=4 * us, launch_ts=10 * us)
    plain.write(tmp_path / "in" / "plain" / "rank0.json")

    ta = cclq.TraceAnalysis(trace_dir=tmp_path / "in" / "cupti", warehouse=tmp_path / "wh")
    (frame,) = ta.get_cupti_counter_data_with_operators()
    assert [
        tuple(r)
        for r in frame[
            ["name", "ts", "dur", "op_stack", "top_level_op", "bottom_level_op", counters, "dram__bytes_read.sum"]
        ].itertuples(index=False)
    ] == [
        ("gemm_k", 40.0, 4.0, ["aten::linear", "aten::addmm"], "aten::linear", "aten::addmm", 61.5, 4096),
        ("relu_k", 60.0, 2.0, [], "", "", 12.25, 1024),
    ]
    assert ta.get_cupti_counter_data_with_operators([1]) == []
    assert len(ta.get_cupti_counter_data_with_operators([0, 1])) == 1
    plain_ta = cclq.TraceAnalysis(trace_dir=tmp_path / "in" / "plain", warehouse=tmp_path / "wh")
    assert plain_ta.get_cupti_counter_data_with_operators() == []


@pytest.mark.slow
def test_kernels_with_annotations_leaves_htas_columns_on_a_frame_not_yet_built(tmp_path: Path) -> None:
    """HTA's get_gpu_kernels_with_user_annotations adds ``end`` (ts + dur) and
    ``user_annotation`` (-1) to the rank's frame before it finds no GPU annotation and
    returns None. cclq does not build the frame for that answer, yet the frame a script
    reads afterwards has both columns, as when it was built first."""
    from cclq.synth.kineto import KinetoTraceBuilder

    us = 1000
    b = KinetoTraceBuilder(rank=0)
    b.cpu_op("aten::mm", ts=0, dur=20 * us)
    b.kernel("gemm_k", ts=30 * us, dur=4 * us, launch_ts=5 * us)
    b.kernel("relu_k", ts=40 * us, dur=2 * us, launch_ts=10 * us)
    b.write(tmp_path / "in" / "t" / "rank0.json")

    frames = []
    for build_first in (True, False):
        ta = cclq.TraceAnalysis(trace_dir=tmp_path / "in" / "t", warehouse=tmp_path / f"wh{build_first}")
        if build_first:
            ta.t.get_trace(0)
        assert ta.get_gpu_kernels_with_user_annotations(0) is None
        frames.append(ta.t.get_trace(0))
    built_first, built_after = frames
    assert list(built_after.columns)[-2:] == ["end", "user_annotation"]
    assert (built_after["user_annotation"] == -1).all()
    assert (built_after["end"] == built_after["ts"] + built_after["dur"]).all()
    pd.testing.assert_frame_equal(built_first, built_after)
    with pytest.raises(ValueError, match="no trace for rank 3"):
        ta.get_gpu_kernels_with_user_annotations(3)
