"""Workload cards the board and CCL-Bench tests give the hand-laid folders of
``helpers.ccl_bench``."""

from __future__ import annotations

import textwrap

GPU_CARD = textwrap.dedent("""\
    workload:
      model: {phase: training}
      hardware:
        xpu_spec: {type: GPU, model: nvidia_h100, total_count: 2, count_per_node: 2}
    metric_source:
      traces: [json]
    """)
TPU_CARD = textwrap.dedent("""\
    workload:
      model: {phase: training}
      hardware:
        xpu_spec: {type: TPU, model: tpu_v6e, total_count: 2, count_per_node: 2}
    metric_source:
      traces: [json_tpu]
    """)
