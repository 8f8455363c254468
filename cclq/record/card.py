"""The workload card of a recorded configuration, in CCL-Bench's template.

Filled with what is known: the machine the ranks ran on (GPU model and count, or the
CPU for gloo runs), the world size, the backend and its version, the parallelism the
primitive stands for, the dtype, the profiled iterations. What cannot be known
(model URLs, network bandwidth, a contact) is left empty, as the template leaves it.
The config's ``card`` object is merged in last, so a user can say more (a model
family, a topology) or correct a guess.

The parallelism factors multiply to the world size, as CCL-Bench's cards do:
tp_columnwise / tp_rowwise are one tensor-parallel layer (``tp`` = W); all_reduce is
data parallelism's gradient reduction (``dp_replicate`` = W); all_gather and
reduce_scatter are sharded data parallelism's (``dp_shard`` = W); all_to_all is
expert parallelism's token exchange (``ep`` = W within ``dp_shard`` = W, torchtitan's
convention that experts are sharded over the data-parallel ranks; ``moe`` true); dp_mlp
is ``dp_replicate`` = W.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from cclq.cards.load import CARD_FILE
from cclq.record.config import COLLECTIVE_PRIMITIVES, Run

# dtype -> the card's precision words (the template lists fp32 and bf16)
PRECISION = {
    "float32": "fp32",
    "bfloat16": "bf16",
    "float16": "fp16",
    "float64": "fp64",
    "int32": "int32",
    "int64": "int64",
}
GRANULARITY = {
    "tp_columnwise": "layer",
    "tp_rowwise": "layer",
    "dp_mlp": "model_fwd_bwd_pass",
    **{p: "kernel" for p in COLLECTIVE_PRIMITIVES},
}
WHAT = {
    "tp_columnwise": "tensor-parallel column-wise linear layer (all-gather + GEMM)",
    "tp_rowwise": "tensor-parallel row-wise linear layer (GEMM + {collective})",
    "all_reduce": "all-reduce",
    "all_gather": "all-gather",
    "reduce_scatter": "reduce-scatter",
    "all_to_all": "all-to-all",
    "dp_mlp": "data-parallel training step of a {layers}-layer MLP (forward, backward, bucketed gradient all-reduce)",
}
LIBRARY = {"nccl": "NCCL", "gloo": "Gloo", "ucc": "UCC", "mpi": "MPI"}


def device_model(name: str | None) -> str | None:
    """``NVIDIA H100 80GB HBM3`` -> ``nvidia_h100``, the template's spelling."""
    if not name:
        return None
    words = re.sub(r"[^a-z0-9]+", " ", name.lower()).split()
    words = [w for w in words if not re.fullmatch(r"\d+gb|hbm\d*e?|sxm\d*|pcie|nvl", w)]
    return "_".join(words[:2]) if words else None


def parallelism(primitive: str, world_size: int) -> dict[str, int]:
    p = {"dp_replicate": 1, "dp_shard": 1, "tp": 1, "pp": 1, "cp": 1, "ep": 1}
    if primitive in ("tp_columnwise", "tp_rowwise"):
        p["tp"] = world_size
    elif primitive in ("all_gather", "reduce_scatter"):
        p["dp_shard"] = world_size
    elif primitive == "all_to_all":
        p["dp_shard"] = p["ep"] = world_size
    else:  # all_reduce, dp_mlp
        p["dp_replicate"] = world_size
    return p


def _sizes_text(run: Run) -> str:
    return ", ".join(f"{k}={v}" for k, v in run.sizes.items())


def build_card(run: Run, world_size: int, facts: dict[str, Any]) -> dict[str, Any]:
    """The card as a dict, in the template's key order."""
    on_gpu = run.device == "cuda"
    what = WHAT[run.primitive].format(
        collective=run.options.get("collective", "reduce-scatter").replace("_", "-"), layers=run.sizes.get("layers")
    )
    timing = (
        f"{run.num_iterations} profiled iterations after {run.num_warmups} warm-ups, "
        f"{run.time_measurement_backend}" + (", barrier before each iteration" if run.barrier_at_each_iteration else "")
    )
    description = (
        f"cclq record: {what}; {_sizes_text(run)}; {run.dtype}; {run.label}; {world_size} ranks; "
        f"{timing}; torch {facts.get('torch')}."
    )
    library = LIBRARY.get(run.backend or "")
    library_version = facts.get("nccl") if run.backend == "nccl" else None
    model: dict[str, Any] = {
        "phase": "training",
        "moe": run.primitive == "all_to_all",
        "granularity": GRANULARITY[run.primitive],
        "model_family": f"cclq-record-{run.primitive}",
        "precision": PRECISION[run.dtype],
        "epochs": 1,
        "iteration": run.num_iterations,
    }
    data: dict[str, Any] = {"dataset": "synthetic"}
    if run.primitive == "dp_mlp":
        s = run.sizes
        params = s["k"] * s["n"] + s["n"] + (s["layers"] - 1) * (s["n"] * s["n"] + s["n"])
        model["model_arch"] = {"num_params": params, "num_layers": s["layers"]}
        data["batch_size"] = s["m"] * world_size  # global batch
    card: dict[str, Any] = {
        "version": 1,
        "description": description,
        "hf_url": None,
        "trace_url": None,
        "contributor": "cclq record",
        "contact": None,
        "workload": {
            "model": model,
            "data": data,
            "hardware": {
                "xpu_spec": {
                    "type": "GPU" if on_gpu else "CPU",
                    "model": device_model(facts.get("gpu_name")) if on_gpu else facts.get("cpu_model"),
                    "total_count": world_size,
                    "count_per_node": world_size,  # cclq record runs every rank on this host
                },
                "driver_version": f"cuda_{facts['cuda']}" if on_gpu and facts.get("cuda") else None,
            },
        },
        "Model-executor": {
            "framework": {"name": "pytorch", "compiler_tool_selection": "plain_pytorch", "version": facts.get("torch")},
            "model_plan_parallelization": {**parallelism(run.primitive, world_size), "pp_mb": 1},
            "communication_library": {"name": library, "version": library_version},
            # gloo between processes of one host goes over TCP (loopback)
            "protocol_selection": ["tcp"] if run.backend == "gloo" else [],
        },
        "metric_source": {"traces": ["json"], "metrics_specific_trace": []},
    }
    return _merge(card, run.card)


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        out[key] = _merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def write_card(folder: Path, card: dict[str, Any]) -> Path:
    path = folder / CARD_FILE
    path.write_text(yaml.safe_dump(card, sort_keys=False, default_flow_style=False, width=100))
    return path
