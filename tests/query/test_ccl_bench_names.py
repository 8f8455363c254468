"""Every metric name CCL-Bench's tools/main.py dispatches answers through
``python -m cclq.main``, and the eleven names cclq added for it (issue 25) give
the numbers worked out here by hand from traces laid out in ``helpers.ccl_bench``
(CCL_BENCH_NAMES, the two-rank GPU folder and the TPU profile, with the layout in comments).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers.ccl_bench import CCL_BENCH_NAMES, build_gpu, build_tpu
from helpers.warehouse import run_ingest

from cclq.compat.main import run_here
from cclq.query.metrics import run_metric, summarize
from cclq.query.registry import registry, resolve
from cclq.query.session import connect
from cclq.store.warehouse import Warehouse

ROOT = Path(__file__).resolve().parents[2]
KINETO_FOLDER = ROOT / "trace_collection" / "synthetic_mlp_dp4"

NEW_NAMES = [
    "ttft_group_6",
    "tpot_group_6",
    "kernel_compute_time_group_6",
    "throughput_group_6",
    "straggler_metrics",
    "comm_kernel_breakdown_tpu",
    "estimated_bandwidth",
    "traffic_window",
    "communication_overhead",
    "bandwidth_utilization",
    "gpu_step_score",
]


def test_the_list_is_ccl_benchs_61_names_and_cclq_knows_each():
    assert len(CCL_BENCH_NAMES) == 61 == len(set(CCL_BENCH_NAMES))
    assert set(NEW_NAMES) <= set(CCL_BENCH_NAMES)
    assert [n for n in CCL_BENCH_NAMES if n not in registry()] == []


@pytest.mark.slow
def test_every_name_exits_0_on_a_kineto_folder(tmp_path, capsys):
    """The call CCL-Bench's website makes, for each of its 61 names: exit 0 and a last
    stdout line that is a number or `nan` (with the reason on stderr)."""
    wh = tmp_path / "wh"
    for name in CCL_BENCH_NAMES:
        rc = run_here(["--trace", str(KINETO_FOLDER), "--metric", name, "--warehouse", str(wh)])
        out, err = capsys.readouterr()
        assert rc == 0, (name, err)
        last = out.strip().splitlines()[-1]
        value = float(last)  # a number or nan, never words
        if value != value:
            assert "does not apply" in err, (name, err)


@pytest.mark.slow
def test_the_real_command_in_a_subprocess(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "cclq.main",
            "--trace",
            str(KINETO_FOLDER),
            "--metric",
            "straggler_metrics",
            "--warehouse",
            str(tmp_path / "wh"),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**__import__("os").environ, "CCLQ_DAEMON": "0", "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 0, proc.stderr
    assert float(proc.stdout.strip().splitlines()[-1]) >= 1.0


def build_sglang(folder: Path) -> None:
    folder.mkdir(parents=True)
    record = {
        "backend": "sglang",
        "duration": 10.0,
        "completed": 20,
        "total_output_tokens": 2560,
        "median_ttft_ms": 123.5,
        "median_tpot_ms": 7.25,
        "mean_ttft_ms": 130.0,
        "ttfts": [0.1, 0.12],
        "output_throughput": 256.0,
    }
    (folder / "bench_results.jsonl").write_text(json.dumps(record) + "\n")


CARD = textwrap.dedent("""\
    workload:
      model: {phase: training}
      hardware:
        xpu_spec: {type: GPU, model: nvidia_h100, total_count: 8, count_per_node: 8}
    """)


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory) -> Warehouse:
    root = tmp_path_factory.mktemp("names")
    build_gpu(root / "in" / "gpu", card=None)
    build_gpu(root / "in" / "gpu_card8", card=CARD)
    build_sglang(root / "in" / "sglang")
    build_tpu(root / "in" / "tpu")
    wh = Warehouse(root / "wh")
    report = run_ingest([root / "in"], wh)
    assert not report.failed, [o.message for o in report.failed]
    return wh


def one(wh: Warehouse, name: str, trace: str, **params: str) -> tuple[float | None, str | None, list[dict]]:
    """(the number python -m cclq.main prints, its reason, the rows)."""
    spec = resolve(name)
    con = connect(wh, traces=[trace])
    try:
        table = run_metric(con, spec, params)
        value, reason = summarize(spec, table)
        return value, reason, table.to_pylist()
    finally:
        con.close()


def test_kernel_compute_time_group_6(warehouse):
    # compute kernels: 400 + 500 + 300 us per rank, two ranks
    value, _, rows = one(warehouse, "kernel_compute_time_group_6", "gpu")
    assert value == pytest.approx(2 * 1200e-6)
    # comm left out: rank 0 200+40+100, rank 1 300+40+100
    assert rows[0]["comm_kernel_s"] == pytest.approx(780e-6)


def test_straggler_metrics_is_the_slowdown(warehouse):
    value, _, rows = one(warehouse, "straggler_metrics", "gpu")
    assert value == pytest.approx(440 / 340)
    assert rows[0]["delay"] == pytest.approx((440 - 340) / 440)
    assert rows[0]["least_comm_rank"] == 0
    straggler, _, _ = one(warehouse, "straggler", "gpu")
    assert straggler == pytest.approx(rows[0]["delay"])


def test_communication_overhead_pools_the_ranks(warehouse):
    value, _, rows = one(warehouse, "communication_overhead", "gpu")
    assert value == pytest.approx((340 + 440) / (340 + 1200 + 440 + 1200))
    assert {r["rank"]: r["value"] for r in rows} == {0: pytest.approx(340 / 1540), 1: pytest.approx(440 / 1640)}


def test_traffic_window_counts_the_inner_step(warehouse):
    # inner step #2: rank 0 200 + 40 us, rank 1 300 + 40 us; mean over ranks
    value, _, rows = one(warehouse, "traffic_window", "gpu")
    assert value == pytest.approx((240e-6 + 340e-6) / 2)
    r0 = next(r for r in rows if r["rank"] == 0)
    assert (r0["basis"], r0["steps_used"]) == ("inner steps", 1)
    assert r0["all_reduce_s"] == pytest.approx(200e-6)
    assert r0["gather_scatter_s"] == pytest.approx(40e-6)
    assert r0["p2p_s"] == 0 and r0["other_comm_s"] == pytest.approx(0, abs=1e-15)


def test_bandwidth_utilization_is_ccl_benchs_formula(warehouse):
    # T_exp = (S / n)(n - 1) / B = (4e6 / 2) / 100e9 = 20 us; over 200, 100, 300, 100 us
    expected = (20 / 200 + 20 / 100 + 20 / 300 + 20 / 100) / 4
    value, _, rows = one(warehouse, "bandwidth_utilization", "gpu")
    assert value == pytest.approx(expected)
    assert rows[0]["all_reduces"] == 4 and rows[0]["link_gbs"] == 100
    halved, _, _ = one(warehouse, "bandwidth_utilization", "gpu", link_gbs="50")
    assert halved == pytest.approx(2 * expected)


def test_gpu_step_score(warehouse):
    # T = 1000 us (the inner step), G = the 2 ranks traced: 0.5*16/2 + 0.5*0.44/0.001
    value, _, rows = one(warehouse, "gpu_step_score", "gpu")
    assert value == pytest.approx(0.5 * 16 / 2 + 0.5 * 0.44 / 0.001)
    assert rows[0]["gpus_source"] == "ranks traced"
    # the card says 8 GPUs
    value, _, rows = one(warehouse, "gpu_step_score", "gpu_card8")
    assert value == pytest.approx(0.5 * 16 / 8 + 0.5 * 0.44 / 0.001)
    assert rows[0]["gpus_source"] == "card total_count"
    value, _, _ = one(warehouse, "gpu_step_score", "gpu_card8", w="1", g0="4")
    assert value == pytest.approx(4 / 8)


def test_the_serving_benchmark_names(warehouse):
    assert one(warehouse, "ttft_group_6", "sglang")[0] == pytest.approx(123.5)
    assert one(warehouse, "tpot_group_6", "sglang")[0] == pytest.approx(7.25)
    assert one(warehouse, "throughput_group_6", "sglang")[0] == pytest.approx(2560 / 10.0)
    value, reason, _ = one(warehouse, "ttft_group_6", "gpu")
    assert value is None and "no serving benchmark results" in reason


def test_the_tpu_names(warehouse):
    value, _, rows = one(warehouse, "comm_kernel_breakdown_tpu", "tpu")
    r = rows[0]
    assert value == pytest.approx((4 + 1 + 2 + 3) * 1e-6)
    assert r["events"] == 4
    assert r["all_reduce_s"] == pytest.approx(4e-6)
    assert r["all_gather_s"] == pytest.approx(3e-6)
    assert r["collective_permute_s"] == pytest.approx(3e-6)
    assert r["devices"] == 2
    # bytes 1e6 + 2e6 + 1e6 + 0.5e6 over the devices' span 0..53 us
    value, _, rows = one(warehouse, "estimated_bandwidth", "tpu")
    assert value == pytest.approx(4.5e6 / 53e-6 / 1e9)
    assert rows[0]["total_bytes"] == 4_500_000
    value, reason, _ = one(warehouse, "comm_kernel_breakdown_tpu", "gpu")
    assert value is None and "no XLA ops" in reason
