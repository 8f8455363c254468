"""HTA 0.5.0 parity: the hta_* metrics against Holistic Trace Analysis' own output.

The golden CSVs in ../shared/golden/hta/<folder>/ were written by HTA 0.5.0 on the
trace folders ../shared/traces/hta_<folder>. cclq promises parity for four HTA analyses
(the four `hta_*` metrics) and the load window under them; for each of the eight folders,
every number of these golden files is asserted, one parametrized case per folder:

  loaded_facts.csv           HTA's rows, GPU rows, streams and time span after its load
                             and tail filter (the window the four analyses read)
  temporal_breakdown.csv     get_temporal_breakdown       -> hta_temporal_breakdown
  comm_comp_overlap.csv      get_comm_comp_overlap        -> hta_comm_comp_overlap
  idle_time_breakdown.csv    get_idle_time_breakdown      -> hta_idle_time_breakdown
  kernel_type_breakdown.csv  get_gpu_kernel_breakdown's kernel_type_df
                                                          -> hta_kernel_type_breakdown

plus potential_stragglers.csv (only trace_filter_2rank has one: the other folders have
a single rank) against `straggler_rank`, whose definition differs; what is comparable
is asserted, see test_straggler_rank_agrees_with_hta_potential_stragglers.

The other golden files are outputs of HTA analyses outside those four; they are asserted
in tests/query/test_hta_analyses.py (kernel_breakdown*, idle_interval_stats, the launch stats,
queue length, time blocked on a full queue, memory bandwidth, user annotations, profiler
steps); the top-level vision_transformer_expected_from_hta_tests.csv has no trace folder of
ours.

Small hand-built traces pin each metric (and the HTA load rules in sql/views/hta.sql:
tail filter, µs rounding of float64 timestamps, the event-#0 quirk) to values worked
out on paper.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any

import duckdb
import pytest
from helpers.paths import GOLDEN, require_shared
from helpers.warehouse import run_ingest

from cclq.query.metrics import run_metric
from cclq.query.registry import resolve
from cclq.query.session import connect
from cclq.store.warehouse import Warehouse
from cclq.synth.kineto import KinetoTraceBuilder, Micros

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

Row = dict[str, Any]


def _metric_rows(con: duckdb.DuckDBPyConnection, name: str) -> list[Row]:
    return run_metric(con, resolve(name)).to_pylist()


def _golden(folder: str, name: str) -> list[dict[str, str]]:
    with open(GOLDEN / folder / f"{name}.csv", newline="") as f:
        return list(csv.DictReader(f))


def _num(text: str) -> float | None:
    return None if text == "" else float(text)


def _assert_us(actual: float | None, expected: float, what: str) -> None:
    """Exact when HTA's value is a whole number of µs, else to the microsecond."""
    assert actual is not None, f"{what}: no value, HTA has {expected}"
    if float(expected).is_integer():
        assert actual == expected, f"{what}: {actual} != HTA {expected}"
    else:
        assert abs(actual - expected) <= 1, f"{what}: {actual} vs HTA {expected}"


# ----------------------------------------------------------------------------------------
# Real traces against HTA's golden output
# ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real(tmp_path_factory) -> dict[str, list[Row]]:
    traces = require_shared()
    if not GOLDEN.is_dir():
        pytest.skip(f"HTA golden output not available ({GOLDEN} is absent)")
    wh = Warehouse(tmp_path_factory.mktemp("hta_real") / "wh")
    run_ingest([traces / f"hta_{f}" for f in FOLDERS], wh, jobs=2)
    con = connect(wh)
    try:
        out = {
            name: _metric_rows(con, name)
            for name in (
                "hta_temporal_breakdown",
                "hta_comm_comp_overlap",
                "hta_idle_time_breakdown",
                "hta_kernel_type_breakdown",
                "straggler_rank",
            )
        }
        out["facts"] = [
            dict(zip(("trace", "rank", "n_rows", "n_gpu_rows", "n_streams", "min_ts_us", "max_end_us", "origin_us"), r))
            for r in con.execute("SELECT * FROM hta_rank_facts").fetchall()
        ]
    finally:
        con.close()
    return out


def _of(rows: list[Row], folder: str) -> list[Row]:
    return [r for r in rows if r["trace"] == f"hta_{folder}"]


