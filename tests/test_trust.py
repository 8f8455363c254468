"""Issue 21: no number from the wrong run, no 0 for "does not apply", no run silently
merged or half-ingested. Each test here failed on the code before the fix."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cclq.dev.synth.kineto import generate_workload


# ---------------------------------------------------------------- 1. trace identity
def _main(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cclq.main", *args], capture_output=True, text=True, env=env)


@pytest.mark.parametrize("daemon_on", ["0", "1"])
def test_cclq_main_answers_for_each_of_two_folders_of_the_same_name(tmp_path, daemon_on):
    """`a/workX` then `b/workX`: each call prints its own folder's value (the value each
    folder gives in a warehouse of its own), with and without the daemon."""
    generate_workload(tmp_path / "a" / "workX", ranks=2, steps=3, layers=2, seed=1)
    generate_workload(tmp_path / "b" / "workX", ranks=1, steps=2, layers=1, seed=2)
    (tmp_path / "tmp").mkdir()
    env = {**os.environ, "TMPDIR": str(tmp_path / "tmp"), "CCLQ_DAEMON": daemon_on, "CCLQ_DAEMON_IDLE_S": "30",
           "CCLQ_WAREHOUSE": str(tmp_path / "wh")}
    try:
        alone = {}
        for side in "ab":  # each folder alone, in a warehouse of its own: its own value
            r = _main(env, "--trace", str(tmp_path / side / "workX"), "--metric", "total_kernel_time",
                      "--warehouse", str(tmp_path / f"wh_{side}"))
            assert r.returncode == 0, r.stderr
            alone[side] = float(r.stdout.split()[-1])
        assert alone["a"] != alone["b"]
        for _ in range(2):  # and again: the second folder keeps its own (distinct, stable) id
            for side in "ab":
                r = _main(env, "--trace", str(tmp_path / side / "workX"), "--metric", "total_kernel_time")
                assert r.returncode == 0, r.stderr
                assert "error" not in r.stderr, r.stderr
                assert float(r.stdout.split()[-1]) == pytest.approx(alone[side], rel=1e-12), side
    finally:
        subprocess.run([sys.executable, "-m", "cclq.compat.daemon_process", "--stop"], env=env, capture_output=True)


# ---------------------------------------------------------------- 2. NULL for "does not apply"
@pytest.fixture(scope="module")
def suite_wh(tmp_path_factory):
    """The generated suite: Kineto (hand-placed and generated DDP), XLA/TPU, Nsight
    Systems and a Horovod timeline, each a trace of its own."""
    from presentation_traces import board_workloads

    from cclq.dev.synth.horovod import HorovodTimelineBuilder
    from cclq.dev.synth.nsys import NsysExportBuilder
    from cclq.ingest.run import ingest
    from cclq.store.warehouse import Warehouse

    root = tmp_path_factory.mktemp("suite")
    board_workloads(root / "in")
    b = NsysExportBuilder(sm_count=132)
    p = b.process(pid=4242)
    b.nvtx_range(p, 0, 20_000, "ProfilerStep#1")
    b.kernel(p, 0, 7, 2_000, 12_000, "sm90_xmma_gemm_bf16bf16_bf16f32", grid=(264, 1, 1))
    b.memcpy(p, 0, 7, 18_000, 19_000, 4_000_000)
    b.write(root / "in" / "nsys_run" / "node.sqlite")
    h = HorovodTimelineBuilder(start_epoch_us=1_700_000_000_000_000)
    h.op("allreduce.w", "ALLREDUCE", {0: 100, 1: 130}, [("QUEUE", 140, 150), ("NCCL_ALLREDUCE", 160, 200)],
         shape=[1000])
    h.cycle(90)
    h.write(root / "in" / "horovod_run" / "timeline.json")
    wh = Warehouse(root / "wh")
    report = ingest([root / "in"], wh, jobs=1)
    assert not report.failed, [o.message for o in report.failed]
    return wh


def test_a_row_with_a_reason_has_no_value_in_any_metric(suite_wh):
    """Every metric (latest version) on every format of the suite: a row that says why
    the metric does not apply has a NULL value, never 0 (and never another number)."""
    from cclq.query.metrics import run_metrics
    from cclq.query.registry import latest_specs
    from cclq.query.session import connect

    con = connect(suite_wh, views=False)
    specs = latest_specs()
    assert len(specs) >= 63
    runs = run_metrics(con, specs)
    problems = []
    for spec in specs:
        run = runs[spec.name]
        assert run.table is not None, (spec.label, run.error)
        rows = run.table.select(["trace", "value", "reason"]).to_pylist()
        problems += [f"{spec.label} on {r['trace']}: {r['value']!r} with reason {r['reason']!r}"
                     for r in rows if r["reason"] is not None and r["value"] is not None]
    assert not problems, "\n".join(problems)


def test_horovod_tensor_comm_time_is_nan_on_a_kineto_trace(tmp_path):
    env = {**os.environ, "CCLQ_DAEMON": "0"}
    generate_workload(tmp_path / "k", ranks=1, steps=2, layers=1, seed=3)
    r = _main(env, "--trace", str(tmp_path / "k"), "--metric", "horovod_tensor_comm_time",
              "--warehouse", str(tmp_path / "wh"))
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[-1] == "nan"
    assert "no Horovod timeline" in r.stderr


# ---------------------------------------------------------------- 7. coll_call_num and barriers
def test_coll_call_num_says_that_barriers_count():
    """The latest coll_call_num counts barriers (as `collectives` lists them): its header
    says so and why, and where to look for data-moving collectives only."""
    from cclq.query.registry import resolve

    text = resolve("coll_call_num").path.read_text()
    header = "\n".join(line for line in text.splitlines() if line.startswith("--"))
    assert "Barriers count" in header and "'barrier'" in header and "collectives" in header


# ---------------------------------------------------------------- 9. output after the work
@pytest.fixture(scope="module")
def small_cli_wh(tmp_path_factory):
    from conftest import run_cli

    root = tmp_path_factory.mktemp("out")
    generate_workload(root / "in" / "w", ranks=2, steps=3, layers=1, seed=4)
    wh = str(root / "wh")
    r = run_cli("ingest", str(root / "in" / "w"), "-w", wh, "-q")
    assert r.returncode == 0, r.stderr
    return root, wh


def test_output_into_a_new_folder_is_made(small_cli_wh):
    from conftest import run_cli

    root, wh = small_cli_wh
    out = root / "new" / "dir" / "x.csv"
    r = run_cli("metric", "total_kernel_time", "--all", "-w", wh, "-f", "csv", "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert out.read_text().startswith("trace,")
    page = root / "new" / "sub" / "r.html"
    r = run_cli("report", "w", "-f", "html", "-o", str(page), "-w", wh)
    assert r.returncode == 0, r.stderr
    assert "<html" in page.read_text().lower()


def test_output_folder_with_several_metrics_gets_one_csv_per_metric(small_cli_wh):
    import csv

    from conftest import run_cli

    root, wh = small_cli_wh
    out = root / "per_metric"
    r = run_cli("metric", "total_kernel_time", "avg_step_time", "--all", "-w", wh, "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in out.iterdir()) == ["avg_step_time.csv", "total_kernel_time.csv"]
    rows = list(csv.DictReader((out / "total_kernel_time.csv").open()))
    assert {row["trace"] for row in rows} == {"w"} and all(float(row["value"]) > 0 for row in rows)


def test_details_of_several_metrics_nest_in_json_and_parquet(small_cli_wh):
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    from conftest import run_cli

    root, wh = small_cli_wh
    names = ("total_kernel_time", "coll_call_num")
    r = run_cli("metric", *names, "--all", "-w", wh, "-f", "json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    coll = [row for row in rows if row["metric"] == "coll_call_num"]
    assert coll and all(isinstance(row["details"], dict) for row in coll)
    assert coll[0]["details"]["source"] == "gpu_kernels"
    out = root / "long.parquet"
    r = run_cli("metric", *names, "--all", "-w", wh, "-f", "parquet", "-o", str(out))
    assert r.returncode == 0, r.stderr
    table = pq.read_table(out)
    assert pa.types.is_struct(table.schema.field("details").type)
    sources = {row["details"]["source"] for row in table.to_pylist() if row["metric"] == "coll_call_num"}
    assert sources == {"gpu_kernels"}
