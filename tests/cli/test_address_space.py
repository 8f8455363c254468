"""Every metric computes under a 2 GB address-space limit (``prlimit --as=2000000000``, a
cluster's ``ulimit -v``): the README's quick start; over the shared traces every metric at
once, the board, and the largest traces' reports. What used to reserve the address space:
DuckDB's Arrow results, whose buffers are reserved for a million rows per batch
(``query.engine.ARROW_BATCH_ROWS``), and pyarrow's mimalloc arenas (``cclq.runtime``)."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.paths import SHARED

pytestmark = pytest.mark.slow  # (CONTRIBUTING.md: over ~2 s each)

REPO = Path(__file__).resolve().parents[2]
LIMIT = 2_000_000_000


def _capped(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))

    return subprocess.run(
        [sys.executable, "-m", "cclq", *args], capture_output=True, text=True, cwd=cwd, preexec_fn=cap, timeout=600
    )


def _no_failure(done: subprocess.CompletedProcess) -> None:
    assert done.returncode == 0, done.stderr[-2000:]
    assert "failed" not in done.stderr and "Out of Memory" not in done.stdout + done.stderr, done.stderr[-2000:]


def test_the_quick_start_computes_every_metric_under_2_gb(tmp_path):
    wh = ["-w", str(tmp_path / "wh")]
    _no_failure(_capped("ingest", str(REPO / "trace_collection"), *wh, cwd=tmp_path))
    _no_failure(_capped("metric", "communication_overlap_ratio", "--all", *wh, cwd=tmp_path))
    report = _capped("report", "synthetic_mlp_dp4", "--no-cache", *wh, cwd=tmp_path)
    _no_failure(report)
    assert "FAILED" not in report.stdout
    _no_failure(_capped("board", str(tmp_path / "site"), "--no-cache", *wh, cwd=tmp_path))


# every category: the union is every metric (the test checks it against `cclq metrics`)
CATEGORIES = ("step_time", "communication", "compute", "memory", "collectives", "inference", "hta")
# the largest shared traces of JSON, where the report's figure data are largest
LARGEST = ("hta_mtia_single_rank", "hta_df_index_resolver")


def test_every_metric_report_and_board_over_the_shared_traces_under_2_gb(tmp_path):
    """Every metric over every shared trace in one process (one batch: the most the address
    space holds at once), the board, and the report of the largest traces. A report per
    trace ran the same metrics, a trace at a time, at 5x the time."""
    if not (SHARED / "traces").is_dir():
        pytest.skip("../shared/traces is not here")
    wh = ["-w", str(tmp_path / "wh")]
    done = _capped("ingest", str(SHARED / "traces"), *wh, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    categories = [arg for c in CATEGORIES for arg in ("-c", c)]
    every = _capped("metric", *categories, "--all", "--no-cache", "-f", "csv", *wh, cwd=tmp_path)
    _no_failure(every)
    computed = {line.split(",")[0] for line in every.stdout.splitlines()[1:]}
    listed = _capped("metrics", "-f", "csv", cwd=tmp_path).stdout.splitlines()[1:]
    assert computed == {line.split(",")[0] for line in listed}
    _no_failure(_capped("board", str(tmp_path / "site"), "--no-cache", *wh, cwd=tmp_path))
    for trace in LARGEST:
        report = _capped("report", trace, "--no-cache", *wh, cwd=tmp_path)
        _no_failure(report)
        assert "FAILED" not in report.stdout, trace