@pytest.mark.slow
@pytest.mark.parametrize("folder", FOLDERS)
def test_loaded_window_matches_hta(real: dict[str, list[Row]], folder: str) -> None:
    """HTA's row counts after its load filter and tail filter (loaded_facts.csv)."""
    mine = {r["rank"]: r for r in _of(real["facts"], folder)}
    golden = _golden(folder, "loaded_facts")
    assert sorted(mine) == sorted(int(g["rank"]) for g in golden)
    for g in golden:
        r = mine[int(g["rank"])]
        assert r["n_rows"] == int(g["n_rows_after_filter"])
        assert r["n_gpu_rows"] == int(g["n_gpu_rows"])
        assert r["n_streams"] == int(g["n_streams"])
        assert r["min_ts_us"] == float(g["min_ts"])
        assert r["max_end_us"] == float(g["max_end"])
        assert r["origin_us"] == float(g["global_min_ts_offset"])


@pytest.mark.slow
@pytest.mark.parametrize("folder", FOLDERS)
def test_temporal_breakdown_matches_hta(real: dict[str, list[Row]], folder: str) -> None:
    mine = {r["rank"]: r for r in _of(real["hta_temporal_breakdown"], folder)}
    golden = _golden(folder, "temporal_breakdown")
    assert sorted(mine) == sorted(int(g["rank"]) for g in golden)
    for g in golden:
        r = mine[int(g["rank"])]
        assert r["reason"] is None
        _assert_us(r["value"], float(g["kernel_time(us)"]), "value")
        for col in ("idle_time", "compute_time", "non_compute_time", "kernel_time"):
            _assert_us(r[f"{col}_us"], float(g[f"{col}(us)"]), col)
        for col in ("idle_time_pctg", "compute_time_pctg", "non_compute_time_pctg"):
            assert abs(r[col] - float(g[col])) <= 0.01, (col, r[col], g[col])


@pytest.mark.slow
@pytest.mark.parametrize("folder", FOLDERS)
def test_comm_comp_overlap_matches_hta(real: dict[str, list[Row]], folder: str) -> None:
    mine = {r["rank"]: r for r in _of(real["hta_comm_comp_overlap"], folder)}
    golden = _golden(folder, "comm_comp_overlap")
    assert sorted(mine) == sorted(int(g["rank"]) for g in golden)
    for g in golden:
        r = mine[int(g["rank"])]
        expected = _num(g["comp_comm_overlap_pctg"])
        if expected is None:  # HTA: NaN (no communication kernels)
            assert r["value"] is None and r["reason"], r
        else:
            assert r["value"] is not None and abs(r["value"] - expected) <= 0.01, (r["value"], expected)


_CATEGORIES = ("host_wait", "kernel_wait", "other")


@pytest.mark.slow
@pytest.mark.parametrize("folder", FOLDERS)
def test_idle_time_breakdown_matches_hta(real: dict[str, list[Row]], folder: str) -> None:
    mine = {(r["rank"], r["stream"]): r for r in _of(real["hta_idle_time_breakdown"], folder)}
    golden = _golden(folder, "idle_time_breakdown")
    # HTA reports the ranks asked for (here: all of them); every stream of those ranks
    golden_ranks = {int(g["rank"]) for g in golden}
    assert {k for k in mine if k[0] in golden_ranks} == {(int(g["rank"]), int(g["stream"])) for g in golden}
    for (rank, stream), r in mine.items():
        if rank not in golden_ranks:
            continue
        rows = {g["idle_category"]: g for g in golden if (int(g["rank"]), int(g["stream"])) == (rank, stream)}
        for cat in _CATEGORIES:
            if cat not in rows:  # HTA lists only the categories that occur
                assert r[f"{cat}_us"] is None, (rank, stream, cat, r[f"{cat}_us"])
                continue
            _assert_us(r[f"{cat}_us"], float(rows[cat]["idle_time"]), f"{rank}/{stream}/{cat}")
            ratio = _num(rows[cat]["idle_time_ratio"])
            if ratio is None:  # HTA: NaN (0/0)
                assert r[f"{cat}_ratio"] is None
            else:
                assert abs(r[f"{cat}_ratio"] - ratio) <= 0.01, (rank, stream, cat, r[f"{cat}_ratio"], ratio)
        _assert_us(r["value"], sum(float(g["idle_time"]) for g in rows.values()), f"{rank}/{stream} total")


@pytest.mark.slow
@pytest.mark.parametrize("folder", FOLDERS)
def test_kernel_type_breakdown_matches_hta(real: dict[str, list[Row]], folder: str) -> None:
    mine = {r["kernel_type"]: r for r in _of(real["hta_kernel_type_breakdown"], folder)}
    golden = {g["kernel_type"]: g for g in _golden(folder, "kernel_type_breakdown")}
    # the same labels, including HTA's zero-length ones ("COMPUTATION overlapping MEMORY,0")
    assert sorted(mine) == sorted(golden)
    for label, g in golden.items():
        _assert_us(mine[label]["value"], float(g["sum"]), label)
        # HTA writes round(100 * sum / total, 1): the same one decimal, exactly
        assert round(mine[label]["percentage"], 1) == float(g["percentage"]), (label, mine[label], g)


