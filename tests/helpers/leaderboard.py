"""The leaderboard workloads laid out as plain Python data: four ranks on two nodes, and
the MFU training and inference runs. ``tests/query/test_metrics_leaderboard.py`` works out
every expected number from this layout; the card tests reuse the folders."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

from cclq.synth.kineto import KinetoTraceBuilder

US = 1_000  # ns per microsecond
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_cublas"
LAYOUT = "void deep_ep::layout::get_dispatch_layout<256, 32, 8>(long const*, int*, int*)"
DISPATCH = "void deep_ep::internode::dispatch<false, 8, true, 8>(int4*, float*, int*)"
NOTIFY = "void deep_ep::internode::cached_notify<4>(int, int, int)"
AR_NELEMS, AG_NELEMS, A2A_NELEMS = 5_000_000, 250_000, 100_000  # bf16: 2 bytes each
AR_DUR = (200, 200, 120, 100)  # us, the intra-node all-reduce per rank


# ------------------------------------------------------------------ the two-node layout
def two_node_kernels(rank: int) -> list[dict[str, Any]]:
    """Rank `rank` of `two_nodes` (4 ranks, 2 per node). Times in us. `v1` / `v2`: comm
    by kernel_class_rules version 1 / 2; `moe`: MoE by version 2; `link`: where the
    collective runs (tp groups {0,1} {2,3} stay on a node, dp groups {0,2} {1,3} and the
    ep group {0..3} span both; DeepEP kernels carry no group and fall back to the world
    size 4 > 2 per node)."""
    tp = [2 * (rank // 2), 2 * (rank // 2) + 1]
    dp = [rank % 2, rank % 2 + 2]
    return [
        dict(name=GEMM, ts=100, dur=400, v1=False, v2=False),  # step 1
        dict(name=GEMM, ts=1000, dur=600, v1=False, v2=False),  # step 2
        dict(
            coll="allreduce",
            ts=1500,
            dur=AR_DUR[rank],
            nelems=AR_NELEMS,
            group=tp,
            pg=f"tp{rank // 2}",
            v1=True,
            v2=True,
            link="scale_up",
            bytes=2 * AR_NELEMS,
        ),
        dict(name=LAYOUT, ts=1650, dur=10, v1=True, v2=False, moe=True),  # v1: `deep_ep.*dispatch`
        dict(name=DISPATCH, ts=1700, dur=40, v1=True, v2=True, moe=True, link="scale_out"),
        dict(name=NOTIFY, ts=1740, dur=20, v1=False, v2=True, moe=True, link="scale_out"),
        dict(
            coll="allgather",
            ts=1800,
            dur=100,
            nelems=AG_NELEMS,
            group=dp,
            pg=f"dp{rank % 2}",
            v1=True,
            v2=True,
            link="scale_out",
            bytes=2 * 2 * AG_NELEMS,
        ),  # the gathered output
        dict(
            coll="all_to_all",
            ts=1950,
            dur=30,
            nelems=A2A_NELEMS,
            group=[0, 1, 2, 3],
            pg="ep",
            v1=True,
            v2=True,
            link="scale_out",
            bytes=2 * A2A_NELEMS,
        ),
        dict(name=GEMM, ts=2100, dur=400, v1=False, v2=False),  # step 3
    ]


STEP2 = (1000, 2000)  # the one inner step of ProfilerStep#1..3 = [0,1000) [1000,2000) [2000,3000)
TWO_NODE_CARD = textwrap.dedent("""\
    workload:
      model:
        phase: training
        precision: bf16
        model_arch: {num_params: 8.0e9, num_params_embedding: 5.0e8, num_layers: 32, num_heads: 32, head_dim: 128}
      data: {batch_size: 8, seq_len: 4096}
      hardware:
        network_topo: {bandwidth_gbps: [100, 800]}
        xpu_spec: {type: GPU, model: nvidia_h100, total_count: 4, count_per_node: 2}
    """)
SCALE_OUT_GBS, SCALE_UP_GBS = 100 / 8, 800 / 8


def build_two_nodes(folder: Path) -> None:
    for rank in range(4):
        b = KinetoTraceBuilder(rank=rank, world_size=4)
        for i in range(3):
            b.profiler_step(i + 1, i * 1000 * US, 1000 * US)
        for k in two_node_kernels(rank):
            if "coll" in k:
                b.nccl_kernel(
                    k["coll"],
                    k["ts"] * US,
                    k["dur"] * US,
                    nelems=k["nelems"],
                    dtype="BFloat16",
                    group_size=len(k["group"]),
                    pg_name=k["pg"],
                    pg_desc=k["pg"],
                    pg_ranks=k["group"],
                )
            else:
                b.kernel(k["name"], k["ts"] * US, k["dur"] * US)
        if rank == 3:
            b.memcpy(2600 * US, 100 * US, 1_000_000)
        b.write(folder / f"rank{rank}.json")
    (folder / "workload_card.yaml").write_text(TWO_NODE_CARD)


# ------------------------------------------------------------------- the MFU workloads
ARCH = dict(num_params=8.0e9, num_params_embedding=5.0e8, num_layers=32, num_heads=32, head_dim=128)
TRAIN_STEPS = {0: (1.0, 1.2, 1.4, 1.6), 1: (1.0, 1.4, 1.6, 2.0)}  # seconds per ProfilerStep


def mfu_card(phase: str, model: str, precision: str, total: int, data: str, arch: bool = True) -> str:
    model_arch = (
        (
            "    model_arch: {num_params: 8.0e9, num_params_embedding: 5.0e8, num_layers: 32, "
            "num_heads: 32, head_dim: 128}\n"
        )
        if arch
        else ""
    )
    return (
        f"workload:\n  model:\n    phase: {phase}\n    precision: {precision}\n{model_arch}"
        f"  data: {data}\n  hardware:\n    xpu_spec: {{model: {model}, total_count: {total}}}\n"
    )


def build_mfu_train(folder: Path) -> None:
    for rank, durations in TRAIN_STEPS.items():
        b = KinetoTraceBuilder(rank=rank, world_size=2)
        t = 0
        for i, d in enumerate(durations):
            b.profiler_step(i + 1, t, int(d * 1e9))
            b.kernel(GEMM, t + 1000, 1000)
            t += int(d * 1e9)
        b.write(folder / f"rank{rank}.json")
    (folder / "workload_card.yaml").write_text(
        mfu_card("training", "NVIDIA-H100", "bfloat16", 2, "{batch_size: 8, seq_len: 4096}")
    )


# vLLM iterations: (context requests, context tokens, generation requests, tokens, ms)
INFER_ITERATIONS = ((2, 1000, 0, 0, 50), (0, 0, 8, 8, 10), (0, 0, 0, 0, 5), (0, 0, 8, 8, 10))


def build_mfu_infer(folder: Path) -> None:
    b = KinetoTraceBuilder(rank=0, world_size=1)
    t = 0
    for cr, ct, gr, gt, ms in INFER_ITERATIONS:
        b.user_annotation(f"execute_context_{cr}({ct})_generation_{gr}({gt})", t, ms * 1_000_000)
        t += ms * 1_000_000 + 1000
    b.write(folder / "rank0.json")
    (folder / "workload_card.yaml").write_text(
        mfu_card("inference", "nvidia_a100", "bf16", 1, "{batch_size: 8, seq_len: 2048}")
    )
