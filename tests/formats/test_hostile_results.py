"""Hostile benchmark result files: the bounds of every reader hold for CSVs and logs, and a
foreseeable data error is a drop or one line naming the file, never "a bug"."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.cli import run_capped
from helpers.warehouse import query, run_ingest

from cclq.formats.base import ReadOptions
from cclq.formats.limits import ReadLimits

HEADER = "implementation,mean_time (ms),std_time,m,n,k,dtype,world_size,valid"


def _csv(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.mark.slow
def test_a_csv_of_a_million_columns_fails_at_its_header(tmp_path):
    """10^6 columns ran 209 s and passed 4 GB; the header's width is checked first."""
    wide = HEADER + "".join(f",c{i}" for i in range(1_000_000)) + "\n"
    row = "nccl,1.5,0.1,1,2,3,bf16,8,true" + ",x" * 1_000_000 + "\n"
    _csv(tmp_path / "in" / "w" / "results.csv", wide + row * 8)
    done, seconds = run_capped(
        "ingest", str(tmp_path / "in"), "-w", str(tmp_path / "wh"), "-q", "--jobs", "1", timeout=90
    )
    assert done.returncode == 1
    (line,) = [ln for ln in done.stderr.splitlines() if ln.startswith("cclq: error:")]
    assert "results.csv" in line and "1000009" in line and line.endswith("(limit --max-columns)"), line
    assert seconds < 30


def test_a_one_megabyte_cell_is_read_and_a_cell_past_the_bound_is_one_line(tmp_path, wh):
    """A 1 MB cell lost the file as "a bug" (csv's own 128 KB field limit); the string
    bound (16 MiB, --max-string-mb) decides now."""
    _csv(
        tmp_path / "in" / "w" / "results.csv",
        HEADER + ",note\n" + "nccl,1.5,0.1,1,2,3,bf16,8,true," + "n" * (1 << 20) + "\n",
    )
    report = run_ingest([tmp_path / "in"], wh)
    assert not report.failed, [o.message for o in report.failed]
    assert query(wh, "SELECT value FROM results WHERE metric = 'mean_time_ms'") == [(1.5,)]
    report = run_ingest(
        [tmp_path / "in"],
        type(wh)(tmp_path / "wh2"),
        options=ReadOptions(limits=ReadLimits(max_string_bytes=512 << 10)),
    )
    (failed,) = report.failed
    assert "a CSV cell longer than 524288 bytes on line 2" in failed.message
    assert failed.message.endswith("(limit --max-string-mb)") and "a bug" not in failed.message


def test_an_over_long_count_in_a_log_is_counted_not_fatal(tmp_path, wh):
    """``Batch size: <5,000 digits>`` lost the whole log to Python's int() limit."""
    log = (
        "Model: resnet50\nBatch size: " + "6" * 5000 + "\nNumber of GPUs: 8\n"
        "Iter #0: 100.5 img/sec per GPU\nImg/sec per GPU: 100.5 +-1.5\nTotal img/sec on 8 GPU(s): 804.0 +-12.0\n"
    )
    _csv(tmp_path / "in" / "w" / "train.log", log)
    report = run_ingest([tmp_path / "in"], wh)
    assert not report.failed, [o.message for o in report.failed]
    assert query(wh, "SELECT value, batch_size FROM results WHERE metric = 'total_samples_per_s'") == [(804.0, None)]
    assert query(wh, "SELECT stat, count FROM ingest_stats WHERE dropped") == [("batch line: not a plausible count", 1)]


def test_a_line_past_the_event_bound_names_the_option(tmp_path, wh):
    _csv(tmp_path / "in" / "w" / "results.csv", HEADER + "\n" + "nccl," + "1" * 3000 + "\n")
    report = run_ingest([tmp_path / "in"], wh, options=ReadOptions(limits=ReadLimits(max_event_bytes=1000)))
    (failed,) = report.failed
    assert failed.message.endswith("a line longer than 1000 bytes (line 2; limit --max-event-mb)"), failed.message