@pytest.mark.slow
def test_straggler_rank_agrees_with_hta_potential_stragglers(real: dict[str, list[Row]]) -> None:
    """HTA's get_potential_stragglers and cclq's straggler_rank answer the same question
    ("which rank holds the others up?") by different rules, so only the rank they name is
    compared.

    HTA (hta-semantics.md 3.7): within its analysed window (here ProfilerStep#551 only),
    the last `ncclKernel*` on each (rank, stream) that lasts >= 1 % of the mean iteration;
    of the (stream, kernel name) pairs, the one whose duration varies most across ranks;
    per iteration the ranks whose start is latest on it are flagged; the most-flagged
    ranks are the candidates (potential_stragglers.csv lists the rank it found).
    cclq: collectives are matched across ranks (Seq, else order within group, type and
    size), and the rank that starts last in the most matched collectives over the whole
    trace is the straggler. HTA's per-rank flag counts are not in the CSV and cclq's
    late_count / share have no HTA counterpart, so neither is compared."""
    golden = [int(g["straggler_rank"]) for g in _golden("trace_filter_2rank", "potential_stragglers")]
    assert len(golden) == 1, golden  # one candidate named
    (mine,) = _of(real["straggler_rank"], "trace_filter_2rank")
    assert mine["reason"] is None
    assert mine["value"] == golden[0]


# ----------------------------------------------------------------------------------------
# Hand-built traces
# ----------------------------------------------------------------------------------------

US = 1_000  # ns per µs; the builder takes ns
NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"


def _sync_event(b: KinetoTraceBuilder, name: str, ts: int, dur: int, stream: int, corr: int) -> None:
    """A Kineto cuda_sync event on a GPU stream, linked to its runtime call by `corr`."""
    b.raw(
        {
            "ph": "X",
            "cat": "cuda_sync",
            "name": name,
            "pid": b.device,
            "tid": stream,
            "ts": Micros(ts),
            "dur": Micros(dur),
            "args": {"cuda_sync_kind": name, "device": b.device, "context": 1, "stream": stream, "correlation": corr},
        }
    )


def _build_window(root: Path) -> None:
    """Two ranks, ProfilerStep#1 [0,100) and #2 [100,200) µs on both: HTA analyses the CPU
    rows before 100 µs and the GPU rows they launched."""
    b = KinetoTraceBuilder(rank=0, world_size=2)
    b.profiler_step(1, ts=0, dur=100 * US)
    b.profiler_step(2, ts=100 * US, dur=100 * US)
    b.kernel("gemm_a", ts=10 * US, dur=20 * US, launch_ts=5 * US)  # COMP [10,30)
    b.nccl_kernel("allreduce", ts=25 * US, dur=15 * US, stream=20, launch_ts=8 * US, kernel_name=NCCL)  # COMM [25,40)
    b.memcpy(ts=50 * US, dur=10 * US, nbytes=4096, launch_ts=12 * US)  # MEMORY [50,60)
    wait = b.runtime("cudaStreamWaitEvent", ts=14 * US, dur=1 * US)
    _sync_event(b, "Stream Wait Event", 70 * US, 5 * US, 7, wait)  # COMP in 0.5.0 [70,75)
    b.kernel("gemm_b", ts=120 * US, dur=30 * US, launch_ts=95 * US)  # kept: launched < 100
    b.kernel("gemm_c", ts=160 * US, dur=10 * US, launch_ts=150 * US)  # dropped: launched in the last step
    b.write(root / "hand_window" / "rank0.json")
    b = KinetoTraceBuilder(rank=1, world_size=2)
    b.profiler_step(1, ts=0, dur=100 * US)
    b.profiler_step(2, ts=100 * US, dur=100 * US)
    b.kernel("gemm_a", ts=10 * US, dur=40 * US, launch_ts=5 * US)  # COMP [10,50)
    b.memset(ts=40 * US, dur=20 * US, nbytes=4096, stream=8, launch_ts=6 * US)  # MEMORY [40,60)
    b.write(root / "hand_window" / "rank1.json")


# Absolute (epoch) µs timestamps where a float64 is only accurate to 0.25 µs.
T0_NS = 1_712_195_495_502_095_000


