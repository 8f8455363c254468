"""communication_overlap_ratio, total_kernel_time, avg_step_time, coll_call_num:
hand-worked small traces, and the real 8-rank DLRM run checked against plain Python."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest
from helpers.paths import require_shared
from helpers.warehouse import run_ingest

from cclq.query.metrics import run_metric
from cclq.query.registry import resolve
from cclq.query.session import connect
from cclq.synth.kineto import KinetoTraceBuilder

NO_STEPS = "no steps (no ProfilerStep#N annotations, no XLA steps)"
# version 2 of the step metrics also knows inference engine iterations, and says so
NO_STEPS_V2 = "no steps (no ProfilerStep#N annotations, no inference engine iterations, no XLA steps)"


def _build(root: Path) -> None:
    # rank 0: three ProfilerSteps, overlapping kernels on several streams, NCCL on stream 20
    b = KinetoTraceBuilder(rank=0, world_size=2)
    b.profiler_step(1, ts=0, dur=10_000)
    b.profiler_step(2, ts=10_000, dur=10_000)
    b.profiler_step(3, ts=20_000, dur=12_000)
    b.kernel("gemm_a", ts=1_000, dur=4_000, stream=7, launch_ts=500)  # [1000, 5000)
    b.kernel("gemm_b", ts=3_000, dur=4_000, stream=8, launch_ts=600)  # [3000, 7000)
    b.nccl_kernel("allreduce", ts=4_000, dur=6_000, stream=20, launch_ts=3_500)  # [4000, 10000)
    b.kernel("gemm_c", ts=12_000, dur=2_000, stream=7, launch_ts=11_000)  # [12000, 14000)
    b.kernel("nested", ts=12_500, dur=500, stream=9, launch_ts=11_200)  # inside gemm_c
    b.nccl_kernel("allreduce", ts=13_000, dur=2_000, stream=20, launch_ts=11_500)  # [13000, 15000)
    b.nccl_kernel("allgather", ts=22_000, dur=1_000, stream=20, launch_ts=21_000)  # [22000, 23000)
    b.write(root / "mixed" / "rank0.json")
    # rank 1: one compute kernel, no communication, no ProfilerStep
    b = KinetoTraceBuilder(rank=1, world_size=2)
    b.kernel("gemm_a", ts=0, dur=1_000, stream=7, launch_ts=0)
    b.write(root / "mixed" / "rank1.json")
    # a CPU-only trace: a c10d collective on the CPU and no GPU activity at all
    b = KinetoTraceBuilder(rank=0, world_size=1)
    b.cpu_op("c10d::allreduce_", ts=0, dur=5_000)
    b.write(root / "cpu_only" / "rank0.json")


@pytest.fixture(scope="module")
def con(tmp_path_factory):
    from cclq.store.warehouse import Warehouse

    root = tmp_path_factory.mktemp("core")
    _build(root / "in")
    wh = Warehouse(root / "wh")
    run_ingest([root / "in"], wh)
    return connect(wh)


def _rows(con, name: str, version: int | None = None) -> dict:
    return {(r["trace"], r["rank"], r["step"]): r for r in run_metric(con, resolve(name, version)).to_pylist()}


def test_communication_overlap_ratio_by_hand(con):
    rows = _rows(con, "communication_overlap_ratio")
    # comm = [4000,10000) + [13000,15000) + [22000,23000) = 9000 ns
    # compute union = [1000,7000) + [12000,14000); overlap with comm = [4000,7000) + [13000,14000) = 4000 ns
    assert rows["mixed", 0, None]["value"] == pytest.approx(4000 / 9000, abs=1e-15)
    assert rows["mixed", 0, None]["comm_s"] == pytest.approx(9e-6)
    assert rows["mixed", 1, None]["value"] is None
    assert rows["mixed", 1, None]["reason"] == "no communication kernels"
    # version 3 reads a CPU-only rank's Gloo collectives: this one has none
    assert rows["cpu_only", 0, None]["reason"] == "no GPU kernels and no CPU collectives (Gloo records)"
    assert rows["mixed", 0, None]["exposed_s"] == pytest.approx(5e-6)  # 9000 - 4000 ns
    assert _rows(con, "communication_overlap_ratio", 2)["cpu_only", 0, None]["reason"] == "no GPU kernels"


def test_total_kernel_time_by_hand(con):
    rows = _rows(con, "total_kernel_time")
    # 4000 + 4000 + 6000 + 2000 + 500 + 2000 + 1000 ns: concurrent kernels each count
    assert rows["mixed", 0, None]["value"] == pytest.approx(19_500e-9, abs=1e-18)
    assert rows["mixed", 0, None]["kernels"] == 7
    assert rows["mixed", 1, None]["value"] == pytest.approx(1_000e-9, abs=1e-18)
    assert rows["cpu_only", 0, None]["reason"] == "no GPU kernels"


@pytest.mark.parametrize("version,no_steps", [(1, NO_STEPS), (2, NO_STEPS_V2)])
def test_avg_step_time_drops_first_and_last_step(con, version, no_steps):
    rows = _rows(con, "avg_step_time", version)
    # steps of 10000, 10000, 12000 ns: only the inner one (step 2) is averaged
    assert rows["mixed", 0, None]["value"] == pytest.approx(10_000e-9, abs=1e-18)
    assert (rows["mixed", 0, None]["steps_used"], rows["mixed", 0, None]["steps_seen"]) == (1, 3)
    assert rows["mixed", 1, None]["reason"] == no_steps
    assert rows["mixed", 0, None]["source"] == "cpu_annotation"


@pytest.mark.parametrize("version,no_steps", [(1, NO_STEPS), (2, NO_STEPS_V2)])
def test_coll_call_num_counts_per_step_by_launch(con, version, no_steps):
    rows = _rows(con, "coll_call_num", version)
    assert {k: v["value"] for k, v in rows.items() if k[0] == "mixed" and k[1] == 0} == {
        ("mixed", 0, 1): 1,  # launched at 3.5 us, inside step 1
        ("mixed", 0, 2): 1,  # launched at 11.5 us
        ("mixed", 0, 3): 1,  # the all-gather launched at 21 us
    }
    assert rows["mixed", 1, None]["reason"] == no_steps
    assert {v["source"] for k, v in rows.items() if k[0] == "mixed"} == {"gpu_kernels"}
    # the CPU-only trace has a collective but no steps
    assert rows["cpu_only", 0, None]["reason"] == no_steps and rows["cpu_only", 0, None]["source"] == "cpu_ops"


# --------------------------------------------------------------------- real trace
def _union(intervals: list[tuple[Decimal, Decimal]]) -> list[tuple[Decimal, Decimal]]:
    out: list[list[Decimal]] = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def _length(intervals) -> Decimal:
    return sum((e - s for s, e in intervals), Decimal(0))


def _intersection(a, b) -> Decimal:
    total, i, j = Decimal(0), 0, 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if hi > lo:
            total += hi - lo
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


@pytest.mark.slow
def test_dlrm_eight_ranks_in_one_query(tmp_path):
    traces = require_shared()
    from cclq.store.warehouse import Warehouse

    wh = Warehouse(tmp_path / "wh")
    run_ingest([traces / "dlrm_param_8xV100"], wh, jobs=2)
    rows = _rows(connect(wh), "communication_overlap_ratio")
    kt = _rows(connect(wh), "total_kernel_time")
    expected = {}
    for path in sorted((traces / "dlrm_param_8xV100").glob("worker*.json")):
        doc = json.loads(path.read_text(), parse_float=Decimal)
        kernels = [e for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "kernel"]
        comm = [
            (Decimal(e["ts"]), Decimal(e["ts"]) + Decimal(e["dur"]))
            for e in kernels
            if e["name"].startswith(("ncclKernel", "ncclDevKernel"))
        ]
        comp = [
            (Decimal(e["ts"]), Decimal(e["ts"]) + Decimal(e["dur"]))
            for e in kernels
            if not e["name"].startswith(("ncclKernel", "ncclDevKernel"))
        ]
        cu, pu = _union(comm), _union(comp)
        rank = doc["distributedInfo"]["rank"]
        expected[rank] = (float(_intersection(cu, pu) / _length(cu)), float(sum(Decimal(e["dur"]) for e in kernels)))
    assert sorted(expected) == list(range(8))
    for rank, (ratio, kernel_us) in expected.items():
        assert rows["dlrm_param_8xV100", rank, None]["value"] == pytest.approx(ratio, abs=1e-12), rank
        assert kt["dlrm_param_8xV100", rank, None]["value"] == pytest.approx(kernel_us / 1e6, abs=1e-12), rank
