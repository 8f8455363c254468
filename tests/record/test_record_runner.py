"""`cclq record` end to end, as a user runs it: record a tiny config (2 processes,
gloo, two sizes, two options), `cclq ingest` the output, and check with `cclq metric` /
`cclq sql` that the traces hold what the config asked for (collectives per step, their
message bytes from the sizes and dtype) and that the results CSV agrees with the step
times in the traces. The end-to-end tests need torch (the `record` extra) and skip
cleanly without it; the first tests below do not."""

from __future__ import annotations

import csv
import io
import json
import math
import warnings
from importlib.util import find_spec
from pathlib import Path

import pytest
import yaml
from helpers.cli import run_cli

from cclq.record import CHECK_FILE, RESULT_FILE, results
from cclq.record.config import expand
from cclq.record.runner import FAILED_DIR, RECORD_FILE, _finish

needs_torch = pytest.mark.skipif(
    find_spec("torch") is None, reason="torch is not installed (pip install -e '.[record]')"
)


def cuda_available() -> bool:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
        import torch
    return torch.cuda.is_available()


# ----------------------------------------------------------------- without torch
def test_an_invalid_result_is_recorded_as_invalid_not_dropped(tmp_path):
    cfg = tmp_path / "c.json"
    cfg.write_text(
        json.dumps(
            {
                "benchmark": {
                    "primitive": "all_reduce",
                    "message_bytes": 64,
                    "implementations": {"pytorch": [{"backend": "gloo"}]},
                }
            }
        )
    )
    (run,) = expand(cfg, 2)
    scratch = tmp_path / "out" / ".record-x"
    workload = scratch / "x"
    workload.mkdir(parents=True)
    (workload / "kineto_trace_0.json").write_text("{}")
    facts = {
        "hostname": "h",
        "torch": "2.13.0",
        "cpu_model": "cpu",
        "cuda": None,
        "gpu_name": None,
        "gpu_count": 0,
        "nccl": None,
    }
    (scratch / RESULT_FILE).write_text(json.dumps({"times_ms": [1.0, 3.0], "facts": facts}))
    (scratch / CHECK_FILE.format(rank=0)).write_text(json.dumps({"rank": 0, "problem": None}))
    (scratch / CHECK_FILE.format(rank=1)).write_text(json.dumps({"rank": 1, "problem": "all_reduce: 1 of 16 differ"}))
    outcome = _finish(run, "x", scratch, workload, tmp_path / "out", 2, cfg)
    assert outcome.status == "recorded" and outcome.reason == "rank 1: all_reduce: 1 of 16 differ"
    folder = tmp_path / "out" / "x"
    (row,) = results.read_rows(folder / results.RESULTS_FILE)
    assert row["valid"] == "False" and row["mean_time (ms)"] == "2.0"
    record = yaml.safe_load((folder / RECORD_FILE).read_text())
    assert record["valid"] is False and record["invalid_reason"] == outcome.reason
    assert record["benchmark"]["implementations"] == {"pytorch": [{"backend": "gloo", "device": "cpu"}]}
    assert (folder / "workload_card.yaml").is_file() and (folder / "kineto_trace_0.json").is_file()