def _build_rounding(root: Path) -> list[tuple[int, int]]:
    """Sub-µs kernels at epoch times, no ProfilerStep (no tail filter). Returns the ns
    (ts, dur) of each kernel as written."""
    kernels = [(T0_NS - 10 * US + 400, 300), (T0_NS + 123, 2 * US), (T0_NS + 5 * US + 400, 3 * US)]
    b = KinetoTraceBuilder(rank=0, base_time_ns=None)
    for i, (ts, dur) in enumerate(kernels):
        b.kernel(f"gemm_{i}", ts=ts, dur=dur, launch_ts=T0_NS - 20 * US + i * US)
    b.write(root / "hand_rounding" / "rank0.json")
    return kernels


def _build_idle(root: Path) -> None:
    """One rank, no ProfilerStep; kernels on streams 7 and 20."""
    b = KinetoTraceBuilder(rank=0)
    b.cpu_op("aten::first_event", ts=150 * US, dur=1 * US)  # raw event #0 (HTA quirk below)
    b.kernel("k1", ts=10 * US, dur=10 * US, launch_ts=0)  # [10,20) first: other, no gap
    b.kernel("k2", ts=25 * US, dur=10 * US, launch_ts=5 * US)  # gap 5, launched early: kernel_wait
    b.kernel("k3", ts=45 * US, dur=10 * US, launch_ts=40 * US)  # gap 10, launched after 35: host_wait
    b.kernel("k4", ts=100 * US, dur=10 * US, launch_ts=41 * US)  # gap 45 >= 30: other
    b.memset(ts=108 * US, dur=4 * US, nbytes=64, launch_ts=42 * US)  # overlaps k4: gap -2, kernel_wait
    sync = b.runtime("cudaStreamSynchronize", ts=43 * US, dur=80 * US)
    _sync_event(b, "Stream Sync", 115 * US, 1 * US, 7, sync)  # cuda_sync: not a kernel here
    b.kernel("k7", ts=200 * US, dur=10 * US)  # no launch: joins event #0 (150 µs)
    b.kernel("k_other_stream", ts=30 * US, dur=10 * US, stream=20, launch_ts=1 * US)
    b.write(root / "hand_idle" / "rank0.json")


