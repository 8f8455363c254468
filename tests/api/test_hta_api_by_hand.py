"""cclq.TraceAnalysis in HTA's shapes on a trace small enough to work out by hand (runs on a
fresh clone: no shared traces, no HTA). One rank, times in µs:

  CPU   ProfilerStep#1 [0, 100)  #2 [100, 200)  #3 [200, 250) (HTA drops the last step's rows)
        aten::mm [10, 50)
        launches: k1 at 20, k2 at 62, k3 at 110 (cudaLaunchKernel, 3 µs), memcpy at 140
        (cudaMemcpyAsync, 3 µs)
  GPU   stream 7: k1 [60, 70), k2 [75, 85), k3 [120, 140), Memcpy HtoD [150, 160) of 1 MB
        (Kineto's bandwidth: 1e6 B / 10 000 ns = 100 GB/s)
"""

from __future__ import annotations

import gzip
import json
import math
import sys
from pathlib import Path

import pytest

pd = pytest.importorskip("pandas")

import cclq  # noqa: E402
import cclq.errors  # noqa: E402
from cclq.api.hta_frames import MissingExtra  # noqa: E402
from cclq.synth.kineto import KinetoTraceBuilder  # noqa: E402

US = 1000


def _trace(folder: Path) -> Path:
    b = KinetoTraceBuilder(rank=0, world_size=1)
    b.profiler_step(1, ts=0, dur=100 * US)
    b.profiler_step(2, ts=100 * US, dur=100 * US)
    b.profiler_step(3, ts=200 * US, dur=50 * US)
    b.cpu_op("aten::mm", ts=10 * US, dur=40 * US)
    b.kernel("k1", ts=60 * US, dur=10 * US, launch_ts=20 * US)
    b.kernel("k2", ts=75 * US, dur=10 * US, launch_ts=62 * US)
    b.kernel("k3", ts=120 * US, dur=20 * US, launch_ts=110 * US)
    b.memcpy(ts=150 * US, dur=10 * US, nbytes=1_000_000, launch_ts=140 * US)
    b.write(folder / "rank0.json")
    return folder


@pytest.fixture(scope="module")
def ta(tmp_path_factory: pytest.TempPathFactory) -> cclq.TraceAnalysis:
    root = tmp_path_factory.mktemp("hand")
    return cclq.TraceAnalysis(trace_dir=_trace(root / "hand"), warehouse=root / "wh")


def test_the_breakdowns_come_back_in_htas_shapes(ta: cclq.TraceAnalysis) -> None:
    temporal = ta.get_temporal_breakdown(visualize=False)
    assert isinstance(temporal, pd.DataFrame) and isinstance(temporal.index, pd.RangeIndex)
    # GPU busy [60,70) [75,85) [120,140) [150,160): 50 of the 100 µs from 60 to 160; compute 40
    assert temporal.to_dict("records") == [
        {
            "rank": 0,
            "idle_time(us)": 50.0,
            "compute_time(us)": 40.0,
            "non_compute_time(us)": 10.0,
            "kernel_time(us)": 100.0,
            "idle_time_pctg": 50.0,
            "compute_time_pctg": 40.0,
            "non_compute_time_pctg": 10.0,
        }
    ]
    assert str(temporal["rank"].dtype) == "int64"

    idle_df, stats = ta.get_idle_time_breakdown(visualize=False)  # HTA's pair: the stats only on request
    assert stats is None
    # gaps on stream 7: k2 5 µs (launched at 62, before k1 ended: kernel_wait), k3 35 µs
    # (launched at 110 after k2 ended at 85: host_wait), the memcpy 10 µs (launched at 140 as
    # k3 ended: kernel_wait); the first kernel has no gap (other, 0)
    assert [
        tuple(r)
        for r in idle_df[["rank", "stream", "idle_category", "idle_time", "idle_time_ratio"]].itertuples(index=False)
    ] == [(0, 7, "host_wait", 35.0, 0.7), (0, 7, "kernel_wait", 15.0, 0.3), (0, 7, "other", 0.0, 0.0)]
    by_delay, _ = ta.get_idle_time_breakdown(visualize=False, consecutive_kernel_delay=8)
    assert dict(zip(by_delay["idle_category"], by_delay["idle_time"])) == {
        "host_wait": 35.0,
        "kernel_wait": 5.0,
        "other": 10.0,
    }


