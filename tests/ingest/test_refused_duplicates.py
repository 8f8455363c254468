"""Two files claiming one rank (CCL-Bench's layout keeps ``rank0_trace.json`` beside
``kineto_trace_0.json``): the second by path is refused, and the refusal is remembered
(cclq/ingest/refusals.py) so that the file is not parsed again, nor its error said again,
until it or the file holding its rank changes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers.cli import invoke

import cclq.ingest.run as ingest_run
from cclq.compat.main import run_here
from cclq.ingest.refusals import load
from cclq.store.warehouse import Warehouse
from cclq.synth.kineto import KinetoTraceBuilder

US = 1_000


def rank_file(path: Path, rank: int, gemm_us: int) -> None:
    b = KinetoTraceBuilder(rank=rank, world_size=2)
    b.kernel("sm90_xmma_gemm_bf16bf16_bf16f32", 100 * US, gemm_us * US)
    b.write(path)


def ccl_bench_layout(folder: Path) -> Path:
    folder.mkdir(parents=True)
    rank_file(folder / "kineto_trace_0.json", 0, 100)
    rank_file(folder / "kineto_trace_1.json", 1, 200)
    rank_file(folder / "rank0_trace.json", 0, 300)  # rank 0 again, refused (after kineto_trace_0 by path)
    return folder


@pytest.fixture
def parses(monkeypatch) -> list[str]:
    """The file names parsed, counted in this process (one parser: os.cpu_count() is 1)."""
    seen: list[str] = []
    real_file, real_group = ingest_run.parse_file, ingest_run.parse_group

    def parse_file(path: str, *args, **kwargs):  # noqa: ANN202, ANN002, ANN003
        seen.append(Path(path).name)
        return real_file(path, *args, **kwargs)

    def parse_group(items: list, *args, **kwargs):  # noqa: ANN202, ANN002, ANN003
        seen.extend(Path(item[0]).name for item in items)
        return real_group(items, *args, **kwargs)

    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    monkeypatch.setattr(ingest_run, "parse_file", parse_file)
    monkeypatch.setattr(ingest_run, "parse_group", parse_group)
    return seen


def call(capsys, folder: Path, wh: Path) -> tuple[float, str]:
    assert run_here(["--trace", str(folder), "--metric", "total_kernel_time", "--warehouse", str(wh)]) == 0
    out, err = capsys.readouterr()
    return float(out.splitlines()[-1]), err


def test_a_refused_file_is_parsed_once_over_three_calls(tmp_path, capsys, parses):
    folder = ccl_bench_layout(tmp_path / "run")
    wh = tmp_path / "wh"
    first, err = call(capsys, folder, wh)
    assert first == pytest.approx(300e-6)  # kineto_trace_0's 100 us and kineto_trace_1's 200 us
    assert "rank0_trace.json: rank 0 of trace 'run' is already taken by" in err
    assert sorted(parses) == ["kineto_trace_0.json", "kineto_trace_1.json", "rank0_trace.json"]
    for _ in range(2):
        again, err = call(capsys, folder, wh)
        assert again == first and "already taken" not in err
    assert parses.count("rank0_trace.json") == 1 and len(parses) == 3  # three calls, one parse each
    (entry,) = load(Warehouse(wh)).values()
    assert entry["path"] == str(folder / "rank0_trace.json") and entry["holder_path"].endswith("kineto_trace_0.json")

    # `cclq ingest` says it passed the file over, and why
    proc = invoke("ingest", str(folder), "-w", str(wh))
    assert proc.returncode == 0, proc.stderr
    assert "rank0_trace.json: not read again: rank 0 of trace 'run' is already taken by" in proc.stderr


def test_a_change_to_either_file_reads_it_again(tmp_path, capsys, parses):
    folder = ccl_bench_layout(tmp_path / "run")
    wh = tmp_path / "wh"
    call(capsys, folder, wh)
    parses.clear()
    # the refused file changed (same size, another mtime: its hash says it changed)
    rank_file(folder / "rank0_trace.json", 0, 301)
    _, err = call(capsys, folder, wh)
    assert parses == ["rank0_trace.json"] and "already taken" in err
    parses.clear()
    call(capsys, folder, wh)
    assert parses == []
    # only touched: same content, the hash says it did not change
    os.utime(folder / "rank0_trace.json", ns=(1, 1))
    _, err = call(capsys, folder, wh)
    assert parses == [] and "already taken" not in err
    # the holder changed: both are read again (the refused file may hold the rank now)
    rank_file(folder / "kineto_trace_0.json", 0, 150)
    value, err = call(capsys, folder, wh)
    assert sorted(parses) == ["kineto_trace_0.json", "rank0_trace.json"] and value == pytest.approx(350e-6)
    # the holder is gone: the refused file takes rank 0
    parses.clear()
    (folder / "kineto_trace_0.json").unlink()
    value, err = call(capsys, folder, wh)
    assert parses == ["rank0_trace.json"] and value == pytest.approx(501e-6) and "already taken" not in err
    assert load(Warehouse(wh)) == {}


def test_force_reads_a_refused_file_again(tmp_path, capsys, parses):
    folder = ccl_bench_layout(tmp_path / "run")
    wh = tmp_path / "wh"
    call(capsys, folder, wh)
    parses.clear()
    report = ingest_run.ingest([folder], Warehouse(wh), force=True)
    assert "rank0_trace.json" in parses
    assert any(o.status == "failed" and "already taken" in o.message for o in report.outcomes)
