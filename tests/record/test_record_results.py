"""The results CSV in DDLB's format, and the workload card `cclq record` fills. No torch."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest
import yaml

from cclq.cards.load import card_table, load_card
from cclq.record import card as record_card
from cclq.record import results
from cclq.record.config import PRIMITIVES, SIZE_KEYS, Run, expand

# DDLB's columns, in order (ddlb/benchmark.py result_row; `valid` only when validating)
DDLB_COLUMNS = [
    "implementation",
    "mean_time (ms)",
    "std_time",
    "min_time",
    "max_time",
    "m",
    "n",
    "k",
    "dtype",
    "Throughput (TFLOPS)",
    "Throughput std (TFLOPS)",
    "world_size",
    "hostname",
    "time_measurement_backend",
    "barrier_at_each_iteration",
    "option",
    "valid",
]

CPU_FACTS = {
    "hostname": "node7",
    "torch": "2.13.0",
    "cpu_model": "AMD EPYC 9654",
    "cuda": None,
    "gpu_name": None,
    "gpu_count": 0,
    "nccl": None,
}
GPU_FACTS = {**CPU_FACTS, "cuda": "12.8", "gpu_name": "NVIDIA H100 80GB HBM3", "gpu_count": 8, "nccl": "2.27.3"}


def one_run(tmp_path: Path, benchmark: dict, world_size: int = 2, cuda: bool = False) -> Run:
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"benchmark": benchmark}))
    (run,) = expand(path, world_size, cuda=cuda)
    return run


def test_row_statistics_are_worked_out_like_ddlb(tmp_path):
    run = one_run(
        tmp_path,
        {
            "primitive": "tp_columnwise",
            "m": 64,
            "n": 32,
            "k": 16,
            "implementations": {"pytorch": [{"backend": "gloo"}]},
        },
    )
    row = results.result_row(run, 2, [1.0, 2.0, 4.0, 5.0], "node7", valid=True)
    assert list(row) == DDLB_COLUMNS
    assert row["mean_time (ms)"] == 3.0
    assert row["std_time"] == pytest.approx(math.sqrt((4 + 1 + 1 + 4) / 4))  # population std, numpy's default
    assert (row["min_time"], row["max_time"]) == (1.0, 5.0)
    flops = 2 * 64 * 32 * 16
    tputs = [flops / (t * 1e9) for t in (1.0, 2.0, 4.0, 5.0)]
    assert row["Throughput (TFLOPS)"] == pytest.approx(sum(tputs) / 4)
    assert (row["m"], row["n"], row["k"], row["world_size"], row["hostname"]) == (64, 32, 16, 2, "node7")
    assert row["option"] == "backend=gloo, order=AG_before, device=cpu" and row["valid"] is True


def test_collectives_put_the_message_in_m_and_have_no_flops(tmp_path):
    run = one_run(
        tmp_path,
        {
            "primitive": "all_gather",
            "message_bytes": 4096,
            "dtype": "bfloat16",
            "validate": False,
            "implementations": {"pytorch": [{}]},
        },
    )
    row = results.result_row(run, 4, [0.5], "node7", valid=None)
    assert (row["m"], row["n"], row["k"]) == (2048, 1, 1)  # 4096 B of bfloat16
    assert row["Throughput (TFLOPS)"] is None and "valid" not in row


def test_dp_mlp_counts_forward_and_backward_flops_of_every_rank(tmp_path):
    run = one_run(
        tmp_path, {"primitive": "dp_mlp", "m": 8, "n": 64, "k": 32, "layers": 3, "implementations": {"pytorch": [{}]}}
    )
    # per rank and sample: 2 x weights forward, 4 x weights backward; weights 32*64 + 2*64*64
    assert results.flops_per_iteration(run, 4) == 6 * 8 * (32 * 64 + 2 * 64 * 64) * 4


def test_csv_has_ddlb_header_and_pandas_cells(tmp_path):
    run = one_run(
        tmp_path,
        {
            "primitive": "tp_columnwise",
            "m": 64,
            "n": 32,
            "k": 16,
            "implementations": {"pytorch": [{"backend": "gloo"}]},
        },
    )
    path = tmp_path / results.RESULTS_FILE
    results.write_rows(path, [results.result_row(run, 2, [0.25, 0.75], "node7", valid=False)])
    with open(path, newline="") as f:
        header, values = list(csv.reader(f))
    assert header == DDLB_COLUMNS
    cells = dict(zip(header, values))
    assert cells["mean_time (ms)"] == "0.5" and cells["valid"] == "False"
    assert cells["barrier_at_each_iteration"] == "True" and cells["time_measurement_backend"] == "cpu_clock"
    assert cells["implementation"] == "pytorch (backend=gloo, order=AG_before, device=cpu)"


def test_output_folder_csv_gathers_every_workload(tmp_path):
    run = one_run(
        tmp_path,
        {"primitive": "all_reduce", "message_bytes": 64, "validate": False, "implementations": {"pytorch": [{}]}},
    )
    for name, t in (("b", 2.0), ("a", 1.0)):
        (tmp_path / name).mkdir()
        results.write_rows(tmp_path / name / results.RESULTS_FILE, [results.result_row(run, 2, [t], "h", None)])
    (tmp_path / ".record-failed").mkdir()
    assert results.collect(tmp_path) == 2
    rows = results.read_rows(tmp_path / results.RESULTS_FILE)
    assert [r["mean_time (ms)"] for r in rows] == ["1.0", "2.0"]  # folder order
    assert list(rows[0]) == DDLB_COLUMNS[:-1]


def test_ddlb_output_csv_is_appended_to_with_one_header(tmp_path):
    run = one_run(tmp_path, {"primitive": "all_reduce", "message_bytes": 64, "implementations": {"pytorch": [{}]}})
    path = tmp_path / "results" / "run.csv"
    results.append_rows(path, [results.result_row(run, 2, [1.0], "h", True)])
    results.append_rows(path, [results.result_row(run, 2, [3.0], "h", False)])
    rows = results.read_rows(path)
    assert [(r["mean_time (ms)"], r["valid"]) for r in rows] == [("1.0", "True"), ("3.0", "False")]
    assert path.read_text().count("implementation,") == 1


# ------------------------------------------------------------------------- card
PHASES = {"training", "inference", "serving"}
PRECISIONS = {"fp32", "bf16", "fp16", "fp64", "int32", "int64"}
FACTORS = ("dp_replicate", "dp_shard", "tp", "pp", "cp")


def check_card(card: dict, world_size: int) -> None:
    """What `cclq cards check` will ask of a card (the template's structure)."""
    model = card["workload"]["model"]
    xpu = card["workload"]["hardware"]["xpu_spec"]
    par = card["Model-executor"]["model_plan_parallelization"]
    assert model["phase"] in PHASES and model["precision"] in PRECISIONS
    assert isinstance(model["iteration"], int) and isinstance(model["epochs"], int)
    assert isinstance(xpu["total_count"], int) and isinstance(xpu["count_per_node"], int)
    assert all(isinstance(par[f], int) for f in (*FACTORS, "ep", "pp_mb"))
    assert math.prod(par[f] for f in FACTORS) == xpu["total_count"] == world_size
    assert card["metric_source"]["traces"] == ["json"]


def sample_sizes(primitive: str) -> dict:
    values = {"m": 64, "n": 32, "k": 16, "layers": 2, "message_bytes": 4096}
    return {k: values[k] for k in SIZE_KEYS[primitive]}


@pytest.mark.parametrize("primitive", PRIMITIVES)
def test_card_of_every_primitive_passes_the_template_checks(tmp_path, primitive):
    run = one_run(
        tmp_path,
        {
            "primitive": primitive,
            **sample_sizes(primitive),
            "dtype": "bfloat16",
            "implementations": {"pytorch": [{"backend": "gloo"}]},
        },
        world_size=4,
    )
    card = record_card.build_card(run, 4, CPU_FACTS)
    check_card(card, 4)
    assert card["workload"]["hardware"]["xpu_spec"] == {
        "type": "CPU",
        "model": "AMD EPYC 9654",
        "total_count": 4,
        "count_per_node": 4,
    }
    executor = card["Model-executor"]
    assert executor["communication_library"] == {"name": "Gloo", "version": None}
    assert executor["framework"]["version"] == "2.13.0"
    assert card["workload"]["model"]["precision"] == "bf16"
    assert card["workload"]["model"]["iteration"] == 10  # the profiled iterations (default)


def test_card_on_gpus_names_the_device_driver_and_nccl(tmp_path):
    run = one_run(
        tmp_path,
        {"primitive": "tp_columnwise", "m": 64, "n": 32, "k": 16, "implementations": {"pytorch": [{}]}},
        world_size=2,
        cuda=True,
    )
    card = record_card.build_card(run, 2, GPU_FACTS)
    check_card(card, 2)
    hw = card["workload"]["hardware"]
    assert hw["xpu_spec"]["type"] == "GPU" and hw["xpu_spec"]["model"] == "nvidia_h100"
    assert hw["driver_version"] == "cuda_12.8"
    assert card["Model-executor"]["communication_library"] == {"name": "NCCL", "version": "2.27.3"}
    assert card["Model-executor"]["model_plan_parallelization"]["tp"] == 2


def test_device_model_spelling():
    assert record_card.device_model("NVIDIA H200") == "nvidia_h200"
    assert record_card.device_model("NVIDIA A100-SXM4-80GB") == "nvidia_a100"
    assert record_card.device_model("NVIDIA H100 80GB HBM3") == "nvidia_h100"
    assert record_card.device_model(None) is None


def test_config_card_fields_are_merged_and_the_card_flattens(tmp_path):
    run = one_run(
        tmp_path,
        {
            "primitive": "dp_mlp",
            "m": 8,
            "n": 64,
            "k": 32,
            "layers": 3,
            "card": {"contact": "me@example.org", "workload": {"hardware": {"network_topo": {"topology": "nvlink"}}}},
            "implementations": {"pytorch": [{"backend": "gloo"}]},
        },
    )
    card = record_card.build_card(run, 2, CPU_FACTS)
    check_card(card, 2)
    path = record_card.write_card(tmp_path, card)
    row = card_table("t", load_card(path)).to_pylist()[0]
    assert (row["total_count"], row["dp_replicate"], row["phase"], row["batch_size"]) == (2, 2, "training", 16)
    assert row["num_params"] == 32 * 64 + 64 + 2 * (64 * 64 + 64)
    assert row["network_topology"] == "nvlink" and row["comm_library"] == "Gloo"
    assert yaml.safe_load(path.read_text())["contact"] == "me@example.org"
