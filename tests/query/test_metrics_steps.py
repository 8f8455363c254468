"""Steps from every source (CPU track, GPU track, XLA profiles) and the per-step
metrics on each: avg_step_time, coll_call_num, break_down_steps; coll_call_num on
CPU-only ranks; total_communication_time and communication_overlap_ratio with
zero-duration communication kernels.

Every expected number is worked out by hand from the events placed below (Kineto) or
from the generator's parameters (cclq.synth.xla), never from cclq's output.
"""

from __future__ import annotations

import gzip
import json
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from helpers.paths import require_shared
from helpers.warehouse import metric_rows, query, run_ingest

from cclq.store.warehouse import Warehouse
from cclq.synth.kineto import KinetoTraceBuilder, Micros
from cclq.synth.xla import TpuTraceSpec, generate_tpu_trace, write_tpu_trace

US = 1_000  # ns per microsecond
TOL = 1e-15
NO_STEPS = "no steps (no ProfilerStep#N annotations, no XLA steps)"
NEITHER = "no GPU kernels, no CPU-side collective ops and no XLA ops"
OLD_AG = "ncclKernel_AllGather_RING_LL_Sum_float(ncclWorkElem)"
OLD_RS = "ncclKernel_ReduceScatter_RING_LL_Sum_float(ncclWorkElem)"


# ----------------------------------------------------------------------------- traces
def build_gpu_track_steps(folder: Path) -> None:
    """`gpu_steps`: ProfilerStep#5..7 on the GPU annotation track only (us):
    S5 [100,200)  S6 [200,260)  S7 [260,400). Kernels, all LAUNCHED at 5-9 us (before
    every step, so launch-based attribution would find none):
      GEMM [110,150) s7; ncclDevKernel AllReduce [150,190) s20       -> S5
      old-name ncclKernel_AllGather [210,230) s20                    -> S6
      GEMM [270,300) s7; old-name ncclKernel_ReduceScatter [300,350) -> S7
      ncclDevKernel AllReduce [450,460)                              -> no step
    """
    b = KinetoTraceBuilder(rank=0, world_size=2)
    for n, ts, dur in ((5, 100, 100), (6, 200, 60), (7, 260, 140)):
        b.gpu_user_annotation(f"ProfilerStep#{n}", ts * US, dur * US, stream=7)
    b.kernel("ampere_sgemm_128x64_tn", 110 * US, 40 * US, stream=7, launch_ts=5 * US)
    b.nccl_kernel("allreduce", 150 * US, 40 * US, stream=20, launch_ts=6 * US)
    b.nccl_kernel("allgather", 210 * US, 20 * US, stream=20, launch_ts=7 * US, kernel_name=OLD_AG)
    b.kernel("ampere_sgemm_128x64_tn", 270 * US, 30 * US, stream=7, launch_ts=8 * US)
    b.nccl_kernel("reduce_scatter", 300 * US, 50 * US, stream=20, launch_ts=9 * US, kernel_name=OLD_RS)
    b.nccl_kernel("allreduce", 450 * US, 10 * US, stream=20, launch_ts=10 * US)
    b.write(folder / "rank0.json")


def build_old_names_cpu_steps(folder: Path) -> None:
    """`old_names`: CPU-track steps S1 [0,100) S2 [100,200) us; comm kernels with the old
    ncclKernel_* names and the new ncclDevKernel_* names, counted by launch:
      S1: ncclKernel_AllGather (launch 10) + ncclDevKernel AllReduce (launch 20)  -> 2
      S2: ncclKernel_ReduceScatter (launch 150), runs after S2 ended              -> 1
    The step is also on the GPU track (identical times): the CPU track wins."""
    b = KinetoTraceBuilder(rank=0, world_size=2)
    b.profiler_step(1, 0, 100 * US, gpu_stream=7)
    b.profiler_step(2, 100 * US, 100 * US, gpu_stream=7)
    b.nccl_kernel("allgather", 30 * US, 10 * US, launch_ts=10 * US, kernel_name=OLD_AG)
    b.nccl_kernel("allreduce", 40 * US, 10 * US, launch_ts=20 * US)
    b.nccl_kernel("reduce_scatter", 210 * US, 10 * US, launch_ts=150 * US, kernel_name=OLD_RS)
    b.write(folder / "rank0.json")


