"""`cclq ccl-bench shim DIR`: CCL-Bench's website scripts call `python tools/main.py` by
path; after the shim that call is answered by cclq, with the warehouse in the checkout's
.cclq/ (git-ignored), and CCL-Bench's own dispatcher kept runnable beside it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from helpers.cli import invoke

ROOT = Path(__file__).resolve().parents[2]
ORIGINAL = "#!/usr/bin/env python3\n# CCL-Bench's dispatcher\nprint('ccl-bench')\n"


def checkout(tmp_path: Path) -> Path:
    repo = tmp_path / "ccl-bench"
    (repo / "tools").mkdir(parents=True)
    (repo / "tools" / "main.py").write_text(ORIGINAL)
    (repo / ".gitignore").write_text("*.pyc\n")
    return repo


def test_the_shim_refuses_then_replaces_and_answers(tmp_path):
    repo = checkout(tmp_path)
    proc = invoke("ccl-bench", "shim", str(repo))
    assert proc.returncode == 2 and "--force" in proc.stderr and "Traceback" not in proc.stderr
    assert (repo / "tools" / "main.py").read_text() == ORIGINAL  # untouched
    proc = invoke("ccl-bench", "shim", str(repo), "--force")
    assert proc.returncode == 0, proc.stderr
    assert (repo / "tools" / "main_ccl_bench.py").read_text() == ORIGINAL
    assert "cclq.compat.main" in (repo / "tools" / "main.py").read_text()
    assert (repo / ".gitignore").read_text() == "*.pyc\n# cclq's warehouse (cclq ccl-bench shim)\n.cclq/\n"
    # again: the shim is recognised (no --force needed), .gitignore not extended twice
    assert invoke("ccl-bench", "shim", str(repo)).returncode == 0
    assert (repo / ".gitignore").read_text().count(".cclq/") == 1

    # the call CCL-Bench's generate_data.py makes, from the checkout's root
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CCLQ_DAEMON": "0"}
    env.pop("CCLQ_WAREHOUSE", None)
    folder = str(ROOT / "trace_collection" / "synthetic_mlp_dp4")
    via_shim = subprocess.run(
        [sys.executable, "tools/main.py", "--trace", folder, "--metric", "avg_step_time"],
        capture_output=True,
        text=True,
        cwd=repo,
        env=env,
    )
    assert via_shim.returncode == 0, via_shim.stderr
    assert (repo / ".cclq" / "warehouse").is_dir()  # the checkout's, whatever the cwd
    direct = subprocess.run(
        [
            sys.executable,
            "-m",
            "cclq.main",
            "--trace",
            folder,
            "--metric",
            "avg_step_time",
            "--warehouse",
            str(tmp_path / "wh"),
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    assert float(via_shim.stdout.splitlines()[-1]) == float(direct.stdout.splitlines()[-1]) > 0
    # CCL-Bench's own dispatcher still runs
    assert (
        subprocess.run([sys.executable, "tools/main_ccl_bench.py"], capture_output=True, text=True, cwd=repo).stdout
        == "ccl-bench\n"
    )


def test_no_such_folder(tmp_path):
    proc = invoke("ccl-bench", "shim", str(tmp_path / "nope"))
    assert proc.returncode == 2 and "no such folder" in proc.stderr
