"""Inference engine iterations as steps (step_marker_rules version 2) and the metrics
that read them: engine_iterations, steps_with(2), avg_step_time v2, ttft, tpot,
break_down_steps v2 and coll_call_num v2.

Every expected number is worked out by hand from the events placed below, or
computed here from the raw JSON of the real vLLM trace with the json module.
"""

from __future__ import annotations

import gzip
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from helpers.paths import require_shared
from helpers.warehouse import run_ingest

from cclq.query.metrics import run_metric
from cclq.query.registry import resolve
from cclq.query.session import connect
from cclq.store.warehouse import Warehouse
from cclq.synth.kineto import KinetoTraceBuilder

US = 1_000  # ns per microsecond
TOL = 1e-15
NO_ITERATIONS = (
    "no inference engine iterations (vLLM execute_context_*/execute_model, SGLang run_batch/forward_batch_generation)"
)
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_cublas"
RUNNER = "vllm/v1/worker/gpu_model_runner.py(2907): execute_model"
WORKER = "vllm/v1/worker/gpu_worker.py(450): execute_model"  # not the model runner: no step
RUN_BATCH = "sglang/srt/managers/scheduler.py(1210): run_batch"
FORWARD_BATCH = "sglang/srt/managers/tp_worker.py(230): forward_batch_generation"
EXTEND = "sglang/srt/model_executor/model_runner.py(1630): forward_extend"
DECODE = "sglang/srt/model_executor/model_runner.py(1610): forward_decode"


def card(phase: str, output_len: int | None = None) -> str:
    data = f"\n  data:\n    output_len: {output_len}" if output_len is not None else ""
    return f"version: 1\nworkload:\n  model:\n    phase: {phase}{data}\n"


def vllm_iteration(b: KinetoTraceBuilder, ctx: tuple[int, int], gen: tuple[int, int], ts: int, dur: int) -> None:
    """One vLLM engine iteration: the execute_context annotation with the model
    runner's execute_model frame (and the worker's) nested inside."""
    name = f"execute_context_{ctx[0]}({ctx[1]})_generation_{gen[0]}({gen[1]})"
    b.python_function(WORKER, ts * US, dur * US)
    b.user_annotation(name, ts * US, dur * US)
    b.python_function(RUNNER, ts * US + 500, dur * US - 1000)


def build_vllm(folder: Path) -> None:
    """`vllm_tp2`: two ranks, card phase inference, output_len 4. Iterations (us):
        rank 0                        rank 1
      1 idle     [0, 10)             idle     [0, 10)
      2 prefill  [20, 70)   50       prefill  [20, 80)   60   (2 requests, 256 tokens)
      3 mixed    [80, 110)  30       mixed    [90, 120)  30   (1 prompt of 128 + 2 decodes)
      4 decode   [120, 132) 12       decode   [130, 144) 14
      5 decode   [140, 150) 10       decode   [150, 162) 12
      6 decode   [160, 168)  8       decode   [170, 180) 10
    Rank 0 also launches a GEMM at 25 us (runs [30, 60)) and an all-reduce at 125 us
    (runs [126, 131)), and a GEMM at 200 us (after the last iteration)."""
    for rank, prefill, mixed, decodes in (
        (0, (20, 50), (80, 30), ((120, 12), (140, 10), (160, 8))),
        (1, (20, 60), (90, 30), ((130, 14), (150, 12), (170, 10))),
    ):
        b = KinetoTraceBuilder(rank=rank, world_size=2)
        vllm_iteration(b, (0, 0), (0, 0), 0, 10)
        vllm_iteration(b, (2, 256), (0, 0), *prefill)
        vllm_iteration(b, (1, 128), (2, 2), *mixed)
        for ts, dur in decodes:
            vllm_iteration(b, (0, 0), (3, 3), ts, dur)
        if rank == 0:
            b.kernel(GEMM, 30 * US, 30 * US, stream=7, launch_ts=25 * US)
            b.nccl_kernel("allreduce", 126 * US, 5 * US, stream=20, launch_ts=125 * US)
            b.kernel(GEMM, 205 * US, 5 * US, stream=7, launch_ts=200 * US)
        b.write(folder / f"rank{rank}.json")
    (folder / "workload_card.yaml").write_text(card("inference", 4))


