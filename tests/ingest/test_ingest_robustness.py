"""Bad input, re-ingest, duplicate ranks, concurrent and killed ingests."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.cli import invoke
from helpers.traces import write_trace
from helpers.warehouse import query, run_ingest

from cclq.store.warehouse import Warehouse

GOOD_EVENTS = [{"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 1, "ts": 1, "dur": 2}]


def _good(root: Path, name: str = "rank0.json", rank: int = 0) -> Path:
    return write_trace(root / name, GOOD_EVENTS, distributedInfo={"rank": rank, "world_size": 2})


def _visible_parquet(wh_root: Path) -> list[Path]:
    """Parquet files any reader could see (temp files excluded)."""
    return sorted(p for p in wh_root.rglob("*.parquet") if "tmp" not in p.relative_to(wh_root).parts)


def _data_files(wh: Warehouse) -> list[str]:
    """The data files the current snapshot names (what readers read)."""
    return [r[0] for r in query(wh, "SELECT path FROM parts ORDER BY path")]


def _make_bad(kind: str, root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    if kind == "truncated json":
        p = root / "rank1.json"
        full = json.dumps({"traceEvents": GOOD_EVENTS * 50})
        p.write_text(full[: len(full) // 2])
    elif kind == "corrupt gzip":
        p = root / "rank1.json.gz"
        data = gzip.compress(json.dumps({"traceEvents": GOOD_EVENTS * 500}).encode())
        p.write_bytes(data[:10] + b"\x00garbage\xff" * 20 + data[200:])
    elif kind == "empty file":
        p = root / "rank1.json"
        p.write_bytes(b"")
    elif kind == "json but not a trace":
        p = root / "rank1.json"
        p.write_text(json.dumps({"hello": "world", "values": [1, 2, 3]}))
    elif kind == "binary junk":
        p = root / "rank1.json"
        p.write_bytes(bytes(range(256)) * 4)
    elif kind == "unreadable path":
        p = root / "rank1.json"
        p.symlink_to(root / "does-not-exist.json")  # root can read anything, a dangling link it cannot
    else:
        raise AssertionError(kind)
    return p


BAD_KINDS = {
    "truncated json": "invalid JSON at byte",
    "corrupt gzip": "corrupt gzip stream",
    "empty file": "empty file",
    "json but not a trace": "not a trace: no traceEvents array",
    "binary junk": "not a recognised trace format",
    "unreadable path": "cannot read",
}


@pytest.mark.parametrize("kind", sorted(BAD_KINDS))
def test_bad_file_fails_alone_with_one_clear_line(kind, tmp_path):
    root = tmp_path / "work"
    _good(root)
    bad = _make_bad(kind, root)
    wh_root = tmp_path / "wh"
    result = invoke("ingest", str(root), "--warehouse", str(wh_root), "--quiet")
    assert result.returncode == 1, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("cclq: error:")]
    assert len(errors) == 1, result.stderr
    assert str(bad) in errors[0] and BAD_KINDS[kind] in errors[0], errors[0]
    assert "Traceback" not in result.stderr
    # the good file is in, the bad one left nothing behind
    visible = [p.relative_to(wh_root).as_posix() for p in _visible_parquet(wh_root)]
    assert len([v for v in visible if v.startswith("events/")]) == 1
    assert query(Warehouse(wh_root), "SELECT relpath FROM files") == [("rank0.json",)]


def test_truncated_json_error_gives_the_byte_offset(tmp_path):
    root = tmp_path / "work"
    root.mkdir()
    p = root / "t.json"
    p.write_text('{"traceEvents": [{"ph": "X", "ts": 1, "dur": 2}, {"ph": "X", "ts": @}]}')
    result = invoke("ingest", str(root), "-w", str(tmp_path / "wh"), "-q")
    line = [x for x in result.stderr.splitlines() if x.startswith("cclq: error:")][0]
    # the "@" is byte 67 of the file (0-based)
    assert line.endswith("invalid JSON at byte 67: lexical error: invalid char in json text."), line


def test_the_garbage_collector_is_paused_only_while_a_file_is_parsed(tmp_path, wh):
    """Parsing pauses the cyclic GC (a speed-up) and gives it back afterwards, also when
    a file fails, and leaves it off when the caller had switched it off. The bad file is
    given up by the fast reader and read again by ijson: both parse with the GC paused."""
    import gc

    import cclq.formats.chrome.builder as chrome_builder
    import cclq.formats.chrome.ijson_reader as chrome

    seen: list[tuple[str, bool]] = []
    real_items = chrome.ijson.items
    real_add = chrome_builder.Builder.add

    def spying_items(*args, **kwargs):  # records the GC state the parsers run under
        seen.append(("ijson", gc.isenabled()))
        return real_items(*args, **kwargs)

    def spying_add(self, chunk):
        seen.append(("fast", gc.isenabled()))
        return real_add(self, chunk)

    write_trace(tmp_path / "in" / "good" / "rank0.json", GOOD_EVENTS)
    (tmp_path / "in" / "bad").mkdir()
    (tmp_path / "in" / "bad" / "rank0.json").write_text('{"traceEvents": [{"ph": "X", "ts": @}]}')
    chrome.ijson.items = spying_items
    chrome_builder.Builder.add = spying_add
    try:
        assert gc.isenabled()
        report = run_ingest([tmp_path / "in"], wh, jobs=1)
        assert sorted(o.status for o in report.outcomes) == ["failed", "ingested"]
        assert seen == [("ijson", False), ("fast", False)] and gc.isenabled()
        gc.disable()
        run_ingest([tmp_path / "in"], wh, jobs=1, force=True)
        assert not gc.isenabled()
    finally:
        chrome.ijson.items = real_items
        chrome_builder.Builder.add = real_add
        gc.enable()


def test_reingest_of_unchanged_files_is_a_noop(tmp_path, wh):
    root = tmp_path / "work"
    _good(root, "rank0.json", 0)
    _good(root, "rank1.json", 1)
    run_ingest([root], wh)
    before = {p: p.stat().st_mtime_ns for p in _visible_parquet(wh.root)}
    os.utime(root / "rank0.json")  # touched, same content: still unchanged (hash check)
    report = run_ingest([root], wh)
    assert [o.status for o in report.outcomes] == ["unchanged", "unchanged"]
    assert {p: p.stat().st_mtime_ns for p in _visible_parquet(wh.root)} == before


def test_changed_file_replaces_only_its_own_partition(tmp_path, wh, monkeypatch):
    """Files parsed alone (small files in a group share a data file, which a change
    rewrites: tests/store/test_compaction.py)."""
    import cclq.ingest.run as run_module

    monkeypatch.setattr(run_module, "SMALL_FILE_BYTES", 0)
    root = tmp_path / "work"
    _good(root, "rank0.json", 0)
    _good(root, "rank1.json", 1)
    run_ingest([root], wh)
    part = dict(query(wh, "SELECT rank, path FROM parts"))
    mtime0 = (wh.root / part[0]).stat().st_mtime_ns
    time.sleep(0.01)
    write_trace(root / "rank1.json", GOOD_EVENTS * 3, distributedInfo={"rank": 1, "world_size": 2})
    report = run_ingest([root], wh)
    assert sorted(o.status for o in report.outcomes) == ["ingested", "unchanged"]
    after = dict(query(wh, "SELECT rank, path FROM parts"))
    assert after[0] == part[0] and (wh.root / part[0]).stat().st_mtime_ns == mtime0  # untouched
    assert after[1] != part[1] and not (wh.root / part[1]).exists()  # a new file; the old one collected
    assert query(wh, "SELECT rank, count(*) FROM events GROUP BY rank ORDER BY rank") == [(0, 1), (1, 3)]


def test_removed_file_leaves_the_warehouse(tmp_path, wh):
    root = tmp_path / "work"
    _good(root, "rank0.json", 0)
    _good(root, "rank1.json", 1)
    run_ingest([root], wh)
    (root / "rank1.json").unlink()
    report = run_ingest([root], wh)
    assert "removed" in [o.status for o in report.outcomes]
    assert query(wh, "SELECT DISTINCT rank FROM events") == [(0,)]


def test_two_files_claiming_one_rank_fail_the_second(tmp_path, wh):
    root = tmp_path / "work"
    first = _good(root, "a.json", 0)
    second = _good(root, "b.json", 0)
    report = run_ingest([root], wh)
    assert [o.status for o in report.outcomes] == ["ingested", "failed"]
    assert report.failed[0].message == f"{second}: rank 0 of trace 'work' is already taken by {first}"
    assert query(wh, "SELECT relpath FROM files") == [("a.json",)]
    # the two small files were parsed into one shared data file: b's rows left it before the commit
    assert query(wh, "SELECT count(DISTINCT path) FROM parts") == [(1,)]
    assert query(wh, "SELECT DISTINCT e.file_id = f.file_id, count(*) FROM events e, files f GROUP BY ALL") == [
        (True, len(GOOD_EVENTS))
    ]
    # and it stays that way on the next run: never a silent overwrite; b is remembered as
    # refused and not parsed again (cclq/ingest/refusals.py), with the reason
    report = run_ingest([root], wh)
    assert {Path(o.path).name: o.status for o in report.outcomes} == {"a.json": "unchanged", "b.json": "skipped"}
    (passed,) = [o for o in report.outcomes if o.status == "skipped"]
    assert passed.message.startswith(f"{second}: not read again: rank 0 of trace 'work' is already taken by {first}")


def test_sqlite_files_that_are_no_nsys_export(tmp_path, wh):
    """A SQLite database of something else is skipped, saying so; a damaged one fails."""
    import sqlite3

    root = tmp_path / "work"
    _good(root)
    con = sqlite3.connect(root / "other.sqlite")
    con.execute("CREATE TABLE t (x)")
    con.commit()
    con.close()
    (root / "broken.sqlite").write_bytes(b"SQLite format 3\x00" + b"\x00" * 100)
    report = run_ingest([root], wh)
    assert sorted((Path(o.path).name, o.status) for o in report.outcomes) == [
        ("broken.sqlite", "failed"),
        ("other.sqlite", "skipped"),
        ("rank0.json", "ingested"),
    ]
    by_name = {Path(o.path).name: o.message for o in report.outcomes}
    assert by_name["other.sqlite"] == (
        "a SQLite database, but not an Nsight Systems export (no StringIds and nsys tables)"
    )
    assert "not a readable SQLite database" in by_name["broken.sqlite"]


def _big_trace(path: Path, n_events: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        f.write('{"distributedInfo": {"rank": 0, "world_size": 1}, "traceEvents": [\n')
        for i in range(n_events):
            sep = "," if i else ""
            f.write(
                f'{sep}{{"ph": "X", "cat": "cpu_op", "name": "aten::op_{i % 50}", "pid": 1, "tid": 2, '
                f'"ts": {i}.125, "dur": 0.500, "args": {{"External id": {i}, "Input Dims": [[{i % 7}, 3]]}}}}\n'
            )
        f.write("]}\n")
    return path


def test_killed_ingest_leaves_the_warehouse_as_it_was(tmp_path, wh):
    small = tmp_path / "small"
    _good(small)
    run_ingest([small], wh)
    before = [p.relative_to(wh.root) for p in _visible_parquet(wh.root)]
    big = _big_trace(tmp_path / "big" / "rank0.json", 400_000)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from cclq.cli.app import main; main()",
            "ingest",
            str(big.parent),
            "-w",
            str(wh.root),
            "-q",
            "-j",
            "1",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    # killed once a row group is in the temp file (well into the parse), not after a fixed
    # sleep: on a loaded machine the ingest could commit before a sleep ended
    deadline = time.time() + 30
    while time.time() < deadline and not any(p.stat().st_size > 0 for p in wh.tmp_dir.glob("*.parquet")):
        time.sleep(0.01)
    assert proc.poll() is None, "the ingest ended before it was killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert [p.relative_to(wh.root) for p in _visible_parquet(wh.root)] == before
    assert query(wh, "SELECT trace FROM files") == [("small",)]
    report = run_ingest([big.parent], wh)  # the next run cleans up and succeeds
    assert [o.status for o in report.outcomes] == ["ingested"]
    assert not any(wh.tmp_dir.iterdir())


def test_concurrent_ingests_into_one_warehouse_both_land(tmp_path, wh):
    roots = []
    for name in ("one", "two"):
        root = tmp_path / "in" / name
        _good(root, "rank0.json", 0)
        _good(root, "rank1.json", 1)
        roots.append(root)
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                "from cclq.cli.app import main; main()",
                "ingest",
                str(r),
                "-w",
                str(wh.root),
                "-q",
                "-j",
                "1",
            ],
            stderr=subprocess.PIPE,
            text=True,
        )
        for r in roots
    ]
    codes = [p.wait(timeout=120) for p in procs]
    assert codes == [0, 0], [p.stderr.read() for p in procs]
    assert query(wh, "SELECT trace, count(*) FROM files GROUP BY trace ORDER BY trace") == [("one", 2), ("two", 2)]


def test_parallel_jobs_give_the_same_warehouse_as_one_job(tmp_path):
    root = tmp_path / "work"
    for r in range(4):
        write_trace(root / f"rank{r}.json", GOOD_EVENTS * (r + 1), distributedInfo={"rank": r, "world_size": 4})
    results = []
    for jobs in (1, 2):
        wh = Warehouse(tmp_path / f"wh{jobs}")
        run_ingest([root], wh, jobs=jobs)
        results.append(query(wh, "SELECT rank, count(*), sum(ts_ns) FROM events GROUP BY rank ORDER BY rank"))
    assert results[0] == results[1] == [(0, 1, 1000), (1, 2, 2000), (2, 3, 3000), (3, 4, 4000)]


def test_one_snapshot_per_commit_and_old_ones_are_collected(tmp_path, wh):
    root = tmp_path / "work"
    write_trace(
        root / "rank0.json",
        GOOD_EVENTS + [{"ph": "E", "pid": 1, "tid": 1, "ts": 9}],
        distributedInfo={"rank": 0, "world_size": 2},
    )
    _good(root, "rank1.json", 1)
    run_ingest([root], wh)
    assert [p.name for p in (wh.root / "catalog").iterdir()] == [wh.current_id()]
    assert query(wh, "SELECT rank, stat FROM ingest_stats") == [(0, "E without B")]
    # rank 0 fixed (no more stray E), rank 1 removed: both show after the next run
    write_trace(root / "rank0.json", GOOD_EVENTS, distributedInfo={"rank": 0, "world_size": 2})
    (root / "rank1.json").unlink()
    run_ingest([root], wh)
    assert query(wh, "SELECT rank, events_dropped FROM files") == [(0, 0)]
    assert query(wh, "SELECT count(*) FROM ingest_stats") == [(0,)]
    assert [p.name for p in (wh.root / "catalog").iterdir()] == [wh.current_id()]
    assert sorted(p.relative_to(wh.root).as_posix() for p in (wh.root / "events").rglob("*.parquet")) == _data_files(wh)


def test_a_second_pass_with_decimals_does_not_count_the_file_twice(tmp_path, wh):
    """An epoch timestamp that floats cannot hold, first seen after the first MB, makes the
    reader start over with Decimals; the progress bar still ends at the file's size."""
    events = [
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": f"op{i}",
            "pid": 1,
            "tid": 1,
            "ts": i,
            "dur": 1,
            "args": {"pad": "x" * 200},
        }
        for i in range(8000)
    ]
    events.append({"ph": "X", "cat": "cpu_op", "name": "late", "pid": 1, "tid": 1, "ts": "LATE", "dur": 1})
    path = write_trace(tmp_path / "w" / "rank0.json", events)
    path.write_text(path.read_text().replace('"LATE"', "1700000000000000.123"))  # no float holds it
    assert path.stat().st_size > 2 << 20 and b"1700000000000000.123" in path.read_bytes()[-4096:]

    class Recorder:
        advanced = 0

        def start(self, total_bytes: int, files: int) -> None: ...
        def advance(self, nbytes: int) -> None:
            Recorder.advanced += nbytes

        def file_done(self, outcome) -> None: ...
        def warn(self, message: str) -> None: ...
        def finish(self) -> None: ...

    report = run_ingest([tmp_path / "w"], wh, jobs=1, reporter=Recorder())
    assert [o.status for o in report.outcomes] == ["ingested"]
    assert query(wh, "SELECT ts_ns FROM events WHERE name = 'late'") == [(1700000000000000123,)]
    assert Recorder.advanced == path.stat().st_size


