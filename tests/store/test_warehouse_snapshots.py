"""Opening a named catalog snapshot (what a Dask worker does to read exactly what its
client reads): it stays readable after later commits while someone holds it, and one
that was collected is a clear error, never a silent read of another snapshot."""

from __future__ import annotations

import pytest
from helpers.traces import write_trace
from helpers.warehouse import run_ingest

from cclq.errors import UsageError
from cclq.query.session import connect

EVENTS = [{"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 1, "ts": 1, "dur": 2}]


def _workload(root, name: str, ranks: int) -> None:
    for r in range(ranks):
        write_trace(root / name / f"rank{r}.json", EVENTS * (r + 1), distributedInfo={"rank": r, "world_size": ranks})


def test_a_named_snapshot_is_read_after_later_commits_while_it_is_held(tmp_path, wh):
    _workload(tmp_path, "a", 2)
    run_ingest([tmp_path / "a"], wh)
    client = connect(wh)  # what the client holds while its workers run
    pinned = client.snapshot.id
    _workload(tmp_path, "b", 3)
    run_ingest([tmp_path / "b"], wh)  # a new snapshot, and a garbage collection
    assert wh.current_id() != pinned
    worker = connect(wh, snapshot_id=pinned)
    assert worker.execute("SELECT trace, rank, count(*) FROM events GROUP BY ALL ORDER BY ALL").fetchall() == [
        ("a", 0, 1),
        ("a", 1, 2),
    ]
    assert worker.execute("SELECT count(*) FROM files").fetchall() == [(2,)]
    current = connect(wh)
    assert current.execute("SELECT count(DISTINCT trace) FROM files").fetchall() == [(2,)]
    for con in (worker, current, client):
        con.close()


def test_a_collected_snapshot_is_an_error(tmp_path, wh):
    _workload(tmp_path, "a", 1)
    run_ingest([tmp_path / "a"], wh)
    first = wh.current_id()
    _workload(tmp_path, "b", 1)
    run_ingest([tmp_path / "b"], wh)  # nobody held the first: collected
    assert not (wh.catalog_dir / first).exists()
    with pytest.raises(UsageError, match=f"snapshot {first} is gone"):
        wh.open_snapshot(snapshot_id=first)


@pytest.mark.parametrize("bad", ["../catalog", "", "1/../2", "current"])
def test_a_snapshot_id_is_digits_only(tmp_path, wh, bad):
    _workload(tmp_path, "a", 1)
    run_ingest([tmp_path / "a"], wh)
    with pytest.raises(UsageError, match="not a catalog snapshot id"):
        wh.open_snapshot(snapshot_id=bad)


def test_a_snapshot_moved_away_before_it_was_locked_is_not_read(tmp_path, wh, monkeypatch):
    """On NFS a client deletes a file it holds open by renaming it (".nfsXXXX"), so the
    link count of a collected snapshot stays 1: the reader must also see that its path
    no longer leads to the file it locked. Emulated: between the reader's open and its
    lock, a writer commits a new snapshot (the current reader) and collects the old one
    that way (the current reader, and a worker opening the old one by its id)."""
    import shutil

    import cclq.store.warehouse as warehouse_module

    _workload(tmp_path, "a", 1)
    run_ingest([tmp_path / "a"], wh)
    old = wh.current_id()
    new = f"{int(old) + 1:010d}"
    held = wh.catalog_dir / old / "files.parquet"
    real = warehouse_module._flock

    def race(commit: bool):
        def flock(fd, operation, root):
            if held.exists():  # the first lock: the writer gets in before it
                if commit:
                    shutil.copytree(wh.catalog_dir / old, wh.catalog_dir / new)
                    (wh.root / "CURRENT").write_text(new + "\n")
                held.rename(held.with_name(".nfs000000001"))
            return real(fd, operation, root)

        return flock

    monkeypatch.setattr(warehouse_module, "_flock", race(commit=True))
    with wh.open_snapshot() as snap:
        assert snap.id == new and not held.exists()
    held.with_name(".nfs000000001").rename(held)
    monkeypatch.setattr(warehouse_module, "_flock", race(commit=False))
    with pytest.raises(UsageError, match=f"snapshot {old} is gone"):
        wh.open_snapshot(snapshot_id=old)


def test_a_file_system_without_locks_is_a_clear_error(tmp_path, wh, monkeypatch):
    import errno

    import cclq.store.warehouse as warehouse_module

    _workload(tmp_path, "a", 1)
    run_ingest([tmp_path / "a"], wh)

    def no_locks(fd, operation):
        raise OSError(errno.ENOSYS, "Function not implemented")

    monkeypatch.setattr(warehouse_module.fcntl, "flock", no_locks)
    with pytest.raises(UsageError, match="does not support file locks"):
        wh.open_snapshot()
    with pytest.raises(UsageError, match="does not support file locks"):
        with wh.lock():
            pass