def build_cpu_only(folder: Path) -> None:
    """`cpu_ranks`: no GPU activity. Rank 0, steps S1 [0,100) S2 [100,200) us:
      S1: c10d::allreduce_ [10,40) > record_param_comms(allreduce) [12,38)
          > nccl:all_reduce [15,35)                                   -> 1 call
          record_param_comms(wait) [45,47)                            -> no call
          c10d::broadcast_ [50,60) > record_param_comms(broadcast) [51,59)
          > nccl:broadcast [52,58)                                    -> 1 call
      S2: c10d::allgather_ [110,130) > gloo:all_gather [112,128)       -> 1 call
          record_param_comms without a Collective name [150,152)      -> no call
          c10d::barrier [160,170) on another thread (tid 2)           -> 1 call
          gloo:barrier [172,175) on a Gloo worker thread (tid 4): the
          backend running that barrier, not a call of its own        -> no call
          record_param_comms(allreduce) [180,190) alone (tid 3)       -> 1 call
      outside every step: c10d::allreduce_ [250,260)                 -> not counted
    Rank 1: steps S1 [0,100) and CPU work, no collectives -> not applicable.
    Rank 2: steps S1 [0,100); only backend records: nccl:all_reduce [10,20) and
    gloo:broadcast [30,40) on a worker thread -> 2 calls (no call records at all)."""
    b = KinetoTraceBuilder(rank=0, world_size=3)
    b.profiler_step(1, 0, 100 * US)
    b.profiler_step(2, 100 * US, 100 * US)
    b.cpu_op("c10d::allreduce_", 10 * US, 30 * US)
    b.cpu_op("record_param_comms", 12 * US, 26 * US, args={"Collective name": "allreduce"})
    b.user_annotation("nccl:all_reduce", 15 * US, 20 * US)
    b.cpu_op("record_param_comms", 45 * US, 2 * US, args={"Collective name": "wait"})
    b.cpu_op("c10d::broadcast_", 50 * US, 10 * US)
    b.cpu_op("record_param_comms", 51 * US, 8 * US, args={"Collective name": "broadcast"})
    b.user_annotation("nccl:broadcast", 52 * US, 6 * US)
    b.cpu_op("c10d::allgather_", 110 * US, 20 * US)
    b.user_annotation("gloo:all_gather", 112 * US, 16 * US)
    b.cpu_op("record_param_comms", 150 * US, 2 * US)
    b.cpu_op("c10d::barrier", 160 * US, 10 * US, tid=2)
    b.user_annotation("gloo:barrier", 172 * US, 3 * US, tid=4)
    b.cpu_op("record_param_comms", 180 * US, 10 * US, args={"Collective name": "allreduce"}, tid=3)
    b.cpu_op("c10d::allreduce_", 250 * US, 10 * US)
    b.write(folder / "rank0.json")
    b = KinetoTraceBuilder(rank=1, world_size=3)
    b.profiler_step(1, 0, 100 * US)
    b.cpu_op("aten::add", 10 * US, 5 * US)
    b.write(folder / "rank1.json")
    b = KinetoTraceBuilder(rank=2, world_size=3)
    b.profiler_step(1, 0, 100 * US)
    b.user_annotation("nccl:all_reduce", 10 * US, 10 * US)
    b.user_annotation("gloo:broadcast", 30 * US, 10 * US, tid=4)
    b.write(folder / "rank2.json")


def build_few_steps(root: Path) -> None:
    """`one_step`: ProfilerStep#3 of 7 us, a 3 us kernel and a 50 us Stream Sync
    (cuda_sync, not a kernel). `two_steps`: ProfilerStep#1 10 us and #2 14 us."""
    b = KinetoTraceBuilder(rank=0, world_size=1)
    b.profiler_step(3, 0, 7 * US)
    b.kernel("ampere_sgemm_128x64_tn", 1 * US, 3 * US, stream=7, launch_ts=500)
    # as CUPTI writes it (hta_alexnet): on the stream, with a correlation id
    b.raw(
        {
            "ph": "X",
            "cat": "cuda_sync",
            "name": "Stream Sync",
            "pid": b.device,
            "tid": 7,
            "ts": Micros(5 * US),
            "dur": Micros(50 * US),
            "args": {"cuda_sync_kind": "Stream Sync", "stream": 7, "correlation": 99, "device": b.device},
        }
    )
    b.write(root / "one_step" / "rank0.json")
    b = KinetoTraceBuilder(rank=0, world_size=1)
    b.profiler_step(1, 0, 10 * US)
    b.profiler_step(2, 10 * US, 14 * US)
    b.write(root / "two_steps" / "rank0.json")


