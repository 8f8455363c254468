"""Progress on stderr when it is not a terminal: one plain line per step (file, metric)
with counts and seconds, so a CI log shows what is happening while it happens."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers.cli import invoke

from cclq.query.registry import latest_specs
from cclq.synth.kineto import generate_workload


@pytest.mark.slow
def test_ingest_and_report_write_a_line_per_step_when_piped(tmp_path: Path):
    generate_workload(tmp_path / "in" / "dp2", ranks=2, steps=2, layers=1, seed=3)
    wh = str(tmp_path / "wh")
    done = invoke("ingest", str(tmp_path / "in"), "-w", wh)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert re.fullmatch(r"ingest: 2 file\(s\) to parse, \d+\.\d MB", lines[0]), done.stderr
    per_file = [
        x
        for x in lines
        if re.match(
            r"ingest \d/2 dp2/kineto_trace_\d\.json: ingested, [\d,]+ events, "
            r"\d+\.\d\d s \(\d+\.\d s in all\)$",
            x,
        )
    ]
    assert len(per_file) == 2, done.stderr

    done = invoke("report", "dp2", "-w", wh, "--no-cache")
    assert done.returncode == 0, done.stderr
    total = len(latest_specs())
    steps = [x for x in done.stderr.splitlines() if x.startswith("metrics ")]
    assert len(steps) == total, done.stderr
    assert all(
        re.fullmatch(
            rf"metrics \d+/{total} \w+(: not applicable \(from the catalog\)|: failed)? "
            r"\(\d+\.\d\d s\)",
            x,
        )
        for x in steps
    ), steps
    assert [int(x.split()[1].split("/")[0]) for x in steps] == list(range(1, total + 1)), steps
    # an XLA-only metric on a Kineto trace is decided from the catalog (its seconds are
    # those of a busy machine's scheduling, not of a query: not checked)
    position = [s.name for s in latest_specs()].index("total_comm_time_s") + 1
    assert any(
        re.fullmatch(
            rf"metrics {position}/{total} total_comm_time_s: not applicable \(from the catalog\) \(\d+\.\d\d s\)", x
        )
        for x in steps
    ), steps
    assert re.fullmatch(rf"metrics: {total}/{total} done in \d+\.\d s", done.stderr.splitlines()[-1]), done.stderr


def test_ingest_summary_does_not_wrap_when_piped(tmp_path: Path):
    name = "a_workload_whose_name_is_long_enough_to_wrap_at_80_columns"
    generate_workload(tmp_path / "in" / name, ranks=1, steps=2, layers=1, seed=3)
    done = invoke("ingest", str(tmp_path / "in"), "-w", str(tmp_path / "wh"))
    assert done.returncode == 0, done.stderr
    (row,) = [x for x in done.stderr.splitlines() if x.startswith("│")]
    assert f"│ {name} │" in row and "kineto_trace_0.json" in row


def test_ingest_of_an_empty_folder_says_what_it_looked_for_and_fails(tmp_path: Path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.md").write_text("no traces here")
    done = invoke("ingest", str(tmp_path / "empty"), "-w", str(tmp_path / "wh"))
    assert done.returncode == 1
    error, hint = done.stderr.splitlines()
    assert error == f"cclq: error: no trace or results file under {tmp_path / 'empty'}"
    assert hint.startswith("hint: cclq looks in every folder below for Kineto / Chrome trace JSON")