def test_without_torch_record_says_how_to_install(tmp_path, monkeypatch):
    import cclq.record.runner as runner

    monkeypatch.setattr(runner.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(runner.UsageError) as e:
        runner.require_torch()
    assert "needs PyTorch" in e.value.message and "[record]" in e.value.hint


def test_cclq_help_does_not_import_torch():
    result = run_cli("--help")
    assert result.returncode == 0
    probe = run_cli("record", "--help")
    assert probe.returncode == 0 and "Example:" in probe.stdout
    import subprocess
    import sys

    code = "import sys; from cclq.cli.app import app; sys.exit('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


# -------------------------------------------------------------------- end to end
TINY = {
    "benchmark": {
        "primitive": "tp_columnwise",
        "m": [64, 128],
        "n": 32,
        "k": 16,
        "dtype": "float32",
        "validate": True,
        "num_iterations": 5,
        "num_warmups": 2,
        "barrier_at_each_iteration": False,
        "implementations": {
            "pytorch": [{"backend": "gloo", "order": ["AG_before", "AG_after"]}, {"backend": "nccl"}],
            "fuser": [{"algorithm": "default"}],
        },
    }
}
ITERATIONS, WARMUPS, N, K, ELEM = 5, 2, 32, 16, 4


def sql(wh: Path, query: str) -> list[dict[str, str]]:
    result = run_cli("sql", query, "-w", str(wh), "-f", "csv")
    assert result.returncode == 0, result.stderr
    return list(csv.DictReader(io.StringIO(result.stdout)))


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    if find_spec("torch") is None:
        pytest.skip("torch is not installed (pip install -e '.[record]')")
    root = tmp_path_factory.mktemp("record")
    cfg = root / "config.json"
    cfg.write_text(json.dumps(TINY))
    out, wh = root / "out", root / "wh"
    rec = run_cli("record", str(cfg), "-o", str(out), "--nproc", "2", "-f", "csv")
    ingest = run_cli("ingest", str(out), "-w", str(wh), "-q")
    return {
        "out": out,
        "wh": wh,
        "record": rec,
        "ingest": ingest,
        "rows": list(csv.DictReader(io.StringIO(rec.stdout))),
    }


def gloo_folders(recorded) -> dict[str, tuple[int, str]]:
    """workload -> (m, order) of the four gloo configurations."""
    return {
        f"tp_columnwise-pytorch-gloo-{order}-cpu-m{m}-n32-k16-float32-np2": (m, order)
        for m in (64, 128)
        for order in ("AG_before", "AG_after")
    }


@pytest.mark.slow
@needs_torch
def test_record_reports_what_it_cannot_run_and_records_the_rest(recorded):
    rec = recorded["record"]
    status = {r["workload"]: r["status"] for r in recorded["rows"]}
    assert len(status) == 2 * 4  # 2 sizes x (2 gloo orders + nccl + fuser)
    assert {w for w, s in status.items() if s == "recorded"} >= set(gloo_folders(recorded))
    assert rec.returncode == 1  # fuser always fails here, so the run says so
    for m in (64, 128):
        fuser = f"tp_columnwise-fuser-default-m{m}-n32-k16-float32-np2"
        assert status[fuser] == "failed"
        assert f"cclq: error: {fuser}: implementation 'fuser' is not available" in rec.stderr
        if not cuda_available():
            nccl = f"tp_columnwise-pytorch-nccl-AG_before-cuda-m{m}-n32-k16-float32-np2"
            assert status[nccl] == "failed"
            assert f"cclq: error: {nccl}: backend nccl needs CUDA" in rec.stderr
    leftovers = [p.name for p in recorded["out"].iterdir() if p.name.startswith(".record-") and p.name != FAILED_DIR]
    assert leftovers == []


@pytest.mark.slow
@needs_torch
def test_each_configuration_is_a_complete_workload_folder(recorded):
    out = recorded["out"]
    for name, (m, order) in gloo_folders(recorded).items():
        folder = out / name
        assert sorted(p.name for p in folder.iterdir()) == [
            "ddlb_results.csv",
            "kineto_trace_0.json",
            "kineto_trace_1.json",
            "record.yaml",
            "workload_card.yaml",
        ]
        (row,) = results.read_rows(folder / "ddlb_results.csv")
        assert row["implementation"] == f"pytorch (backend=gloo, order={order}, device=cpu)"
        assert (row["m"], row["n"], row["k"], row["world_size"], row["valid"]) == (str(m), "32", "16", "2", "True")
        trace = json.loads((folder / "kineto_trace_1.json").read_text())
        assert trace["distributedInfo"]["rank"] == 1 and trace["distributedInfo"]["backend"] == "gloo"
    recorded_names = [r["workload"] for r in recorded["rows"] if r["status"] == "recorded"]
    all_rows = results.read_rows(out / "ddlb_results.csv")  # the output folder's CSV: every workload
    assert len(all_rows) == len(recorded_names) >= 4


@pytest.mark.slow
@needs_torch
def test_ingest_takes_the_output_whole_with_the_cards(recorded):
    assert recorded["ingest"].returncode == 0, recorded["ingest"].stderr
    traces = {r["trace"]: r for r in sql(recorded["wh"], "SELECT trace, world_size, ranks_seen FROM traces")}
    for name in gloo_folders(recorded):
        assert (traces[name]["world_size"], traces[name]["ranks_seen"]) == ("2", "2")
    cards = sql(
        recorded["wh"],
        "SELECT trace, total_count, tp, phase, precision, iteration, comm_library, hardware_type FROM cards",
    )
    for card in cards:
        if card["trace"] in gloo_folders(recorded):
            assert (
                card["total_count"],
                card["tp"],
                card["precision"],
                card["iteration"],
                card["comm_library"],
                card["hardware_type"],
            ) == ("2", "2", "fp32", str(ITERATIONS), "Gloo", "CPU")


@pytest.mark.slow
@needs_torch
def test_collectives_per_step_match_the_config(recorded):
    metric = run_cli("metric", "coll_call_num", "--all", "-w", str(recorded["wh"]), "-f", "csv")
    assert metric.returncode == 0, metric.stderr
    per_step = [r for r in csv.DictReader(io.StringIO(metric.stdout)) if r["trace"] in gloo_folders(recorded)]
    # one all-gather per iteration, on each rank, in each of the profiled steps (the
    # warm-ups are not profiled: steps WARMUPS .. WARMUPS + ITERATIONS - 1)
    assert len(per_step) == 4 * 2 * ITERATIONS
    assert {float(r["value"]) for r in per_step} == {1.0}
    assert {int(r["step"]) for r in per_step} == set(range(WARMUPS, WARMUPS + ITERATIONS))

    msgs = sql(
        recorded["wh"], "SELECT trace, rank, step, role, coll_type, bytes, group_size FROM cpu_collective_messages"
    )
    for name, (m, order) in gloo_folders(recorded).items():
        mine = [r for r in msgs if r["trace"] == name]
        # the gathered tensor: A (m x k) before the GEMM, C (m x n) after it
        expected = m * (K if order == "AG_before" else N) * ELEM
        for role in ("call", "backend"):
            rows = [r for r in mine if r["role"] == role]
            assert len(rows) == 2 * ITERATIONS, (name, role)
            assert {(r["coll_type"], r["bytes"], r["group_size"]) for r in rows} == {
                ("all_gather", str(expected), "2")
            }, (name, role)
            assert {(r["rank"], r["step"]) for r in rows} == {
                (str(rank), str(step)) for rank in range(2) for step in range(WARMUPS, WARMUPS + ITERATIONS)
            }


@pytest.mark.slow
@needs_torch
def test_results_csv_agrees_with_the_step_times_in_the_traces(recorded):
    steps = sql(
        recorded["wh"],
        "SELECT trace, step, max(dur_ns) AS slowest_ns FROM steps GROUP BY trace, step ORDER BY trace, step",
    )
    for name in gloo_folders(recorded):
        folder = recorded["out"] / name
        times = yaml.safe_load((folder / "record.yaml").read_text())["times_ms"]  # per iteration, MAX over ranks
        (row,) = results.read_rows(folder / "ddlb_results.csv")
        assert float(row["mean_time (ms)"]) == pytest.approx(sum(times) / len(times))
        assert float(row["min_time"]) == min(times) and float(row["max_time"]) == max(times)
        step_ms = [int(s["slowest_ns"]) / 1e6 for s in steps if s["trace"] == name]
        assert len(step_ms) == len(times) == ITERATIONS
        for step, timed in zip(step_ms, times):
            # each step holds its timed region (and the profiler's own work at its edges):
            # never shorter (clocks agree to a few microseconds), and not much longer
            assert step >= timed - 0.02, (name, step_ms, times)
        overhead = sum(step_ms) / len(step_ms) - float(row["mean_time (ms)"])
        assert overhead <= 1.0 + 0.25 * float(row["mean_time (ms)"]), (name, step_ms, times)


@pytest.mark.slow
@needs_torch
def test_a_failing_rank_is_reported_and_the_next_configuration_runs(tmp_path):
    # 2**44 bytes cannot be allocated (the allocator refuses at once); 4096 can
    cfg = tmp_path / "c.json"
    cfg.write_text(
        json.dumps(
            {
                "benchmark": {
                    "primitive": "all_reduce",
                    "message_bytes": [2**44, 4096],
                    "num_iterations": 2,
                    "num_warmups": 1,
                    "output_csv": str(tmp_path / "ddlb" / "ar_{timestamp}.csv"),
                    "implementations": {"pytorch": [{"backend": "gloo"}]},
                }
            }
        )
    )
    out = tmp_path / "out"
    rec = run_cli("record", str(cfg), "-o", str(out), "--nproc", "1", "-f", "json")
    assert rec.returncode == 1
    failed, ok = json.loads(rec.stdout)
    assert failed["status"] == "failed" and failed["reason"].startswith("rank 0: out of memory: ")
    assert ok["status"] == "recorded" and ok["valid"] is True
    assert f"cclq: error: {failed['workload']}: rank 0: out of memory" in rec.stderr
    assert not (out / failed["workload"]).exists()  # nothing half-written where ingest reads
    assert "can't allocate memory" in (out / FAILED_DIR / failed["workload"] / "rank0.log").read_text()
    assert (out / ok["workload"] / "kineto_trace_0.json").is_file()
    # DDLB's own output_csv gets the run's rows too, {timestamp} filled in
    (ddlb_csv,) = (tmp_path / "ddlb").glob("ar_2*.csv")
    assert [r["m"] for r in results.read_rows(ddlb_csv)] == ["1024"]  # 4096 B of float32


@pytest.mark.slow
@needs_torch
def test_a_configuration_past_its_timeout_is_stopped(tmp_path):
    cfg = tmp_path / "c.json"
    cfg.write_text(
        json.dumps(
            {
                "benchmark": {
                    "primitive": "all_reduce",
                    "message_bytes": 64,
                    "implementations": {"pytorch": [{"backend": "gloo"}]},
                }
            }
        )
    )
    out = tmp_path / "out"
    # one second does not even start a rank (importing torch takes longer)
    rec = run_cli("record", str(cfg), "-o", str(out), "--nproc", "2", "--timeout", "1", "-f", "json")
    assert rec.returncode == 1
    (row,) = json.loads(rec.stdout)
    assert row["status"] == "failed" and row["reason"].startswith("timed out after 1 s")
    assert [p.name for p in out.iterdir()] == [FAILED_DIR]


@pytest.mark.slow
@needs_torch
def test_dp_mlp_all_reduces_one_bucket_at_a_time(tmp_path):
    m, n, k, layers = 4, 64, 32, 2
    bucket_mb = 0.01  # 10485.76 bytes
    cfg = tmp_path / "c.json"
    cfg.write_text(
        json.dumps(
            {
                "benchmark": {
                    "primitive": "dp_mlp",
                    "m": m,
                    "n": n,
                    "k": k,
                    "layers": layers,
                    "num_iterations": 2,
                    "num_warmups": 1,
                    "barrier_at_each_iteration": False,
                    "implementations": {
                        "pytorch": [{"backend": "gloo", "bucket_mb": bucket_mb, "overlap": [True, False]}]
                    },
                }
            }
        )
    )
    out, wh = tmp_path / "out", tmp_path / "wh"
    rec = run_cli("record", str(cfg), "-o", str(out), "--nproc", "2", "-f", "json")
    assert rec.returncode == 0, rec.stderr
    assert [r["valid"] for r in json.loads(rec.stdout)] == [True, True]
    assert run_cli("ingest", str(out), "-w", str(wh), "-q").returncode == 0
    # parameters in registration order: W1 (n x k), b1 (n), W2 (n x n), b2 (n), float32;
    # backward yields them last first, and a bucket closes once it holds >= bucket_mb MB
    sizes = [n * k * 4, n * 4, n * n * 4, n * 4]
    buckets, current = [], 0
    for size in reversed(sizes):
        current += size
        if current >= bucket_mb * 2**20:
            buckets.append(current)
            current = 0
    if current:
        buckets.append(current)
    assert buckets == [(n + n * n) * 4, (n + n * k) * 4]
    msgs = sql(
        wh,
        "SELECT trace, rank, step, bytes FROM cpu_collective_messages "
        "WHERE role = 'backend' AND coll_type = 'all_reduce' ORDER BY trace, rank, step, ts_ns",
    )
    for trace in {r["trace"] for r in msgs}:
        for rank in ("0", "1"):
            for step in ("1", "2"):
                got = [int(r["bytes"]) for r in msgs if (r["trace"], r["rank"], r["step"]) == (trace, rank, step)]
                assert sorted(got) == sorted(buckets), (trace, rank, step, got)
    assert math.isclose(sum(buckets), sum(sizes))
