"""A snapshot's kept facts (``cclq.store.summary_cache``) are the snapshot's, and are
used only while that snapshot is current and its catalog file the same one."""

from __future__ import annotations

import os

from helpers.traces import write_trace
from helpers.warehouse import run_ingest

from cclq.query.partial import partial_traces
from cclq.store.summary_cache import kept_summary, read_summary, summary_file

EVENTS = [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 2}]


def _workload(root, name: str, ranks: int, world: int) -> None:
    for r in range(ranks):
        write_trace(root / name / f"rank{r}.json", EVENTS, distributedInfo={"rank": r, "world_size": world})


def test_kept_facts_are_the_snapshots_own(tmp_path, wh):
    _workload(tmp_path / "in", "whole", 2, 2)
    _workload(tmp_path / "in", "half", 1, 2)
    run_ingest([tmp_path / "in"], wh)
    assert kept_summary(wh) is None  # nothing kept before a command looked
    read = read_summary(wh)
    with wh.open_snapshot() as snapshot:
        assert read == snapshot.summary
        files = snapshot.tables["files"].to_pylist()
    assert kept_summary(wh) == read
    assert read.trace_ids() == ["half", "whole"]
    assert sorted(read.inputs) == sorted(
        (f["trace"], f["rank"], f["file_id"], f["content_hash"], f["ingest_version"]) for f in files
    )
    assert partial_traces(wh) == {"half": "1 of 2 ranks"}


def test_a_new_commit_is_read_not_the_facts_kept_for_the_last(tmp_path, wh):
    _workload(tmp_path / "a", "first", 1, 1)
    run_ingest([tmp_path / "a"], wh)
    first = read_summary(wh)
    _workload(tmp_path / "b", "second", 1, 1)
    run_ingest([tmp_path / "b"], wh)
    assert kept_summary(wh) is None
    assert read_summary(wh).trace_ids() == ["first", "second"]
    assert not summary_file(wh, first.snapshot).exists()  # a collected snapshot's facts go with it


def test_facts_of_another_catalog_file_under_the_same_id_are_not_used(tmp_path, wh):
    """A warehouse deleted and made again at the same path starts its snapshot ids over:
    the kept facts name the id, but not the file they were read from."""
    _workload(tmp_path / "in", "t", 1, 1)
    run_ingest([tmp_path / "in"], wh)
    read_summary(wh)
    files = wh.catalog_dir / wh.current_id() / "files.parquet"
    st = os.stat(files)
    os.utime(files, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert kept_summary(wh) is None


def test_an_unreadable_kept_file_is_read_again_and_replaced(tmp_path, wh):
    _workload(tmp_path / "in", "t", 1, 1)
    run_ingest([tmp_path / "in"], wh)
    path = summary_file(wh, read_summary(wh).snapshot)
    path.write_text('{"layout": 1, "snapshot": "0')  # a torn write, or another program
    assert kept_summary(wh) is None
    assert read_summary(wh).trace_ids() == ["t"]
    assert kept_summary(wh) is not None


def test_one_process_reads_the_kept_file_once_per_snapshot_file(tmp_path, wh):
    """A command asks for the facts up to three times (`cclq metric --trace T`): the kept
    file is read once; a catalog file that is not the same one is looked at again."""
    _workload(tmp_path / "in", "t", 1, 1)
    run_ingest([tmp_path / "in"], wh)
    path = summary_file(wh, read_summary(wh).snapshot)
    first = kept_summary(wh)
    path.write_text("not the facts")  # not read again while the catalog file is the same
    assert kept_summary(wh) == first and read_summary(wh) == first
    files = wh.catalog_dir / wh.current_id() / "files.parquet"
    st = os.stat(files)
    os.utime(files, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert kept_summary(wh) is None  # another file under the id: the kept file is read, and refused
