"""Workload cards: where they are found, the TOML forms, and `cclq cards check`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.cli import invoke
from helpers.paths import REPO, SHARED_TRACES, require_shared
from helpers.warehouse import query, run_ingest

from cclq.cards.check import check_card_document, check_card_file
from cclq.cards.load import find_card, load_card
from cclq.ingest.plan import check_input_cards
from cclq.synth.kineto import KinetoTraceBuilder

GOOD_CARD = """\
version: 1
description: Llama training on 8 GPUs
workload:
  model:
    phase: training
    moe: false
    precision: bf16
    model_family: llama-3.1-8b
    model_arch:
      num_params: 8030261248
  data:
    batch_size: 4
    seq_len: 512
  hardware:
    network_topo:
      bandwidth_gbps: [200, N/A]
    xpu_spec:
      type: GPU
      total_count: 8
      count_per_node: 4
Model-executor:
  model_plan_parallelization:
    dp_replicate: 1
    dp_shard: 2
    tp: 4
    pp: 1
  communication_library:
    name: NCCL
    version: "2.21.5"
metric_source:
  traces: [json]
"""

TORCHTITAN_TOML = """\
[job]
description = "Llama 3 8B, FSDP2 x TP4"

[model]
name = "llama3"
flavor = "8B"

[training]
local_batch_size = 4
seq_len = 512
dataset = "c4_test"
mixed_precision_param = "bfloat16"

