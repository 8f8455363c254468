"""Benchmark result files in the `results` table: DDLB CSVs, ddl-benchmarks logs, vLLM and
SGLang benchmark JSON. Files are written in the tests in each tool's documented format;
expected values are the numbers written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.warehouse import metric_rows, query, run_ingest

from cclq.synth.kineto import KinetoTraceBuilder

DDLB_HEADER = (
    "implementation,mean_time (ms),std_time,min_time,max_time,m,n,k,dtype,Throughput (TFLOPS),"
    "Throughput std (TFLOPS),world_size,hostname,time_measurement_backend,barrier_at_each_iteration,"
    "option,valid"
)


def _trace(root: Path) -> None:
    b = KinetoTraceBuilder(rank=0, world_size=1)
    b.kernel("gemm", 0, 1_000)
    b.write(root / "rank0.json")


def test_a_ddlb_csv_gives_times_and_throughputs_per_row(tmp_path, wh):
    root = tmp_path / "tp_columnwise"
    _trace(root)
    (root / "ddlb_results.csv").write_text(
        "\n".join(
            [
                DDLB_HEADER,
                '"pytorch (backend=gloo, order=AG_before)",1.5,0.25,1.25,2.0,1024,512,256,float32,0.18,0.02,2,box,'
                'cpu_clock,True,"backend=gloo, order=AG_before",True',
                "compute_only (size=sharded),0.75,0.0,0.75,0.75,1024,512,256,float32,n/a,0.0,2,box,cpu_clock,True,"
                "size=sharded,False",
            ]
        )
        + "\n"
    )
    report = run_ingest([root], wh)
    assert sorted(o.status for o in report.outcomes) == ["ingested", "ingested"]
    rows = query(
        wh,
        "SELECT run, implementation, metric, value, unit, m, n, k, dtype, world_size, valid "
        "FROM results ORDER BY run, metric",
    )
    pytorch = ("pytorch (backend=gloo, order=AG_before)", 1024, 512, 256, "float32", 2, True)
    compute = ("compute_only (size=sharded)", 1024, 512, 256, "float32", 2, False)
    assert [(r[0], r[2], r[3], r[4]) for r in rows] == [
        (0, "max_time_ms", 2.0, "ms"),
        (0, "mean_time_ms", 1.5, "ms"),
        (0, "min_time_ms", 1.25, "ms"),
        (0, "std_time_ms", 0.25, "ms"),
        (0, "throughput_std_tflops", 0.02, "TFLOPS"),
        (0, "throughput_tflops", 0.18, "TFLOPS"),
        (1, "max_time_ms", 0.75, "ms"),
        (1, "mean_time_ms", 0.75, "ms"),
        (1, "min_time_ms", 0.75, "ms"),
        (1, "std_time_ms", 0.0, "ms"),
        (1, "throughput_std_tflops", 0.0, "TFLOPS"),
    ]
    assert {r[0]: (r[1], *r[5:]) for r in rows} == {0: pytorch, 1: compute}
    # the cell that is not a number is counted, and the row's other numbers kept
    assert query(wh, "SELECT stat, count FROM ingest_stats WHERE dropped") == [("Throughput (TFLOPS): not a number", 1)]
    config = json.loads(query(wh, "SELECT config_json FROM results WHERE run = 0 LIMIT 1")[0][0])
    assert config["option"] == "backend=gloo, order=AG_before" and config["hostname"] == "box"
    # a results file claims no rank: the trace's rank 0 is still its own
    assert query(wh, "SELECT relpath, rank_source FROM files ORDER BY relpath") == [
        ("ddlb_results.csv", "results file (not per rank)"),
        ("rank0.json", "distributedInfo"),
    ]


DDL_LOG = """#Date: May 29 2020 10:01:02
#CMD: mpirun -np 8 python imagenet_benchmark.py --model resnet50
NCCL INFO Bootstrap : Using [0]ib0:10.0.0.1<0>
Model: resnet50
Batch size: 64
Number of GPUs: 8
Running warmup...
Running benchmark...
Iter #0: 115.2 img/sec per GPU
Iter #1: 116.0 img/sec per GPU
Img/sec per GPU: 115.6 +-0.8
Total img/sec on 8 GPU(s): 924.8 +-6.4
NCCL INFO comm 0x55d rank 0 nranks 8 - Init COMPLETE
Iter #0: 117.0 img/sec per GPU
Img/sec per GPU: 117.0 +-0.0
Total img/sec on 8 GPU(s): 936.0 +-0.0
"""


def test_a_ddl_benchmarks_log_gives_each_try_and_counts_the_noise(tmp_path, wh):
    root = tmp_path / "resnet50_bs64_8gpu"
    root.mkdir()
    (root / "rdma-1-method-wfbp-dnn-resnet50-bs-64-nworker-8.log").write_text(DDL_LOG)
    report = run_ingest([root], wh)
    assert [o.status for o in report.outcomes] == ["ingested"]
    assert query(
        wh,
        "SELECT run, metric, value, unit, benchmark, batch_size, world_size FROM results "
        "WHERE metric LIKE 'total%' ORDER BY run, metric",
    ) == [
        (0, "total_samples_per_s", 924.8, "img/s", "resnet50", 64, 8),
        (0, "total_samples_per_s_ci95", 6.4, "img/s", "resnet50", 64, 8),
        (1, "total_samples_per_s", 936.0, "img/s", "resnet50", 64, 8),
        (1, "total_samples_per_s_ci95", 0.0, "img/s", "resnet50", 64, 8),
    ]
    assert query(
        wh, "SELECT run, item, value FROM results WHERE metric = 'samples_per_s_per_gpu_iter' ORDER BY run, item"
    ) == [(0, 0, 115.2), (0, 1, 116.0), (1, 0, 117.0)]
    # Running warmup / benchmark, two NCCL INFO lines: known to no rule, counted, not fatal
    assert query(wh, "SELECT stat, count, dropped FROM ingest_stats") == [("log lines no rule knows", 4, False)]


def _serving(ttft_ms: float, tpot_ms: float) -> dict:
    return {
        "backend": "vllm",
        "model_id": "meta-llama/Llama-3.1-8B",
        "num_prompts": 3,
        "duration": 12.5,
        "completed": 3,
        "total_output_tokens": 384,
        "request_throughput": 0.24,
        "output_throughput": 30.72,
        "mean_ttft_ms": ttft_ms + 5,
        "median_ttft_ms": ttft_ms,
        "p99_ttft_ms": ttft_ms * 2,
        "mean_tpot_ms": tpot_ms + 1,
        "median_tpot_ms": tpot_ms,
        "ttfts": [0.1, 0.2, 0.3],
        "output_lens": [128, 128, 128],
    }


def test_vllm_and_sglang_benchmark_results(tmp_path, wh):
    vllm = tmp_path / "in" / "vllm_serve"
    vllm.mkdir(parents=True)
    (vllm / "serve.json").write_text(json.dumps(_serving(120.0, 25.0)))
    (vllm / "latency.json").write_text(
        json.dumps({"avg_latency": 1.75, "latencies": [1.5, 2.0], "percentiles": {"50": 1.75, "99": 2.0}})
    )
    sglang = tmp_path / "in" / "sglang"
    sglang.mkdir()
    lines = [dict(_serving(200.0, 40.0), backend="sglang"), dict(_serving(180.0, 30.0), backend="sglang")]
    (sglang / "bench_results.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    report = run_ingest([tmp_path / "in"], wh)
    assert sorted(o.status for o in report.outcomes) == ["ingested"] * 3, [o.message for o in report.outcomes]
    assert query(
        wh,
        "SELECT trace, source_format, metric, value, unit FROM results WHERE metric IN "
        "('median_ttft_ms', 'avg_latency', 'latency_p99_s', 'output_throughput', 'duration') "
        "ORDER BY trace, run, metric",
    ) == [
        ("sglang", "sglang_bench_jsonl", "duration", 12.5, "s"),
        ("sglang", "sglang_bench_jsonl", "median_ttft_ms", 200.0, "ms"),
        ("sglang", "sglang_bench_jsonl", "output_throughput", 30.72, "tokens/s"),
        ("sglang", "sglang_bench_jsonl", "duration", 12.5, "s"),
        ("sglang", "sglang_bench_jsonl", "median_ttft_ms", 180.0, "ms"),
        ("sglang", "sglang_bench_jsonl", "output_throughput", 30.72, "tokens/s"),
        ("vllm_serve", "vllm_bench_json", "avg_latency", 1.75, "s"),
        ("vllm_serve", "vllm_bench_json", "duration", 12.5, "s"),
        ("vllm_serve", "vllm_bench_json", "latency_p99_s", 2.0, "s"),
        ("vllm_serve", "vllm_bench_json", "median_ttft_ms", 120.0, "ms"),
        ("vllm_serve", "vllm_bench_json", "output_throughput", 30.72, "tokens/s"),
    ]
    # request-level rows: one per request
    assert query(
        wh, "SELECT item, value FROM results WHERE trace = 'vllm_serve' AND metric = 'ttft_s' ORDER BY item"
    ) == [(0, 0.1), (1, 0.2), (2, 0.3)]
    # ttft / tpot v2 take the benchmark's median (the last run), seconds
    ttft = {r["trace"]: (r["value"], r["source"]) for r in metric_rows(wh, "ttft")}
    assert ttft == {
        "sglang": (pytest.approx(0.18), "benchmark results (sglang_bench_jsonl)"),
        "vllm_serve": (pytest.approx(0.12), "benchmark results (vllm_bench_json)"),
    }
    tpot = {r["trace"]: r["value"] for r in metric_rows(wh, "tpot")}
    assert tpot == {"sglang": pytest.approx(0.030), "vllm_serve": pytest.approx(0.025)}


def test_files_that_are_no_results_are_skipped_and_do_not_make_workloads(tmp_path, wh):
    out = tmp_path / "recorded"
    _trace(out / "run_a")
    _trace(out / "run_b")
    (out / "ddlb_results.csv").write_text(DDLB_HEADER + "\n")  # the run's summary, beside the workloads
    (out / "run_a" / "notes.txt").write_text("tried with 2 GPUs\n")
    (out / "run_a" / "eplb.csv").write_text("layer,expert,load\n0,1,0.5\n")
    report = run_ingest([out], wh)
    assert query(wh, "SELECT DISTINCT trace FROM files ORDER BY 1") == [("run_a",), ("run_b",)]
    skipped = sorted(Path(o.path).name for o in report.outcomes if o.status == "skipped")
    assert skipped == ["eplb.csv", "notes.txt"] and not report.failed
