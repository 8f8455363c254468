"""A folder that holds several runs (two Nsight Systems exports recorded months apart, which
cclq splits into a trace each): `python -m cclq.main --trace FOLDER` answers as CCL-Bench
does, for the export its tools read (the first ``.sqlite`` by name; ``tools/nsys_utils.py``
``find_sqlite_file``), names the runs on stderr and how to ask for another, and gives the
metric's own reason where there is no number, never "no value" for a trace it did not
find; ``cclq board --config`` fills the pair's row (its card's metadata, its numbers)."""

from __future__ import annotations

import json

import pytest
from helpers.ccl_bench import CCL_BENCH_NAMES
from helpers.cli import invoke
from helpers.several_runs import two_runs

from cclq.compat.main import run_here


def call(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = run_here(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_the_folder_answers_for_the_export_ccl_bench_reads(tmp_path, capsys):
    folder = two_runs(tmp_path / "pipit")
    wh = str(tmp_path / "wh")
    rc, out, err = call(capsys, "--trace", str(folder), "--metric", "total_kernel_time", "--warehouse", wh)
    assert rc == 0, err
    assert float(out.splitlines()[-1]) == pytest.approx(40e-6)  # a's 10 + 30 us, not b's 7
    assert "holds 2 runs" in err and "pipit+a_hpc (a_hpc.sqlite)" in err and "pipit+b_bench (b_bench.sqlite)" in err
    assert f"--trace {folder / 'b_bench.sqlite'}" in err  # how to ask for the other one
    # the other run, asked for by its file, as CCL-Bench's tools take a .sqlite path too
    rc, out, err = call(
        capsys, "--trace", str(folder / "b_bench.sqlite"), "--metric", "total_kernel_time", "--warehouse", wh
    )
    assert rc == 0, err
    assert float(out.splitlines()[-1]) == pytest.approx(7e-6)
    # percent, as CCL-Bench prints it: the top kernel is a's 30 us of 40
    rc, out, err = call(capsys, "--trace", str(folder), "--metric", "dominant_kernel_concentration", "--warehouse", wh)
    assert float(out.splitlines()[-1]) == pytest.approx(75.0)


@pytest.mark.slow
def test_no_name_says_it_does_not_apply_for_want_of_the_trace(tmp_path, capsys):
    """Each of the 61 names: a number, or nan with the metric's reason about a's run."""
    folder = two_runs(tmp_path / "pipit")
    wh = str(tmp_path / "wh")
    numbers = 0
    for name in CCL_BENCH_NAMES:
        rc, out, err = call(capsys, "--trace", str(folder), "--metric", name, "--warehouse", wh)
        assert rc == 0, (name, err)
        value = float(out.splitlines()[-1])
        if value == value:
            numbers += 1
            continue
        (line,) = [ln for ln in err.splitlines() if "does not apply" in ln]
        assert "does not apply to pipit+a_hpc: " in line, (name, line)
        assert not line.endswith(": no value"), (name, line)
    assert numbers >= 5  # kernel times, shares, the trace's span


def test_board_config_fills_the_row_of_a_folder_of_runs(tmp_path):
    folder = two_runs(tmp_path / "pipit")
    info = {
        "dominant_kernel_concentration": {"unit": "%", "trace_types": ["nsys", "json"]},
        "avg_step_time": {"unit": "s", "trace_types": ["json"]},
    }
    cfg = tmp_path / "benchmark_config.json"
    cfg.write_text(json.dumps({"pairs": [{"trace": str(folder), "metrics": "auto"}], "metric_info": info}))
    proc = invoke("board", str(tmp_path / "out"), "--config", str(cfg), "-w", str(tmp_path / "wh"))
    assert proc.returncode == 0, proc.stderr
    (row,) = json.loads((tmp_path / "out" / "benchmark_data.json").read_text())["rows"]
    assert row["metadata"]["trace_types"] == ["nsys"] and row["metadata"]["workload_name"] == "pipit"
    assert row["metrics"] == {"dominant_kernel_concentration": 75.0}
    assert "holds 2 runs" in proc.stderr and "the card names no trace types" not in proc.stderr