@pytest.mark.parametrize("grouped", [False, True])
def test_a_commit_that_fails_fails_that_file_alone(tmp_path, wh, monkeypatch, grouped):
    """The snapshot holding rank1's rows cannot be written (an I/O error): the batch is
    committed again file by file, rank1 fails, the files around it are committed, its data
    file is collected, and a later run takes it. Small files parsed in a group share a
    data file, so they are committed, or fail, together."""
    import pyarrow.parquet as pq  # what Warehouse.commit writes the snapshot with

    import cclq.ingest.run as run_module

    if not grouped:
        monkeypatch.setattr(run_module, "SMALL_FILE_BYTES", 0)

    root = tmp_path / "work"
    for r in range(3):
        _good(root, f"rank{r}.json", r)
    real_write = pq.write_table

    def write_table(table, path, *args, **kwargs):
        if "relpath" in table.column_names and "rank1.json" in table.column("relpath").to_pylist():
            raise OSError(5, "Input/output error")
        return real_write(table, path, *args, **kwargs)

    monkeypatch.setattr(pq, "write_table", write_table)
    report = run_ingest([root], wh)
    if grouped:
        assert [o.status for o in report.outcomes] == ["failed"] * 3
        assert report.failed[0].message == (
            f"{root / 'rank0.json'}: could not be written to the warehouse: OSError: [Errno 5] Input/output error"
        )
        assert query(wh, "SELECT count(*) FROM files") == [(0,)]
        assert not list((wh.root / "events").rglob("*.parquet")) and not any(wh.tmp_dir.iterdir())
        monkeypatch.undo()
        assert [o.status for o in run_ingest([root], wh).outcomes] == ["ingested"] * 3
        return
    assert [o.status for o in report.outcomes] == ["ingested", "failed", "ingested"]
    assert report.failed[0].message == (
        f"{root / 'rank1.json'}: could not be written to the warehouse: OSError: [Errno 5] Input/output error"
    )
    assert query(wh, "SELECT rank FROM files ORDER BY rank") == [(0,), (2,)]
    assert query(wh, "SELECT DISTINCT rank FROM events ORDER BY rank") == [(0,), (2,)]
    assert len(list((wh.root / "events").rglob("*.parquet"))) == 2
    monkeypatch.undo()
    report = run_ingest([root], wh)
    assert sorted((Path(o.path).name, o.status) for o in report.outcomes) == [
        ("rank0.json", "unchanged"),
        ("rank1.json", "ingested"),
        ("rank2.json", "unchanged"),
    ]