def build_zero_comm(folder: Path) -> None:
    """`zero_comm`: a GEMM [0,10) us and an all-reduce kernel of zero duration at 20 us."""
    b = KinetoTraceBuilder(rank=0, world_size=1)
    b.kernel("ampere_sgemm_128x64_tn", 0, 10 * US, stream=7)
    b.nccl_kernel("allreduce", 20 * US, 0, stream=20)
    b.write(folder / "rank0.json")


@pytest.fixture(scope="module")
def kwh(tmp_path_factory) -> Warehouse:
    root = tmp_path_factory.mktemp("steps")
    traces = root / "in"
    build_gpu_track_steps(traces / "gpu_steps")
    build_old_names_cpu_steps(traces / "old_names")
    build_cpu_only(traces / "cpu_ranks")
    build_few_steps(traces)
    build_zero_comm(traces / "zero_comm")
    wh = Warehouse(root / "wh")
    report = run_ingest([traces], wh)
    assert not report.failed
    return wh


_CACHE: dict[tuple[str, str], list[dict[str, Any]]] = {}


def rows(wh: Warehouse, metric: str, trace: str) -> list[dict[str, Any]]:
    key = (str(wh.root), metric)
    if key not in _CACHE:
        _CACHE[key] = metric_rows(wh, metric)
    return [r for r in _CACHE[key] if r["trace"] == trace]


def by_key(wh: Warehouse, metric: str, trace: str) -> dict[tuple, dict[str, Any]]:
    found = rows(wh, metric, trace)
    out = {(r["rank"], r["step"]): r for r in found}
    assert len(out) == len(found)
    return out


# ------------------------------------------------------------------------ GPU-track steps
def test_steps_from_the_gpu_track_when_the_cpu_track_has_none(kwh):
    got = query(kwh, "SELECT step, ts_ns, dur_ns, source, records FROM steps WHERE trace = 'gpu_steps' ORDER BY step")
    base = query(kwh, "SELECT min(ts_ns) FROM steps WHERE trace = 'gpu_steps'")[0][0]
    assert [(s, ts - base, d, src, t) for s, ts, d, src, t in got] == [
        (5, 0, 100 * US, "gpu_annotation", 1),
        (6, 100 * US, 60 * US, "gpu_annotation", 1),
        (7, 160 * US, 140 * US, "gpu_annotation", 1),
    ]
    # both tracks: the CPU track wins (one row per step, not two)
    assert query(kwh, "SELECT DISTINCT source, count(*) FROM steps WHERE trace = 'old_names' GROUP BY ALL") == [
        ("cpu_annotation", 2)
    ]


def test_avg_step_time_on_gpu_track_steps(kwh):
    (row,) = rows(kwh, "avg_step_time", "gpu_steps")
    # 100, 60, 140 us: the inner step alone
    assert row["value"] == pytest.approx(60e-6, abs=TOL)
    assert (row["steps_used"], row["steps_seen"], row["source"]) == (1, 3, "gpu_annotation")


def test_coll_call_num_on_gpu_track_steps_counts_by_kernel_start(kwh):
    got = by_key(kwh, "coll_call_num", "gpu_steps")
    assert {k: v["value"] for k, v in got.items()} == {(0, 5): 1, (0, 6): 1, (0, 7): 1}
    assert {(v["source"], v["step_source"]) for v in got.values()} == {("gpu_kernels", "gpu_annotation")}


def test_break_down_steps_on_gpu_track_steps(kwh):
    got = by_key(kwh, "break_down_steps", "gpu_steps")
    # S5: GEMM 40 + comm 40; S6: comm 20; S7: GEMM 30 + comm 50 (us)
    expected = {5: (80, 40, 40), 6: (20, 20, 0), 7: (80, 50, 30)}
    assert set(got) == {(0, s) for s in expected}
    for s, (total, comm, gemm) in expected.items():
        row = got[0, s]
        assert row["value"] == pytest.approx(total * 1e-6, abs=TOL)
        assert row["comm_s"] == pytest.approx(comm * 1e-6, abs=TOL)
        assert row["dense_gemm_s"] == pytest.approx(gemm * 1e-6, abs=TOL)
        assert row["step_source"] == "gpu_annotation"


