"""``helpers.cli.invoke`` (cclq in the test's process) answers as ``run_cli`` (a fresh
process) does: the same stdout, stderr and exit status, for output, usage errors and
cclq's own errors; and it leaves the process as it found it. The output-format tests
rely on it; a difference here would make them test something a user never sees."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
from helpers.cli import invoke, run_cli
from helpers.traces import gpu_trace


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("inproc")
    gpu_trace(root / "in" / "w" / "rank0.json", kernels=3)
    done = invoke("ingest", str(root / "in"), "-w", str(root / "wh"), "-q", "-j", "1")
    assert done.returncode == 0, done.stderr
    return root / "wh"


CASES = [
    ("sql", "SELECT count(*) AS n, sum(dur_ns) AS d FROM kernels", "-f", "csv"),  # output: csv
    ("metric", "total_kernel_time", "--all", "-f", "json"),  # output: json
    ("sql", "SELEC 1"),  # a query error: exit 3, one line
    ("metric", "no_such_metric_xyz", "--all"),  # a usage error of cclq's: exit 2, did-you-mean
    ("metric", "--no-such-option"),  # a usage error of typer's: exit 2
    ("traces", "-f", "csv"),
]


@pytest.mark.parametrize("args", CASES, ids=[" ".join(c[:2]) for c in CASES])
def test_in_process_is_what_a_process_says(small: Path, args: tuple[str, ...]) -> None:
    here = invoke(*args, "-w", str(small))
    there = run_cli(*args, "-w", str(small))
    assert (here.returncode, here.stdout, here.stderr) == (there.returncode, there.stdout, there.stderr)


def test_missing_warehouse_from_the_environment_and_the_folder(tmp_path: Path) -> None:
    """``env`` and ``cwd`` reach the command as they reach a process, and are put back."""
    cwd, env_before = os.getcwd(), dict(os.environ)
    handlers = list(logging.getLogger("cclq").handlers)
    here = invoke("traces", env={"CCLQ_WAREHOUSE": "nowhere"}, cwd=tmp_path)
    there = run_cli("traces", env={"CCLQ_WAREHOUSE": "nowhere"}, cwd=tmp_path)
    assert here.returncode == there.returncode == 2
    assert here.stderr == there.stderr and "nowhere" in here.stderr
    assert os.getcwd() == cwd and dict(os.environ) == env_before
    assert logging.getLogger("cclq").handlers == handlers


def test_debug_set_by_a_command_does_not_leak(small: Path) -> None:
    """``--debug`` sets CCLQ_DEBUG for the command; the next call does not inherit it."""
    invoke("--debug", "traces", "-w", str(small))
    assert "CCLQ_DEBUG" not in os.environ
    done = invoke("sql", "SELEC 1", "-w", str(small))
    assert done.returncode == 3 and "Traceback" not in done.stderr
