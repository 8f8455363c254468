"""The first look at a new trace as one command (issue 42): `cclq metric NAME... PATH` and
`cclq report PATH` on a folder not yet in the warehouse ingest it first, with progress
and the warehouse's rules, and answer what `cclq ingest` then `cclq metric` answer."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # (CONTRIBUTING.md: over ~2 s each)

BUNDLED = Path(__file__).resolve().parents[2] / "trace_collection" / "synthetic_mlp_dp4"


def _cclq(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cclq", *args], capture_output=True, text=True, cwd=cwd, timeout=600)


def test_metric_on_a_new_folder_ingests_it_first(tmp_path):
    folder = tmp_path / "synthetic_mlp_dp4"
    shutil.copytree(BUNDLED, folder)
    first = _cclq("metric", "total_kernel_time", str(folder), "-w", "wh1", "-f", "csv", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert "ingest" in first.stderr and "ingested" in first.stderr  # the progress of the ingest
    # the two commands it stands for, on another warehouse
    assert _cclq("ingest", str(folder), "-w", "wh2", "-q", cwd=tmp_path).returncode == 0
    two = _cclq("metric", "total_kernel_time", "--all", "-w", "wh2", "-f", "csv", cwd=tmp_path)
    assert first.stdout == two.stdout and first.stdout.count("\n") == 5  # header + 4 ranks
    # again: the warehouse's rules, unchanged files are not parsed again
    again = _cclq("metric", "total_kernel_time", str(folder), "-w", "wh1", "-f", "csv", cwd=tmp_path)
    assert again.returncode == 0 and again.stdout == first.stdout
    assert "ingested" not in again.stderr


def test_report_on_a_new_folder_ingests_it_first(tmp_path):
    folder = tmp_path / "synthetic_mlp_dp4"
    shutil.copytree(BUNDLED, folder)
    done = _cclq("report", str(folder), "-w", "wh", "-f", "json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["trace"] == "synthetic_mlp_dp4" and data["info"]["ranks_seen"] == 4


def test_a_broken_file_is_named_and_the_rest_answered(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    for name in ("kineto_trace_0.json.gz", "kineto_trace_1.json.gz"):
        shutil.copy(BUNDLED / name, folder / name)
    (folder / "kineto_trace_2.json").write_text('{"traceEvents": [{"ph": "X", "name": ')  # cut short
    done = _cclq("metric", "total_kernel_time", str(folder), "-w", "wh", "-f", "csv", cwd=tmp_path)
    assert done.returncode == 1  # FAILED: an input failed, the job went on
    assert any("error" in line and "kineto_trace_2.json" in line for line in done.stderr.splitlines())
    assert done.stdout.startswith("trace,rank") and done.stdout.count("\n") == 3  # ranks 0 and 1
