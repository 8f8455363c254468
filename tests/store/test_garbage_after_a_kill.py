"""What a writer killed mid-commit leaves is swept by the next writer, whatever that
writer does (issue 39: once in 24 `kill -9` of `cclq compact` the warehouse kept 4 event
files instead of 1 or 3, and a later `cclq compact`, with nothing to compact, left them
for good), and never a file that a running reader's snapshot names."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers.warehouse import run_ingest

import cclq.ingest.run
import cclq.store.compaction as compaction
from cclq.store.compaction import compact
from cclq.store.warehouse import CURRENT, Warehouse
from cclq.synth.kineto import generate_workload

pytestmark = pytest.mark.slow  # (CONTRIBUTING.md: over ~2 s each)

# A `cclq compact` killed (SIGKILL, as `kill -9`) at one moment of its commit: the hook
# replaces what runs at that moment with the kill.
_KILLED_COMPACT = textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path
    import cclq.store.warehouse as w
    from cclq.store.compaction import compact

    root, moment = Path(sys.argv[1]), sys.argv[2]
    def die(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGKILL)
    if moment == "after_commit":  # CURRENT names the compacted file; its own sweep never ran
        commit = w.Warehouse.commit
        def commit_then_die(self, *args, **kwargs):
            commit(self, *args, **kwargs)
            die()
        w.Warehouse.commit = commit_then_die
    elif moment == "before_snapshot":  # the compacted file renamed into events/, named by no snapshot
        import pyarrow.parquet as pq  # what Warehouse.commit writes the snapshot with
        pq.write_table = die
    elif moment == "before_current":  # the new snapshot folder in catalog/, CURRENT not replaced
        tmp_path = w.Warehouse.tmp_path
        w.Warehouse.tmp_path = lambda self, suffix=".parquet": die() if suffix == ".current" else tmp_path(self, suffix)
    compact(w.Warehouse(root), jobs=1)
    sys.exit(3)  # not reached: the kill came first
""")


def _event_files(wh: Warehouse) -> set[str]:
    return {p.relative_to(wh.root).as_posix() for p in (wh.root / "events").glob("trace=*/*.parquet")}


def _named(wh: Warehouse, snapshot) -> set[str]:
    return set(snapshot.tables["parts"].column("path").to_pylist())


@pytest.fixture
def four_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Warehouse:
    """A trace of 4 ranks, one data file each (no grouping of small files, no compaction
    after the ingest)."""
    generate_workload(tmp_path / "in" / "a", ranks=4, steps=2, layers=1, seed=1)
    monkeypatch.setattr(cclq.ingest.run, "SMALL_FILE_BYTES", 0)
    monkeypatch.setattr(compaction.plan, "__defaults__", (None, 10**6, compaction.SMALL_ROWS))
    wh = Warehouse(tmp_path / "wh")
    assert not run_ingest([tmp_path / "in"], wh).failed
    monkeypatch.undo()
    assert len(_event_files(wh)) == 4
    return wh


@pytest.mark.parametrize("moment", ["after_commit", "before_snapshot", "before_current"])
def test_the_next_writer_sweeps_what_a_killed_compact_left_but_not_a_readers_files(four_files: Warehouse, moment: str):
    wh = four_files
    reader = wh.open_snapshot()  # a query running through all of it
    held = _named(wh, reader)
    assert held == _event_files(wh)
    killed = subprocess.run(
        [sys.executable, "-c", _KILLED_COMPACT, str(wh.root), moment], capture_output=True, text=True, timeout=120
    )
    assert killed.returncode == -9, killed.stderr
    left = _event_files(wh)
    assert len(left) == 5  # the 4 files and the compacted one
    if moment == "after_commit":
        assert (wh.root / CURRENT).read_text().strip() != reader.id
    else:
        assert (wh.root / CURRENT).read_text().strip() == reader.id

    # the next writer: a compact (with nothing left to compact after "after_commit")
    compact(wh, jobs=1)
    with wh.open_snapshot() as now:
        current = _named(wh, now)
    assert len(current) == 1
    # only what the reader's snapshot or the current one names is left
    assert _event_files(wh) == held | current
    assert all((wh.root / p).exists() for p in held)
    assert sorted(p.name for p in wh.catalog_dir.iterdir()) == sorted({reader.id, now.id})
    reader.close()

    # with the reader gone, the next writer, which again has nothing to do, sweeps the rest
    assert compact(wh, jobs=1) == []
    assert _event_files(wh) == current
    assert [p.name for p in wh.catalog_dir.iterdir()] == [now.id]
    assert not any(wh.tmp_dir.iterdir())