def test_the_counter_series_and_summaries(ta: cclq.TraceAnalysis) -> None:
    series = ta.get_queue_length_time_series()
    assert list(series) == [0]
    frame = series[0]
    assert list(frame.columns) == ["ts", "pid", "tid", "stream", "queue_length"] and frame.index.name == "index"
    # +1 at each launch, -1 at each start
    assert list(zip(frame["ts"], frame["queue_length"])) == [
        (20, 1),
        (60, 0),
        (62, 1),
        (75, 0),
        (110, 1),
        (120, 0),
        (140, 1),
        (150, 0),
    ]
    summary = ta.get_queue_length_summary_from_time_series(series)
    assert list(summary.columns) == [
        ("queue_length", s) for s in ("count", "mean", "std", "min", "25%", "50%", "75%", "max")
    ]
    assert summary.index.names == ["rank", "stream"] and list(summary.index) == [(0, 7)]
    values = [1, 0, 1, 0, 1, 0, 1, 0]
    mean = sum(values) / 8
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / 7)
    row = summary.loc[(0, 7), "queue_length"]
    assert (row["count"], row["mean"], row["min"], row["max"]) == (8.0, mean, 0.0, 1.0)
    assert math.isclose(row["std"], std, rel_tol=1e-12)
    blocked = ta.get_time_spent_blocked_on_full_queue(series, max_queue_length=1)
    # the queue is at 1 for 20..60, 62..75, 110..120, 140..150: 73 µs of the 150 its rows span
    assert blocked.to_dict("records") == [
        {"rank": 0, "stream": 7, "duration_at_max_queue_length": 73, "relative_duration_at_max_queue_length": 73 / 150}
    ]
    assert len(ta.get_time_spent_blocked_on_full_queue(series, max_queue_length=2)) == 0

    bw = ta.get_memory_bw_time_series()[0]
    assert list(zip(bw["ts"], bw["name"], bw["memory_bw_gbps"])) == [
        (150.0, "Memcpy HtoD", 100.0),
        (160.0, "Memcpy HtoD", 0.0),
    ]
    bw_summary = ta.get_memory_bw_summary()
    assert bw_summary.loc[(0, "Memcpy HtoD"), ("memory_bw_gbps", "count")] == 1.0


def test_launch_stats_and_steps(ta: cclq.TraceAnalysis) -> None:
    launches = ta.get_cuda_kernel_launch_stats(visualize=False)
    # delay = kernel start - launch start - launch duration (3 µs)
    assert [
        tuple(r) for r in launches[0][["cpu_duration", "gpu_duration", "launch_delay"]].itertuples(index=False)
    ] == [(3.0, 10.0, 37.0), (3.0, 10.0, 10.0), (3.0, 20.0, 7.0), (3.0, 10.0, 7.0)]
    assert ta.get_profiler_steps() == [1, 2]  # HTA drops the last step
    assert ta.t.get_ranks() == [0] and ta.t.get_trace(0)["ts"].min() == 0


def test_the_counter_trace_is_written_beside_the_trace_and_reads_back(tmp_path: Path) -> None:
    folder = _trace(tmp_path / "in")
    ta = cclq.TraceAnalysis(trace_dir=folder, warehouse=tmp_path / "wh")
    ta.generate_trace_with_counters()
    written = folder / "rank0_with_counters.json"
    assert written.exists()
    with gzip.open(written, "rt") as f:  # gzip-compressed whatever its name says, as HTA writes it
        doc = json.load(f)
    with open(folder / "rank0.json") as f:
        original = json.load(f)
    counters = [e for e in doc["traceEvents"] if e["ph"] == "C"]
    assert len(doc["traceEvents"]) - len(counters) == len(original["traceEvents"])
    assert sorted((e["name"], e["ts"], json.dumps(e["args"])) for e in counters) == sorted(
        [
            ("Queue Length", ts, json.dumps({"Queue Length": q}))
            for ts, q in [(20, 1), (60, 0), (62, 1), (75, 0), (110, 1), (120, 0), (140, 1), (150, 0)]
        ]
        + [("Memcpy HtoD", ts, json.dumps({"Memcpy BW": bw})) for ts, bw in [(150.0, 100.0), (160.0, 0.0)]]
    )
    # cclq's own reader takes it back: the same events and the counters
    other = cclq.open(tmp_path / "wh2")
    copy = tmp_path / "copy"
    copy.mkdir()
    (copy / "rank0.json.gz").write_bytes(written.read_bytes())
    assert not other.ingest(copy).failed
    rows = other.sql("SELECT ph, count(*) AS n FROM events GROUP BY ph ORDER BY ph").rows()
    assert dict(rows)["C"] == len(counters)
    assert sum(n for _, n in rows) == len(doc["traceEvents"])
    hta = _hta()
    if hta is not None:  # HTA's own loader: the same rows as from the original (it drops counters)
        plain = tmp_path / "plain"
        plain.mkdir()
        (plain / "rank0.json").write_text((folder / "rank0.json").read_text())
        assert len(hta(trace_dir=str(copy)).t.get_trace(0)) == len(hta(trace_dir=str(plain)).t.get_trace(0))


