"""Issue 21: no number from the wrong run, no 0 for "does not apply", no run silently
merged or half-ingested. Each test here failed on the code before the fix."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cclq.synth.kineto import generate_workload


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
    env = {
        **os.environ,
        "TMPDIR": str(tmp_path / "tmp"),
        "CCLQ_DAEMON": daemon_on,
        "CCLQ_DAEMON_IDLE_S": "30",
        "CCLQ_WAREHOUSE": str(tmp_path / "wh"),
    }
    try:
        alone = {}
        for side in "ab":  # each folder alone, in a warehouse of its own: its own value
            r = _main(
                env,
                "--trace",
                str(tmp_path / side / "workX"),
                "--metric",
                "total_kernel_time",
                "--warehouse",
                str(tmp_path / f"wh_{side}"),
            )
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
    from helpers.presentation_traces import board_workloads

    from cclq.ingest.run import ingest
    from cclq.store.warehouse import Warehouse
    from cclq.synth.horovod import HorovodTimelineBuilder
    from cclq.synth.nsys import NsysExportBuilder

    root = tmp_path_factory.mktemp("suite")
    board_workloads(root / "in")
    b = NsysExportBuilder(sm_count=132)
    p = b.process(pid=4242)
    b.nvtx_range(p, 0, 20_000, "ProfilerStep#1")
    b.kernel(p, 0, 7, 2_000, 12_000, "sm90_xmma_gemm_bf16bf16_bf16f32", grid=(264, 1, 1))
    b.memcpy(p, 0, 7, 18_000, 19_000, 4_000_000)
    b.write(root / "in" / "nsys_run" / "node.sqlite")
    h = HorovodTimelineBuilder(start_epoch_us=1_700_000_000_000_000)
    h.op(
        "allreduce.w", "ALLREDUCE", {0: 100, 1: 130}, [("QUEUE", 140, 150), ("NCCL_ALLREDUCE", 160, 200)], shape=[1000]
    )
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

    con = connect(suite_wh)
    specs = latest_specs()
    assert len(specs) >= 63
    runs = run_metrics(con, specs)
    problems = []
    for spec in specs:
        run = runs[spec.name]
        assert run.table is not None, (spec.label, run.error)
        rows = run.table.select(["trace", "value", "reason"]).to_pylist()
        problems += [
            f"{spec.label} on {r['trace']}: {r['value']!r} with reason {r['reason']!r}"
            for r in rows
            if r["reason"] is not None and r["value"] is not None
        ]
    assert not problems, "\n".join(problems)


def test_horovod_tensor_comm_time_is_nan_on_a_kineto_trace(tmp_path):
    env = {**os.environ, "CCLQ_DAEMON": "0"}
    generate_workload(tmp_path / "k", ranks=1, steps=2, layers=1, seed=3)
    r = _main(
        env, "--trace", str(tmp_path / "k"), "--metric", "horovod_tensor_comm_time", "--warehouse", str(tmp_path / "wh")
    )
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
    from helpers.cli import invoke

    root = tmp_path_factory.mktemp("out")
    generate_workload(root / "in" / "w", ranks=2, steps=3, layers=1, seed=4)
    wh = str(root / "wh")
    r = invoke("ingest", str(root / "in" / "w"), "-w", wh, "-q")
    assert r.returncode == 0, r.stderr
    return root, wh


def test_output_into_a_new_folder_is_made(small_cli_wh):
    from helpers.cli import invoke

    root, wh = small_cli_wh
    out = root / "new" / "dir" / "x.csv"
    r = invoke("metric", "total_kernel_time", "--all", "-w", wh, "-f", "csv", "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert out.read_text().startswith("trace,")
    page = root / "new" / "sub" / "r.html"
    r = invoke("report", "w", "-f", "html", "-o", str(page), "-w", wh)
    assert r.returncode == 0, r.stderr
    assert "<html" in page.read_text().lower()


def test_output_folder_with_several_metrics_gets_one_csv_per_metric(small_cli_wh):
    import csv

    from helpers.cli import invoke

    root, wh = small_cli_wh
    out = root / "per_metric"
    r = invoke("metric", "total_kernel_time", "avg_step_time", "--all", "-w", wh, "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in out.iterdir()) == ["avg_step_time.csv", "total_kernel_time.csv"]
    rows = list(csv.DictReader((out / "total_kernel_time.csv").open()))
    assert {row["trace"] for row in rows} == {"w"} and all(float(row["value"]) > 0 for row in rows)


def test_details_of_several_metrics_nest_in_json_and_parquet(small_cli_wh):
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq
    from helpers.cli import invoke

    root, wh = small_cli_wh
    names = ("total_kernel_time", "coll_call_num")
    r = invoke("metric", *names, "--all", "-w", wh, "-f", "json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    coll = [row for row in rows if row["metric"] == "coll_call_num"]
    assert coll and all(isinstance(row["details"], dict) for row in coll)
    assert coll[0]["details"]["source"] == "gpu_kernels"
    out = root / "long.parquet"
    r = invoke("metric", *names, "--all", "-w", wh, "-f", "parquet", "-o", str(out))
    assert r.returncode == 0, r.stderr
    table = pq.read_table(out)
    assert pa.types.is_struct(table.schema.field("details").type)
    sources = {row["details"]["source"] for row in table.to_pylist() if row["metric"] == "coll_call_num"}
    assert sources == {"gpu_kernels"}


# ---------------------------------------------------------------- 8. the leaderboard
def _ccl_bench_pill(value, info) -> str:
    """CCL-Bench's website index.html ``metricPill`` (cornell-sysphotonics/ccl-bench,
    index.html at 1d257f0), line for line: N/A for null; thresholds default to
    {high: 50, mid: 25} and higher_is_better to true."""
    if value is None:
        return "mp-na"
    thr = info.get("thresholds") or {"high": 50, "mid": 25}
    higher = info.get("higher_is_better") is not False
    if higher:
        return "mp-high" if value >= thr["high"] else "mp-mid" if value >= thr["mid"] else "mp-low"
    return "mp-high" if value <= thr["mid"] else "mp-mid" if value <= thr["high"] else "mp-low"


def _cclq_cells(index_html: str) -> dict[tuple[str, str], tuple[str, str]]:
    """(trace, metric) -> (tint: q-good | q-poor | '' | na, data-sort) read from the page."""
    import re

    metrics = {int(c): m for c, m in re.findall(r'<th data-col="(\d+)"[^>]*data-metric="([^"]+)"', index_html)}
    out = {}
    for block in index_html.split('<tr data-trace="')[1:]:
        trace = block.split('"', 1)[0]
        cells = re.findall(r'<td class="([^"]*)"(?: data-sort="([^"]*)")?[^>]*>(.*?)</td>', block, re.S)
        for i, (cls, sort, body) in enumerate(cells):
            if i in metrics:
                tint = "na" if 'class="na"' in body else next((c for c in cls.split() if c.startswith("q-")), "")
                out[(trace, metrics[i])] = (tint, sort)
    return out


def test_the_board_never_ranks_nothing_and_ccl_bench_reads_it_the_same(board_site):
    """Not applicable and zero communication are neither tinted nor ranked (sorted
    last); load_imbalance_ratio is on the board; CCL-Bench's own page logic on
    benchmark_data.json marks the same cells best and worst as cclq's page."""
    import json

    _, site, _ = board_site
    data = json.loads((site / "benchmark_data.json").read_text())
    info = data["metric_info"]
    assert "load_imbalance_ratio" in data["all_metrics"]
    assert info["load_imbalance_ratio"]["higher_is_better"] is False
    assert info["mfu"]["unit"] == "%" and info["average_memory_bandwidth"]["unit"] == "GB/s"
    for name, mi in info.items():
        assert set(mi["thresholds"]) == {"high", "mid"}, name
        assert isinstance(mi["trace_types"], list), name
        assert mi["unit"], name
    rows = {r["trace"]: r for r in data["rows"]}
    # run_b has no all-reduce: 0 s of communication is not a best value
    assert rows["run_b"]["metrics"]["total_communication_time"] is None
    assert "no communication" in rows["run_b"]["reasons"]["total_communication_time"]
    # load_imbalance_ratio by hand: run_a's ranks each have 2x100 + 50 + 30 us of kernels
    assert rows["run_a"]["metrics"]["load_imbalance_ratio"] == 1.0
    cells = _cclq_cells((site / "index.html").read_text())
    assert cells[("run_b", "total_communication_time")] == ("", "")  # shown, no tint, sorted last
    compared = 0
    for trace, row in rows.items():
        for name, value in row["metrics"].items():
            tint, _ = cells[(trace, name)]
            pill = _ccl_bench_pill(value, info[name])
            expected = {"q-good": "mp-high", "q-poor": "mp-low", "na": "mp-na"}.get(tint, "mp-mid")
            if value is None:
                expected = "mp-na"
            assert pill == expected, (trace, name, value, tint, info[name])
            compared += 1
    assert compared == len(rows) * len(info)
    assert any(t == "q-good" for t, _ in cells.values()) and any(t == "q-poor" for t, _ in cells.values())


