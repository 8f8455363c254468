"""``cclq board`` onto a full disk leaves the board that was there, not part of a new
one: the build writes into a staging folder and moves its files in only once all are
written. On a small tmpfs (never the real disk); skipped where none can be mounted."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import pytest
from helpers.serve import run_cclq, two_rank_run

pytestmark = pytest.mark.slow  # (CONTRIBUTING.md: over ~2 s each)


def _site(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_a_board_onto_a_full_disk_leaves_the_previous_board(tmp_path: Path) -> None:
    import pytest

    disk = tmp_path / "disk"
    disk.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(disk)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode(errors='replace').strip()}")
    try:
        wh = str(tmp_path / "wh")
        two_rank_run(tmp_path / "in" / "first")
        assert run_cclq("ingest", str(tmp_path / "in" / "first"), "-w", wh, "-q").returncode == 0
        built = run_cclq("board", str(disk / "site"), "-w", wh, "-q")
        assert built.returncode == 0, built.stderr
        before = _site(disk / "site")
        assert "index.html" in before and len(before) >= 5
        two_rank_run(tmp_path / "in" / "second")
        assert run_cclq("ingest", str(tmp_path / "in" / "second"), "-w", wh, "-q").returncode == 0
        # leave room for a few of the new board's files, not all of them
        free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
        (disk / "filler").write_bytes(os.urandom(max(free - (24 << 10), 0)))
        failed = run_cclq("board", str(disk / "site"), "-w", wh, "-q")
        assert failed.returncode == 1, failed.stderr
        assert "disk full" in failed.stderr and len(failed.stderr.strip().splitlines()) == 1, failed.stderr
        assert _site(disk / "site") == before  # every file as it was, none added
        assert [p.name for p in (disk / "site").iterdir() if p.name.startswith(".cclq-staging")] == []
        (disk / "filler").unlink()  # room again: the next build brings it up to date
        again = run_cclq("board", str(disk / "site"), "-w", wh, "-q")
        assert again.returncode == 0, again.stderr
        assert len(_site(disk / "site")) > len(before)
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)