def test_coll_call_num_counts_old_and_new_nccl_kernel_names(kwh):
    got = by_key(kwh, "coll_call_num", "old_names")
    assert {k: v["value"] for k, v in got.items()} == {(0, 1): 2, (0, 2): 1}
    assert {v["step_source"] for v in got.values()} == {"cpu_annotation"}
    types = query(kwh, "SELECT name, coll_type FROM gpu_ops_classified WHERE trace = 'old_names' ORDER BY ts_ns")
    assert [t for _, t in types] == ["all_gather", "all_reduce", "reduce_scatter"]
    assert [n.split("_")[0] for n, _ in types] == ["ncclKernel", "ncclDevKernel", "ncclKernel"]


# ----------------------------------------------------------------------- CPU-only ranks
def test_coll_call_num_on_cpu_only_ranks_counts_outermost_collective_ops(kwh):
    got = by_key(kwh, "coll_call_num", "cpu_ranks")
    assert got[0, 1]["value"] == 2 and got[0, 2]["value"] == 3
    assert {got[0, s]["source"] for s in (1, 2)} == {"cpu_ops"}
    row = got[1, None]  # steps, but neither GPU kernels nor CPU collectives
    assert row["value"] is None and row["reason"] == NEITHER
    assert got[2, 1]["value"] == 2 and got[2, 1]["source"] == "cpu_ops"  # backend records only


def test_cpu_collective_calls_are_the_outermost_typed_ops(kwh):
    calls = query(
        kwh,
        """SELECT name, coll_type FROM cpu_collective_calls_with(1, files)
                        WHERE trace = 'cpu_ranks' AND rank = 0 ORDER BY ts_ns""",
    )
    assert calls == [
        ("c10d::allreduce_", "all_reduce"),
        ("c10d::broadcast_", "broadcast"),
        ("c10d::allgather_", "all_gather"),
        ("c10d::barrier", "barrier"),
        ("record_param_comms", "all_reduce"),
        ("c10d::allreduce_", "all_reduce"),
    ]
    # cpu_collectives keeps every matching op: rank 0 3 + 1 + 3 + 2 + 1 + 1 + 1 + 1 + 1 = 14
    # (the two waits untyped), rank 2 two
    assert query(
        kwh,
        "SELECT rank, count(*), count(coll_type) FROM cpu_collectives WHERE trace = 'cpu_ranks' "
        "GROUP BY ALL ORDER BY 1",
    ) == [(0, 14, 12), (2, 2, 2)]
    assert query(
        kwh,
        "SELECT name FROM cpu_collective_calls_with(1, files) WHERE trace = 'cpu_ranks' AND rank = 2 ORDER BY ts_ns",
    ) == [("nccl:all_reduce",), ("gloo:broadcast",)]


# -------------------------------------------------------------------------- few steps
def test_avg_step_time_with_one_and_two_steps_keeps_them_all(kwh):
    (one,) = rows(kwh, "avg_step_time", "one_step")
    assert one["value"] == pytest.approx(7e-6, abs=TOL)
    assert (one["steps_used"], one["steps_seen"]) == (1, 1)
    (two,) = rows(kwh, "avg_step_time", "two_steps")
    assert two["value"] == pytest.approx(12e-6, abs=TOL)  # (10 + 14) / 2
    assert (two["steps_used"], two["steps_seen"]) == (2, 2)


def test_sync_activities_are_gpu_ops_but_not_kernels(kwh):
    got = query(kwh, "SELECT kind, kernel_class, dur_ns FROM gpu_ops_classified WHERE trace = 'one_step' ORDER BY 1")
    assert got == [("kernel", "compute", 3 * US), ("sync", "sync", 50 * US)]
    # kernel-only metrics see the 3 us kernel alone
    (row,) = rows(kwh, "total_kernel_time", "one_step")
    assert row["value"] == pytest.approx(3e-6, abs=TOL)
    (row,) = rows(kwh, "aggregate_gpu_utilization", "one_step")
    assert row["value"] == pytest.approx(1.0)
    (row,) = rows(kwh, "break_down_steps", "one_step")
    assert row["value"] == pytest.approx(3e-6, abs=TOL) and row["kernels"] == 1
    (row,) = rows(kwh, "memory_transfer_overhead", "one_step")
    assert row["value"] == 0.0 and row["span_s"] == pytest.approx(3e-6, abs=TOL)


