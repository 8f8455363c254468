"""CPU collectives (a PyTorch run on Gloo: no GPU kernels) count as communication in the
step-time metrics a CPU trace can answer (issue 41): total_communication_time v3,
communication_overlap_ratio v3 (with exposed_s) and communication_fraction v3.

The trace, per rank (times in ms; main thread tid 100, Gloo's worker thread tid 201):
  ProfilerStep#1 [0,10)  #2 [10,20)  #3 [20,30)        -> the inner step is #2
  compute (cpu_op): aten::mm [1,5) [10,14) [21,25), MmBackward0 [14,17), aten::add_ [18,19)
  calls: c10d::allreduce_ [4.9,5) [15,15.1) [24.9,25) (async: return at once)
  Gloo:  gloo:all_reduce  [5,6) [15.1,18.1) [25,27)     -> communication, 6 ms
By hand: |U(comm)| = 1 + 3 + 2 = 6 ms. Under compute: [5,6) none (mm ends at 5),
[15.1,18.1) by MmBackward0 to 17 (1.9) and aten::add_ from 18 (0.1) = 2.0 ms, [25,27)
none: overlap 2/6, exposed 4 ms. In the inner step [10,20): 3 ms of 10 ms = 0.3.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.warehouse import metric_rows, run_ingest

from cclq.store.warehouse import Warehouse
from cclq.synth.kineto import KinetoTraceBuilder

MS = 1_000_000
US = 1_000


def gloo_ddp_rank(rank: int) -> KinetoTraceBuilder:
    b = KinetoTraceBuilder(rank=rank, world_size=2, tid=100)
    for i in range(3):
        b.profiler_step(i + 1, i * 10 * MS, 10 * MS)
    for ts, dur in ((1, 4), (10, 4), (21, 4)):
        b.cpu_op("aten::mm", ts * MS, dur * MS)
    b.cpu_op("autograd::engine::evaluate_function: MmBackward0", 14 * MS, 3 * MS)
    b.cpu_op("aten::add_", 18 * MS, 1 * MS)
    dims = {"Input Dims": [[1024]], "Input type": ["float"]}
    for call_ns, start_ns, dur_ns in (
        (4900 * US, 5 * MS, 1 * MS),
        (15 * MS, 15100 * US, 3 * MS),
        (24900 * US, 25 * MS, 2 * MS),
    ):
        b.cpu_op(
            "c10d::allreduce_",
            call_ns,
            100 * US,
            args={
                "Input Dims": [[[1024]], [], [], [], [], []],
                "Input type": ["TensorList", "", "", "", "Scalar", "Scalar"],
            },
        )
        b.user_annotation("gloo:all_reduce", start_ns, dur_ns, tid=201, args=dims)
    return b


@pytest.fixture(scope="module")
def gloo_wh(tmp_path_factory) -> Warehouse:
    root = tmp_path_factory.mktemp("gloo")
    for r in range(2):
        gloo_ddp_rank(r).write(root / "gloo_ddp" / f"kineto_trace_{r}.json")
    wh = Warehouse(root / "wh")
    report = run_ingest([root / "gloo_ddp"], wh)
    assert not report.failed, [o.message for o in report.failed]
    return wh


def _by_rank(wh: Warehouse, name: str, version: int | None = None) -> dict[int, dict]:
    return {r["rank"]: r for r in metric_rows(wh, name, version=version)}


def test_total_communication_time_counts_gloo(gloo_wh):
    rows = _by_rank(gloo_wh, "total_communication_time")
    for rank in (0, 1):
        assert rows[rank]["value"] == pytest.approx(6e-3, rel=1e-12)
        assert (rows[rank]["source"], rows[rank]["cpu_collectives"], rows[rank]["reason"]) == (
            "cpu_collectives",
            3,
            None,
        )
    # the released version keeps its answer
    assert _by_rank(gloo_wh, "total_communication_time", 2)[0]["reason"] == "no GPU kernels"


def test_exposed_communication_on_a_cpu_run(gloo_wh):
    rows = _by_rank(gloo_wh, "communication_overlap_ratio")
    for rank in (0, 1):
        r = rows[rank]
        assert r["source"] == "cpu_collectives"
        assert r["comm_s"] == pytest.approx(6e-3, rel=1e-12)
        assert r["overlapped_s"] == pytest.approx(2e-3, rel=1e-9)
        assert r["exposed_s"] == pytest.approx(4e-3, rel=1e-9)
        assert r["value"] == pytest.approx(2 / 6, rel=1e-9)
    assert _by_rank(gloo_wh, "communication_overlap_ratio", 2)[0]["value"] is None


def test_communication_share_of_the_step_on_a_cpu_run(gloo_wh):
    rows = _by_rank(gloo_wh, "communication_fraction")
    for rank in (0, 1):
        r = rows[rank]
        assert (r["source"], r["reason"]) == ("cpu_collectives", None)
        assert r["comm_s"] == pytest.approx(3e-3, rel=1e-9)
        assert r["op_time_s"] == pytest.approx(10e-3, rel=1e-12)
        assert r["value"] == pytest.approx(0.3, rel=1e-9)
    assert _by_rank(gloo_wh, "communication_fraction", 2)[0]["value"] is None


def test_per_collective_time_is_in_the_collectives_view(gloo_wh):
    from helpers.warehouse import query

    rows = query(gloo_wh, "SELECT rank, coll_type, dur_ns, bytes, source FROM collectives ORDER BY rank, ts_ns")
    assert rows == [(r, "all_reduce", d, 4096, "cpu_backend") for r in (0, 1) for d in (1 * MS, 3 * MS, 2 * MS)]


def test_gpu_ranks_are_unchanged(tmp_path: Path):
    """A GPU rank reads version 2's rows: one comm kernel [0, 5 us) beside a GEMM."""
    b = KinetoTraceBuilder(rank=0, world_size=1)
    b.kernel("gemm", 0, 10 * US)
    b.nccl_kernel("allreduce", 2 * US, 5 * US)
    b.write(tmp_path / "gpu" / "rank0.json")
    wh = Warehouse(tmp_path / "wh")
    run_ingest([tmp_path / "gpu"], wh)
    for name in ("total_communication_time", "communication_overlap_ratio", "communication_fraction"):
        v3, v2 = metric_rows(wh, name)[0], metric_rows(wh, name, version=2)[0]
        assert v3["value"] == v2["value"] and v3["source"] == "gpu_kernels", name
    assert metric_rows(wh, "total_communication_time")[0]["value"] == pytest.approx(5e-6, rel=1e-12)