[parallelism]
data_parallel_replicate_degree = 1
data_parallel_shard_degree = 2
tensor_parallel_degree = 4
pipeline_parallel_degree = 1
pipeline_parallel_microbatch_size = 1
context_parallel_degree = 1
"""


def problems(text: str) -> dict[str, str]:
    import yaml

    return dict(check_card_document(yaml.safe_load(text)))


def tiny_trace(folder: Path) -> None:
    b = KinetoTraceBuilder(rank=0, world_size=1)
    b.kernel("gemm", ts=1_000, dur=2_000)
    b.write(folder / "rank0.pt.trace.json")


def test_a_card_that_follows_the_template_has_no_problems():
    assert problems(GOOD_CARD) == {}


def test_every_kind_of_problem_names_its_field():
    bad = (
        GOOD_CARD.replace("phase: training", "phase: pretraining")
        .replace("precision: bf16", "precision: bfloat16")
        .replace("num_params: 8030261248", "num_params: 8.03e9")
        .replace("batch_size: 4", 'batch_size: "4"')
        .replace("seq_len: 512", "seq_len: 0")
        .replace("count_per_node: 4", "count_per_node: 3")
        .replace('version: "2.21.5"', "version: 2.20")
        .replace("    tp: 4", "    tpp: 4")
        .replace("traces: [json]", "traces: json")
    )
    found = problems(bad)
    assert found == {
        "workload.model.phase": "text 'pretraining' is not one of training, inference, serving",
        "workload.model.precision": "'bfloat16' is spelled 'bf16' in the template",
        "workload.model.model_arch.num_params": "must be a number, got text '8.03e9' (YAML 1.1 reads 8.03e9 as text: write 8.03e+9 or the integer)",  # noqa: E501
        "workload.data.batch_size": "must be a number, got text '4' (drop the quotes)",
        "workload.data.seq_len": "must be >= 1, got 0",
        "workload.hardware.xpu_spec.count_per_node": "3 per node does not divide the 8 devices (workload.hardware.xpu_spec.total_count)",  # noqa: E501
        "Model-executor.communication_library.version": 'is the number 2.2; quote it ("...") so it stays as written (2.20 would become 2.2)',  # noqa: E501
        "Model-executor.model_plan_parallelization.tpp": "unknown field; did you mean 'tp'? (its value is ignored)",
        # with tp misspelled, the factors the card gives multiply to 2, not 8
        "Model-executor.model_plan_parallelization": "dp_replicate 1 x dp_shard 2 x pp 1 = 2 devices, but workload.hardware.xpu_spec.total_count is 8",  # noqa: E501
        "metric_source.traces": "must be a list, got text 'json'",
    }


def test_required_fields_and_sections():
    found = problems("version: 1\nworkload:\n  model:\n    moe: false\n")
    assert found == {
        "description": "missing (a required field)",
        "workload.model.phase": "missing (a required field)",
        "workload.hardware": "missing (a required section)",
        "metric_source": "missing (a required section)",
    }
    # the template's empty list entry (`traces:\n  -`) is no value
    assert (
        problems(GOOD_CARD.replace("traces: [json]", "traces:\n    -"))["metric_source.traces"]
        == "missing (a required field)"
    )


def test_parallelism_must_multiply_to_the_device_count_and_ep_needs_experts():
    assert problems(GOOD_CARD.replace("    tp: 4", "    tp: 2"))["Model-executor.model_plan_parallelization"] == (
        "dp_replicate 1 x dp_shard 2 x tp 2 x pp 1 = 4 devices, but workload.hardware.xpu_spec.total_count is 8"
    )
    ep = problems(GOOD_CARD.replace("    pp: 1", "    pp: 1\n    ep: 3").replace("moe: false", "moe: true"))
    assert ep == {
        "Model-executor.model_plan_parallelization.ep": "ep 3 does not divide the 8 devices (workload.hardware.xpu_spec.total_count)"  # noqa: E501
    }
    # ep 4 divides 8, but the model has no experts
    assert list(problems(GOOD_CARD.replace("    pp: 1", "    pp: 1\n    ep: 4")).values()) == [
        "ep 4 is expert parallelism, but workload.model.moe is false (without experts, set ep: 1 or moe: true)"
    ]
    assert problems(GOOD_CARD.replace("    pp: 1", "    pp: 1\n    ep: 4").replace("moe: false", "moe: true")) == {}


def test_a_file_that_is_not_a_card_is_one_problem(tmp_path: Path):
    broken = tmp_path / "workload_card.yaml"
    broken.write_text("workload: [unclosed\n")
    (problem,) = check_card_file(broken)
    assert (problem.field, problem.problem.split(":")[0]) == ("-", "invalid YAML")
    broken.write_text("- a list, not a mapping\n")
    assert [p.problem for p in check_card_file(broken)] == ["a workload card must be a YAML mapping"]


def test_card_named_after_its_folder_and_torchtitan_toml(tmp_path: Path, wh):
    named = tmp_path / "in" / "llama_named"
    tiny_trace(named)
    (named / "llama_named.yaml").write_text(GOOD_CARD)
    toml_only = tmp_path / "in" / "llama_toml"
    tiny_trace(toml_only)
    (toml_only / "workload.toml").write_text(TORCHTITAN_TOML)
    assert find_card(named) == named / "llama_named.yaml"
    assert load_card(toml_only / "workload.toml") == {
        "description": "Llama 3 8B, FSDP2 x TP4",
        # global batch = local 4 x dp_replicate 1 x dp_shard 2
        "workload": {
            "model": {"phase": "training", "model_family": "llama3-8b", "precision": "bf16"},
            "data": {"batch_size": 8, "seq_len": 512, "dataset": "c4_test"},
        },
        "Model-executor": {
            "framework": {"name": "torchtitan"},
            "model_plan_parallelization": {"dp_replicate": 1, "dp_shard": 2, "tp": 4, "pp": 1, "pp_mb": 1, "cp": 1},
        },
    }
    report = run_ingest([tmp_path / "in"], wh)
    assert not report.failed
    assert query(wh, "SELECT trace, model_family, tp, dp_shard, batch_size, framework FROM traces ORDER BY trace") == [
        ("llama_named", "llama-3.1-8b", 4, 2, 4, None),
        ("llama_toml", "llama3-8b", 4, 2, 8, "torchtitan"),
    ]


def test_card_and_torchtitan_config_must_agree(tmp_path: Path):
    folder = tmp_path / "w"
    folder.mkdir()
    (folder / "w.yaml").write_text(GOOD_CARD)
    (folder / "workload.toml").write_text(
        TORCHTITAN_TOML.replace("tensor_parallel_degree = 4", "tensor_parallel_degree = 2")
    )
    assert [(p.field, p.problem) for p in check_card_file(folder / "w.yaml")] == [
        ("Model-executor.model_plan_parallelization.tp", "4 here, but workload.toml says tensor_parallel_degree = 2")
    ]


def test_a_malformed_card_never_blocks_the_traces_beside_it(tmp_path: Path, wh):
    bad_yaml = tmp_path / "in" / "bad_yaml"
    tiny_trace(bad_yaml)
    (bad_yaml / "workload_card.yaml").write_text("workload: [unclosed\n")
    wrong = tmp_path / "in" / "wrong_values"
    tiny_trace(wrong)
    (wrong / "workload_card.yaml").write_text(GOOD_CARD.replace("phase: training", "phase: pretraining"))
    report = run_ingest([tmp_path / "in"], wh)
    assert not report.failed
    assert query(wh, "SELECT trace, phase FROM traces ORDER BY trace") == [
        ("bad_yaml", None),
        ("wrong_values", "pretraining"),
    ]  # kept as written, and reported
    warned = sorted(w.split(": ", 1)[1] for w in report.warnings if "workload_card.yaml" in w)
    assert warned[0].startswith("1 card problem(s), first workload.model.phase: text 'pretraining'")
    assert warned[1].startswith("invalid YAML") and warned[1].endswith("card ignored")


def test_cli_prints_one_line_per_problem_and_exits_1(tmp_path: Path):
    good, bad, bare = (tmp_path / name for name in ("good", "bad", "bare"))
    for folder in (good, bad, bare):
        tiny_trace(folder)
    (good / "workload_card.yaml").write_text(GOOD_CARD)
    (bad / "workload_card.yaml").write_text(GOOD_CARD.replace("tp: 4", "tp: four"))
    done = invoke("cards", "check", str(tmp_path))
    assert done.returncode == 1
    card = bad / "workload_card.yaml"
    assert done.stdout.splitlines() == [
        f"{card}: Model-executor.model_plan_parallelization.tp: must be a whole number >= 1, got text 'four'"
    ]
    assert "2 card(s) checked: 1 problem(s) in 1 card(s); 1 workload(s) without a card" in done.stderr
    as_json = invoke("cards", "check", str(bad), "--format", "json")
    assert json.loads(as_json.stdout) == [
        {
            "file": str(card),
            "field": "Model-executor.model_plan_parallelization.tp",
            "problem": "must be a whole number >= 1, got text 'four'",
        }
    ]
    assert invoke("cards", "check", str(good / "workload_card.yaml")).returncode == 0
    missing = invoke("cards", "check", str(tmp_path / "nowhere"))
    assert missing.returncode == 2 and "Traceback" not in missing.stderr


def test_the_sample_workload_card_is_clean():
    report = check_input_cards([REPO / "trace_collection"])
    assert len(report.cards) == 1 and report.problems == []


@pytest.mark.slow
def test_real_cards_are_accepted_except_what_is_really_wrong():
    """The shared cards follow the template; the DLRM card says ep 8 for a model without
    experts (its embedding tables are sharded, which the template has no field for)."""
    require_shared()
    report = check_input_cards([SHARED_TRACES])
    assert len(report.cards) == 5
    assert [(Path(p.path).parent.name, p.field) for p in report.problems] == [
        ("dlrm_param_8xV100", "Model-executor.model_plan_parallelization.ep")
    ]


@pytest.mark.parametrize("text", ["", "version: 1\n"])
def test_an_empty_card_lists_what_it_lacks(tmp_path: Path, text: str):
    path = tmp_path / "workload_card.yaml"
    path.write_text(text)
    fields = {p.field for p in check_card_file(path)}
    assert {"description", "workload", "metric_source"} <= fields