# ---------------------------------------------------------- zero-duration communication
def test_a_zero_duration_comm_kernel_is_communication(kwh):
    (row,) = rows(kwh, "communication_overlap_ratio", "zero_comm")
    assert row["value"] is None
    assert row["reason"] == "communication kernels have zero duration"
    assert row["comm_kernels"] == 1
    (row,) = rows(kwh, "total_communication_time", "zero_comm")
    assert row["value"] == 0.0 and row["reason"] is None and row["comm_kernels"] == 1


# ------------------------------------------------------------------------------ XLA steps
SPEC = TpuTraceSpec()


def _step_len(s: TpuTraceSpec, d: int) -> int:
    """One step on device d, from its start to one gap after the copy (see synth_xla)."""
    from cclq.synth.xla import DTYPE_BYTES, allreduce_ps

    conv = s.conv_ns + d * s.conv_ns_per_device
    ar = sum(allreduce_ps(s, e * DTYPE_BYTES[t]) // 1000 + s.gap_ns for t, e in s.allreduce_sizes)
    return (
        s.gap_ns
        + conv
        + s.gap_ns
        + s.ag_start_ns
        + s.gap_ns
        + s.loop_ns
        + s.gap_ns
        + s.ag_done_ns
        + s.gap_ns
        + ar
        + s.copy_ns
        + s.gap_ns
    )


SLOWEST = _step_len(SPEC, SPEC.devices - 1)


@pytest.fixture(scope="module")
def xwh(tmp_path_factory) -> Warehouse:
    """The generated TPU trace three ways: as generated (device Steps lines), without
    the Steps lines (host `train N` annotations), and without either (module runs)."""
    root = tmp_path_factory.mktemp("xla_steps")
    write_tpu_trace(root / "in" / "tpu" / "host0.trace.json.gz", SPEC)
    doc = generate_tpu_trace(SPEC)
    device_pids = set(range(1, SPEC.devices + 1))
    no_steps_line = [
        e for e in doc["traceEvents"] if not (e.get("ph") == "X" and e["pid"] in device_pids and e["tid"] == 1)
    ]
    (root / "in" / "tpu_host").mkdir()
    (root / "in" / "tpu_host" / "h.trace.json").write_text(json.dumps({**doc, "traceEvents": no_steps_line}))
    modules_only = [e for e in no_steps_line if not (e.get("ph") == "X" and e["name"].startswith("train "))]
    (root / "in" / "tpu_modules").mkdir()
    (root / "in" / "tpu_modules" / "h.trace.json").write_text(json.dumps({**doc, "traceEvents": modules_only}))
    wh = Warehouse(root / "wh")
    assert not run_ingest([root / "in"], wh).failed
    return wh


def test_steps_of_an_xla_profile(xwh):
    s = SPEC
    got = query(xwh, "SELECT trace, step, ts_ns, dur_ns, source, records FROM steps ORDER BY trace, step")
    # device Steps line: every device starts step k at start + k * step_ns; the step
    # ends when the slowest (last) device ends it
    expected = [("tpu", k, s.start_ns + k * s.step_ns, SLOWEST, "xla_device_steps", s.devices) for k in range(3)]
    # host annotations `train k`: the same span, one track
    expected += [("tpu_host", k, s.start_ns + k * s.step_ns, SLOWEST, "xla_host_annotation", 1) for k in range(3)]
    # module runs: from the first op (start + gap) to the last op's end (step end - gap)
    expected += [
        ("tpu_modules", k, s.start_ns + k * s.step_ns + s.gap_ns, SLOWEST - 2 * s.gap_ns, "xla_module_runs", s.devices)
        for k in range(3)
    ]
    assert sorted(got) == sorted(expected)


def test_avg_step_time_on_xla_profiles(xwh):
    # version 3: a device's Steps line or module runs are per device: each device's
    # step 1 (3 steps: step 1 alone), then the mean over the 4 devices
    mean = sum(_step_len(SPEC, d) for d in range(SPEC.devices)) / SPEC.devices
    n = SPEC.devices
    for trace, dur, source, used in (
        ("tpu", mean, "xla_device_steps", (n, 3 * n, n)),
        ("tpu_host", SLOWEST, "xla_host_annotation", (1, 3, 1)),
        ("tpu_modules", mean - 2 * SPEC.gap_ns, "xla_module_runs", (n, 3 * n, n)),
    ):
        (row,) = rows(xwh, "avg_step_time", trace)
        assert row["value"] == pytest.approx(dur / 1e9, rel=1e-12), trace
        assert (row["steps_used"], row["steps_seen"], row["devices"], row["source"]) == (*used, source)


def test_avg_step_time_v2_joins_a_step_across_devices(xwh):
    """Version 2 (frozen): one step from its first start to its end on the slowest device."""
    from cclq.query.metrics import run_metric
    from cclq.query.registry import resolve
    from cclq.query.session import connect

    con = connect(xwh)
    got = {r["trace"]: r for r in run_metric(con, resolve("avg_step_time", 2), {}).to_pylist()}
    for trace, dur in (("tpu", SLOWEST), ("tpu_host", SLOWEST), ("tpu_modules", SLOWEST - 2 * SPEC.gap_ns)):
        assert got[trace]["value"] == pytest.approx(dur / 1e9, abs=TOL), trace


def test_coll_call_num_on_xla_profiles_counts_collective_ops_per_device(xwh):
    # per device and step: the all-gather start/done pair (one op) + 4 all-reduces
    per_device = 1 + len(SPEC.allreduce_sizes)
    for trace in ("tpu", "tpu_host", "tpu_modules"):
        got = by_key(xwh, "coll_call_num", trace)
        assert set(got) == {(0, k) for k in range(SPEC.steps)}, trace
        for row in got.values():
            assert row["value"] == per_device and row["reason"] is None
            assert (row["source"], row["devices"], row["comm_ops"]) == ("xla_ops", 4, 4 * per_device)


def test_gpu_kernel_step_metrics_are_not_applicable_on_xla(xwh):
    (row,) = rows(xwh, "break_down_steps", "tpu")
    assert row["value"] is None and row["reason"] == "no GPU kernels"


@pytest.mark.slow
def test_jax_cpu_profile_steps_and_collectives_from_raw_json(tmp_path):
    folder = require_shared() / "xla_jax_cpu_4dev"
    wh = Warehouse(tmp_path / "wh")
    run_ingest([folder], wh)
    raw = json.loads(gzip.open(folder / "host0.trace.json.gz").read())["traceEvents"]

    def ns(v: Any) -> int:
        return int(Decimal(str(v)) * 1000)

    steps = sorted(
        (int(e["args"]["step_num"]), ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]))
        for e in raw
        if e.get("ph") == "X" and re.match(r"^train \d+$", e["name"])
    )
    assert len(steps) == 5
    (row,) = rows(wh, "avg_step_time", "xla_jax_cpu_4dev")
    inner = [end - ts for _, ts, end in steps[1:-1]]
    assert row["value"] == pytest.approx(sum(inner) / len(inner) / 1e9, rel=1e-12)
    assert row["source"] == "xla_host_annotation"
    # collective ops (psum = all-reduce, all_gather) per device_ordinal, by start time
    ops = [e for e in raw if e.get("ph") == "X" and "hlo_op" in e.get("args", {})]
    devices = {e["args"]["device_ordinal"] for e in ops}
    comm = [ns(e["ts"]) for e in ops if e["args"]["hlo_op"].startswith(("psum", "all_gather"))]
    got = by_key(wh, "coll_call_num", "xla_jax_cpu_4dev")
    for n, ts, end in steps:
        in_step = sum(ts <= t < end for t in comm)
        assert got[0, n]["value"] == pytest.approx(in_step / len(devices), rel=1e-12), n
        assert got[0, n]["comm_ops"] == in_step and got[0, n]["devices"] == len(devices)
    assert sum(r["comm_ops"] for r in got.values()) > 0