@pytest.mark.slow
def test_report_says_what_a_metric_assumes_on_a_cpu_run(gloo_wh):
    """gpu_step_score counts the ranks as GPUs and bandwidth_utilization takes a 100 GB/s
    link unless told: on this CPU run the report says both; --param link_gbs silences the
    second. The communication share is the CPU one (0.3 on both ranks)."""
    import json

    from helpers.cli import run_cli

    done = run_cli("report", "gloo_ddp", "-w", str(gloo_wh.root), "--format", "json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    # the builder lists H100s in deviceProperties, as Kineto does on a GPU host; no GPU ran it
    assert '"deviceProperties"' in (gloo_wh.root.parent / "gloo_ddp" / "kineto_trace_0.json").read_text()[:200]
    assert data["hardware"] == {"model": None, "count": None, "source": ""}
    entries = {e["metric"]: e for g in data["categories"] for e in g["metrics"]}
    assert entries["gpu_step_score"]["assumes"] == "assumes GPUs: this trace has no GPU kernel (a CPU-only run)"
    assert entries["bandwidth_utilization"]["value"] is not None
    assert entries["bandwidth_utilization"]["assumes"] == (
        "assumes link_gbs = 100 (the default; --param link_gbs=... sets it)"
    )
    assert entries["communication_fraction"]["value"] == pytest.approx(0.3, rel=1e-9)
    assert "assumes" not in entries["communication_fraction"]
    text = run_cli("report", "gloo_ddp", "-w", str(gloo_wh.root)).stdout
    assert "assumes GPUs: this trace has no GPU kernel" in " ".join(text.split())
    given = run_cli("report", "gloo_ddp", "-w", str(gloo_wh.root), "--format", "json", "--param", "link_gbs=50")
    entries = {e["metric"]: e for g in json.loads(given.stdout)["categories"] for e in g["metrics"]}
    assert "assumes" not in entries["bandwidth_utilization"]