# ---------------------------------------------------------------- 4. steps per device
def _xprof_two_gpus(path: Path) -> list[dict]:
    """An xprof trace-viewer document with two GPU planes whose Steps records are far
    apart in time (as GPU:4 and GPU:6 of the TensorFlow BERT profile). Times in us."""
    import json

    events: list[dict] = [
        {"ph": "M", "pid": 100, "name": "process_name", "args": {"name": "/host:CPU"}},
        {"ph": "M", "pid": 100, "tid": 1, "name": "thread_name", "args": {"name": "python"}},
    ]
    steps = {4: (0.0, 19_900.0), 6: (627_000.0, 21_300.0)}  # device -> (first start, middle step's length)
    for pid, (device, (start, middle)) in enumerate(steps.items(), start=1):
        events.append({"ph": "M", "pid": pid, "name": "process_name", "args": {"name": f"/device:GPU:{device}"}})
        events.append({"ph": "M", "pid": pid, "tid": 1, "name": "thread_name", "args": {"name": "Steps"}})
        events.append({"ph": "M", "pid": pid, "tid": 2, "name": "thread_name", "args": {"name": "XLA Ops"}})
        t = start
        for step, dur in ((0, 30_000.0), (1, middle), (2, 25_000.0)):
            events.append(
                {
                    "ph": "X",
                    "pid": pid,
                    "tid": 1,
                    "ts": t,
                    "dur": dur,
                    "name": str(step),
                    "args": {"group_id": str(step)},
                }
            )
            events.append(
                {
                    "ph": "X",
                    "pid": pid,
                    "tid": 2,
                    "ts": t + 10,
                    "dur": 100.0,
                    "name": "fusion.1",
                    "args": {"hlo_op": "fusion.1", "hlo_category": "non-fusion elementwise", "group_id": str(step)},
                }
            )
            t += dur + 1_000
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"displayTimeUnit": "ns", "traceEvents": events}))
    return events


