"""`cclq report TRACE`: every metric of one trace, grouped by category, in one process.

The numbers asserted are worked out by hand from the events placed in
``presentation_traces.two_rank_run`` (see its docstring), never taken from cclq's output.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.cli import invoke
from helpers.presentation_traces import two_rank_run
from helpers.warehouse import run_ingest

from cclq.query.registry import CATEGORIES, registry

CARD = """version: 1
description: Two ranks <b>by hand</b>
workload:
  model:
    phase: training
    model_family: "<script>alert(1)</script>"
  hardware:
    xpu_spec:
      type: GPU
      total_count: 2
metric_source:
  traces: [json]
"""


@pytest.fixture(scope="module")
def run_a(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A warehouse with run_a; the first report computes (and caches) every metric."""
    from cclq.store.warehouse import Warehouse

    root = tmp_path_factory.mktemp("report")
    two_rank_run(root / "in" / "run_a", card=CARD)
    assert not run_ingest([root / "in"], Warehouse(root / "wh")).failed
    return root / "wh"


_JSON: dict[Path, dict] = {}


def report_json(wh_root: Path, trace: str = "run_a") -> dict:
    if wh_root not in _JSON:
        done = invoke("report", trace, "--format", "json", "--warehouse", str(wh_root))
        assert done.returncode == 0, done.stderr
        _JSON[wh_root] = json.loads(done.stdout)
    return _JSON[wh_root]


def entries(data: dict) -> dict[str, dict]:
    return {e["metric"]: e for g in data["categories"] for e in g["metrics"]}


@pytest.mark.slow
def test_report_has_every_metric_once_grouped_by_category_in_order(run_a: Path):
    data = report_json(run_a)
    names = [e["metric"] for g in data["categories"] for e in g["metrics"]]
    assert sorted(names) == sorted(registry())
    assert [g["id"] for g in data["categories"]] == [
        c for c in CATEGORIES if any(versions[max(versions)].category == c for versions in registry().values())
    ]
    for group in data["categories"]:
        assert all(e["category"] == group["id"] for e in group["metrics"])
    assert data["metrics_applied"] + data["metrics_not_applicable"] == len(registry())


def test_report_values_are_the_hand_computed_ones(run_a: Path):
    data = report_json(run_a)
    m = entries(data)
    # avg_step_time: step 2 only (first and last dropped): 2 ms on rank 0, 2.5 ms on rank 1
    assert m["avg_step_time"]["value"] == pytest.approx(0.00225, rel=1e-12)
    assert [r[:2] for r in m["avg_step_time"]["by_rank"]] == [[0, pytest.approx(0.002)], [1, pytest.approx(0.0025)]]
    # total_kernel_time sums ranks: 2 x (2 x 100 + 50 + 30) us
    assert m["total_kernel_time"]["value"] == pytest.approx(560e-6, rel=1e-12)
    # communication_fraction: 30 / 280 on each rank
    assert m["communication_fraction"]["value"] == pytest.approx(30 / 280, rel=1e-12)
    assert m["straggler_rank"]["value"] == 1
    assert m["collective_skew"]["value"] == pytest.approx(700e-6, rel=1e-12)
    # rows come with the JSON form, every column
    assert {r["rank"] for r in m["avg_step_time"]["rows"]} == {0, 1}


def test_metrics_that_do_not_apply_say_why(run_a: Path):
    m = entries(report_json(run_a))
    for name in ("wall_time_s", "total_comm_time_s", "hockney_alpha_s"):
        assert m[name]["value"] is None
        assert "XLA" in m[name]["reason"], (name, m[name]["reason"])
    # an XLA-only metric is n/a here, not 0
    assert all(e["value"] is None or e["reason"] is None for e in m.values())


def test_report_figure_data_comes_from_metrics_and_views(run_a: Path):
    fig = report_json(run_a)["figures"]
    assert fig["steps"] == [[0, 1, 0.001], [0, 2, 0.002], [0, 3, 0.003], [1, 1, 0.0015], [1, 2, 0.0025], [1, 3, 0.0035]]
    assert fig["straggler"] == {"matched": 1, "late_count": [[1, 1]], "late_skew_s": [[1, pytest.approx(700e-6)]]}
    ops = fig["top_ops"]["ops"]
    assert [(o["name"], o["calls"], o["ranks"]) for o in ops[:2]] == [
        ("gemm_kernel", 4, 2),
        ("elementwise_kernel", 2, 2),
    ]
    assert ops[0]["total_s"] == pytest.approx(400e-6) and fig["top_ops"]["total_s"] == pytest.approx(560e-6)
    assert ops[2]["class"] == "comm" and ops[2]["coll_type"] == "all_reduce"


@pytest.mark.slow
def test_report_table_and_html(run_a: Path, tmp_path: Path):
    table = invoke("report", "run_a", "--warehouse", str(run_a))
    assert table.returncode == 0, table.stderr
    for title in ("Step time and throughput", "Communication", "HTA breakdowns"):
        assert title in table.stdout
    # avg_step_time is 0.00225 s (test_report_values_are_the_hand_computed_ones): in ms for people
    (row,) = [x for x in table.stdout.splitlines() if "avg_step_time" in x]
    assert [c.strip() for c in row.split("│")[2:4]] == ["2.25", "ms"]
    # what does not apply is folded into one line; --all-metrics lists it with the reason
    assert "n/a" not in table.stdout and " not applicable: " in table.stdout
    every = invoke("report", "run_a", "--all-metrics", "--warehouse", str(run_a))
    assert "n/a" in every.stdout and "no XLA ops (not an XLA/xprof profile)" in every.stdout
    out = tmp_path / "run_a.html"
    html_run = invoke("report", "run_a", "-f", "html", "-o", str(out), "--warehouse", str(run_a))
    assert html_run.returncode == 0, html_run.stderr
    html = out.read_text()
    assert "<style>" in html and 'href="../assets' not in html  # stands alone
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<b>by hand</b>" not in html
    assert html.count("<svg") >= 6


def test_report_of_an_unknown_trace_is_a_usage_error(run_a: Path):
    done = invoke("report", "nope", "--warehouse", str(run_a))
    assert done.returncode == 2 and "no trace 'nope'" in done.stderr and "Traceback" not in done.stderr


def test_params_reach_the_metrics_that_take_them_and_a_typo_is_an_error(run_a: Path):
    done = invoke("report", "run_a", "-f", "json", "--param", "model_params=7e9", "--warehouse", str(run_a))
    assert done.returncode == 0, done.stderr
    m = entries(json.loads(done.stdout))
    assert m["flops_per_token_used"]["value"] == pytest.approx(6 * 7e9)  # training: 6 x params per token
    typo = invoke("report", "run_a", "--param", "model_parms=7e9", "--warehouse", str(run_a))
    assert typo.returncode == 2 and "no metric here takes the parameter model_parms" in typo.stderr
