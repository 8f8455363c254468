"""The CCL-Bench leaderboard metrics cclq lacked: mfu, bandwidth_utilization_*_group_6,
collective_vol_*_gb, compute_comm_overlap, straggler, scale_up_bw_utility and
total_trace_time; the kernel_class_rules v2 versions of the communication metrics and
moe_fraction; the pooled summaries of mean_sm_coverage, memory_bound_fraction and
average_memory_bandwidth v2.

The traces are laid out as plain Python data (``helpers.leaderboard``, and below); every
expected number is worked out from that layout here, by hand (in the comments) or with
the small interval helpers of this file, never from cclq's output.
"""

from __future__ import annotations

import gzip
import json
from decimal import Decimal
from pathlib import Path
from statistics import median
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from helpers.leaderboard import (
    AR_DUR,
    ARCH,
    GEMM,
    SCALE_UP_GBS,
    STEP2,
    US,
    build_mfu_infer,
    build_mfu_train,
    build_two_nodes,
    mfu_card,
    two_node_kernels,
)
from helpers.paths import require_shared
from helpers.warehouse import run_ingest

from cclq.query.metrics import run_metric, run_metrics, summarize
from cclq.query.registry import resolve
from cclq.query.session import Session, connect
from cclq.store.warehouse import Warehouse
from cclq.synth.kineto import KinetoTraceBuilder
from cclq.synth.xla import DTYPE_BYTES, TpuTraceSpec, write_tpu_trace

TOL = 1e-12


def build_mfu_variants(root: Path) -> None:
    for name, card in (
        ("mfu_unknown_hw", mfu_card("training", "nvidia_x999", "bf16", 2, "{batch_size: 8, seq_len: 16}")),
        ("mfu_no_arch", mfu_card("training", "nvidia_h100", "bf16", 2, "{batch_size: 8, seq_len: 16}", arch=False)),
        ("mfu_no_batch", mfu_card("training", "nvidia_h100", "bf16", 2, "{seq_len: 16}")),
    ):
        folder = root / name
        folder.mkdir()
        b = KinetoTraceBuilder(rank=0, world_size=1)
        b.profiler_step(1, 0, 1000 * US)
        b.kernel(GEMM, 10 * US, 100 * US)
        b.write(folder / "rank0.json")
        (folder / "workload_card.yaml").write_text(card)


def build_no_card(folder: Path) -> None:
    """`no_card`: two ranks without card; an all-reduce per rank without group ranks."""
    for rank in range(2):
        b = KinetoTraceBuilder(rank=rank, world_size=2)
        b.kernel(GEMM, 0, 100 * US)
        b.nccl_kernel("allreduce", 50 * US, 100 * US, nelems=1000, pg_ranks=None)
        b.write(folder / f"rank{rank}.json")


def build_one_node(folder: Path) -> None:
    """`one_node`: 2 ranks on one node (card: 2 per node, scale-up 800 Gbit/s = 100 GB/s).
    Each rank: a reduce_scatter of 1e6 bf16 elements per rank (input 2e6 elements = 4e6 B)
    in 40 us; rank 0 sends 5e5 bf16 (1e6 B) to rank 1 in 20 us, rank 1 receives it in 25 us."""
    for rank in range(2):
        b = KinetoTraceBuilder(rank=rank, world_size=2)
        b.nccl_kernel("reduce_scatter", 0, 40 * US, nelems=1_000_000, dtype="BFloat16")
        b.nccl_kernel(
            "send" if rank == 0 else "recv",
            100 * US,
            (20 if rank == 0 else 25) * US,
            nelems=500_000,
            dtype="BFloat16",
            pg_name="p2p",
            pg_desc="p2p",
            pg_ranks=[0, 1],
        )
        b.write(folder / f"rank{rank}.json")
    (folder / "workload_card.yaml").write_text(
        "workload:\n  hardware:\n    network_topo: {bandwidth_gbps: [100, 800]}\n"
        "    xpu_spec: {type: GPU, total_count: 2, count_per_node: 2}\n"
    )