def test_avg_step_time_is_per_device_on_a_multi_device_xprof_trace(tmp_path):
    """Each device's steps: 0, 1, 2; the inner one (1) is 19.9 ms on GPU:4 and 21.3 ms
    on GPU:6 (the JSON above); the mean over devices is 20.6 ms, not the 0.65 s from
    GPU:4's start of step 1 to GPU:6's end of it."""
    from cclq.ingest.run import ingest
    from cclq.query.metrics import run_metric, summarize
    from cclq.query.registry import resolve
    from cclq.query.session import connect
    from cclq.store.warehouse import Warehouse

    events = _xprof_two_gpus(tmp_path / "bert" / "host0.trace.json")
    by_hand = {}
    for e in events:
        if e.get("ph") == "X" and e["tid"] == 1 and e["name"] == "1":
            by_hand[e["pid"]] = e["dur"] / 1e6
    assert by_hand == {1: 0.0199, 2: 0.0213}
    wh = Warehouse(tmp_path / "wh")
    report = ingest([tmp_path / "bert"], wh, jobs=1)
    assert not report.failed, [o.message for o in report.failed]
    spec = resolve("avg_step_time")
    con = connect(wh)
    rows = run_metric(con, spec, {}).to_pylist()
    assert [r["devices"] for r in rows] == [2]
    value, reason = summarize(spec, run_metric(con, spec, {}))
    assert reason is None
    assert value == pytest.approx((0.0199 + 0.0213) / 2, rel=1e-9)