def test_a_catalog_row_that_cannot_be_built_fails_that_file_alone(tmp_path, wh, monkeypatch):
    """What a rank beyond int32 did: ArrowInvalid while building the row, once reported as
    a bug that stopped the run. Now that file fails; the one after it is committed."""
    import pyarrow as pa

    import cclq.ingest.commit as ingest_module

    root = tmp_path / "work"
    _good(root, "rank0.json", 0)
    _good(root, "rank1.json", 1)
    real_files_row = ingest_module._files_row

    def files_row(task, parsed):
        if task.relpath == "rank0.json":
            raise pa.ArrowInvalid("Integer value 1694128201545 not in range")
        return real_files_row(task, parsed)

    monkeypatch.setattr(ingest_module, "_files_row", files_row)
    report = run_ingest([root], wh)
    assert [o.status for o in report.outcomes] == ["failed", "ingested"]
    assert report.failed[0].message == (
        f"{root / 'rank0.json'}: could not be written to the warehouse: "
        "ArrowInvalid: Integer value 1694128201545 not in range"
    )
    assert query(wh, "SELECT rank FROM files") == [(1,)]
    assert len(list((wh.root / "events").rglob("*.parquet"))) == 1
    assert not any(wh.tmp_dir.iterdir())


def test_catalog_keeps_the_types_of_all_null_columns(tmp_path, wh):
    import pyarrow.parquet as pq

    from cclq.store.catalog import FILES_SCHEMA, STATS_SCHEMA

    _good(tmp_path / "work")  # nothing dropped: drop_reasons is NULL in every row
    run_ingest([tmp_path / "work"], wh)
    snapshot = wh.root / "catalog" / wh.current_id()
    assert pq.read_schema(snapshot / "files.parquet") == FILES_SCHEMA
    assert pq.read_schema(snapshot / "stats.parquet") == STATS_SCHEMA
    assert query(wh, "SELECT count(*) FROM files WHERE drop_reasons LIKE '%E%'") == [(0,)]
    # a snapshot written by an older cclq may lack columns: they read as NULL, with their type
    old = pq.read_table(snapshot / "files.parquet").drop_columns(["drop_reasons", "ingest_seconds"])
    pq.write_table(old, snapshot / "files.parquet")
    assert wh.read_state().files[old.column("file_id")[0].as_py()]["ingest_seconds"] is None
    write_trace(
        tmp_path / "work" / "rank1.json",
        GOOD_EVENTS + [{"ph": "E", "pid": 1, "tid": 1, "ts": 9}],
        distributedInfo={"rank": 1, "world_size": 2},
    )
    run_ingest([tmp_path / "work"], wh)
    assert pq.read_schema(wh.root / "catalog" / wh.current_id() / "files.parquet") == FILES_SCHEMA
    assert query(wh, "SELECT count(*) FROM files WHERE drop_reasons LIKE '%E%'") == [(1,)]


