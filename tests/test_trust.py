"""Issue 21: no number from the wrong run, no 0 for "does not apply", no run silently
merged or half-ingested. Each test here failed on the code before the fix."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cclq.dev.synth.kineto import generate_workload


# ---------------------------------------------------------------- 1. trace identity
def _main(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cclq.main", *args], capture_output=True, text=True, env=env)


@pytest.mark.parametrize("daemon_on", ["0", "1"])
def test_cclq_main_answers_for_each_of_two_folders_of_the_same_name(tmp_path, daemon_on):
    """`a/workX` then `b/workX`: each call prints its own folder's value (the value each
    folder gives in a warehouse of its own), with and without the daemon."""
    generate_workload(tmp_path / "a" / "workX", ranks=2, steps=3, layers=2, seed=1)
    generate_workload(tmp_path / "b" / "workX", ranks=1, steps=2, layers=1, seed=2)
    (tmp_path / "tmp").mkdir()
    env = {**os.environ, "TMPDIR": str(tmp_path / "tmp"), "CCLQ_DAEMON": daemon_on, "CCLQ_DAEMON_IDLE_S": "30",
           "CCLQ_WAREHOUSE": str(tmp_path / "wh")}
    try:
        alone = {}
        for side in "ab":  # each folder alone, in a warehouse of its own: its own value
            r = _main(env, "--trace", str(tmp_path / side / "workX"), "--metric", "total_kernel_time",
                      "--warehouse", str(tmp_path / f"wh_{side}"))
            assert r.returncode == 0, r.stderr
            alone[side] = float(r.stdout.split()[-1])
        assert alone["a"] != alone["b"]
        for _ in range(2):  # and again: the second folder keeps its own (distinct, stable) id
            for side in "ab":
                r = _main(env, "--trace", str(tmp_path / side / "workX"), "--metric", "total_kernel_time")
                assert r.returncode == 0, r.stderr
                assert "error" not in r.stderr, r.stderr
                assert float(r.stdout.split()[-1]) == pytest.approx(alone[side], rel=1e-12), side
    finally:
        subprocess.run([sys.executable, "-m", "cclq.compat.daemon_process", "--stop"], env=env, capture_output=True)
