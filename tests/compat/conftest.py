"""Fixtures of the compat tests (CCL-Bench's calls, the warm daemon)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from cclq.synth.kineto import generate_workload


@pytest.fixture
def setup(tmp_path):
    """Two workloads, a warehouse, and an environment whose daemon home is the test's own."""
    generate_workload(tmp_path / "in" / "a", ranks=2, steps=3, layers=2, seed=1)
    generate_workload(tmp_path / "in" / "b", ranks=4, steps=2, layers=1, seed=2)
    (tmp_path / "tmp").mkdir()
    env = {
        **os.environ,
        "TMPDIR": str(tmp_path / "tmp"),
        "CCLQ_DAEMON": "1",
        "CCLQ_DAEMON_IDLE_S": "60",
        "CCLQ_WAREHOUSE": str(tmp_path / "wh"),
    }
    yield tmp_path, env
    subprocess.run([sys.executable, "-m", "cclq.compat.daemon_process", "--stop"], env=env, capture_output=True)