def build_sglang(folder: Path) -> None:
    """`sglang`: run_batch frames with forward_batch_generation and the per-mode
    forward frame nested (us): rb1 [0,40) extend; rb2 [50,60) decode; rb3 [70,82)
    decode; rb4 [90,99) decode. No card."""
    b = KinetoTraceBuilder(rank=0, world_size=1)
    for (ts, dur), mode in zip(((0, 40), (50, 10), (70, 12), (90, 9)), (EXTEND, DECODE, DECODE, DECODE)):
        b.python_function(RUN_BATCH, ts * US, dur * US)
        b.python_function(FORWARD_BATCH, ts * US + 200, dur * US - 400)
        b.python_function(mode, ts * US + 300, dur * US - 600)
    b.write(folder / "rank0.json")


def build_runner_only(folder: Path) -> None:
    """`runner_only`: vLLM with_stack trace without the annotation: the model runner's
    execute_model frames [0,30) [40,50) [60,72) [80,88) us, phase not recorded."""
    b = KinetoTraceBuilder(rank=0, world_size=1)
    for ts, dur in ((0, 30), (40, 10), (60, 12), (80, 8)):
        b.python_function(WORKER, ts * US, dur * US)
        b.python_function(RUNNER, ts * US + 100, dur * US - 200)
    b.write(folder / "rank0.json")
    (folder / "workload_card.yaml").write_text(card("inference"))


def build_profiler_steps_too(folder: Path) -> None:
    """`with_profiler_steps`: ProfilerStep#1..3 of 100 us and vLLM iterations inside:
    ProfilerStep wins for steps; ttft still reads the engine iterations. Card output_len 1."""
    b = KinetoTraceBuilder(rank=0, world_size=1)
    for i in range(3):
        b.profiler_step(i + 1, i * 100 * US, 100 * US)
    vllm_iteration(b, (1, 64), (0, 0), 10, 40)
    vllm_iteration(b, (0, 0), (1, 1), 110, 20)
    vllm_iteration(b, (0, 0), (1, 1), 210, 20)
    b.write(folder / "rank0.json")
    (folder / "workload_card.yaml").write_text(card("inference", 1))


def build_training(folder: Path) -> None:
    """`training`: card phase training, vLLM-like annotations present anyway."""
    b = KinetoTraceBuilder(rank=0, world_size=1)
    vllm_iteration(b, (1, 64), (0, 0), 0, 40)
    vllm_iteration(b, (0, 0), (1, 1), 50, 20)
    b.write(folder / "rank0.json")
    (folder / "workload_card.yaml").write_text(card("training"))


def build_decode_only(folder: Path) -> None:
    """`decode_only`: the window starts mid-decode: two decode iterations, no prefill."""
    b = KinetoTraceBuilder(rank=0, world_size=1)
    vllm_iteration(b, (0, 0), (4, 4), 0, 9)
    vllm_iteration(b, (0, 0), (4, 4), 20, 11)
    b.write(folder / "rank0.json")


def build_sglang_forward_only(folder: Path) -> None:
    """`sglang_forward`: no run_batch frames, only the worker's forward_batch_generation
    with forward_decode inside: [0,8) [10,19) us."""
    b = KinetoTraceBuilder(rank=0, world_size=1)
    for ts, dur in ((0, 8), (10, 9)):
        b.python_function(FORWARD_BATCH, ts * US, dur * US)
        b.python_function(DECODE, ts * US + 100, dur * US - 200)
    b.write(folder / "rank0.json")


def build_vllm_tpu(folder: Path) -> None:
    """`vllm_tpu`: an xprof-style host plane (no categories) with vLLM-TPU's engine core
    step frames `$core.py:331 step`: [1000,1030) [1040,1050) [1060,1072) us, and a
    `$core.py:90 step_with_batch_queue`-like frame that is not one."""
    events = [
        {"ph": "M", "pid": 1, "name": "process_name", "args": {"name": "/host:CPU"}},
        {"ph": "M", "pid": 1, "tid": 1, "name": "thread_name", "args": {"name": "python"}},
    ]
    for ts, dur in ((1000, 30), (1040, 10), (1060, 12)):
        events.append({"ph": "X", "pid": 1, "tid": 1, "ts": ts, "dur": dur, "name": "$core.py:331 step"})
    events.append({"ph": "X", "pid": 1, "tid": 1, "ts": 990, "dur": 100, "name": "$core.py:90 step_with_batch_queue"})
    (folder / "host0.trace.json").write_text(json.dumps({"displayTimeUnit": "ns", "traceEvents": events}))