# --------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def wh(tmp_path_factory: pytest.TempPathFactory) -> Warehouse:
    root = tmp_path_factory.mktemp("leaderboard")
    inputs = root / "in"
    for name, build in (
        ("two_nodes", build_two_nodes),
        ("mfu_train", build_mfu_train),
        ("mfu_infer", build_mfu_infer),
        ("no_card", build_no_card),
        ("one_node", build_one_node),
    ):
        (inputs / name).mkdir(parents=True)
        build(inputs / name)
    build_mfu_variants(inputs)
    write_tpu_trace(inputs / "tpu" / "host0.trace.json.gz", TpuTraceSpec())
    warehouse = Warehouse(root / "wh")
    report = run_ingest([inputs], warehouse)
    assert not report.failed
    return warehouse


_RESULTS: dict[tuple[str, int | None], list[dict[str, Any]]] = {}


@pytest.fixture(scope="module")
def con(wh: Warehouse):
    c = connect(wh)
    yield c
    c.close()
    _RESULTS.clear()


def rows(con, metric: str, trace: str, version: int | None = None) -> list[dict[str, Any]]:
    key = (metric, version)
    if key not in _RESULTS:
        _RESULTS[key] = run_metric(con, resolve(metric, version)).to_pylist()
    return [r for r in _RESULTS[key] if r["trace"] == trace]


def by_rank(con, metric: str, trace: str, version: int | None = None) -> dict[int, dict[str, Any]]:
    return {r["rank"]: r for r in rows(con, metric, trace, version)}


def one(con, metric: str, trace: str, version: int | None = None) -> dict[str, Any]:
    (row,) = rows(con, metric, trace, version)
    return row


