"""hta_critical_path_breakdown against HTA 0.5.0's critical path summary, and by hand.

Goldens: tests/hta_golden/<folder>/critical_path_summary.csv, written by
tests/hta_golden/generate.py (HTA 0.5.0: critical_path_analysis(rank = the first rank,
annotation "ProfilerStep", instance_id 0), then CPGraph.summary()). HTA writes the
percentages with repr() (17 significant digits); the tolerance is relative 1e-9, the
rounding of a sum of a few thousand doubles of whole and fractional µs, far below any
difference a wrong edge would make (one µs of a 100 ms path is 1e-5 relative).

Folders where HTA fails: alexnet (no ProfilerStep annotation: HTA returns None), and
mtia_single_rank (HTA asserts: a kernel's launch row is not a runtime row of the window);
the first gets the metric's reason, the second is not compared.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest
from helpers.paths import require_shared
from helpers.warehouse import run_ingest

from cclq.query.critical_path import dagpath, longest_path, longest_path_arrays
from cclq.query.metrics import run_metric
from cclq.query.registry import resolve
from cclq.query.session import connect
from cclq.store.warehouse import Warehouse
from cclq.synth.kineto import KinetoTraceBuilder

HTA_GOLDEN = Path(__file__).resolve().parents[1] / "hta_golden"
FOLDERS = [
    "amd_mi250",
    "df_index_resolver",
    "nccl_data",
    "negative_queue_length",
    "ns_resolution",
    "trace_filter_2rank",
]
US = 1_000  # ns per µs; the builder takes ns

Row = dict[str, Any]


def _rows(con: duckdb.DuckDBPyConnection) -> list[Row]:
    return run_metric(con, resolve("hta_critical_path_breakdown"), {}).to_pylist()


@pytest.fixture(scope="module")
def real(tmp_path_factory) -> list[Row]:
    traces = require_shared()
    wh = Warehouse(tmp_path_factory.mktemp("hta_cp_real") / "wh")
    run_ingest([traces / f"hta_{f}" for f in [*FOLDERS, "alexnet"]], wh, jobs=2)
    con = connect(wh)
    try:
        return _rows(con)
    finally:
        con.close()


@pytest.mark.slow
@pytest.mark.parametrize("folder", FOLDERS)
def test_critical_path_summary_matches_hta(real: list[Row], folder: str) -> None:
    with open(HTA_GOLDEN / folder / "critical_path_summary.csv", newline="") as f:
        golden = {r["bound_by"]: float(r["percentage"]) for r in csv.DictReader(f)}
    ranks = sorted({r["rank"] for r in real if r["trace"] == f"hta_{folder}"})
    assert ranks, folder
    ours = {r["bound_by"]: r["percentage"] for r in real if r["trace"] == f"hta_{folder}" and r["rank"] == ranks[0]}
    assert sorted(ours) == sorted(golden), (ours, golden)
    for bound_by, pct in golden.items():
        assert ours[bound_by] == pytest.approx(pct, rel=1e-9, abs=1e-12), bound_by


@pytest.mark.slow
def test_critical_path_without_profiler_step_says_why(real: list[Row]) -> None:
    rows = [r for r in real if r["trace"] == "hta_alexnet"]
    assert rows and all(r["bound_by"] is None and "ProfilerStep" in r["reason"] for r in rows)


def _hand_cp_gpu(g: KinetoTraceBuilder) -> KinetoTraceBuilder:
    """hand_cp_gpu's events (see _build) on one rank's builder."""
    g.profiler_step(1, ts=0 * US, dur=100 * US)
    g.profiler_step(2, ts=100 * US, dur=100 * US)
    g.cpu_op("aten::mm", ts=10 * US, dur=20 * US)
    g.kernel("k1", ts=40 * US, dur=30 * US, launch_ts=12 * US, launch_dur=3 * US)
    g.cpu_op("aten::add", ts=50 * US, dur=10 * US)
    g.kernel("k2", ts=75 * US, dur=5 * US, launch_ts=52 * US, launch_dur=3 * US)
    return g


def _build(root: Path) -> None:
    """hand_cp_gpu, step #1 = [0, 100] µs: aten::mm 10..30 launches k1 (cudaLaunchKernel
    12..15, k1 40..70 on stream 7), aten::add 50..60 launches k2 (52..55, k2 75..80).
    hand_cp_cpu, step #1: op_a 10..40, op_b 45..95 holding cudaStreamSynchronize 60..90
    (a blocking call: the edge into its end weighs 0). Step #2 is dropped by HTA's tail
    filter in both."""
    _hand_cp_gpu(KinetoTraceBuilder(rank=0)).write(root / "hand_cp_gpu" / "rank0.json")
    c = KinetoTraceBuilder(rank=0)
    c.profiler_step(1, ts=0 * US, dur=100 * US)
    c.profiler_step(2, ts=100 * US, dur=100 * US)
    c.cpu_op("op_a", ts=10 * US, dur=30 * US)
    c.cpu_op("op_b", ts=45 * US, dur=50 * US)
    c.runtime("cudaStreamSynchronize", ts=60 * US, dur=30 * US)
    c.write(root / "hand_cp_cpu" / "rank0.json")


@pytest.fixture(scope="module")
def hand(tmp_path_factory) -> list[Row]:
    root = tmp_path_factory.mktemp("hta_cp_hand")
    _build(root / "in")
    wh = Warehouse(root / "wh")
    run_ingest([root / "in"], wh)
    con = connect(wh)
    try:
        return _rows(con)
    finally:
        con.close()


def test_critical_path_by_hand_gpu(hand: list[Row]) -> None:
    """The queue of stream 7 is 1 after each launch and 0 after each kernel starts; k1
    has no predecessor on the stream: a launch edge 12 -> 40 (28 µs). k2's launch (52)
    comes before k1 ends (70): a kernel-kernel edge 70 -> 75 (5 µs). Longest path:
    aten::mm start 10 -> launch start 12 (2, cpu) -> k1 40 (28) -> 70 (30) -> k2 75 (5)
    -> 80 (5): 70 µs, against 30 for the CPU alone."""
    rows = {r["bound_by"]: r for r in hand if r["trace"] == "hand_cp_gpu"}
    assert {b: r["duration_us"] for b, r in rows.items()} == {
        "cpu_bound": 2,
        "gpu_kernel_launch_overhead": 28,
        "gpu_compute_bound": 35,
        "gpu_kernel_kernel_overhead": 5,
    }
    assert rows["gpu_kernel_launch_overhead"]["value"] == pytest.approx(40.0)
    assert rows["gpu_compute_bound"]["percentage"] == pytest.approx(50.0)
    assert {r["path_us"] for r in rows.values()} == {70}


def test_critical_path_by_hand_blocking_call(hand: list[Row]) -> None:
    """op_a 10 -> 40 (30), dependency to op_b (0), op_b 45 -> sync start 60 (15), the
    sync's 30 µs weigh 0, sync end 90 -> op_b end 95 (5): 50 µs, all CPU, and HTA's
    empty class with 0 for the dependency edge."""
    rows = {r["bound_by"]: r for r in hand if r["trace"] == "hand_cp_cpu"}
    assert {b: (r["duration_us"], r["percentage"]) for b, r in rows.items()} == {"cpu_bound": (50, 100.0), "": (0, 0.0)}


def _path_through_arrays(edges: list[tuple[int, int, float, int]]) -> list[int]:
    """``longest_path`` as the metric runs it: Arrow columns, the compiled path where it
    was built (and takes the graph), else the Python one."""
    columns = list(zip(*edges, strict=True)) if edges else [[], [], [], []]
    types = (pa.int64(), pa.int64(), pa.float64(), pa.int64())
    return longest_path_arrays(*(pa.array(c, t) for c, t in zip(columns, types, strict=True))).to_pylist()


PATH_FINDERS = [pytest.param(longest_path, id="python"), pytest.param(_path_through_arrays, id="arrays")]


@pytest.mark.parametrize("find", PATH_FINDERS)
def test_longest_path_ties_as_networkx(find) -> None:  # noqa: ANN001 - one of PATH_FINDERS
    """Two paths of 5 from node 0 to 3 (0-1-3 inserted first, 0-2-3): networkx keeps the
    first predecessor among equals; a negative best restarts the path (node 4)."""
    edges = [(0, 1, 2.0, 1), (0, 2, 3.0, 2), (1, 3, 3.0, 3), (2, 3, 2.0, 4), (3, 4, -9.0, 5)]
    assert find(edges) == [1, 3]
    assert find([]) == []
    with pytest.raises(ValueError, match="cycle"):
        find([(0, 1, 1.0, 1), (1, 0, 1.0, 2)])


@pytest.mark.parametrize("find", PATH_FINDERS)
def test_longest_path_equals_networkx_on_random_dags(find) -> None:  # noqa: ANN001 - one of PATH_FINDERS
    """Differential check against networkx.dag_longest_path (what HTA calls) on 2,000
    small random DAGs with repeated edges (networkx keeps the first position and the last
    weight), ties, negative weights, isolated starts, and node ids that are not in
    topological order (as in HTA's graph, where a sync edge runs to an earlier id). networkx
    comes with torch (the test extra); without it the test skips."""
    nx = pytest.importorskip("networkx")
    import random

    for seed in range(2000):
        draw = random.Random(seed)
        n = draw.randint(1, 12)
        label = list(range(n))
        if seed % 2:
            draw.shuffle(label)
        edges = [
            (label[u], label[v], float(draw.choice([-2, 0, 1, 1, 2, 3])), k)
            for k in range(draw.randint(0, 25))
            for u, v in [(draw.randrange(n), draw.randrange(n))]
            if u < v
        ]
        graph = nx.DiGraph()
        graph.add_nodes_from(sorted({node for edge in edges for node in edge[:2]}))
        for u, v, weight, number in edges:
            graph.add_edge(u, v, weight=weight, number=number)
        path = nx.dag_longest_path(graph, weight="weight")
        expected = [graph.edges[a, b]["number"] for a, b in zip(path, path[1:], strict=False)]
        assert find(edges) == expected, (seed, edges)


def test_longest_path_arrays_takes_other_number_types() -> None:
    """Node ids and weights of other widths (int32, float32) are read as their values, not
    as the bytes of int64 and float64, compiled or not."""
    src, dst = pa.array([0, 1], pa.int32()), pa.array([1, 2], pa.int32())
    path = longest_path_arrays(src, dst, pa.array([1.0, 2.0], pa.float32()), pa.array([4, 5]))
    assert path.to_pylist() == [4, 5]


def test_the_compiled_longest_path_declines_what_python_handles() -> None:
    """``dagpath`` takes dense ids without repeated edges, and answers None otherwise (the
    caller then runs Python); a cycle is an error, and malformed buffers are refused."""
    if dagpath is None:
        pytest.skip("cclq.query.dagpath is not built here (no C compiler at install)")

    def buffers(edges: list[tuple[int, int, float]]) -> tuple[bytes, bytes, bytes]:
        src, dst, weight = zip(*edges, strict=True)
        return (
            pa.array(src, pa.int64()).buffers()[1].to_pybytes(),
            pa.array(dst, pa.int64()).buffers()[1].to_pybytes(),
            pa.array(weight, pa.float64()).buffers()[1].to_pybytes(),
        )

    assert dagpath.longest_path(*buffers([(0, 1, 1.0), (1, 2, 1.0)])) == [0, 1]
    assert dagpath.longest_path(*buffers([(0, 1, 1.0), (0, 1, 2.0)])) is None  # repeated
    assert dagpath.longest_path(*buffers([(0, 10_000, 1.0)])) is None  # sparse ids
    assert dagpath.longest_path(*buffers([(-1, 1, 1.0)])) is None
    with pytest.raises(ValueError, match="cycle"):
        dagpath.longest_path(*buffers([(0, 1, 1.0), (1, 2, 1.0), (2, 1, 1.0)]))
    with pytest.raises(ValueError, match="one int64"):
        dagpath.longest_path(b"\0" * 8, b"\0" * 16, b"\0" * 8)
    # a path through sliced arrays reads each slice's own rows
    src, dst, weight = (
        pa.array(v, t) for v, t in (([7, 0, 1], pa.int64()), ([7, 1, 2], pa.int64()), ([0.0, 1.0, 1.0], pa.float64()))
    )
    assert longest_path_arrays(src.slice(1), dst.slice(1), weight.slice(1), pa.array([5, 6])).to_pylist() == [5, 6]


def test_critical_path_figure_by_hand(hand: list[Row]) -> None:
    """The report's figure from hand_cp_gpu's rows: one stacked bar (rank 0) with the four
    classes of the path, the launch delay's tooltip 28 us of 70 us; no rows: the reason."""
    from cclq.present.board.figures import critical_path_figure

    rows = [
        [r["rank"], r["bound_by"], r["duration_us"], r["percentage"], r["path_us"]]
        for r in hand
        if r["trace"] == "hand_cp_gpu"
    ]
    fig = critical_path_figure({"figures": {"critical_path": rows}})
    assert fig.svg is not None and fig.svg.count("rank 0") >= 1
    for label in ("CPU", "GPU compute", "launch delay", "gap between kernels"):
        assert f">{label}<" in fig.svg, label
    assert "28 us of 70 us" in fig.svg and "GPU communication" not in fig.svg
    empty = critical_path_figure(
        {
            "figures": {},
            "categories": [
                {
                    "metrics": [
                        {"metric": "hta_critical_path_breakdown", "reason": "no ProfilerStep annotation on the rank"}
                    ]
                }
            ],
        }
    )
    assert empty.svg is None and empty.caption == "n/a: no ProfilerStep annotation on the rank"


def test_only_rank_builds_one_ranks_path(tmp_path: Path) -> None:
    """hand_cp_gpu's graph as ranks 0 and 1 of one trace: only_rank=1 gives rank 1's
    rows alone, the same 70 µs path as worked out above."""
    for rank in (0, 1):
        trace = _hand_cp_gpu(KinetoTraceBuilder(rank=rank, world_size=2))
        trace.write(tmp_path / "in" / "two_ranks" / f"rank{rank}.json")
    wh = Warehouse(tmp_path / "wh")
    run_ingest([tmp_path / "in"], wh)
    con = connect(wh)
    try:
        every = run_metric(con, resolve("hta_critical_path_breakdown"), {}).to_pylist()
        one = run_metric(con, resolve("hta_critical_path_breakdown"), {"only_rank": "1"}).to_pylist()
    finally:
        con.close()
    assert {r["rank"] for r in every} == {0, 1}
    assert {r["rank"] for r in one} == {1}
    assert {r["bound_by"]: r["duration_us"] for r in one} == {
        "cpu_bound": 2,
        "gpu_kernel_launch_overhead": 28,
        "gpu_compute_bound": 35,
        "gpu_kernel_kernel_overhead": 5,
    }


def test_edges_are_numbered_in_htas_insertion_order(tmp_path: Path) -> None:
    """edge_no is the order HTA inserts the edges in (networkx breaks ties by it): the CPU
    threads in (pid, tid) order, each thread's ends in call-stack order, then the GPU
    edges kernel by kernel (its span, then its launch). Threads 5 (an annotation) and
    1000 (the ProfilerSteps) have no nodes and no edges. Worked out by hand from
    sql/views/hta_critical_path.sql's rules: thread 11's op b is one edge (start -> end);
    thread 12 holds a1, then a2 with its cudaLaunchKernel, 6 ends and 5 edges; kernel k
    (stream 7 empty before it) has its span and a launch edge."""
    g = KinetoTraceBuilder(rank=0)
    g.profiler_step(1, ts=0 * US, dur=100 * US)
    g.profiler_step(2, ts=100 * US, dur=100 * US)
    g.user_annotation("note", ts=20 * US, dur=5 * US, tid=5)
    g.cpu_op("b", ts=5 * US, dur=10 * US, tid=11)
    g.cpu_op("a1", ts=10 * US, dur=20 * US, tid=12)
    g.cpu_op("a2", ts=40 * US, dur=10 * US, tid=12)
    g.kernel("k", ts=60 * US, dur=10 * US, launch_ts=41 * US, launch_dur=2 * US, tid=12)
    g.write(tmp_path / "in" / "numbered" / "rank0.json")
    wh = Warehouse(tmp_path / "wh")
    run_ingest([tmp_path / "in"], wh)
    con = connect(wh)
    try:
        edges = con.execute(
            "SELECT e.edge_no, s.name, e.src_is_end, d.name, e.dst_is_end "
            "FROM hta_critical_path_edges AS e "
            "JOIN hta_events AS s ON (s.trace, s.rank, s.event_idx) = (e.trace, e.rank, e.src_event_idx) "
            "JOIN hta_events AS d ON (d.trace, d.rank, d.event_idx) = (e.trace, e.rank, e.dst_event_idx) "
            "ORDER BY e.edge_no"
        ).fetchall()
    finally:
        con.close()
    launch = "cudaLaunchKernel"
    assert edges == [
        (1, "b", False, "b", True),
        (2, "a1", False, "a1", True),
        (3, "a1", True, "a2", False),
        (4, "a2", False, launch, False),
        (5, launch, False, launch, True),
        (6, launch, True, "a2", True),
        (7, "k", False, "k", True),
        (8, launch, False, "k", False),
    ]


def test_sync_edges_give_htas_summary_on_htas_cuda_event_sync_trace(tmp_path: Path) -> None:
    """v2 builds HTA's CUDA sync edges: on HTA's cuda_event_sync trace (its first
    ProfilerStep, the metric's window) every class and percentage of HTA's own summary,
    recorded by tests/hta_golden/generate_notebooks.py (cell 10 of the critical path
    notebook run on that trace); v1 still says why it gives none."""
    import gzip
    import json

    from helpers.hta_notebooks import ANSWERS, BUNDLED

    with gzip.open(ANSWERS / "critical_path_analysis_cuda_event_sync.json.gz", "rt") as f:
        cell = next(c for c in json.load(f)["cells"] if c["cell"] == 10)["value"]
    golden = dict(zip(cell["index"]["values"], cell["values"]))
    assert "" in golden and len(golden) == 4  # HTA's classes: '', cpu, compute, launch
    wh = Warehouse(tmp_path / "wh")
    run_ingest([BUNDLED / "tests" / "data" / "critical_path" / "cuda_event_sync"], wh)
    con = connect(wh)
    try:
        rows = run_metric(con, resolve("hta_critical_path_breakdown", 2), {}).to_pylist()
        old = run_metric(con, resolve("hta_critical_path_breakdown", 1), {}).to_pylist()
    finally:
        con.close()
    got = {r["bound_by"]: r["percentage"] for r in rows}
    assert sorted(got) == sorted(golden)
    for k, v in golden.items():
        assert got[k] == pytest.approx(v, rel=1e-9, abs=1e-12), k
    assert [r["reason"] for r in old] == ["CUDA sync events (cuda_sync) on the rank: their edges are not built"]
