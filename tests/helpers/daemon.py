"""Calling ``python -m cclq.main`` as CCL-Bench does, with or without the warm daemon, and
where a test's daemon keeps its socket and lock (its own ``TMPDIR``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from cclq.compat import daemon


def _main(env: dict, *args: str, cwd: Path | None = None, daemon_on: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "cclq.main", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**env, "CCLQ_DAEMON": "1" if daemon_on else "0"},
    )


def _paths(tmp_path: Path) -> dict[str, Path]:
    old = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = str(tmp_path / "tmp")
    import tempfile

    tempfile.tempdir = None
    try:
        return daemon.daemon_paths((tmp_path / "wh").resolve())
    finally:
        if old is None:
            del os.environ["TMPDIR"]
        else:
            os.environ["TMPDIR"] = old
        tempfile.tempdir = None