# ------------------------------------------------------------------- interval helpers
def union(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for s, e in sorted(i for i in intervals if i[1] > i[0]):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def length(intervals: list[tuple[int, int]]) -> int:
    return sum(e - s for s, e in union(intervals))


def intersect(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> int:
    return sum(max(0, min(e1, e2) - max(s1, s2)) for s1, e1 in union(a) for s2, e2 in union(b))


def clip(k: dict[str, Any], window: tuple[int, int]) -> tuple[int, int]:
    return max(k["ts"], window[0]), min(k["ts"] + k["dur"], window[1])


# ------------------------------------------------------------------------------- tests
def test_collective_volumes(con) -> None:
    # per rank: all_reduce 5e6 bf16 = 1e7 B; all_gather output 2 x 250000 x 2 B = 1e6 B;
    # all_to_all 100000 x 2 B = 2e5 B (DeepEP's dispatch/notify: all_to_all without size)
    for metric, expected, unsized in (
        ("collective_vol_allreduce_gb", 0.01, 0),
        ("collective_vol_allgather_gb", 0.001, 0),
        ("collective_vol_alltoall_gb", 0.0002, 2),
        ("collective_vol_reducescatter_gb", 0.0, 0),
        ("collective_vol_total_gb", 0.0112, 2),
    ):
        got = by_rank(con, metric, "two_nodes")
        assert sorted(got) == [0, 1, 2, 3]
        for r in range(4):
            assert got[r]["value"] == pytest.approx(expected, abs=TOL), (metric, r)
            assert got[r]["unsized"] == unsized, (metric, r)
    assert by_rank(con, "collective_vol_total_gb", "two_nodes")[0]["four_types_gb"] == pytest.approx(0.0112)
    # a rank without GPU kernels or XLA ops has no volume to report
    row = one(con, "collective_vol_total_gb", "mfu_infer")
    assert row["value"] is None and row["reason"] == "no GPU kernels and no XLA ops"
    # a rank with kernels and no collectives moved 0 bytes
    assert one(con, "collective_vol_allreduce_gb", "mfu_unknown_hw")["value"] == 0.0


def test_collective_volumes_xla(con) -> None:
    # 4 devices x 3 steps, per step and device four all-reduces of the spec's sizes and
    # one all-gather of 4 x 2048 bf16; value = per device = 3 x the per-step bytes
    spec = TpuTraceSpec()
    ar_bytes = sum(DTYPE_BYTES[t] * n for t, n in spec.allreduce_sizes)
    row = one(con, "collective_vol_allreduce_gb", "tpu")
    assert row["value"] == pytest.approx(spec.steps * ar_bytes / 1e9, rel=1e-12)
    assert (row["devices"], row["source"]) == (spec.devices, "xla collective ops")
    ag = one(con, "collective_vol_allgather_gb", "tpu")
    assert ag["value"] == pytest.approx(spec.steps * spec.devices * spec.ag_shard_elements * 2 / 1e9, rel=1e-12)


def test_bandwidth_utilization(con) -> None:
    # all_reduce, n = 2, busbw = 1e7 B / dur x 2(n-1)/n = 1e7 / dur; scale-up 100 GB/s
    # version 1, the ratio to the card's link bandwidth
    ar = [1e7 / (d * US) / SCALE_UP_GBS for d in AR_DUR]  # 0.5, 0.5, 0.8333, 1.0
    row = one(con, "bandwidth_utilization_allreduce_group_6", "two_nodes", 1)
    assert row["value"] == pytest.approx(median(ar), abs=TOL)
    assert row["value"] == pytest.approx((0.5 + 1e7 / 120e3 / 100) / 2, abs=TOL)
    assert (row["scale_up_collectives"], row["scale_out_collectives"], row["ranks"]) == (4, 0, 4)
    # all_gather, n = 2: 1e6 B / 100 us x 1/2 = 5 GB/s over the scale-out 12.5 GB/s = 0.4
    row = one(con, "bandwidth_utilization_allgather_group_6", "two_nodes", 1)
    assert row["value"] == pytest.approx(0.4, abs=TOL) and row["scale_out_collectives"] == 4
    assert row["median_busbw_gbps"] == pytest.approx(5.0, abs=TOL)
    # all_to_all, n = 4: 2e5 B / 30 us x 3/4 = 5 GB/s -> 0.4; DeepEP's kernels have no size
    row = one(con, "bandwidth_utilization_alltoall_group_6", "two_nodes", 1)
    assert row["value"] == pytest.approx(0.4, abs=TOL) and row["unsized"] == 8
    for metric, reason in (
        ("bandwidth_utilization_reducescatter_group_6", "no reduce_scatter collectives"),
        ("bandwidth_utilization_peertopeer_group_6", "no send / recv / send_recv collectives"),
    ):
        row = one(con, metric, "two_nodes", 1)
        assert row["value"] is None and row["reason"] == reason
    row = one(con, "bandwidth_utilization_allreduce_group_6", "no_card", 1)
    assert row["value"] is None
    assert row["reason"] == "group placement unknown: the card gives no count_per_node"
    # version 2, the median bus bandwidth in GB/s (what CCL-Bench's tools print): the same
    # instances, not divided by the link; no card needed
    row = one(con, "bandwidth_utilization_allreduce_group_6", "two_nodes")
    assert row["value"] == pytest.approx(median(1e7 / (d * US) for d in AR_DUR), abs=TOL)
    assert row["value"] == pytest.approx((50 + 1e7 / 120e3) / 2, abs=TOL)
    assert (row["collectives"], row["ranks"], row["unsized"]) == (4, 4, 0)
    row = one(con, "bandwidth_utilization_allgather_group_6", "two_nodes")
    assert row["value"] == pytest.approx(5.0, abs=TOL) and row["collectives"] == 4
    row = one(con, "bandwidth_utilization_alltoall_group_6", "two_nodes")
    assert row["value"] == pytest.approx(5.0, abs=TOL) and row["unsized"] == 8
    row = one(con, "bandwidth_utilization_reducescatter_group_6", "two_nodes")
    assert row["value"] is None and row["reason"] == "no reduce_scatter collectives"


def test_bandwidth_utilization_reduce_scatter_and_point_to_point(con) -> None:
    # reduce_scatter, n = 2: 4e6 B / 40 us = 100 GB/s algbw, x 1/2 = 50 GB/s over 100 GB/s
    row = one(con, "bandwidth_utilization_reducescatter_group_6", "one_node", 1)
    assert row["value"] == pytest.approx(0.5, abs=TOL) and row["scale_up_collectives"] == 2
    row = one(con, "bandwidth_utilization_reducescatter_group_6", "one_node")  # v2: the 50 GB/s
    assert row["value"] == pytest.approx(50.0, abs=TOL) and row["collectives"] == 2
    # send 1e6 B / 20 us = 50 GB/s (factor 1) -> 0.5; recv / 25 us = 40 GB/s -> 0.4; median 0.45
    row = one(con, "bandwidth_utilization_peertopeer_group_6", "one_node")
    assert row["value"] == pytest.approx(0.45, abs=TOL) and row["scale_up_collectives"] == 2
    # volumes: reduce_scatter moves its input (4e6 B); the total adds the 1e6 B point-to-point
    got = by_rank(con, "collective_vol_reducescatter_gb", "one_node")
    assert [got[r]["value"] for r in (0, 1)] == [pytest.approx(0.004, abs=TOL)] * 2
    got = by_rank(con, "collective_vol_total_gb", "one_node")
    assert got[0]["value"] == pytest.approx(0.005, abs=TOL) and got[0]["four_types_gb"] == pytest.approx(0.004)


def test_compute_comm_overlap_and_its_v1_v2_neighbours(con) -> None:
    whole = (0, 3000)
    got = by_rank(con, "compute_comm_overlap", "two_nodes")
    overlap_v1 = by_rank(con, "communication_overlap_ratio", "two_nodes", 1)
    overlap_v2 = by_rank(con, "communication_overlap_ratio", "two_nodes", 2)
    for r in range(4):
        ks = two_node_kernels(r)
        comm = [clip(k, STEP2) for k in ks if k["v2"]]
        compute = [clip(k, STEP2) for k in ks if not k["v2"]]
        assert got[r]["value"] == pytest.approx(intersect(comm, compute) / length(comm), abs=TOL), r
        assert got[r]["steps_used"] == 1
        for version, table in ((1, overlap_v1), (2, overlap_v2)):
            comm = [clip(k, whole) for k in ks if k[f"v{version}"]]
            compute = [clip(k, whole) for k in ks if not k[f"v{version}"]]
            assert table[r]["value"] == pytest.approx(intersect(comm, compute) / length(comm), abs=TOL)
    # by hand, rank 0: comm v2 = [1500,1700) + [1700,1760) + [1800,1900) + [1950,1980) = 390 us;
    # under compute: [1500,1600) by the GEMM and [1650,1660) by get_dispatch_layout = 110
    assert got[0]["value"] == pytest.approx(110 / 390, abs=TOL)
    # version 1: the layout kernel is comm, cached_notify compute: comm 370, overlap 100
    assert overlap_v1[0]["value"] == pytest.approx(100 / 370, abs=TOL)
    row = one(con, "compute_comm_overlap", "mfu_unknown_hw")
    assert row["value"] is None and row["reason"] == "no communication in the inner steps"


def test_communication_v2_counts_deep_ep(con) -> None:
    for r in range(4):
        ks = two_node_kernels(r)
        for version in (1, 2):
            comm = [(k["ts"], k["ts"] + k["dur"]) for k in ks if k[f"v{version}"]]
            row = by_rank(con, "total_communication_time", "two_nodes", version)[r]
            assert row["value"] == pytest.approx(length(comm) / 1e6, abs=TOL), (r, version)
    kernel_us = sum(k["dur"] for r in range(4) for k in two_node_kernels(r))
    for version in (1, 2):
        comm_us = sum(k["dur"] for r in range(4) for k in two_node_kernels(r) if k[f"v{version}"])
        assert one(con, "communication_ratio", "two_nodes", version)["value"] == pytest.approx(comm_us / kernel_us)
    # moe_fraction: v2 counts the three DeepEP kernels (70 us per rank), v1 none of them
    moe_us = sum(k["dur"] for r in range(4) for k in two_node_kernels(r) if k.get("moe"))
    assert moe_us == 4 * 70
    assert one(con, "moe_fraction", "two_nodes", 2)["value"] == pytest.approx(moe_us / kernel_us, abs=TOL)
    assert one(con, "moe_fraction", "two_nodes", 1)["value"] == 0.0


def test_straggler(con) -> None:
    # Σ comm kernel time (v2): ranks 0, 1: 200+40+20+100+30 = 390 us; rank 2: 310; rank 3: 290
    comm = {r: sum(k["dur"] for k in two_node_kernels(r) if k["v2"]) for r in range(4)}
    assert comm == {0: 390, 1: 390, 2: 310, 3: 290}
    row = one(con, "straggler", "two_nodes")
    assert row["value"] == pytest.approx((390 - 290) / 390, abs=TOL)
    assert row["slowdown"] == pytest.approx(390 / 290, abs=TOL)
    assert (row["straggler_rank"], row["most_comm_rank"], row["ranks"]) == (3, 0, 4)
    row = one(con, "straggler", "mfu_infer")
    assert row["value"] is None and row["reason"] == "single rank"


def test_scale_up_bw_utility(con) -> None:
    got = by_rank(con, "scale_up_bw_utility", "two_nodes")
    for r in range(4):
        ks = two_node_kernels(r)
        scale_up = [clip(k, STEP2) for k in ks if k.get("link") == "scale_up"]
        compute = [clip(k, STEP2) for k in ks if not k["v2"]]
        exposed = length(scale_up) - intersect(scale_up, compute)
        assert got[r]["value"] == pytest.approx(exposed / 2 / 1000, abs=TOL), r
        assert got[r]["exposed_scale_up_s"] == pytest.approx(exposed / 1e6, abs=TOL)
    # by hand, rank 0: [1500,1700) less the GEMM to 1600 and the layout kernel
    # [1650,1660): 50 + 40 = 90 us exposed, half of it over the 1000 us step
    assert got[0]["value"] == pytest.approx(0.045, abs=TOL)
    assert got[3]["value"] == 0.0  # its all-reduce [1500,1600) is hidden under the GEMM
    row = by_rank(con, "scale_up_bw_utility", "no_card")[0]
    assert row["value"] is None and row["reason"].startswith("no steps")


def test_total_trace_time(con) -> None:
    # kernels from 100 us (step 1 GEMMs) to 2500 us, rank 3's memcpy to 2700 us
    row = one(con, "total_trace_time", "two_nodes")
    assert row["value"] == pytest.approx(2600e-6, abs=TOL)
    assert (row["ranks"], row["source"]) == (4, "gpu")
    row = one(con, "total_trace_time", "mfu_infer")
    assert row["value"] is None and row["reason"] == "no GPU activity and no XLA device ops"


def test_total_trace_time_xla(con, wh: Warehouse) -> None:
    # the span of every event on a /device:TPU:N plane of the generated file
    path = next((wh.root.parent / "in" / "tpu").glob("*.gz"))
    with gzip.open(path, "rt") as f:
        events = json.load(f, parse_float=Decimal)["traceEvents"]
    devices = {e["pid"] for e in events if e.get("name") == "process_name" and "/device:" in e["args"]["name"]}
    timed = [e for e in events if e.get("ph") == "X" and e["pid"] in devices]
    first = min(int(e["ts"] * 1000) for e in timed)
    last = max(int((e["ts"] + e["dur"]) * 1000) for e in timed)
    row = one(con, "total_trace_time", "tpu")
    assert row["value"] == pytest.approx((last - first) / 1e9, rel=1e-12) and row["source"] == "xla"


def test_mfu_training(con) -> None:
    n, emb, layers, heads, head_dim = ARCH.values()
    flop_per_token = 6 * (n - emb) + 12 * layers * heads * head_dim * 4096
    assert flop_per_token == 51_442_450_944
    # inner steps: rank 0 (1.2 + 1.4) / 2 = 1.3 s, rank 1 (1.4 + 1.6) / 2 = 1.5 s -> 1.4 s
    step_s = 1.4
    expected = flop_per_token * 8 * 4096 / step_s / (989.5e12 * 2)  # H100 bf16, 2 devices
    row = one(con, "mfu", "mfu_train")
    assert row["value"] == pytest.approx(expected, rel=1e-12)
    assert 0.60 < row["value"] < 0.61
    assert (row["mode"], row["hardware_model"], row["precision"]) == ("training", "nvidia_h100", "bf16")
    assert row["step_s"] == pytest.approx(step_s, rel=1e-12)


def test_mfu_inference(con) -> None:
    n, emb, layers, heads, head_dim = ARCH.values()
    flop_per_token = 2 * (n - emb) + 4 * layers * heads * head_dim * 2048
    # the idle iteration (5 ms) is left out: 1000 + 8 + 8 tokens in 70 ms
    tokens, seconds = 1016, 0.070
    expected = flop_per_token * tokens / seconds / 312e12  # A100 bf16, 1 device
    row = one(con, "mfu", "mfu_infer")
    assert row["value"] == pytest.approx(expected, rel=1e-12)
    assert (row["mode"], row["engine_iterations"]) == ("inference", 3)


def test_mfu_not_applicable(con) -> None:
    for trace, reason in (
        ("mfu_unknown_hw", "no peak FLOP/s known for nvidia_x999 at bf16"),
        ("mfu_no_arch", "the card's model_arch lacks num_params, num_layers, num_heads or head_dim"),
        ("mfu_no_batch", "the card gives no batch_size"),
        ("no_card", "the card gives no phase (training or inference)"),
    ):
        row = one(con, "mfu", trace)
        assert row["value"] is None and row["reason"] == reason, trace


def test_mfu_param_overrides_the_card(con) -> None:
    table = run_metric(con, resolve("mfu"), {"batch_size": "16"}).to_pylist()
    (row,) = [r for r in table if r["trace"] == "mfu_train"]
    assert row["value"] == pytest.approx(2 * one(con, "mfu", "mfu_train")["value"], rel=1e-12)


def trace_table(con, metric: str, version: int, trace: str) -> pa.Table:
    table = run_metric(con, resolve(metric, version))
    return table.filter(pc.equal(table["trace"], trace))


def test_pooled_summaries(con) -> None:
    """Version 2 of three metrics pools every rank's kernels for the one number of
    `python -m cclq.main`, as CCL-Bench does; version 1 averaged the ranks."""
    # rank 3's one memcpy: 1e6 B in 100 us = 10 GB/s; the other ranks have none
    spec = resolve("average_memory_bandwidth", 2)
    assert summarize(spec, trace_table(con, "average_memory_bandwidth", 2, "two_nodes")) == (
        pytest.approx(10.0, abs=TOL),
        None,
    )
    spec = resolve("mean_sm_coverage", 2)
    assert spec.summary == "ratio" and spec.summary_columns == ("coverage_weighted_s", "covered_s")
    got = by_rank(con, "mean_sm_coverage", "mfu_train", 2)
    weighted = sum(r["coverage_weighted_s"] for r in got.values())
    covered = sum(r["covered_s"] for r in got.values())
    value, reason = summarize(spec, trace_table(con, "mean_sm_coverage", 2, "mfu_train"))
    assert reason is None and value == pytest.approx(weighted / covered, rel=1e-12)
    # the rows are version 1's
    v1 = by_rank(con, "mean_sm_coverage", "mfu_train", 1)
    assert {r: row["value"] for r, row in got.items()} == {r: row["value"] for r, row in v1.items()}


@pytest.mark.slow
def test_new_metrics_on_every_shared_trace(tmp_path: Path) -> None:
    """The new metrics run over every real trace: each row has a value or a reason (not
    both, not neither), ratios in 0..1."""
    traces = require_shared()
    wh = Warehouse(tmp_path / "wh")
    run_ingest([traces], wh, jobs=2)
    # one of each family: the synthetic tests above cover every file of the families
    names = [
        "mfu",
        "ttft",
        "tpot",
        "compute_comm_overlap",
        "straggler",
        "scale_up_bw_utility",
        "total_trace_time",
        "collective_vol_total_gb",
        "bandwidth_utilization_allreduce_group_6",
    ]
    c = connect(wh)
    try:
        runs = run_metrics(c, [resolve(name) for name in names])  # one batch, each as alone
        for name in names:
            spec = resolve(name)
            assert runs[name].error is None, (name, runs[name].error)
            for row in runs[name].table.to_pylist():
                assert (row["value"] is None) != (row["reason"] is None), (name, row)
                if spec.unit == "ratio" and row["value"] is not None and not name.startswith("bandwidth"):
                    assert 0 <= row["value"] <= 1, (name, row)
    finally:
        c.close()


def test_shared_collectives_v1_copies_v2_only_where_the_comm_kernels_agree(wh: Warehouse, monkeypatch) -> None:
    """collectives_with(1) in a batch is collectives_with(2)'s rows for the traces whose
    comm kernels the two rule versions classify alike, and computed for the others
    (metrics.VERSION_INPUTS): two_nodes differs (get_dispatch_layout is comm in v1 only,
    cached_notify in v2 only), one_node has NCCL kernels only. Either way the shared
    rows are exactly the macro's own."""
    from cclq.query import metrics

    session = connect(wh)
    direct = {}
    for v in (1, 2):
        direct[v] = session.arrow(f"SELECT * FROM collectives_with({v})")
    kernels = {v: {(r["trace"], r["event_idx"]) for r in direct[v].to_pylist()} for v in (1, 2)}
    assert kernels[1] != kernels[2]  # the layout is what the test needs: the versions differ on two_nodes
    queries = [f"SELECT * FROM collectives_with({v})" for v in (1, 2, 1, 2)]
    executed: list[str] = []
    real = Session.execute  # on every connection: the shared views are computed on the batch's lanes
    monkeypatch.setattr(Session, "execute", lambda self, sql, *a: executed.append(sql) or real(self, sql, *a))
    with metrics.shared_views(session, queries) as shared:
        assert "collectives_with" in shared
        for v in (1, 2):
            got = session.arrow(f"SELECT * FROM collectives_with({v})")
            assert sorted_rows(got) == sorted_rows(direct[v]), v
    session.close()
    computed = [sql for sql in executed if 'main."collectives_with"(1)' in sql]
    assert len(computed) == 1 and "trace IN ('two_nodes')" in computed[0]


def test_a_batch_makes_no_other_version_unless_a_call_may_ask_for_it(wh: Warehouse, monkeypatch) -> None:
    """The SQL's calls all read (calls_read): collectives_with(2) only, no view of version
    1 (binding one costs as much as planning a metric). A call the reading cannot see,
    ``collectives_with((1))``: every version the SQL names is offered, and it answers."""
    from cclq.query import metrics

    session = connect(wh)
    direct = session.arrow("SELECT * FROM collectives_with(1)")
    executed: list[str] = []
    real = Session.execute
    monkeypatch.setattr(Session, "execute", lambda self, sql, *a: executed.append(sql) or real(self, sql, *a))
    try:
        with metrics.shared_views(session, ["SELECT * FROM collectives_with(2)"] * 2) as shared:
            assert "collectives_with" in shared
        made = [sql for sql in executed if "_cclq_shared_collectives_with_" in sql and sql.startswith("CREATE")]
        assert made and not any("collectives_with_1" in sql for sql in made), made
        executed.clear()
        queries = ["SELECT * FROM collectives_with(2)", "SELECT * FROM collectives_with((1))"]
        with metrics.shared_views(session, queries) as shared:
            assert "collectives_with" in shared
            assert sorted_rows(session.arrow(queries[1])) == sorted_rows(direct)
        assert any(sql.startswith("CREATE VIEW") and "collectives_with_1" in sql for sql in executed)
    finally:
        session.close()


def sorted_rows(table: pa.Table) -> list[str]:
    return sorted(repr(sorted(row.items())) for row in table.to_pylist())
