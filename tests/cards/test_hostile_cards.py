"""Hostile and impossible workload cards: nesting that recursion cannot follow, values no
hardware has; `cards check` names them, ingest goes on, and a metric they make
inapplicable says why (no NULL or NaN without a reason)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from helpers.cli import invoke
from helpers.leaderboard import build_mfu_train, build_two_nodes
from helpers.warehouse import metric_rows, query, run_ingest

from cclq.cards.check import check_card_file
from cclq.synth.kineto import KinetoTraceBuilder


def _trace(folder: Path) -> None:
    b = KinetoTraceBuilder(rank=0, world_size=1)
    b.kernel("gemm", ts=0, dur=5_000)
    b.write(folder / "rank0.json")


DEEP_CARDS = {
    "workload_card.yaml": "workload: " + "[" * 500 + "]" * 500 + "\n",  # 1 KB, 500 deep
    "workload.toml": "x = " + "[" * 2000 + "]" * 2000 + "\n",  # 4 KB, 2,000 deep
    "deep_block.yaml": "".join("  " * i + f"k{i}:\n" for i in range(200)),  # block style, 200 deep
}


@pytest.mark.parametrize("name", sorted(DEEP_CARDS))
def test_a_deeply_nested_card_is_refused_and_the_collection_ingests(tmp_path, wh, name):
    """A 1 KB YAML card 500 deep, or a 4 KB workload.toml 2,000 deep, stopped the whole
    ingest with "RecursionError ... this is a bug", for every workload of the collection;
    `cards check` died the same way."""
    for w in ("a", "b"):
        _trace(tmp_path / "in" / w)
    card_name = name if name != "deep_block.yaml" else "a.yaml"
    (tmp_path / "in" / "a" / card_name).write_text(DEEP_CARDS[name])
    report = run_ingest([tmp_path / "in"], wh)
    assert not report.failed
    assert query(wh, "SELECT DISTINCT trace FROM events ORDER BY 1") == [("a",), ("b",)]
    problems = check_card_file(tmp_path / "in" / "a" / card_name)
    assert [p.problem for p in problems] == ["nested deeper than 32 levels: not a workload card"]
    done = invoke("cards", "check", str(tmp_path / "in"))
    assert done.returncode == 1
    assert "nested deeper than 32 levels" in done.stdout + done.stderr
    assert "a bug" not in done.stderr and "Traceback" not in done.stderr


def test_card_depth_counts_without_recursion():
    from cclq.cards.load import MAX_CARD_DEPTH, card_depth

    deep: list = []
    node = deep
    for _ in range(100_000):
        node.append([])
        node = node[0]
    assert card_depth(deep) == MAX_CARD_DEPTH + 1  # stops counting past the bound
    assert card_depth({"a": {"b": [1, {"c": 2}]}}) == 4
    assert card_depth(3) == 0


# ------------------------------------------------------------- impossible values
def test_cards_check_flags_a_zero_bandwidth_and_a_zero_count(tmp_path):
    card = tmp_path / "workload_card.yaml"
    card.write_text(
        "version: 1\ndescription: d\nworkload:\n  model: {phase: training}\n  hardware:\n"
        "    network_topo: {bandwidth_gbps: [0, 0]}\n    xpu_spec: {type: GPU, total_count: 0}\n"
        "metric_source: {traces: [json]}\n"
    )
    problems = {p.field: p.problem for p in check_card_file(card)}
    assert problems["workload.hardware.network_topo.bandwidth_gbps"] == "entries must be numbers > 0 (or N/A), got 0"
    assert problems["workload.hardware.xpu_spec.total_count"] == "must be >= 1, got 0"


def test_a_zero_bandwidth_gives_a_null_with_its_reason(tmp_path, wh):
    """``bandwidth_gbps: [0, 0]`` gave bandwidth_utilization_* NULL with a NULL reason
    (version 1, the ratio to the card's link bandwidth; version 2 needs no card)."""
    folder = tmp_path / "in" / "zero_bw"
    build_two_nodes(folder)
    card = folder / "workload_card.yaml"
    card.write_text(card.read_text().replace("bandwidth_gbps: [100, 800]", "bandwidth_gbps: [0, 0]"))
    assert not run_ingest([tmp_path / "in"], wh).failed
    for metric, link, index in (
        ("bandwidth_utilization_allreduce_group_6", "scale-up", 1),
        ("bandwidth_utilization_allgather_group_6", "scale-out", 0),
    ):
        (row,) = metric_rows(wh, metric, version=1)
        assert row["value"] is None
        assert row["reason"] == (
            f"the card gives no {link} bandwidth (network_topo.bandwidth_gbps[{index}] is missing or not above 0)"
        ), metric


def test_a_zero_total_count_gives_no_nan_and_a_reason(tmp_path, wh):
    """``total_count: 0`` gave mfu = nan without a reason."""
    folder = tmp_path / "in" / "zero_count"
    folder.mkdir(parents=True)
    build_mfu_train(folder)
    card = folder / "workload_card.yaml"
    card.write_text(card.read_text().replace("total_count: 2", "total_count: 0"))
    assert not run_ingest([tmp_path / "in"], wh).failed
    (row,) = metric_rows(wh, "mfu")
    assert row["value"] is None or not math.isnan(row["value"])
    assert row["value"] is None
    assert row["reason"] == "the card's total_count is not above 0: no devices to divide by"


@pytest.mark.slow
def test_every_metric_gives_a_reason_for_every_null_under_impossible_cards(tmp_path, wh):
    """Every metric (latest version) over workloads whose cards hold zeros where no
    hardware or model can (bandwidth, device counts, batch, sequence length, parameters):
    a NULL or NaN value always comes with its reason."""
    from helpers.leaderboard import build_mfu_infer

    from cclq.query.metrics import run_metrics
    from cclq.query.registry import registry
    from cclq.query.session import connect

    zeros = {
        "bandwidth_gbps: [100, 800]": "bandwidth_gbps: [0, 0]",
        "total_count: 4": "total_count: 0",
        "count_per_node: 2": "count_per_node: 0",
        "batch_size: 8": "batch_size: 0",
        "seq_len: 4096": "seq_len: 0",
        "num_params: 8.0e9": "num_params: 0",
        "num_layers: 32": "num_layers: 0",
        "total_count: 2": "total_count: 0",
        "total_count: 1": "total_count: 0",
        "seq_len: 2048": "seq_len: 0",
    }
    for name, build in (("two_nodes", build_two_nodes), ("train", build_mfu_train), ("infer", build_mfu_infer)):
        folder = tmp_path / "in" / name
        folder.mkdir(parents=True)
        build(folder)
        card = folder / "workload_card.yaml"
        text = card.read_text()
        for old, new in zeros.items():
            text = text.replace(old, new)
        card.write_text(text)
    assert not run_ingest([tmp_path / "in"], wh).failed
    latest = [versions[max(versions)] for versions in registry().values()]
    runs = run_metrics(connect(wh), latest)  # one batch: each metric one query, as alone
    silent = []
    for spec in latest:
        assert runs[spec.name].error is None, (spec.name, runs[spec.name].error)
        for row in runs[spec.name].table.to_pylist():
            value = row.get("value")
            if (value is None or isinstance(value, float) and not math.isfinite(value)) and not row.get("reason"):
                silent.append((spec.name, row["trace"], row.get("rank"), value))
    assert silent == []
