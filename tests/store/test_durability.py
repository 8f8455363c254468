"""Commits are durable as SQLite's and DuckDB's are: every file is fsynced before the
rename that publishes it, and every directory a rename changed after it, the ``CURRENT``
pointer and the root last. Before, nothing was fsynced: after a power loss ``CURRENT``
could name an empty snapshot. Recorded here by wrapping ``os.fsync`` and ``os.replace``."""

from __future__ import annotations

import os
from pathlib import Path

from helpers.warehouse import run_ingest

from cclq.store.warehouse import CURRENT, Warehouse
from cclq.synth.kineto import KinetoTraceBuilder


def _record(monkeypatch) -> list[tuple[str, str, str | None]]:
    events: list[tuple[str, str, str | None]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}"), None))
        real_fsync(fd)

    def replace(src, dst) -> None:
        events.append(
            ("replace", os.path.realpath(src), os.path.realpath(os.path.dirname(dst)) + "/" + os.path.basename(dst))
        )
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    return events


def _ingest(tmp_path: Path, wh: Warehouse, monkeypatch, env: str | None = None):
    for rank in range(2):
        b = KinetoTraceBuilder(rank=rank, world_size=2)
        b.kernel("gemm", ts=0, dur=4_000)
        b.write(tmp_path / "in" / "w" / f"rank{rank}.json")
    if env is not None:
        monkeypatch.setenv("CCLQ_FSYNC", env)
    events = _record(monkeypatch)
    assert not run_ingest([tmp_path / "in"], wh).failed
    return events


def test_every_rename_of_a_commit_is_durable_before_current_moves(tmp_path, monkeypatch):
    wh = Warehouse(tmp_path / "wh")
    events = _ingest(tmp_path, wh, monkeypatch)
    root = os.path.realpath(wh.root)
    replaces = [(i, src, dst) for i, (kind, src, dst) in enumerate(events) if kind == "replace"]
    fsyncs = [(i, path) for i, (kind, path, _) in enumerate(events) if kind == "fsync"]
    currents = [i for i, _, dst in replaces if dst == f"{root}/{CURRENT}"]
    assert currents
    data = [(i, src, dst) for i, src, dst in replaces if "/events/" in dst]
    assert len(data) == 1  # the two small rank files share one data file (cclq.ingest.parse.parse_group)
    for i, src, dst in replaces:
        # the file (or the snapshot's staging folder) reached the disk before its rename
        assert any(j < i and path == src for j, path in fsyncs), (src, dst)
        # and the folder the rename changed did, before the next CURRENT moved
        next_current = min(c for c in currents if c >= i)
        parent = os.path.dirname(dst)
        assert any(i < j <= next_current + 1 and path == parent for j, path in fsyncs), (dst, parent)
    for c in currents:  # the pointer's rename itself: the root, right after
        assert events[c + 1] == ("fsync", root, None)
    snapshot_files = [src for i, src, dst in replaces if "/catalog/" in dst]
    for folder in snapshot_files:
        for name in ("files", "parts", "stats", "cards"):
            assert any(path == f"{folder}/{name}.parquet" for _, path in fsyncs), (folder, name)
    # new folders are entries of their parents: events/ in the root, trace=w/ in events/
    assert any(path == f"{root}/events" for _, path in fsyncs)


def test_fsync_can_be_turned_off_for_a_scratch_warehouse(tmp_path, monkeypatch):
    events = _ingest(tmp_path, Warehouse(tmp_path / "wh"), monkeypatch, env="0")
    assert not [e for e in events if e[0] == "fsync"]
