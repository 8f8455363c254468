"""The example config the README and docs/record.md point to runs as written: it expands
without a problem (no torch needed), and with torch `cclq record` records every
configuration of it on CPU, valid."""

from __future__ import annotations

import csv
from importlib.util import find_spec
from pathlib import Path

import pytest
from helpers.cli import run_cli

from cclq.record.config import expand

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "ddlb_all_reduce.json"


def test_the_example_config_expands_without_a_problem():
    runs = expand(EXAMPLE, 2)
    assert len(runs) == 4  # two message sizes x (pytorch on gloo, compute_only)
    assert all(r.problem is None for r in runs), [r.problem for r in runs]
    assert {r.sizes["message_bytes"] for r in runs} == {4096, 1048576}


@pytest.mark.slow
@pytest.mark.skipif(find_spec("torch") is None, reason="torch is not installed (pip install -e '.[record]')")
def test_the_example_config_records_as_written(tmp_path: Path):
    done = run_cli("record", str(EXAMPLE), "-o", str(tmp_path / "runs"), "--nproc", "2")
    assert done.returncode == 0, done.stderr
    with open(tmp_path / "runs" / "ddlb_results.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 4 and all(r["valid"] == "True" for r in rows), rows
    assert all(float(r["mean_time (ms)"]) > 0 for r in rows)
