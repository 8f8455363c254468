"""`cclq diff` of two `cclq record` runs on CPU: the traces have no GPU op, so the
comparison that tells something is the benchmark's own results (DDLB's ``mean_time_ms``,
``valid``). The run folders are built here as `cclq record` leaves them: a CPU-only
Kineto trace per rank (ProfilerStep and gloo's CPU ops, no kernel) and ddlb_results.csv
written by cclq.record.results from per-iteration times chosen by hand. No torch."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from helpers.cli import invoke
from helpers.warehouse import run_ingest

from cclq.record.config import Run
from cclq.record.results import RESULTS_FILE, result_row, write_rows
from cclq.store.warehouse import Warehouse
from cclq.synth.kineto import KinetoTraceBuilder


def _run(backend: str) -> Run:
    return Run(
        primitive="all_reduce",
        implementation="pytorch",
        impl_index=0,
        options={"backend": backend, "device": "cpu"},
        sizes={"message_bytes": 4096},
        dtype="float32",
        validate=True,
        num_iterations=3,
        num_warmups=1,
        time_measurement_backend="cpu_clock",
        barrier_at_each_iteration=False,
        seed=0,
    )


def record_like(folder: Path, backend: str, times_ms: list[float], valid: bool, world: int = 2) -> None:
    """A workload folder as `cclq record` writes it on CPU: one trace per rank, one CSV row."""
    folder.mkdir(parents=True)
    for rank in range(world):
        b = KinetoTraceBuilder(rank=rank, world_size=world)
        t = 0
        for step, ms in enumerate(times_ms, start=1):
            dur = int(ms * 1e6)
            b.profiler_step(step, ts=t, dur=dur)
            b.cpu_op("c10d::allreduce_", ts=t + 1_000, dur=dur - 2_000)
            t += dur + 10_000
        b.write(folder / f"kineto_trace_{rank}.json")
    write_rows(folder / RESULTS_FILE, [result_row(_run(backend), world, times_ms, "host", valid)])


@pytest.fixture(scope="module")
def wh_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("diff_record")
    # A: 1, 2, 3 ms (mean 2); B: 1.5, 1.5, 3 ms (mean 2): equal means, B's std differs.
    # C: 4, 4, 4 ms (mean 4), its validation failed.
    record_like(root / "in" / "rec_a", "gloo", [1.0, 2.0, 3.0], valid=True)
    record_like(root / "in" / "rec_b", "gloo", [1.5, 1.5, 3.0], valid=True)
    record_like(root / "in" / "rec_c", "mpi", [4.0, 4.0, 4.0], valid=False)
    assert not run_ingest([root / "in"], Warehouse(root / "wh")).failed
    return root / "wh"


def _diff(wh_root: Path, *args: str) -> tuple[int, str, str]:
    done = invoke("diff", *args, "--warehouse", str(wh_root))
    return done.returncode, done.stdout, done.stderr


@pytest.mark.slow
def test_results_rows_are_compared(wh_root: Path):
    code, out, err = _diff(wh_root, "rec_a", "rec_c", "--format", "json")
    assert code == 0, err
    data = json.loads(out)
    assert data["ops"] == [] and data["op_groups"] == []
    rows = {r["metric"]: r for r in data["results"]}
    mean = rows["mean_time_ms"]
    # one configuration per side (two record workloads): those two are compared, both named
    shape = "m=1024 n=1 k=1 float32 np=2"  # 4096 B of float32 = 1024 elements
    assert data["results_note"] == (
        f"A: pytorch (backend=gloo, device=cpu) {shape}; B: pytorch (backend=mpi, device=cpu) {shape}"
    )
    assert mean["status"] == "both"
    assert mean["a"] == pytest.approx(2.0) and mean["b"] == pytest.approx(4.0)
    assert mean["delta"] == pytest.approx(2.0) and mean["rel"] == pytest.approx(1.0)
    assert mean["verdict"] == "worse"  # a time: lower is better
    assert (mean["valid_a"], mean["valid_b"]) == (True, False)
    # population std of 1, 2, 3 ms = sqrt(2/3); of 4, 4, 4 = 0
    assert rows["std_time_ms"]["a"] == pytest.approx((2 / 3) ** 0.5) and rows["std_time_ms"]["b"] == 0
    assert rows["std_time_ms"]["verdict"] == "better"
    assert (rows["min_time_ms"]["a"], rows["max_time_ms"]["b"]) == (pytest.approx(1.0), pytest.approx(4.0))


@pytest.mark.slow
def test_table_says_there_are_no_gpu_ops_instead_of_empty_tables(wh_root: Path):
    code, out, err = _diff(wh_root, "rec_a", "rec_b")
    assert code == 0, err
    assert "benchmark results: B against A" in out
    assert "mean_time_ms" in out and "valid A" in out
    assert "no GPU kernel and no XLA device op on either side" in out
    assert "op time by kernel class" not in out and "ops with the largest time change" not in out
    # equal means: no change, no verdict
    line = next(ln for ln in out.splitlines() if "mean_time_ms" in ln)
    assert "better" not in line and "worse" not in line and "+0.0%" in line


def test_csv_carries_the_results_part(wh_root: Path):
    code, out, err = _diff(wh_root, "rec_a", "rec_c", "--format", "csv")
    assert code == 0, err
    rows = [r for r in csv.DictReader(io.StringIO(out)) if r["part"] == "result"]
    mean = next(r for r in rows if r["name"] == "mean_time_ms")
    assert float(mean["a"]) == pytest.approx(2.0) and float(mean["b"]) == pytest.approx(4.0)
    assert (mean["valid_a"], mean["valid_b"]) == ("True", "False")


def test_the_same_configuration_on_both_sides_is_named_once(wh_root: Path):
    code, out, err = _diff(wh_root, "rec_a", "rec_b", "--format", "json")
    assert code == 0, err
    data = json.loads(out)
    assert data["results_note"] == ""
    mean = next(r for r in data["results"] if r["metric"] == "mean_time_ms")
    assert mean["implementation"] == "pytorch (backend=gloo, device=cpu)"
    assert mean["config"] == "m=1024 n=1 k=1 float32 np=2"
    assert mean["a"] == pytest.approx(2.0) and mean["b"] == pytest.approx(2.0) and mean["verdict"] == ""


def test_several_configurations_match_by_configuration():
    from cclq.present.diff import compare_results
    from cclq.query.trace_stats import BenchmarkResult

    def r(impl: str, value: float) -> BenchmarkResult:
        return BenchmarkResult("ddlb", impl, "mean_time_ms", "ms", value, 8, 8, 8, "float32", 2, None)

    # two implementations on A, one on B: matched by implementation, the other is A's alone
    rows, note = compare_results([r("x", 1.0), r("y", 2.0)], [r("x", 3.0)])
    assert note == ""
    by_impl = {row["implementation"]: row for row in rows}
    assert by_impl["x"]["status"] == "both" and by_impl["x"]["delta"] == 2.0
    assert by_impl["y"]["status"] == "only A" and by_impl["y"]["b"] is None

    # one implementation a side, two shapes each: matched by shape, the implementations compared
    def s(impl: str, m: int, value: float) -> BenchmarkResult:
        return BenchmarkResult("ddlb", impl, "mean_time_ms", "ms", value, m, 1, 1, "float32", 2, True)

    rows, note = compare_results([s("gloo", 8, 1.0), s("gloo", 16, 2.0)], [s("mpi", 8, 4.0), s("mpi", 16, 1.0)])
    assert note == "implementation A: gloo; B: mpi"
    assert [(row["config"], row["delta"], row["verdict"]) for row in rows] == [
        ("m=16 n=1 k=1 float32 np=2", -1.0, "better"),
        ("m=8 n=1 k=1 float32 np=2", 3.0, "worse"),
    ]
