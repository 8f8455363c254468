"""Every metric name CCL-Bench's tools/main.py dispatches answers through
``python -m cclq.main``, and the eleven names cclq added for it (issue 25) give
the numbers worked out here by hand from traces laid out in this file.

CCL_BENCH_NAMES is copied from the `metric_name == "..."` branches of CCL-Bench's
tools/main.py (HEAD 1d257f0), in its order: 61 names.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import run_ingest

from cclq.compat.main import run_here
from cclq.query.metrics import run_metric, summarize
from cclq.query.registry import registry, resolve
from cclq.query.session import connect
from cclq.store.warehouse import Warehouse
from cclq.synth.kineto import KinetoTraceBuilder

ROOT = Path(__file__).resolve().parents[2]
KINETO_FOLDER = ROOT / "trace_collection" / "synthetic_mlp_dp4"

CCL_BENCH_NAMES = [
    "wall_time_s", "total_compute_time_s", "total_comm_time_s", "avg_comm_kernel_time_s",
    "allreduce_comm_time_s", "compute_utilization_proxy", "num_comm_kernels", "avg_comm_bandwidth_GBps",
    "hockney_alpha_s", "hockney_beta_s_per_byte", "hockney_inverse_beta_Bps",
    "achieved_flops_from_trace_json", "total_model_flops_from_args", "throughput",
    "estimated_throughput_tokens_per_s", "flops_per_token_used", "estimated_total_tokens",
    "coll_call_num", "mfu", "avg_step_time", "ttft", "tpot", "communication_ratio", "total_trace_time",
    "total_kernel_time", "total_communication_time", "break_down_steps", "communication_fraction",
    "moe_fraction", "dominant_kernel_concentration", "aggregate_gpu_utilization", "mean_sm_coverage",
    "memory_transfer_overhead", "average_memory_bandwidth", "memory_bound_fraction", "load_imbalance_ratio",
    "communication_overlap_ratio", "compute_comm_overlap", "ttft_group_6", "tpot_group_6",
    "bandwidth_utilization_allgather_group_6", "bandwidth_utilization_allreduce_group_6",
    "bandwidth_utilization_alltoall_group_6", "bandwidth_utilization_reducescatter_group_6",
    "bandwidth_utilization_peertopeer_group_6", "kernel_compute_time_group_6", "throughput_group_6",
    "straggler", "straggler_metrics", "comm_kernel_breakdown_tpu", "estimated_bandwidth", "traffic_window",
    "communication_overhead", "bandwidth_utilization", "gpu_step_score", "scale_up_bw_utility",
    "collective_vol_allreduce_gb", "collective_vol_allgather_gb", "collective_vol_reducescatter_gb",
    "collective_vol_alltoall_gb", "collective_vol_total_gb",
]
NEW_NAMES = ["ttft_group_6", "tpot_group_6", "kernel_compute_time_group_6", "throughput_group_6",
             "straggler_metrics", "comm_kernel_breakdown_tpu", "estimated_bandwidth", "traffic_window",
             "communication_overhead", "bandwidth_utilization", "gpu_step_score"]
US = 1_000  # ns per microsecond
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_cublas"


def test_the_list_is_ccl_benchs_61_names_and_cclq_knows_each():
    assert len(CCL_BENCH_NAMES) == 61 == len(set(CCL_BENCH_NAMES))
    assert set(NEW_NAMES) <= set(CCL_BENCH_NAMES)
    assert [n for n in CCL_BENCH_NAMES if n not in registry()] == []


def test_every_name_exits_0_on_a_kineto_folder(tmp_path, capsys):
    """The call CCL-Bench's website makes, for each of its 61 names: exit 0 and a last
    stdout line that is a number or `nan` (with the reason on stderr)."""
    wh = tmp_path / "wh"
    for name in CCL_BENCH_NAMES:
        rc = run_here(["--trace", str(KINETO_FOLDER), "--metric", name, "--warehouse", str(wh)])
        out, err = capsys.readouterr()
        assert rc == 0, (name, err)
        last = out.strip().splitlines()[-1]
        value = float(last)  # a number or nan, never words
        if value != value:
            assert "does not apply" in err, (name, err)


def test_the_real_command_in_a_subprocess(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "cclq.main", "--trace", str(KINETO_FOLDER), "--metric", "straggler_metrics",
         "--warehouse", str(tmp_path / "wh")],
        capture_output=True, text=True, cwd=ROOT, env={**__import__("os").environ, "CCLQ_DAEMON": "0",
                                                       "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr
    assert float(proc.stdout.strip().splitlines()[-1]) >= 1.0


# ---------------------------------------------------------------- the hand-laid traces
# Two ranks, ProfilerStep#1..3 = [0,1000) [1000,2000) [2000,3000) us; the inner step is
# #2. Float all-reduces of 1,000,000 elements (4,000,000 bytes) over both ranks.
#   rank 0: GEMM 100+400, GEMM 1100+500, all_reduce 1700+200, all_gather 1950+40,
#           GEMM 2100+300, all_reduce 2500+100
#   rank 1: the same, but its step-2 all_reduce lasts 300
AR_BYTES = 4_000_000
AR_STEP2 = (200, 300)


def build_gpu(folder: Path, card: str | None) -> None:
    folder.mkdir(parents=True)
    for rank in range(2):
        b = KinetoTraceBuilder(rank=rank, world_size=2)
        for i in range(3):
            b.profiler_step(i + 1, i * 1000 * US, 1000 * US)
        b.kernel(GEMM, 100 * US, 400 * US)
        b.kernel(GEMM, 1100 * US, 500 * US)
        b.nccl_kernel("allreduce", 1700 * US, AR_STEP2[rank] * US, nelems=AR_BYTES // 4, dtype="Float")
        b.nccl_kernel("allgather", 1950 * US, 40 * US, nelems=1000, dtype="Float")
        b.kernel(GEMM, 2100 * US, 300 * US)
        b.nccl_kernel("allreduce", 2500 * US, 100 * US, nelems=AR_BYTES // 4, dtype="Float")
        b.write(folder / f"kineto_trace_{rank}.json")
    if card is not None:
        (folder / "workload_card.yaml").write_text(card)


def build_sglang(folder: Path) -> None:
    folder.mkdir(parents=True)
    record = {"backend": "sglang", "duration": 10.0, "completed": 20, "total_output_tokens": 2560,
              "median_ttft_ms": 123.5, "median_tpot_ms": 7.25, "mean_ttft_ms": 130.0,
              "ttfts": [0.1, 0.12], "output_throughput": 256.0}
    (folder / "bench_results.jsonl").write_text(json.dumps(record) + "\n")


# A TPU profile: two devices with an `XLA Ops` line each and a host plane.
#   TPU:0 fusion.1 0+10 us (9.0 us device, 1,000,000 raw bytes); all-reduce.1 20+5 (4.0 us,
#         2,000,000 bytes); all-gather-start.2 30+1 (1.0 us); all-gather-done.2 40+2 (2.0 us)
#   TPU:1 fusion.1 0+12 (12.0 us, 1,000,000 raw bytes); collective-permute.3 50+3 (3.0 us,
#         500,000 bytes)
#   host  a `send` thread event (CCL-Bench's substring match would count it; not a device op)
def build_tpu(folder: Path) -> None:
    folder.mkdir(parents=True)
    ev: list[dict] = []
    for d in range(2):
        ev.append({"ph": "M", "pid": d + 1, "name": "process_name", "args": {"name": f"/device:TPU:{d}"}})
        ev.append({"ph": "M", "pid": d + 1, "tid": 3, "name": "thread_name", "args": {"name": "XLA Ops"}})
    ev.append({"ph": "M", "pid": 100, "name": "process_name", "args": {"name": "/host:CPU"}})
    ev.append({"ph": "M", "pid": 100, "tid": 1, "name": "thread_name", "args": {"name": "python"}})

    def op(pid: int, name: str, ts: int, dur: int, ps: int, category: str, **extra: int) -> dict:
        args = {"hlo_op": name, "hlo_module": "jit_step", "hlo_category": category,
                "device_duration_ps": ps, **extra}
        return {"ph": "X", "pid": pid, "tid": 3, "ts": ts, "dur": dur, "name": name,
                "args": {k: str(v) for k, v in args.items()}}

    ev += [
        op(1, "fusion.1", 0, 10, 9_000_000, "convolution fusion", raw_bytes_accessed=1_000_000),
        op(1, "all-reduce.1", 20, 5, 4_000_000, "all-reduce", bytes_accessed=2_000_000),
        op(1, "all-gather-start.2", 30, 1, 1_000_000, "all-gather"),
        op(1, "all-gather-done.2", 40, 2, 2_000_000, "all-gather"),
        op(2, "fusion.1", 0, 12, 12_000_000, "convolution fusion", raw_bytes_accessed=1_000_000),
        op(2, "collective-permute.3", 50, 3, 3_000_000, "collective-permute", bytes_accessed=500_000),
        {"ph": "X", "pid": 100, "tid": 1, "ts": 60, "dur": 7, "name": "send_batch"},
    ]
    (folder / "host0.trace.json").write_text(json.dumps({"displayTimeUnit": "ns", "traceEvents": ev}))


CARD = textwrap.dedent("""\
    workload:
      model: {phase: training}
      hardware:
        xpu_spec: {type: GPU, model: nvidia_h100, total_count: 8, count_per_node: 8}
    """)


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory) -> Warehouse:
    root = tmp_path_factory.mktemp("names")
    build_gpu(root / "in" / "gpu", card=None)
    build_gpu(root / "in" / "gpu_card8", card=CARD)
    build_sglang(root / "in" / "sglang")
    build_tpu(root / "in" / "tpu")
    wh = Warehouse(root / "wh")
    report = run_ingest([root / "in"], wh)
    assert not report.failed, [o.message for o in report.failed]
    return wh


def one(wh: Warehouse, name: str, trace: str, **params: str) -> tuple[float | None, str | None, list[dict]]:
    """(the number python -m cclq.main prints, its reason, the rows)."""
    spec = resolve(name)
    con = connect(wh, traces=[trace])
    try:
        table = run_metric(con, spec, params)
        value, reason = summarize(spec, table)
        return value, reason, table.to_pylist()
    finally:
        con.close()


def test_kernel_compute_time_group_6(warehouse):
    # compute kernels: 400 + 500 + 300 us per rank, two ranks
    value, _, rows = one(warehouse, "kernel_compute_time_group_6", "gpu")
    assert value == pytest.approx(2 * 1200e-6)
    # comm left out: rank 0 200+40+100, rank 1 300+40+100
    assert rows[0]["comm_kernel_s"] == pytest.approx(780e-6)


def test_straggler_metrics_is_the_slowdown(warehouse):
    value, _, rows = one(warehouse, "straggler_metrics", "gpu")
    assert value == pytest.approx(440 / 340)
    assert rows[0]["delay"] == pytest.approx((440 - 340) / 440)
    assert rows[0]["least_comm_rank"] == 0
    straggler, _, _ = one(warehouse, "straggler", "gpu")
    assert straggler == pytest.approx(rows[0]["delay"])


def test_communication_overhead_pools_the_ranks(warehouse):
    value, _, rows = one(warehouse, "communication_overhead", "gpu")
    assert value == pytest.approx((340 + 440) / (340 + 1200 + 440 + 1200))
    assert {r["rank"]: r["value"] for r in rows} == {0: pytest.approx(340 / 1540), 1: pytest.approx(440 / 1640)}


def test_traffic_window_counts_the_inner_step(warehouse):
    # inner step #2: rank 0 200 + 40 us, rank 1 300 + 40 us; mean over ranks
    value, _, rows = one(warehouse, "traffic_window", "gpu")
    assert value == pytest.approx((240e-6 + 340e-6) / 2)
    r0 = next(r for r in rows if r["rank"] == 0)
    assert (r0["basis"], r0["steps_used"]) == ("inner steps", 1)
    assert r0["all_reduce_s"] == pytest.approx(200e-6)
    assert r0["gather_scatter_s"] == pytest.approx(40e-6)
    assert r0["p2p_s"] == 0 and r0["other_comm_s"] == pytest.approx(0, abs=1e-15)


def test_bandwidth_utilization_is_ccl_benchs_formula(warehouse):
    # T_exp = (S / n)(n - 1) / B = (4e6 / 2) / 100e9 = 20 us; over 200, 100, 300, 100 us
    expected = (20 / 200 + 20 / 100 + 20 / 300 + 20 / 100) / 4
    value, _, rows = one(warehouse, "bandwidth_utilization", "gpu")
    assert value == pytest.approx(expected)
    assert rows[0]["all_reduces"] == 4 and rows[0]["link_gbs"] == 100
    halved, _, _ = one(warehouse, "bandwidth_utilization", "gpu", link_gbs="50")
    assert halved == pytest.approx(2 * expected)


def test_gpu_step_score(warehouse):
    # T = 1000 us (the inner step), G = the 2 ranks traced: 0.5*16/2 + 0.5*0.44/0.001
    value, _, rows = one(warehouse, "gpu_step_score", "gpu")
    assert value == pytest.approx(0.5 * 16 / 2 + 0.5 * 0.44 / 0.001)
    assert rows[0]["gpus_source"] == "ranks traced"
    # the card says 8 GPUs
    value, _, rows = one(warehouse, "gpu_step_score", "gpu_card8")
    assert value == pytest.approx(0.5 * 16 / 8 + 0.5 * 0.44 / 0.001)
    assert rows[0]["gpus_source"] == "card total_count"
    value, _, _ = one(warehouse, "gpu_step_score", "gpu_card8", w="1", g0="4")
    assert value == pytest.approx(4 / 8)


def test_the_serving_benchmark_names(warehouse):
    assert one(warehouse, "ttft_group_6", "sglang")[0] == pytest.approx(123.5)
    assert one(warehouse, "tpot_group_6", "sglang")[0] == pytest.approx(7.25)
    assert one(warehouse, "throughput_group_6", "sglang")[0] == pytest.approx(2560 / 10.0)
    value, reason, _ = one(warehouse, "ttft_group_6", "gpu")
    assert value is None and "no serving benchmark results" in reason


def test_the_tpu_names(warehouse):
    value, _, rows = one(warehouse, "comm_kernel_breakdown_tpu", "tpu")
    r = rows[0]
    assert value == pytest.approx((4 + 1 + 2 + 3) * 1e-6)
    assert r["events"] == 4
    assert r["all_reduce_s"] == pytest.approx(4e-6)
    assert r["all_gather_s"] == pytest.approx(3e-6)
    assert r["collective_permute_s"] == pytest.approx(3e-6)
    assert r["devices"] == 2
    # bytes 1e6 + 2e6 + 1e6 + 0.5e6 over the devices' span 0..53 us
    value, _, rows = one(warehouse, "estimated_bandwidth", "tpu")
    assert value == pytest.approx(4.5e6 / 53e-6 / 1e9)
    assert rows[0]["total_bytes"] == 4_500_000
    value, reason, _ = one(warehouse, "comm_kernel_breakdown_tpu", "gpu")
    assert value is None and "no XLA ops" in reason