# ---------------------------------------------------------------- 3. two runs in one folder
def _two_exports(folder: Path, days: int) -> None:
    from cclq.synth.nsys import NsysExportBuilder

    day_ns = 86_400 * 10**9
    for name, start, app in (
        ("train_a.sqlite", 1_700_000_000 * 10**9, "python"),
        ("bench_b.sqlite", 1_700_000_000 * 10**9 + days * day_ns, "nccl_tests"),
    ):
        b = NsysExportBuilder(session_start_ns=start)
        p = b.process(pid=4242, name=app)
        b.kernel(p, 0, 7, 2_000, 12_000, "sm90_xmma_gemm_bf16bf16_bf16f32", grid=(264, 1, 1))
        b.write(folder / name)


def test_two_nsight_exports_99_days_apart_become_two_traces_with_the_evidence(tmp_path):
    import csv
    import io

    from helpers.cli import invoke

    _two_exports(tmp_path / "two_runs", days=99)
    wh = str(tmp_path / "wh")
    r = invoke("ingest", str(tmp_path / "two_runs"), "-w", wh, "-q")
    assert r.returncode == 0, r.stderr
    assert "started 99.0 days apart" in r.stderr and "train_a.sqlite first, bench_b.sqlite last" in r.stderr
    r = invoke("traces", "-w", wh, "-f", "csv")
    assert r.returncode == 0, r.stderr
    rows = {row["trace"]: row for row in csv.DictReader(io.StringIO(r.stdout))}
    assert sorted(rows) == ["two_runs+bench_b", "two_runs+train_a"]
    for row in rows.values():
        assert row["ranks_seen"] == "1" and float(row["span_s"]) < 1 and row["flag"] == ""


def test_files_of_one_trace_a_day_apart_are_flagged_in_cclq_traces(tmp_path):
    """What is not split (Kineto files of one folder) is flagged, with rank_source."""
    import csv
    import io
    import json

    from helpers.cli import invoke

    from cclq.synth.kineto import KinetoTraceBuilder

    for rank, base in ((0, 1_700_000_000 * 10**9), (1, 1_700_000_000 * 10**9 + 3 * 86_400 * 10**9)):
        b = KinetoTraceBuilder(rank=rank, world_size=2)
        b.kernel("gemm_kernel", 1_000, 10_000, launch_ts=500)
        b.write(tmp_path / "w" / f"rank{rank}.pt.trace.json")
        path = tmp_path / "w" / f"rank{rank}.pt.trace.json"
        doc = json.loads(path.read_text())
        doc["baseTimeNanoseconds"] = base
        path.write_text(json.dumps(doc))
    wh = str(tmp_path / "wh")
    r = invoke("ingest", str(tmp_path / "w"), "-w", wh, "-q")
    assert "start 3.0 days apart" in r.stderr, r.stderr
    (row,) = list(csv.DictReader(io.StringIO(invoke("traces", "-w", wh, "-f", "csv").stdout)))
    assert row["flag"] == "files start 3.0 days apart" and row["rank_source"]


# ---------------------------------------------------------------- 6. half-ingested traces
class _StopAfter:
    """A reporter that presses Ctrl-C once ``n`` files are done."""

    def __init__(self, n: int) -> None:
        self.n = n

    def start(self, total_bytes: int, files: int) -> None: ...
    def advance(self, nbytes: int) -> None: ...
    def warn(self, message: str) -> None: ...
    def finish(self) -> None: ...

    def file_done(self, outcome) -> None:
        self.n -= 1
        if self.n == 0:
            raise KeyboardInterrupt