@pytest.fixture(scope="module")
def wh(tmp_path_factory: pytest.TempPathFactory) -> Warehouse:
    root = tmp_path_factory.mktemp("inference")
    for name, build in (
        ("vllm_tp2", build_vllm),
        ("sglang", build_sglang),
        ("runner_only", build_runner_only),
        ("with_profiler_steps", build_profiler_steps_too),
        ("training", build_training),
        ("decode_only", build_decode_only),
        ("sglang_forward", build_sglang_forward_only),
        ("vllm_tpu", build_vllm_tpu),
    ):
        (root / "in" / name).mkdir(parents=True)
        build(root / "in" / name)
    warehouse = Warehouse(root / "wh")
    report = run_ingest([root / "in"], warehouse)
    assert not report.failed
    return warehouse


@pytest.fixture(scope="module")
def con(wh: Warehouse):
    c = connect(wh)
    yield c
    c.close()


def rows(con, metric: str, trace: str, version: int | None = None) -> dict[int | None, dict[str, Any]]:
    table = run_metric(con, resolve(metric, version)).to_pylist()
    got = [r for r in table if r["trace"] == trace]
    out = {r["rank"]: r for r in got}
    assert len(out) == len(got)
    return out


# --------------------------------------------------------------------------- the views
def test_engine_iterations_parse_vllm_annotations(con) -> None:
    got = con.execute("""SELECT rank, iteration, dur_ns, source, phase, context_requests, context_tokens,
                                generation_requests, generation_tokens
                         FROM engine_iterations WHERE trace = 'vllm_tp2' ORDER BY ALL""").fetchall()
    src = "vllm_execute_context"
    assert got[:6] == [
        (0, 1, 10 * US, src, "idle", 0, 0, 0, 0),
        (0, 2, 50 * US, src, "prefill", 2, 256, 0, 0),
        (0, 3, 30 * US, src, "mixed", 1, 128, 2, 2),
        (0, 4, 12 * US, src, "decode", 0, 0, 3, 3),
        (0, 5, 10 * US, src, "decode", 0, 0, 3, 3),
        (0, 6, 8 * US, src, "decode", 0, 0, 3, 3),
    ]
    assert [r[2] for r in got[6:]] == [10 * US, 60 * US, 30 * US, 14 * US, 12 * US, 10 * US]
    # rules version 1 has no engine markers
    assert con.execute("SELECT count(*) FROM engine_iterations_with(1)").fetchall() == [(0,)]


def test_engine_iterations_sglang_phase_from_forward_frames(con) -> None:
    got = con.execute(
        "SELECT iteration, dur_ns, source, phase FROM engine_iterations WHERE trace = 'sglang' ORDER BY iteration"
    ).fetchall()
    assert got == [
        (1, 40 * US, "sglang_run_batch", "prefill"),
        (2, 10 * US, "sglang_run_batch", "decode"),
        (3, 12 * US, "sglang_run_batch", "decode"),
        (4, 9 * US, "sglang_run_batch", "decode"),
    ]
    # the model runner's frame counts, the worker's execute_model frame does not
    got = con.execute(
        "SELECT iteration, dur_ns, source, phase FROM engine_iterations WHERE trace = 'runner_only' ORDER BY iteration"
    ).fetchall()
    assert got == [
        (1, 29_800, "vllm_execute_model", None),
        (2, 9_800, "vllm_execute_model", None),
        (3, 11_800, "vllm_execute_model", None),
        (4, 7_800, "vllm_execute_model", None),
    ]


def test_every_engine_marker_rule_finds_its_marker(con) -> None:
    """Each engine source of step_marker_rules v2 is found (the scan's cheap prefilter
    must let every rule's markers through)."""
    got = con.execute("SELECT DISTINCT source FROM engine_iterations ORDER BY 1").fetchall()
    rules = con.execute(
        "SELECT source FROM step_marker_rules WHERE version = 2 AND preference >= 3 ORDER BY 1"
    ).fetchall()
    assert got == rules
    assert con.execute(
        "SELECT iteration, dur_ns, phase FROM engine_iterations WHERE trace = 'sglang_forward' ORDER BY 1"
    ).fetchall() == [(1, 8 * US, "decode"), (2, 9 * US, "decode")]
    assert con.execute(
        "SELECT iteration, dur_ns FROM engine_iterations WHERE trace = 'vllm_tpu' ORDER BY 1"
    ).fetchall() == [(1, 30 * US), (2, 10 * US), (3, 12 * US)]