def _hta() -> object | None:
    """HTA's TraceAnalysis where HTA is installed (it is not a cclq dependency)."""
    try:
        from hta.trace_analysis import TraceAnalysis
    except ImportError:
        return None
    return TraceAnalysis


def test_without_pandas_the_message_names_the_extra(ta: cclq.TraceAnalysis, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pandas", None)  # `import pandas` fails as where it is not installed
    with pytest.raises(MissingExtra) as caught:
        ta.get_temporal_breakdown(visualize=False)
    assert isinstance(caught.value, ImportError)
    assert "pandas" in str(caught.value) and "cclq[hta]" in (caught.value.hint or "")


def test_without_plotly_the_table_htas_aten_delays_draw_names_the_extra(
    ta: cclq.TraceAnalysis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """get_aten_op_kernels_and_delay draws its table whatever it is asked (as HTA's does),
    with plotly.graph_objects alone: without plotly the message names the extra."""
    for module in ("plotly", "plotly.graph_objects", "plotly.express"):
        monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(MissingExtra) as caught:
        ta.get_aten_op_kernels_and_delay(ranks=[0])
    assert "plotly" in str(caught.value) and "cclq[hta]" in (caught.value.hint or "")


def test_the_critical_path_overlay_marks_the_path_and_reads_back(tmp_path: Path) -> None:
    """HTA's overlay of the first step's critical path: the path's events carry
    args.critical = 1, the other complete events (but annotations) are left out, each edge
    of the types HTA draws is a flow pair; the file is Chrome JSON that cclq's reader (and
    HTA's, where installed) reads back."""
    folder = _trace(tmp_path / "in")
    ta = cclq.TraceAnalysis(trace_dir=folder, warehouse=tmp_path / "wh")
    graph, ok = ta.critical_path_analysis(0, "ProfilerStep", 0)
    assert ok
    path = Path(ta.overlay_critical_path_analysis(0, graph, str(tmp_path / "out")))
    assert path.name == "overlaid_critical_path_rank0.json"
    with gzip.open(path, "rt") as f:
        doc = json.load(f)
    with open(folder / "rank0.json") as f:
        original = json.load(f)["traceEvents"]
    events = doc["traceEvents"]
    critical = [e for e in events if e["ph"] == "X" and e.get("args", {}).get("critical") == 1]
    frame = ta.t.get_trace(0)
    names = ta.t.symbol_table.get_sym_table()
    on_path = frame[frame["index"].isin(graph.critical_path_events_set)]
    assert sorted(e["name"] for e in critical) == sorted(names[n] for n in on_path["name"])
    kept_x = [e for e in events if e["ph"] == "X"]
    assert all(e in critical or e["cat"] in ("user_annotation", "python_function") for e in kept_x)
    others = ("X", "s", "f")  # what is not a complete event or a flow is written back as it was
    assert [e for e in events if e["ph"] not in others] == [e for e in original if e["ph"] not in others]
    # the path runs through k1's launch (queued alone, started with nothing before it: a
    # launch edge of 60 - 20 = 40 µs), k1, the gap to k2 and k2: longer than the CPU side
    from cclq.hta.analyzers.critical_path_analysis import CPEdgeType

    on_the_path = sorted(graph.critical_path_edges_set, key=lambda e: graph.node_list[e.begin].ts)
    assert [(e.type, e.weight) for e in on_the_path if e.type != CPEdgeType.OPERATOR_KERNEL] == [
        (CPEdgeType.KERNEL_LAUNCH_DELAY, 40.0),
        (CPEdgeType.KERNEL_KERNEL_DELAY, 5.0),
    ]
    flows = [e for e in events if e.get("name") == "critical_path"]
    assert sorted((e["ph"], e["cat"], e["ts"]) for e in flows) == [
        ("f", "critical_path_kernel_launch_delay", 60),
        ("s", "critical_path_kernel_launch_delay", 20),
    ]
    copy = tmp_path / "copy"
    copy.mkdir()
    (copy / "rank0.json.gz").write_bytes(path.read_bytes())
    other = cclq.open(tmp_path / "wh2")
    assert not other.ingest(copy).failed
    assert other.sql("SELECT count(*) FROM events").item() == len(events)
    hta = _hta()
    if hta is not None:  # HTA's own loader reads it, to the same rows as cclq's
        loaded = hta(trace_dir=str(copy)).t.get_trace(0)
        ours = cclq.TraceAnalysis(trace_dir=copy, warehouse=tmp_path / "wh2").t.get_trace(0)
        assert sorted(loaded["index"]) == sorted(ours["index"]) and len(loaded) >= len(critical)


def test_the_nodes_of_a_blocking_call_say_so(tmp_path: Path) -> None:
    """HTA's CPNode.is_blocking: True on both nodes of a call in CPGraph.BLOCKING_SYNC_CALLS
    (cudaStreamSynchronize 60..90 inside op_b 45..95), False on every other node."""
    b = KinetoTraceBuilder(rank=0, world_size=1)
    b.profiler_step(1, ts=0, dur=100 * US)
    b.profiler_step(2, ts=100 * US, dur=100 * US)
    b.cpu_op("op_a", ts=10 * US, dur=30 * US)
    b.cpu_op("op_b", ts=45 * US, dur=50 * US)
    b.runtime("cudaStreamSynchronize", ts=60 * US, dur=30 * US)
    b.write(tmp_path / "in" / "rank0.json")
    ta = cclq.TraceAnalysis(trace_dir=tmp_path / "in", warehouse=tmp_path / "wh")
    graph, ok = ta.critical_path_analysis(0, "ProfilerStep", 0)
    assert ok
    assert sorted((n.ts, n.is_start, n.is_blocking) for n in graph.node_list) == [
        (10.0, True, False),
        (40.0, False, False),
        (45.0, True, False),
        (60.0, True, True),
        (90.0, False, True),
        (95.0, False, False),
    ]


def test_visualize_draws_htas_figures_and_writes_them_as_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """visualize=True (HTA's default) shows HTA's plotly figures; with figures_dir (or
    $CCLQ_FIGURES_DIR) each is also written there as an HTML file, for scripts run
    outside a notebook."""
    basedatatypes = pytest.importorskip("plotly.basedatatypes")
    shown: list[str] = []
    monkeypatch.setattr(basedatatypes.BaseFigure, "show", lambda fig, *a, **k: shown.append(fig.layout.title.text))
    folder = _trace(tmp_path / "in")
    ta = cclq.TraceAnalysis(trace_dir=folder, warehouse=tmp_path / "wh", figures_dir=tmp_path / "figures")
    ta.get_temporal_breakdown()
    idle_df, _ = ta.get_idle_time_breakdown()
    assert shown == ["Temporal breakdown across ranks", "Idle time breakdown on rank 0 per CUDA stream"]
    assert idle_df["stream"].tolist() == ["7", "7", "7"]  # HTA's quirk: drawn as text, returned so
    files = sorted(p.name for p in (tmp_path / "figures").iterdir())
    assert files == [
        "001-Temporal_breakdown_across_ranks.html",
        "002-Idle_time_breakdown_on_rank_0_per_CUDA_stream.html",
    ]
    page = (tmp_path / "figures" / files[0]).read_text()
    assert "Temporal breakdown across ranks" in page and "plotly" in page.lower()
    monkeypatch.setenv("CCLQ_FIGURES_DIR", str(tmp_path / "env_figures"))
    cclq.TraceAnalysis(trace_dir=folder, warehouse=tmp_path / "wh").get_comm_comp_overlap()
    assert [p.name for p in (tmp_path / "env_figures").iterdir()] == ["001-Computation_Communication_Overlap.html"]


def test_trace_files_and_include_last_profiler_step(tmp_path: Path) -> None:
    """HTA's other constructor arguments: trace_files={rank: file} analyses those ranks only
    (a file named with another rank than its own is refused); include_last_profiler_step
    keeps the last step's rows."""
    folder = tmp_path / "two"
    for rank in (0, 1):
        b = KinetoTraceBuilder(rank=rank, world_size=2)
        b.profiler_step(1, ts=0, dur=100 * US)
        b.profiler_step(2, ts=100 * US, dur=100 * US)
        b.kernel("k1", ts=(20 + 10 * rank) * US, dur=10 * US, launch_ts=10 * US)
        b.kernel("k2", ts=(120 + 10 * rank) * US, dur=10 * US, launch_ts=110 * US)
        b.write(folder / f"rank{rank}.json")
    one = cclq.TraceAnalysis(trace_files={1: "rank1.json"}, trace_dir=folder, warehouse=tmp_path / "wh")
    assert one.t.get_ranks() == [1]
    # the last step's rows (and k2, launched in it) are dropped, as HTA: k1 alone, [30, 40)
    assert one.get_temporal_breakdown(visualize=False)[["rank", "kernel_time(us)"]].values.tolist() == [[1, 10.0]]
    assert one.get_profiler_steps() == [1]
    with pytest.raises(cclq.errors.UsageError, match="is rank 1 by its own content, not 0"):
        cclq.TraceAnalysis(trace_files={0: "rank1.json"}, trace_dir=folder, warehouse=tmp_path / "wh")
    every = cclq.TraceAnalysis(trace_dir=folder, warehouse=tmp_path / "wh", include_last_profiler_step=True)
    assert every.get_profiler_steps() == [1, 2]
    # k2 is kept too: from k1's start to k2's end, 110 µs on each rank
    assert every.get_temporal_breakdown(visualize=False)["kernel_time(us)"].tolist() == [110.0, 110.0]