@pytest.mark.slow
def test_ctrl_c_commits_what_was_parsed_says_so_and_the_trace_is_flagged_partial(tmp_path, monkeypatch):
    import csv
    import io

    import cclq.ingest.run as run_module

    monkeypatch.setattr(run_module, "SMALL_FILE_BYTES", 0)  # a file at a time (a group is staged whole)

    from helpers.cli import run_cli

    from cclq.ingest.report import IngestInterrupted
    from cclq.ingest.run import ingest
    from cclq.store.warehouse import Warehouse

    generate_workload(tmp_path / "in" / "w8", ranks=8, steps=2, layers=1, seed=5)
    wh = Warehouse(tmp_path / "wh")
    with pytest.raises(IngestInterrupted) as caught:
        ingest([tmp_path / "in" / "w8"], wh, jobs=1, reporter=_StopAfter(6))
    message = caught.value.message()
    assert "6 file(s) committed" in message and "2 not ingested" in message and "partial: w8" in message
    assert "run the same `cclq ingest` again to finish" in message
    r = run_cli("traces", "-w", str(wh.root), "-f", "csv")
    (row,) = list(csv.DictReader(io.StringIO(r.stdout)))
    assert (row["ranks_seen"], row["flag"]) == ("6", "partial: 6 of 8 ranks")
    r = run_cli("metric", "total_kernel_time", "--all", "-w", str(wh.root), "-f", "csv")
    assert r.returncode == 0 and "trace 'w8' is partial (6 of 8 ranks)" in r.stderr, r.stderr
    r = run_cli("metric", "total_kernel_time", "--all", "-w", str(wh.root), "-f", "csv", "--allow-partial")
    assert "partial" not in r.stderr
    # a re-run finishes it: the flag goes
    r = run_cli("ingest", str(tmp_path / "in" / "w8"), "-w", str(wh.root), "-q")
    assert r.returncode == 0, r.stderr
    r = run_cli("traces", "-w", str(wh.root), "-f", "csv")
    (row,) = list(csv.DictReader(io.StringIO(r.stdout)))
    assert (row["ranks_seen"], row["flag"]) == ("8", "")


# ---------------------------------------------------------------- 5. device ids that do not join
def test_mean_sm_coverage_on_a_rocm_trace_whose_kernels_say_another_device(tmp_path):
    """One GPU listed (id 0, 304 CUs), kernels on device 2 without blocks per SM:
    the listed GPU's CU count applies. A Tensile GEMM's grid counts threads: 38912
    threads / 256 per block = 152 workgroups, coverage 152/304 = 0.5 (not 1)."""
    import json

    from cclq.ingest.run import ingest
    from cclq.query.metrics import run_metric, summarize
    from cclq.query.registry import resolve
    from cclq.query.session import connect
    from cclq.store.warehouse import Warehouse
    from cclq.synth.kineto import KinetoTraceBuilder

    b = KinetoTraceBuilder(rank=0, world_size=1, device=2)
    b.kernel(
        "Cijk_Ailk_Bljk_HHS_BH_MT128x128x64_MI32x32x8x1",
        1_000,
        100_000,
        args={"grid": [38912, 1, 1], "block": [256, 1, 1]},
    )
    b.kernel("elementwise_kernel", 200_000, 50_000, args={"grid": [608, 1, 1], "block": [256, 1, 1]})
    b.kernel("Cijk_small", 300_000, 50_000, args={"grid": [100, 1, 1], "block": [256, 1, 1]})
    path = b.write(tmp_path / "rocm" / "rank0.pt.trace.json")
    doc = json.loads(path.read_text())
    doc["deviceProperties"] = [{"id": 0, "name": "AMD Instinct MI300X", "numSms": 304}]
    for e in doc["traceEvents"]:
        if e.get("cat") == "kernel":
            e["args"].pop("blocks per SM", None)
    path.write_text(json.dumps(doc))
    wh = Warehouse(tmp_path / "wh")
    report = ingest([tmp_path / "rocm"], wh, jobs=1)
    assert not report.failed, [o.message for o in report.failed]
    con = connect(wh)
    spec = resolve("mean_sm_coverage")
    (row,) = run_metric(con, spec, {}).to_pylist()
    by_hand = (100 * (152 / 304) + 50 * 1.0 + 50 * (100 / 304)) / 200
    assert row["value"] == pytest.approx(by_hand, rel=1e-12)
    assert (row["sm_count_from"], row["grids_in_threads"], row["kernels_with_coverage"]) == ("only_device", 1, 3)
    assert summarize(spec, run_metric(con, spec, {}))[0] == pytest.approx(by_hand, rel=1e-12)