def test_steps_version_2_uses_engine_iterations_without_profiler_steps(con) -> None:
    got = con.execute(
        "SELECT step, dur_ns, source, phase FROM steps_with(2) WHERE trace = 'vllm_tp2' AND rank = 0 ORDER BY step"
    ).fetchall()
    # the idle iteration 1 is not a step
    assert got == [
        (2, 50 * US, "vllm_execute_context", "prefill"),
        (3, 30 * US, "vllm_execute_context", "mixed"),
        (4, 12 * US, "vllm_execute_context", "decode"),
        (5, 10 * US, "vllm_execute_context", "decode"),
        (6, 8 * US, "vllm_execute_context", "decode"),
    ]
    assert con.execute("SELECT * FROM steps EXCEPT ALL SELECT * FROM steps_with(2)").fetchall() == []
    # version 1 (what released metrics read) has none of them
    assert con.execute(
        "SELECT count(*) FROM steps_with(1) WHERE trace IN ('vllm_tp2', 'sglang', 'runner_only')"
    ).fetchall() == [(0,)]
    # ProfilerStep wins where a rank has it
    assert con.execute("SELECT DISTINCT source FROM steps WHERE trace = 'with_profiler_steps'").fetchall() == [
        ("cpu_annotation",)
    ]


def test_gpu_work_attributed_to_engine_iterations_by_launch(con) -> None:
    got = con.execute(
        "SELECT name[:4], step FROM gpu_ops_steps_of(2, 2) WHERE trace = 'vllm_tp2' ORDER BY ts_ns"
    ).fetchall()
    # GEMM launched at 25 us (iteration 2), all-reduce at 125 us (iteration 4),
    # GEMM launched at 200 us after every iteration: no step
    assert got == [("sm90", 2), ("nccl", 4), ("sm90", None)]
    assert con.execute("SELECT count(step) FROM gpu_ops_steps_with(1) WHERE trace = 'vllm_tp2'").fetchall() == [(0,)]


# ------------------------------------------------------------------------------ metrics
def test_avg_step_time_v2_on_engine_iterations(con) -> None:
    # rank 0 steps 50, 30, 12, 10, 8 us -> inner 30, 12, 10; rank 1 60, 30, 14, 12, 10 -> 30, 14, 12
    got = rows(con, "avg_step_time", "vllm_tp2", 2)
    assert got[0]["value"] == pytest.approx(52e-6 / 3, abs=TOL)
    assert got[1]["value"] == pytest.approx(56e-6 / 3, abs=TOL)
    assert (got[0]["steps_used"], got[0]["steps_seen"], got[0]["source"]) == (3, 5, "vllm_execute_context")
    assert (got[0]["prefill_steps"], got[0]["decode_steps"]) == (0, 2)
    # SGLang: 40, 10, 12, 9 -> inner 10, 12
    assert rows(con, "avg_step_time", "sglang", 2)[0]["value"] == pytest.approx(11e-6, abs=TOL)
    # version 1 does not know engine iterations
    v1 = rows(con, "avg_step_time", "vllm_tp2", 1)
    assert v1[0]["value"] is None
    assert v1[0]["reason"] == "no steps (no ProfilerStep#N annotations, no XLA steps)"


def test_ttft(con) -> None:
    got = rows(con, "ttft", "vllm_tp2", 1)
    # the first prefill iteration (iteration 2: the idle iteration 1 is not it)
    assert got[0]["value"] == pytest.approx(50e-6, abs=TOL)
    assert got[1]["value"] == pytest.approx(60e-6, abs=TOL)
    assert (got[0]["iteration"], got[0]["basis"], got[0]["context_tokens"]) == (2, "first prefill iteration", 256)
    assert rows(con, "ttft", "sglang", 1)[0]["value"] == pytest.approx(40e-6, abs=TOL)
    # phase not recorded: the first iteration, as CCL-Bench
    row = rows(con, "ttft", "runner_only", 1)[0]
    assert row["value"] == pytest.approx(29.8e-6, abs=TOL)
    assert row["basis"] == "first iteration (phase not recorded)"
    # ProfilerStep does not hide the engine iterations from ttft
    assert rows(con, "ttft", "with_profiler_steps", 1)[0]["value"] == pytest.approx(40e-6, abs=TOL)


def test_ttft_not_applicable(con) -> None:
    row = rows(con, "ttft", "training", 1)[0]
    assert row["value"] is None and row["reason"] == "the workload card says phase training (ttft is for inference)"
    row = rows(con, "ttft", "decode_only", 1)[0]
    assert row["value"] is None and row["reason"] == "no prefill iteration in the profiled window"


