"""Hand-placed traces for the report, diff and board tests (times in ns).

``two_rank_run`` builds a 2-rank workload whose numbers are worked out here, on paper:

* ProfilerStep#1..3 on the CPU track. Rank 0: [0, 1 ms) [1 ms, 3 ms) [3 ms, 6 ms);
  rank 1: [0, 1.5 ms) [1.5 ms, 4 ms) [4 ms, 7.5 ms). avg_step_time drops the first and
  last step (more than two), so rank 0: 2 ms, rank 1: 2.5 ms; mean 2.25 ms.
* In step 2 of each rank, launched 10 us into the step: ``gemm_kernel`` at +100 us and
  +300 us (``gemm_us`` long each), ``elementwise_kernel`` at +500 us (50 us), an NCCL
  all-reduce (seq 0) of 30 us at +700 us on rank 0 and +900 us on rank 1. The
  all-reduce starts at 1.7 ms on rank 0 and 2.4 ms on rank 1: rank 1 starts it last
  (the straggler), skew 0.7 ms.
* Per rank, kernel time = 2 x gemm + 50 + 30 us.
"""

from __future__ import annotations

from pathlib import Path

from cclq.synth.kineto import KinetoTraceBuilder

US = 1_000
MS = 1_000_000
STEPS = {
    0: ((1, 0, 1 * MS), (2, 1 * MS, 2 * MS), (3, 3 * MS, 3 * MS)),
    1: ((1, 0, 1_500 * US), (2, 1_500 * US, 2_500 * US), (3, 4 * MS, 3_500 * US)),
}
ALLREDUCE_AT = {0: 700 * US, 1: 900 * US}


def two_rank_run(
    folder: Path,
    gemm_us: int = 100,
    card: str | None = None,
    extra_kernel: str | None = None,
    allreduce: bool = True,
    ranks: tuple[int, ...] = (0, 1),
) -> Path:
    """The workload above in ``folder`` (one file per rank), with an optional card text.
    ``extra_kernel``: one more 20 us kernel of that name after the elementwise one."""
    for rank in ranks:
        b = KinetoTraceBuilder(rank=rank, world_size=len(ranks))
        for step, ts, dur in STEPS[rank]:
            b.profiler_step(step, ts, dur)
        start = STEPS[rank][1][1]
        launch = start + 10 * US
        b.kernel("gemm_kernel", start + 100 * US, gemm_us * US, launch_ts=launch)
        b.kernel("gemm_kernel", start + 300 * US, gemm_us * US, launch_ts=launch + 5 * US)
        b.kernel("elementwise_kernel", start + 500 * US, 50 * US, launch_ts=launch + 10 * US)
        if extra_kernel:
            b.kernel(extra_kernel, start + 600 * US, 20 * US, launch_ts=launch + 12 * US)
        if allreduce:
            b.nccl_kernel("allreduce", start + ALLREDUCE_AT[rank], 30 * US, seq=0, launch_ts=launch + 15 * US)
        b.write(folder / f"rank{rank}.pt.trace.json")
    if card is not None:
        (folder / "workload_card.yaml").write_text(card)
    return folder


SCRIPT_MODEL = "<script>alert('card')</script>"
CARD_A = f"""version: 1
description: Two ranks placed by hand, <b>bold</b> is text here
workload:
  model:
    phase: training
    model_family: "{SCRIPT_MODEL}"
    precision: bf16
  hardware:
    xpu_spec:
      type: GPU
      model: nvidia_h100
      total_count: 2
Model-executor:
  framework:
    name: pytorch
  model_plan_parallelization:
    dp_replicate: 2
  communication_library:
    name: NCCL
metric_source:
  traces: [json]
"""
TPU_CARD = """version: 1
description: Synthetic XLA step on 4 TPU devices
workload:
  model:
    phase: inference
    model_family: tiny-xla
  hardware:
    xpu_spec:
      type: TPU
      model: tpu_v6e
      total_count: 4
Model-executor:
  framework:
    name: jax
metric_source:
  traces: [json_tpu]
"""


def board_workloads(root: Path) -> Path:
    """Six workloads of different shapes for the board tests, in ``root`` (returned):
    run_a (hand-placed, a card whose model name is a script tag), run_b, run_c (one rank,
    no card), two generated DDP runs (4 and 8 ranks) and a generated XLA/TPU profile."""
    from cclq.synth.kineto import generate_workload
    from cclq.synth.xla import TpuTraceSpec, write_tpu_trace

    two_rank_run(root / "run_a", card=CARD_A)
    two_rank_run(root / "run_b", gemm_us=150, extra_kernel="softmax_kernel", allreduce=False)
    two_rank_run(root / "run_c", ranks=(0,))
    generate_workload(root / "synthetic_dp4", ranks=4, steps=4, layers=3, seed=2)
    generate_workload(root / "synthetic_dp8", ranks=8, steps=5, layers=2, seed=7)
    write_tpu_trace(root / "tpu_xla" / "host0.trace.json", TpuTraceSpec(devices=4, steps=4))
    (root / "tpu_xla" / "workload_card.yaml").write_text(TPU_CARD)
    return root
