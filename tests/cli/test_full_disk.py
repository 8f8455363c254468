"""A full disk under what a command writes is one line naming where, exit 1, and nothing
of the warehouse changes: tested on a small tmpfs (never the real disk), skipped where
this machine cannot mount one."""

from __future__ import annotations

import hashlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.cli import invoke
from helpers.traces import gpu_trace


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode(errors='replace').strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def _bytes(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in root.rglob("*")
        if p.is_file() and "spill" not in p.parts and "tmp" not in p.parts
    }


@pytest.mark.slow
def test_a_board_onto_a_full_disk_is_one_line(tmp_path: Path, small_disk: Path) -> None:
    gpu_trace(tmp_path / "in" / "work" / "rank0.json")
    wh = tmp_path / "wh"
    assert invoke("ingest", str(tmp_path / "in"), "-w", str(wh), "-q").returncode == 0
    (small_disk / "filler").write_bytes(os.urandom(200 << 10))  # leave ~56 KB
    before = _bytes(wh)
    done = invoke("board", str(small_disk / "site"), "-w", str(wh), "-q")
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "disk full" in lines[0] and str(small_disk) in lines[0], done.stderr
    assert "bug" not in done.stderr
    assert _bytes(wh) == before
