"""Finding the metric you meant: the compact `cclq metrics` listing and its filters,
`--applicable`, `metric --explain`, "did you mean" for every kind of name, and --trace globs."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.cli import invoke
from helpers.warehouse import run_ingest

from cclq.query.registry import CATEGORIES, latest_specs, nearest
from cclq.store.warehouse import Warehouse
from cclq.synth.kineto import generate_workload


@pytest.fixture(scope="module")
def wh(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("find")
    generate_workload(root / "in" / "Run_A", ranks=2, steps=2, layers=1, seed=1)
    generate_workload(root / "in" / "Run_B", ranks=2, steps=2, layers=1, seed=2)
    assert not run_ingest([root / "in"], Warehouse(root / "wh")).failed
    return str(root / "wh")


def _usage_error(*args: str) -> tuple[str, str]:
    done = invoke(*args)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    error, hint = (done.stderr.strip().splitlines() + [""])[:2]
    return error, hint


def test_nearest_names():
    names = {s.name for s in latest_specs()}
    assert nearest("comunication_overlap_ratio", names)[0] == "communication_overlap_ratio"
    assert nearest("dlrm_param_8xv100", ["dlrm_param_8xV100", "hta_alexnet"]) == ["dlrm_param_8xV100"]
    assert nearest("colectives", set(CATEGORIES)) == ["collectives"]
    assert nearest("qqqqqq", names) == []


@pytest.mark.slow
def test_did_you_mean_each_kind_of_name(wh: str):
    error, hint = _usage_error("metric", "comunication_overlap_ratio", "--all", "-w", wh)
    assert error == "cclq: error: unknown metric 'comunication_overlap_ratio'"
    assert hint.startswith("hint: did you mean communication_overlap_ratio")
    error, hint = _usage_error("metric", "total_kernel_time", "--trace", "run_a", "-w", wh)
    assert hint == "hint: did you mean Run_A?"
    _, hint = _usage_error("report", "run_b", "-w", wh)
    assert hint == "hint: did you mean Run_B?"
    _, hint = _usage_error("metric", "--category", "comunication", "--all", "-w", wh)
    assert hint == "hint: did you mean communication?"
    _, hint = _usage_error("metric", "throughput", "--all", "-p", "model_param=7", "-w", wh)
    assert hint == "hint: did you mean model_params?"
    _, hint = _usage_error("metrics", "comunication")
    assert hint.startswith("hint: did you mean communication")


def test_trace_accepts_globs(wh: str):
    done = invoke("metric", "total_kernel_time", "--trace", "Run_*", "-w", wh, "-f", "csv")
    assert done.returncode == 0, done.stderr
    rows = done.stdout.strip().splitlines()[1:]
    assert sorted({r.split(",")[0] for r in rows}) == ["Run_A", "Run_B"] and len(rows) == 4  # 2 ranks each
    error, _ = _usage_error("metric", "total_kernel_time", "--trace", "nothing_*", "-w", wh)
    assert "no trace matches 'nothing_*'" in error


def test_metrics_listing_is_one_line_each_and_filters():
    specs = latest_specs()
    done = invoke("metrics")
    lines = done.stdout.splitlines()
    assert done.returncode == 0 and len(lines) == len(specs)
    assert [line.split()[0] for line in lines] == [s.name for s in specs]
    assert all(len(line) <= 120 for line in lines)
    line = next(x for x in lines if x.startswith("total_kernel_time "))
    assert line.split()[1:3] == ["s", "compute"]

    by_category = invoke("metrics", "communication").stdout.splitlines()
    assert {x.split()[0] for x in by_category} == {s.name for s in specs if s.category == "communication"}
    hta = [x.split()[0] for x in invoke("metrics", "--category", "hta").stdout.splitlines()]
    assert hta == [x.split()[0] for x in lines if x.split()[2] == "hta"] and hta

    found = {x.split()[0] for x in invoke("metrics", "overlap").stdout.splitlines()}
    assert {"communication_overlap_ratio", "compute_comm_overlap", "hta_comm_comp_overlap"} <= found
    assert "total_kernel_time" not in found


def test_applicable_says_what_can_apply_and_why_not(wh: str):
    done = invoke("metrics", "--applicable", "Run_A", "-w", wh, "-f", "csv")
    assert done.returncode == 0, done.stderr
    rows = {r.split(",")[0]: r for r in done.stdout.splitlines()[1:]}
    assert len(rows) == len(latest_specs())
    assert ",no,no XLA ops (not an XLA/xprof profile)," in rows["total_comm_time_s"]
    assert ",no,no Horovod timeline," in rows["horovod_phase_share"]
    assert ",may," in rows["total_kernel_time"] and ",may," in rows["collective_skew"]  # two ranks
    # the generator's card says phase training: the inference metrics cannot apply
    assert ",no,the workload card says phase training (tpot is for inference)," in rows["tpot"]
    text = invoke("metrics", "--applicable", "Run_A", "-w", wh).stdout
    assert text.startswith("Run_A: formats kineto, tables events, 2 rank(s), card phase training\n")


def test_explain_shows_header_file_and_version():
    done = invoke("metric", "total_kernel_time", "--explain")
    assert done.returncode == 0, done.stderr
    out = done.stdout.splitlines()
    assert out[0] == "total_kernel_time v1 (versions: v1)"
    assert out[1] == f"SQL file: {Path('sql/metrics/total_kernel_time/v1.sql').resolve()}"
    assert "unit: s" in out and "applies_if: table events | no GPU kernels" in out