@pytest.fixture(scope="module")
def hand(tmp_path_factory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("hta_hand")
    _build_window(root / "in")
    kernels = _build_rounding(root / "in")
    _build_idle(root / "in")
    wh = Warehouse(root / "wh")
    run_ingest([root / "in"], wh)
    con = connect(wh)
    try:
        rows = {
            name: _metric_rows(con, name)
            for name in (
                "hta_temporal_breakdown",
                "hta_comm_comp_overlap",
                "hta_idle_time_breakdown",
                "hta_kernel_type_breakdown",
            )
        }
    finally:
        con.close()
    return {"rows": rows, "rounding_kernels": kernels}


def _one(rows: list[Row], trace: str, rank: int) -> Row:
    (r,) = [r for r in rows if r["trace"] == trace and r["rank"] == rank]
    return r


def test_temporal_breakdown_by_hand(hand: dict[str, Any]) -> None:
    rows = hand["rows"]["hta_temporal_breakdown"]
    r0 = _one(rows, "hand_window", 0)
    # rank 0, µs. Kept GPU rows: [10,30) [25,40) [50,60) [70,75) [120,150) (gemm_b was
    # launched at 95 < 100, the start of the last step; gemm_c at 150 is dropped).
    # union = [10,40) + [50,60) + [70,75) + [120,150) = 30 + 10 + 5 + 30 = 75
    # kernel_time = 150 - 10 = 140, idle = 140 - 75 = 65
    # compute = [10,30) + [70,75) (Stream Wait Event) + [120,150) = 55
    # non_compute = 140 - 55 - 65 = 20 (comm [30,40) + memcpy [50,60))
    assert (
        r0["value"],
        r0["kernel_time_us"],
        r0["idle_time_us"],
        r0["compute_time_us"],
        r0["non_compute_time_us"],
    ) == (140, 140, 65, 55, 20)
    # 65/140 = 46.43 %, 55/140 = 39.29 %, 20/140 = 14.29 %
    assert (r0["idle_time_pctg"], r0["compute_time_pctg"], r0["non_compute_time_pctg"]) == (46.43, 39.29, 14.29)
    r1 = _one(rows, "hand_window", 1)
    # rank 1: [10,50) gemm + [40,60) memset: kernel_time 50, no idle, compute 40, non-compute 10
    assert (r1["kernel_time_us"], r1["idle_time_us"], r1["compute_time_us"], r1["non_compute_time_us"]) == (
        50,
        0,
        40,
        10,
    )


def test_float64_rounding_by_hand(hand: dict[str, Any]) -> None:
    """HTA rounds float64 µs: ts = ceil(float(ts)), end = floor(float(ts) + float(dur)).
    At 1.7e15 µs a float64 is a multiple of 0.25, so:
      ...085.400 -> 085.5 -> ts 086; + 0.3 -> 085.75 -> end 085: dur -1 (HTA's sub-µs quirk)
      ...095.123 -> 095.0 -> ts 095 (the exact decimal would give 096); + 2 -> end 097
      ...100.400 -> 100.5 -> ts 101; + 3 -> end 103
    HTA's merge keeps the -1 interval: union = -1 + 2 + 2 = 3, kernel_time = 103 - 086 = 17,
    idle = 14, compute = 3, non-compute = 0."""
    spans = []
    for ts_ns, dur_ns in hand["rounding_kernels"]:  # the same arithmetic from the written text
        ts_f = float(Micros(ts_ns).text)
        spans.append((math.ceil(ts_f), math.floor(ts_f + float(Micros(dur_ns).text))))
    t0 = T0_NS // US
    assert [(ts - t0, end - t0) for ts, end in spans] == [(-9, -10), (0, 2), (6, 8)]
    r = _one(hand["rows"]["hta_temporal_breakdown"], "hand_rounding", 0)
    assert (r["kernel_time_us"], r["idle_time_us"], r["compute_time_us"], r["non_compute_time_us"]) == (17, 14, 3, 0)


def test_comm_comp_overlap_by_hand(hand: dict[str, Any]) -> None:
    rows = hand["rows"]["hta_comm_comp_overlap"]
    r0 = _one(rows, "hand_window", 0)
    # comm [25,40) = 15 µs; compute [10,30) covers [25,30) = 5 µs -> 100 * 5/15 %
    assert r0["comm_us"] == 15 and r0["overlap_us"] == 5
    assert r0["value"] == pytest.approx(100 * 5 / 15)
    r1 = _one(rows, "hand_window", 1)
    assert r1["value"] is None and "no communication" in r1["reason"]  # HTA: NaN


def test_kernel_type_breakdown_by_hand(hand: dict[str, Any]) -> None:
    rows = {r["kernel_type"]: r for r in hand["rows"]["hta_kernel_type_breakdown"] if r["trace"] == "hand_window"}
    # rank 0: COMP alone [10,25) + [70,75) + [120,150) = 50; COMP+COMM [25,30) = 5;
    #         COMM alone [30,40) = 10; MEMORY [50,60) = 10
    # rank 1: COMP alone [10,40) = 30; COMP+MEMORY [40,50) = 10; MEMORY alone [50,60) = 10
    # summed: 80, 5, 10, 20, 10; total 125
    expected = {
        "COMPUTATION": (80, 64.0),
        "COMPUTATION overlapping COMMUNICATION": (5, 4.0),
        "COMMUNICATION": (10, 8.0),
        "MEMORY": (20, 16.0),
        "COMPUTATION overlapping MEMORY": (10, 8.0),
    }
    assert {k: (r["value"], r["percentage"]) for k, r in rows.items()} == expected


def test_idle_time_breakdown_by_hand(hand: dict[str, Any]) -> None:
    rows = {r["stream"]: r for r in hand["rows"]["hta_idle_time_breakdown"] if r["trace"] == "hand_idle"}
    assert sorted(rows) == [7, 20]
    s7 = rows[7]
    # stream 7 in ts order (the Stream Sync is cuda_sync, not a kernel, so it is skipped):
    #   k1 [10,20) first -> other, no gap
    #   k2 [25,35): gap 5, launch 5 < 20 -> kernel_wait 5
    #   k3 [45,55): launch 40 > 35 -> host_wait 10
    #   k4 [100,110): launch 41 < 55, gap 45 >= 30 -> other 45
    #   memset [108,112): gap -2 -> kernel_wait -2
    #   k7 [200,210): no launch; HTA joins raw event #0 (aten::first_event, 150 > 112) -> host_wait 88
    # host 98, kernel_wait 3, other 45; total 146
    assert (s7["value"], s7["host_wait_us"], s7["kernel_wait_us"], s7["other_us"]) == (146, 98, 3, 45)
    # 98/146 = 0.671, 3/146 = 0.021, 45/146 = 0.308
    assert (s7["host_wait_ratio"], s7["kernel_wait_ratio"], s7["other_ratio"]) == (0.67, 0.02, 0.31)
    s20 = rows[20]
    # a single kernel: only HTA's "other" row, 0 µs, ratio NaN (0/0)
    assert (s20["value"], s20["host_wait_us"], s20["kernel_wait_us"], s20["other_us"], s20["other_ratio"]) == (
        0,
        None,
        None,
        0,
        None,
    )