def test_tpot(con) -> None:
    got = rows(con, "tpot", "vllm_tp2", 1)
    # decode-only iterations: rank 0 (12 + 10 + 8) / 3; rank 1 (14 + 12 + 10) / 3
    assert got[0]["value"] == pytest.approx(10e-6, abs=TOL)
    assert got[1]["value"] == pytest.approx(12e-6, abs=TOL)
    assert (got[0]["decode_iterations"], got[0]["basis"]) == (3, "decode iterations")
    assert rows(con, "tpot", "sglang", 1)[0]["value"] == pytest.approx(31e-6 / 3, abs=TOL)
    # phase not recorded: iterations [1:-1] = 9.8 and 11.8 us
    row = rows(con, "tpot", "runner_only", 1)[0]
    assert row["value"] == pytest.approx(10.8e-6, abs=TOL)
    assert row["basis"] == "iterations after the first (phase not recorded)"
    # the window starts mid-decode: both decode iterations count
    assert rows(con, "tpot", "decode_only", 1)[0]["value"] == pytest.approx(10e-6, abs=TOL)


def test_tpot_not_applicable(con) -> None:
    row = rows(con, "tpot", "with_profiler_steps", 1)[0]
    assert row["value"] is None and row["reason"] == "the card's output_len is 1.0: no output token after the first"
    row = rows(con, "tpot", "training", 1)[0]
    assert row["value"] is None and row["reason"] == "the workload card says phase training (tpot is for inference)"


def test_ttft_and_tpot_v2_fall_back_to_the_trace_without_benchmark_results(con) -> None:
    """No result files here: version 2 gives version 1's numbers, saying they come from the trace."""
    for metric in ("ttft", "tpot"):
        for trace in ("vllm_tp2", "sglang", "runner_only"):
            v1, v2 = rows(con, metric, trace, 1), rows(con, metric, trace, 2)
            assert {r: row["value"] for r, row in v2.items()} == {r: row["value"] for r, row in v1.items()}
            assert all(row["source"] == "trace: " + v1[r]["basis"] for r, row in v2.items())


def test_break_down_steps_and_coll_call_num_v2_per_engine_iteration(con) -> None:
    got = {
        r["step"]: r
        for r in run_metric(con, resolve("break_down_steps", 2)).to_pylist()
        if r["trace"] == "vllm_tp2" and r["rank"] == 0
    }
    assert sorted(got) == [2, 3, 4, 5, 6]
    assert got[2]["value"] == pytest.approx(30e-6, abs=TOL) and got[2]["dense_gemm_s"] == pytest.approx(30e-6)
    assert got[4]["value"] == pytest.approx(5e-6, abs=TOL) and got[4]["comm_s"] == pytest.approx(5e-6)
    assert got[3]["value"] == 0 and got[2]["step_source"] == "vllm_execute_context"
    calls = {
        r["step"]: r["value"]
        for r in run_metric(con, resolve("coll_call_num", 2)).to_pylist()
        if r["trace"] == "vllm_tp2" and r["rank"] == 0
    }
    assert calls == {2: 0, 3: 0, 4: 1, 5: 0, 6: 0}


# --------------------------------------------------------------------- the real trace
@pytest.mark.slow
def test_real_vllm_trace_from_raw_json(tmp_path: Path) -> None:
    folder = require_shared() / "tracelens_b200_vllm_tp8"
    wh = Warehouse(tmp_path / "wh")
    run_ingest([folder], wh)
    with gzip.open(folder / "eager_trace.json.gz", "rt") as f:
        doc = json.load(f, parse_float=Decimal)
    annotations = [
        e
        for e in doc["traceEvents"]
        if e.get("cat") == "user_annotation" and e.get("name", "").startswith("execute_context_")
    ]
    assert len(annotations) == 1  # one prefill iteration: execute_context_1(888_...)_generation_0(0)
    (only,) = annotations
    assert only["name"].startswith("execute_context_1(888")
    dur_s = float(Decimal(only["dur"]) / Decimal(1_000_000))
    c = connect(wh)
    try:
        ttft = rows(c, "ttft", "tracelens_b200_vllm_tp8", 1)[0]
        assert ttft["value"] == pytest.approx(dur_s, abs=1e-12)
        assert (ttft["phase"], ttft["context_tokens"]) == ("prefill", 888)
        tpot = rows(c, "tpot", "tracelens_b200_vllm_tp8", 1)[0]
        assert tpot["value"] is None and tpot["reason"] == "no decode-only iteration in the profiled window"
        assert rows(c, "avg_step_time", "tracelens_b200_vllm_tp8", 2)[0]["value"] == pytest.approx(dur_s, abs=1e-12)
        assert rows(c, "avg_step_time", "tracelens_b200_vllm_tp8", 1)[0]["value"] is None
    finally:
        c.close()