def test_a_fifo_is_never_read(tmp_path):
    root = tmp_path / "work"
    _good(root)
    fifo = root / "rank1.json"
    os.mkfifo(fifo)  # reading it would block forever
    wh_root = str(tmp_path / "wh")
    result = subprocess.run(
        [sys.executable, "-c", "from cclq.cli.app import main; main()", "ingest", str(root), "-w", wh_root, "-q"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr  # passed by while walking the folder
    assert query(Warehouse(Path(wh_root)), "SELECT relpath FROM files") == [("rank0.json",)]
    result = subprocess.run(
        [sys.executable, "-c", "from cclq.cli.app import main; main()", "ingest", str(fifo), "-w", wh_root, "-q"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1  # named on the command line: it fails alone
    assert [x for x in result.stderr.splitlines() if x.startswith("cclq:")] == [
        f"cclq: error: {fifo}: not a regular file (a pipe, socket or device)"
    ]


def test_documents_images_and_archives_in_a_workload_are_ignored(tmp_path, wh):
    root = tmp_path / "work"
    _good(root)
    for name in (
        "paper.pdf",
        "timeline.PNG",
        "traces.zip",
        "traces.tar",
        "traces.tar.gz",
        "old.parquet",
        "slides.pptx",
        "photo.jpeg",
    ):
        (root / name).write_bytes(b"\x00\x01 not a trace \xff" * 10)
    (root / "profile.nsys-rep").write_bytes(b"\x00\x01 an Nsight Systems report \xff" * 10)
    report = run_ingest([root], wh)
    assert [(Path(o.path).name, o.status) for o in report.outcomes] == [
        ("profile.nsys-rep", "skipped"),
        ("rank0.json", "ingested"),
    ]
    assert report.outcomes[0].message.startswith("Nsight Systems report (binary): export it to SQLite first")


def test_reingest_of_an_unchanged_workload_does_not_rewrite_its_card(tmp_path, wh):
    root = tmp_path / "work"
    _good(root)
    (root / "workload_card.yaml").write_text("version: 1\nworkload:\n  model:\n    model_family: llama\n")
    run_ingest([root], wh)
    before = wh.current_id()
    assert [o.status for o in run_ingest([root], wh).outcomes] == ["unchanged"]
    assert wh.current_id() == before  # nothing changed: no new snapshot
    (root / "workload_card.yaml").write_text("version: 1\nworkload:\n  model:\n    model_family: gpt\n")
    run_ingest([root], wh)
    assert query(wh, "SELECT model_family FROM traces") == [("gpt",)]
