"""A warehouse touches only its own files. ``cclq ingest in -w project`` on an existing
folder deleted every ``*.parquet`` in all its subfolders and emptied its ``tmp/``."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.cli import invoke
from helpers.warehouse import query, run_ingest

from cclq.errors import UsageError
from cclq.store.warehouse import Warehouse
from cclq.synth.kineto import KinetoTraceBuilder

MARKER = ".cclq-warehouse"  # cclq.store.warehouse.MARKER, spelled out


def _inputs(tmp_path: Path) -> Path:
    b = KinetoTraceBuilder(rank=0, world_size=1)
    b.kernel("gemm", ts=0, dur=4_000)
    b.write(tmp_path / "in" / "w" / "rank0.json")
    return tmp_path / "in"


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_folder_that_is_not_a_warehouse_is_refused_untouched(tmp_path):
    project = tmp_path / "project"
    for rel in ("data/results.parquet", "events/trace=x/mine.parquet", "tmp/notes.txt", "README.md"):
        (project / rel).parent.mkdir(parents=True, exist_ok=True)
        (project / rel).write_text(rel)
    before = _snapshot(project)
    done = invoke("ingest", str(_inputs(tmp_path)), "-w", str(project))
    assert done.returncode == 2
    assert f"{project} is not empty and is not a cclq warehouse (no {MARKER})" in done.stderr
    assert _snapshot(project) == before  # nothing deleted, nothing added (no .lock, no marker)
    with pytest.raises(UsageError, match="is not a cclq warehouse"):
        Warehouse(project).collect_garbage()
    with pytest.raises(UsageError, match="is not a cclq warehouse"):
        Warehouse(project).clean_tmp()
    assert _snapshot(project) == before


def test_a_new_or_empty_folder_becomes_a_marked_warehouse(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    for root in (empty, tmp_path / "new" / "wh"):
        assert not run_ingest([_inputs(tmp_path)], Warehouse(root)).failed
        assert (root / MARKER).is_file()
        assert query(Warehouse(root), "SELECT count(*) FROM files") == [(1,)]


def test_a_warehouse_from_before_the_marker_is_adopted(tmp_path):
    wh = Warehouse(tmp_path / "wh")
    run_ingest([_inputs(tmp_path)], wh)
    (wh.root / MARKER).unlink()
    report = run_ingest([_inputs(tmp_path)], wh, force=True)
    assert not report.failed and (wh.root / MARKER).is_file()


def test_garbage_collection_deletes_only_data_files_by_cclq_names(tmp_path):
    wh = Warehouse(tmp_path / "wh")
    run_ingest([_inputs(tmp_path)], wh)
    foreign = [
        wh.root / "notes" / "keep.parquet",
        wh.root / "events" / "keep.parquet",
        wh.root / "events" / "trace=w" / "copied-by-hand.parquet",
    ]
    for path in foreign:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"PAR1")
    orphan = wh.root / "events" / "trace=w" / "0123456789abcdef.0123456789ab.parquet"  # cclq's name, unreferenced
    orphan.write_bytes(b"PAR1")
    with wh.lock():  # a writer sweeps as it takes the lock
        assert not orphan.exists()
        assert wh.collect_garbage() == 0
    assert all(p.exists() for p in foreign)
    assert query(wh, "SELECT count(*) FROM kernels") == [(1,)]
