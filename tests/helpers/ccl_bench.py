"""CCL-Bench's metric names and the traces laid out by hand to check cclq's answers to
them (``tests/query/test_ccl_bench_names.py`` works out the numbers; the board, serve and
compat tests reuse the folders).

CCL_BENCH_NAMES is copied from the `metric_name == "..."` branches of CCL-Bench's
tools/main.py (HEAD 1d257f0), in its order: 61 names.
"""

from __future__ import annotations

import json
from pathlib import Path

from cclq.synth.kineto import KinetoTraceBuilder

US = 1_000  # ns per microsecond
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_cublas"

CCL_BENCH_NAMES = [
    "wall_time_s",
    "total_compute_time_s",
    "total_comm_time_s",
    "avg_comm_kernel_time_s",
    "allreduce_comm_time_s",
    "compute_utilization_proxy",
    "num_comm_kernels",
    "avg_comm_bandwidth_GBps",
    "hockney_alpha_s",
    "hockney_beta_s_per_byte",
    "hockney_inverse_beta_Bps",
    "achieved_flops_from_trace_json",
    "total_model_flops_from_args",
    "throughput",
    "estimated_throughput_tokens_per_s",
    "flops_per_token_used",
    "estimated_total_tokens",
    "coll_call_num",
    "mfu",
    "avg_step_time",
    "ttft",
    "tpot",
    "communication_ratio",
    "total_trace_time",
    "total_kernel_time",
    "total_communication_time",
    "break_down_steps",
    "communication_fraction",
    "moe_fraction",
    "dominant_kernel_concentration",
    "aggregate_gpu_utilization",
    "mean_sm_coverage",
    "memory_transfer_overhead",
    "average_memory_bandwidth",
    "memory_bound_fraction",
    "load_imbalance_ratio",
    "communication_overlap_ratio",
    "compute_comm_overlap",
    "ttft_group_6",
    "tpot_group_6",
    "bandwidth_utilization_allgather_group_6",
    "bandwidth_utilization_allreduce_group_6",
    "bandwidth_utilization_alltoall_group_6",
    "bandwidth_utilization_reducescatter_group_6",
    "bandwidth_utilization_peertopeer_group_6",
    "kernel_compute_time_group_6",
    "throughput_group_6",
    "straggler",
    "straggler_metrics",
    "comm_kernel_breakdown_tpu",
    "estimated_bandwidth",
    "traffic_window",
    "communication_overhead",
    "bandwidth_utilization",
    "gpu_step_score",
    "scale_up_bw_utility",
    "collective_vol_allreduce_gb",
    "collective_vol_allgather_gb",
    "collective_vol_reducescatter_gb",
    "collective_vol_alltoall_gb",
    "collective_vol_total_gb",
]


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
        args = {"hlo_op": name, "hlo_module": "jit_step", "hlo_category": category, "device_duration_ps": ps, **extra}
        return {
            "ph": "X",
            "pid": pid,
            "tid": 3,
            "ts": ts,
            "dur": dur,
            "name": name,
            "args": {k: str(v) for k, v in args.items()},
        }

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