def test_mean_sm_coverage_says_which_devices_do_not_join(tmp_path):
    import json

    from cclq.ingest.run import ingest
    from cclq.query.metrics import run_metric
    from cclq.query.registry import resolve
    from cclq.query.session import connect
    from cclq.store.warehouse import Warehouse
    from cclq.synth.kineto import KinetoTraceBuilder

    b = KinetoTraceBuilder(rank=0, world_size=1, device=2)
    b.kernel("elementwise_kernel", 1_000, 50_000, args={"grid": [608, 1, 1], "block": [256, 1, 1]})
    path = b.write(tmp_path / "two" / "rank0.pt.trace.json")
    doc = json.loads(path.read_text())
    doc["deviceProperties"] = [{"id": 0, "numSms": 304}, {"id": 1, "numSms": 304}]
    for e in doc["traceEvents"]:
        if e.get("cat") == "kernel":
            e["args"].pop("blocks per SM", None)
    path.write_text(json.dumps(doc))
    wh = Warehouse(tmp_path / "wh")
    ingest([tmp_path / "two"], wh, jobs=1)
    (row,) = run_metric(connect(wh), resolve("mean_sm_coverage"), {}).to_pylist()
    assert row["value"] is None
    assert row["reason"].startswith(
        "kernels carry grids on device 2, but deviceProperties lists SM counts for device 0, 1 only"
    )


def test_a_name_clash_on_dask_names_both_folders_or_gets_a_distinct_id(tmp_path):
    """The Dask path plans in the same Committer: a clear error naming both folders, or,
    as cclq.main asks, the folder's own distinct id."""
    pytest.importorskip("distributed")
    from cclq.ingest.plan import distinct_trace_id, plan_inputs
    from cclq.ingest.run import ingest
    from cclq.store.warehouse import Warehouse

    generate_workload(tmp_path / "a" / "workX", ranks=2, steps=2, layers=1, seed=1)
    generate_workload(tmp_path / "b" / "workX", ranks=1, steps=2, layers=1, seed=2)
    wh = Warehouse(tmp_path / "wh")
    assert not ingest([tmp_path / "a" / "workX"], wh, jobs=1).failed
    report = ingest([tmp_path / "b" / "workX"], wh, dask="local:1")
    (failed,) = report.failed
    assert str(tmp_path / "a" / "workX") in failed.message and str(tmp_path / "b" / "workX") in failed.message
    report = ingest([tmp_path / "b" / "workX"], wh, dask="local:1", distinct_ids=True)
    assert not report.failed, [o.message for o in report.failed]
    (w,) = plan_inputs([tmp_path / "b" / "workX"], wh.root)
    assert report.traces == {str(w.root): distinct_trace_id(w)}
    assert {o.trace for o in report.outcomes} == {distinct_trace_id(w)}


def test_several_partial_traces_are_named_in_one_warning_line(tmp_path):
    """A folder of rank samples (one file of an 8-rank run each) is common in shared trace
    collections: the warning names them all on one line instead of one line each."""
    from helpers.cli import invoke

    for name, keep in (("a", 1), ("b", 3)):
        generate_workload(tmp_path / "full" / name, ranks=4, steps=1, layers=1, seed=7)
        (tmp_path / "in" / name).mkdir(parents=True)
        for f in sorted((tmp_path / "full" / name).iterdir()):
            if not f.name.startswith("kineto_trace_") or int(f.name.split("_")[2].split(".")[0]) < keep:
                f.rename(tmp_path / "in" / name / f.name)
    r = invoke("ingest", str(tmp_path / "in"), "-w", str(tmp_path / "wh"), "-q")
    assert r.returncode == 0, r.stderr
    r = invoke("metric", "total_kernel_time", "--all", "-w", str(tmp_path / "wh"), "-f", "csv")
    lines = [line for line in r.stderr.splitlines() if "partial" in line]
    assert lines == [
        "cclq: warning: 2 traces are partial, their values cover the ranks present only: "
        "a (1 of 4 ranks), b (3 of 4 ranks) (re-run `cclq ingest` if one was interrupted; "
        "--allow-partial to accept)"
    ], r.stderr
