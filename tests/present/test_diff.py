"""`cclq diff A B`: metrics side by side and the kernel-level diff, worked out by hand.

run_a: presentation_traces.two_rank_run as is (per rank: 2 gemm of 100 us, 1 elementwise
of 50 us, 1 all-reduce of 30 us). run_b: gemm 150 us, a 20 us softmax_kernel, no
all-reduce. run_c: run_a's rank 0 alone. run_d: run_b with gemm 200 us.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from helpers.cli import invoke
from helpers.presentation_traces import two_rank_run
from helpers.warehouse import run_ingest

from cclq.store.warehouse import Warehouse

US = 1e-6


@pytest.fixture(scope="module")
def wh_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("diff")
    two_rank_run(root / "in" / "run_a")
    two_rank_run(root / "in" / "run_b", gemm_us=150, extra_kernel="softmax_kernel", allreduce=False)
    two_rank_run(root / "in" / "run_c", ranks=(0,))
    two_rank_run(root / "in" / "run_d", gemm_us=200, extra_kernel="softmax_kernel", allreduce=False)
    assert not run_ingest([root / "in"], Warehouse(root / "wh")).failed
    return root / "wh"


def diff_json(wh_root: Path, *args: str) -> dict:
    done = invoke("diff", *args, "--format", "json", "--warehouse", str(wh_root))
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def ops(data: dict) -> dict[str, dict]:
    return {o["name"].split("(")[0]: o for o in data["ops"]}


@pytest.mark.slow
def test_kernel_diff_of_two_traces_with_the_same_ranks(wh_root: Path):
    data = diff_json(wh_root, "run_a", "run_b")
    assert data["op_basis"] == "total"
    o = ops(data)
    names = [n.split("(")[0] for n in (x["name"] for x in data["ops"])]
    # sorted by the size of the time change: gemm +200 us, all-reduce -60, softmax +40, elementwise 0
    assert names == ["gemm_kernel", "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "softmax_kernel", "elementwise_kernel"]
    g = o["gemm_kernel"]
    assert (g["calls_a"], g["calls_b"], g["status"]) == (4, 4, "both")
    assert (g["time_a_s"], g["time_b_s"], g["delta_s"], g["rel"]) == pytest.approx((400 * US, 600 * US, 200 * US, 0.5))
    nccl = o["ncclDevKernel_AllReduce_Sum_f32_RING_LL"]
    assert (nccl["status"], nccl["time_a_s"], nccl["time_b_s"]) == ("only A", pytest.approx(60 * US), 0)
    soft = o["softmax_kernel"]
    assert (soft["status"], soft["calls_b"], soft["time_b_s"], soft["rel"]) == (
        "only B",
        2,
        pytest.approx(40 * US),
        None,
    )
    groups = {(r["group"], r["name"]): r for r in data["op_groups"]}
    assert groups[("class", "compute")]["delta_s"] == pytest.approx((740 - 500) * US)
    assert groups[("collective", "all_reduce")]["status"] == "only A"


def test_metric_diff_with_change_and_per_rank_rows(wh_root: Path):
    data = diff_json(wh_root, "run_a", "run_b")
    rows = {(m["metric"], m["rank"]): m for m in data["metrics"]}
    tkt = rows[("total_kernel_time", None)]
    # A: 2 x 280 us; B: 2 x (300 + 50 + 20) us
    assert (tkt["a"], tkt["b"], tkt["delta"], tkt["rel"]) == pytest.approx((560 * US, 740 * US, 180 * US, 180 / 560))
    # same ranks on both sides: per-rank metrics are compared rank by rank
    r1 = rows[("total_kernel_time", 1)]
    assert (r1["a"], r1["b"]) == pytest.approx((280 * US, 370 * US))
    assert rows[("avg_step_time", None)]["delta"] == pytest.approx(0.0, abs=1e-15)
    # polarity: communication_fraction is lower-is-better; B has no communication at all
    comm = rows[("communication_fraction", None)]
    assert comm["a"] == pytest.approx(30 / 280) and comm["verdict"] == "better"
    # a metric that applies to neither side is left out; one side n/a says why
    assert ("wall_time_s", None) not in rows
    skew = rows[("collective_skew", None)]
    assert skew["b"] is None and skew["note"].startswith("B: ")


@pytest.mark.slow
def test_different_rank_counts_compare_per_rank(wh_root: Path):
    data = diff_json(wh_root, "run_a", "run_c")
    assert data["op_basis"] == "per rank"
    g = ops(data)["gemm_kernel"]
    # A: 400 us over 2 ranks; C: 200 us on its one rank
    assert (g["calls_a"], g["calls_b"], g["time_a_s"], g["time_b_s"]) == pytest.approx((2, 2, 200 * US, 200 * US))
    assert not [m for m in data["metrics"] if m["rank"] is not None]  # ranks differ: summaries only


@pytest.mark.slow
def test_sets_of_traces_and_one_rank(wh_root: Path):
    data = diff_json(wh_root, "run_a", "run_[bd]")
    assert data["b"] == ["run_b", "run_d"] and data["op_basis"] == "per rank"
    g = ops(data)["gemm_kernel"]
    assert (g["time_a_s"], g["time_b_s"]) == pytest.approx((200 * US, (600 + 800) / 4 * US))
    tkt = next(m for m in data["metrics"] if m["metric"] == "total_kernel_time" and m["rank"] is None)
    assert tkt["b"] == pytest.approx((740 + 940) / 2 * US)  # the mean of the set's values
    one = diff_json(wh_root, "run_a", "run_b", "--rank", "1")
    assert ops(one)["gemm_kernel"]["time_b_s"] == pytest.approx(300 * US)
    assert {m["rank"] for m in one["metrics"]} == {None, 1}


@pytest.mark.slow
def test_csv_table_and_errors(wh_root: Path):
    done = invoke("diff", "run_a", "run_b", "--format", "csv", "--warehouse", str(wh_root))
    assert done.returncode == 0, done.stderr
    rows = list(csv.DictReader(io.StringIO(done.stdout)))
    assert {r["part"] for r in rows} == {"metric", "op_group", "op"}
    assert len([r for r in rows if r["part"] == "op"]) == 4
    table = invoke("diff", "run_a", "run_b", "--warehouse", str(wh_root))
    assert table.returncode == 0 and "only B" in table.stdout and "gemm_kernel" in table.stdout
    for args, message in (
        (("run_a", "nope"), "no trace 'nope'"),
        (("run_a", "run_a,run_b"), "on both sides"),
        (("run_a", "zz*"), "no trace matches 'zz*'"),
    ):
        bad = invoke("diff", *args, "--warehouse", str(wh_root))
        assert bad.returncode == 2 and message in bad.stderr and "Traceback" not in bad.stderr, bad.stderr
