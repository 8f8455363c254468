"""Ingest under hostile conditions: odd trace ids, unreadable folders, files rewritten while
read, readers that crash, a full disk, name clashes, a killed commit. Whatever goes wrong
fails the one file (or workload) it concerns, with one line, and the warehouse stays whole."""

from __future__ import annotations

import errno
import os
import time
from pathlib import Path

import pytest
from helpers.cli import invoke
from helpers.traces import gpu_trace
from helpers.warehouse import kernel_time_by_trace, query, run_ingest

from cclq.ingest.plan import trace_id_for
from cclq.store.warehouse import Warehouse


# ---------------------------------------------------------------- 1. trace ids
@pytest.mark.parametrize(
    "names",
    [
        ["NULL", "null", "Null"],
        ["__HIVE_DEFAULT_PARTITION__", "true", "0123", "2024-01-01", "1e5", "nan"],
    ],
)
def test_every_trace_id_survives_the_round_trip(tmp_path, wh, names):
    """A folder named NULL once ingested, then read back as SQL NULL: every metric said
    "no GPU kernels" and several such traces merged into one."""
    for i, name in enumerate(names):
        gpu_trace(tmp_path / "in" / name / "rank0.json", kernels=i + 1)
    report = run_ingest([tmp_path / "in"], wh)
    assert not report.failed
    expected = {trace_id_for(name): (i + 1) * 4e-6 for i, name in enumerate(names)}
    got = kernel_time_by_trace(wh)
    assert got.keys() == expected.keys()
    assert all(got[k] == pytest.approx(v) for k, v in expected.items())
    assert query(wh, "SELECT count(*) FROM events WHERE trace IS NULL") == [(0,)]
    # other engines reading the folders as hive partitions get the same ids back
    import duckdb

    hive = (
        duckdb.connect()
        .execute(
            f"SELECT DISTINCT trace FROM read_parquet('{wh.root}/events/*/*.parquet', hive_partitioning = true, "
            "hive_types = {'trace': VARCHAR})"
        )
        .fetchall()
    )
    assert sorted(t for (t,) in hive) == sorted(expected)


def test_trace_folders_decode_to_the_trace_id_in_hive_readers(tmp_path):
    """Folder names are for people and other engines: each must decode to its id."""
    import duckdb

    from cclq.store.warehouse import trace_folder

    ids = ["NULL", "nULl", "__HIVE_DEFAULT_PARTITION__", "a%2Fb", "x y", "true", "0123", "a'b", "é"]
    con = duckdb.connect()
    for i, trace in enumerate(ids):
        folder = tmp_path / trace_folder(trace)
        folder.mkdir()
        con.execute(f"COPY (SELECT {i} AS i) TO '{str(folder / 'f.parquet').replace(chr(39), chr(39) * 2)}'")
    rows = con.execute(
        f"SELECT i, trace FROM read_parquet('{tmp_path}/*/*.parquet', hive_partitioning = true, "
        "hive_types = {'trace': VARCHAR}) ORDER BY i"
    ).fetchall()
    assert [t for _, t in rows] == ids


# ------------------------------------------------------------- 4. unreadable folder
def test_an_unreadable_folder_is_an_error_that_removes_nothing(tmp_path, wh, monkeypatch):
    """A subfolder unreadable for a moment made the next ingest delete its files' data as
    "no longer in the folder" (and a first ingest skip it without a word)."""
    root = tmp_path / "work"
    gpu_trace(root / "rank0.json")
    gpu_trace(root / "sub" / "rank1.json", rank=1, world=2)
    run_ingest([root], wh)
    assert query(wh, "SELECT relpath FROM files ORDER BY 1") == [("rank0.json",), ("sub/rank1.json",)]
    real_scandir = os.scandir

    def scandir(path="."):
        if isinstance(path, (str, os.PathLike)) and Path(path) == root / "sub":
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    report = run_ingest([root], wh)
    assert [(Path(o.path).name, o.status) for o in report.outcomes if o.status != "unchanged"] == [("sub", "failed")]
    assert report.failed[0].message == f"{root / 'sub'}: cannot read folder: Permission denied"
    assert query(wh, "SELECT relpath FROM files ORDER BY 1") == [("rank0.json",), ("sub/rank1.json",)]
    wh2 = Warehouse(tmp_path / "first")
    report = run_ingest([root], wh2)  # a first ingest says so too
    assert [o.status for o in report.outcomes] == ["failed", "ingested"]


# ------------------------------------------------------ 5. --force replacement
def test_force_replaces_a_trace_only_once_the_new_data_is_committed(tmp_path, wh):
    good = tmp_path / "a" / "work"
    gpu_trace(good / "rank0.json")
    run_ingest([good], wh)
    bad = tmp_path / "b" / "work"
    bad.mkdir(parents=True)
    (bad / "rank0.json").write_text('{"traceEvents": [{"ph": "X", "ts": @}]}')
    report = run_ingest([bad], wh, force=True)
    assert [o.status for o in report.outcomes] == ["failed"]
    assert query(wh, "SELECT path FROM files") == [(str(good / "rank0.json"),)]  # the old trace stays
    assert kernel_time_by_trace(wh) == {"work": pytest.approx(8e-6)}
    gpu_trace(bad / "rank0.json", kernels=5)
    report = run_ingest([bad], wh, force=True)
    assert sorted(o.status for o in report.outcomes) == ["ingested", "removed"]
    assert query(wh, "SELECT path FROM files") == [(str(bad / "rank0.json"),)]
    assert kernel_time_by_trace(wh) == {"work": pytest.approx(20e-6)}


# ------------------------------------------------ 6. file rewritten while read
def test_a_file_rewritten_while_it_is_read_is_read_again(tmp_path, wh, monkeypatch):
    """Rows of two versions, a state the file never had, were recorded as up to date."""
    from cclq.formats.chrome.reader import ChromeReader

    path = gpu_trace(tmp_path / "work" / "rank0.json", kernels=2)
    real_read = ChromeReader.read
    rewrites = {"left": 1}

    def read(self, *args, **kwargs):
        result = real_read(self, *args, **kwargs)
        if rewrites["left"]:
            rewrites["left"] -= 1
            time.sleep(0.01)
            gpu_trace(path, kernels=7)  # the writer of the file was not done
        return result

    monkeypatch.setattr(ChromeReader, "read", read)
    report = run_ingest([tmp_path / "work"], wh)
    assert [o.status for o in report.outcomes] == ["ingested"]
    assert kernel_time_by_trace(wh) == {"work": pytest.approx(28e-6)}  # the 7-kernel version, whole
    rewrites["left"] = 5  # a file that keeps changing fails
    gpu_trace(path, kernels=3)
    report = run_ingest([tmp_path / "work"], wh)
    assert [o.status for o in report.outcomes] == ["failed"]
    assert "changed while it was being read" in report.failed[0].message
    assert kernel_time_by_trace(wh) == {"work": pytest.approx(28e-6)}  # the last good version stays


# ---------------------------------------------- 8. failures stay with their file
def test_an_unforeseen_error_in_a_reader_fails_that_file_alone(tmp_path, wh, monkeypatch):
    """An exception that was not cclq's per-file error type aborted the whole run with
    "this is a bug in cclq", naming no file, and skipped every workload not yet committed."""
    from cclq.formats.chrome.reader import ChromeReader

    for name in ("a", "b", "c"):
        gpu_trace(tmp_path / "in" / name / "rank0.json")
    real_read = ChromeReader.read

    def read(self, path, *args, **kwargs):
        if "/b/" in path:
            raise RecursionError("maximum recursion depth exceeded")
        return real_read(self, path, *args, **kwargs)

    monkeypatch.setattr(ChromeReader, "read", read)
    report = run_ingest([tmp_path / "in"], wh)
    assert [o.status for o in report.outcomes] == ["ingested", "failed", "ingested"]
    message = report.failed[0].message
    assert message.startswith(
        f"{tmp_path / 'in' / 'b' / 'rank0.json'}: unexpected error while reading it "
        "(RecursionError: maximum recursion depth exceeded)"
    )
    assert report.failed[0].detail and "RecursionError" in report.failed[0].detail
    assert sorted(kernel_time_by_trace(wh)) == ["a", "c"]


# ---------------------------------------------------------------- 9. disk full
@pytest.mark.parametrize("grouped", [False, True])
def test_a_full_disk_fails_the_file_and_stops_the_run_cleanly(tmp_path, wh, monkeypatch, grouped):
    """Grouped (small files share a data file: ``parse_group``), the files already in the
    shared file fail with it: rank0 is not committed either; a re-run takes them all."""
    import cclq.ingest.run as run_module
    import cclq.store.writer as writer_module

    for r in range(4):
        gpu_trace(tmp_path / "work" / f"rank{r}.json", rank=r, world=4)
    if not grouped:
        monkeypatch.setattr(run_module, "SMALL_FILE_BYTES", 0)
    real_keys = writer_module.with_keys

    def with_keys(batch, trace, rank, schema):  # what every data file writer calls for each batch
        if rank == 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_keys(batch, trace, rank, schema)

    monkeypatch.setattr(writer_module, "with_keys", with_keys)
    report = run_ingest([tmp_path / "work"], wh)
    first = 0 if grouped else 1
    assert [o.status for o in report.outcomes] == ["ingested"] * first + ["failed"] * (4 - first)
    assert report.failed[0].message == f"{tmp_path / 'work' / f'rank{first}.json'}: no space left on device"
    assert all(
        o.message.endswith("not ingested: the disk is full (no space left on device)") for o in report.failed[1:]
    )
    assert query(wh, "SELECT rank FROM files") == ([] if grouped else [(0,)])
    assert not any(wh.tmp_dir.iterdir())
    monkeypatch.undo()
    assert sorted(o.status for o in run_ingest([tmp_path / "work"], wh).outcomes) == (
        ["ingested"] * (4 - first) + ["unchanged"] * first
    )


# -------------------------------------------------------- 13. trace id clash
def test_two_folders_mapping_to_one_trace_id_fail_the_second_alone(tmp_path, wh):
    for name in ("a=b", "a\u2215b", "c"):
        gpu_trace(tmp_path / "in" / name / "rank0.json")
    report = run_ingest([tmp_path / "in"], wh)
    failed = report.failed
    assert len(failed) == 1 and failed[0].message.startswith(
        f"{tmp_path / 'in' / 'a∕b'}: its trace id 'a_b' is already taken by {tmp_path / 'in' / 'a=b'}"
    )
    assert sorted(kernel_time_by_trace(wh)) == ["a_b", "c"]


# ----------------------------------------------------- 14. newline in a name
def test_a_newline_in_a_file_name_stays_on_one_error_line(tmp_path):
    root = tmp_path / "work"
    gpu_trace(root / "rank0.json")
    (root / "bad\nrank1.json").write_text("not json")
    result = invoke("ingest", str(root), "-w", str(tmp_path / "wh"), "-q")
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if line.startswith("cclq: error:")]
    assert errors == [
        f'cclq: error: "{root}/bad\\nrank1.json": not a recognised trace format (text; not JSON, '
        "SQLite, xplane.pb or a results file)"
    ]
    assert len(result.stderr.splitlines()) == 1


def test_ingest_into_a_read_only_warehouse_is_a_clean_refusal(tmp_path, monkeypatch):
    import builtins

    gpu_trace(tmp_path / "in" / "work" / "rank0.json")
    wh = Warehouse(tmp_path / "wh")
    run_ingest([tmp_path / "in"], wh)
    real_open = builtins.open

    def ro_open(file, mode="r", *args, **kwargs):
        if str(file).endswith(".lock"):
            raise PermissionError(errno.EROFS, "Read-only file system", str(file))
        return real_open(file, mode, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", ro_open)
    from cclq.errors import UsageError

    with pytest.raises(UsageError, match="the warehouse is not writable"):
        run_ingest([tmp_path / "in"], wh)


# ------------------------------------- 16. what a killed commit left behind
def test_data_no_snapshot_names_is_never_read(tmp_path, wh):
    """After kill -9 during a commit, ad-hoc SQL saw the uncommitted partition until the
    next ingest (metrics did not)."""
    import shutil

    gpu_trace(tmp_path / "in" / "work" / "rank0.json")
    run_ingest([tmp_path / "in"], wh)
    (data,) = query(wh, "SELECT path FROM parts")
    (rows,) = query(wh, "SELECT count(*) FROM events")
    orphan = wh.root / "events" / "trace=work" / "0123456789abcdef.deadbeef0000.parquet"
    shutil.copy(wh.root / data[0], orphan)  # renamed into place; the snapshot never written
    result = invoke("sql", "SELECT count(*) AS n FROM events", "-w", str(wh.root), "-f", "csv")
    assert result.stdout.splitlines() == ["n", str(rows[0])]
    run_ingest([tmp_path / "in"], wh)  # the next writer collects it
    assert not orphan.exists()


# ------------------------------------------------------- same size, same mtime
def test_checksum_sees_a_change_that_keeps_size_and_mtime(tmp_path, wh):
    path = gpu_trace(tmp_path / "work" / "rank0.json", dur_ns=4_000)
    run_ingest([tmp_path / "work"], wh)
    st = path.stat()
    path.write_text(path.read_text().replace('"dur": 4.000', '"dur": 5.000'))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_size == st.st_size
    assert [o.status for o in run_ingest([tmp_path / "work"], wh).outcomes] == ["unchanged"]  # rsync-like
    assert [o.status for o in run_ingest([tmp_path / "work"], wh, checksum=True).outcomes] == ["ingested"]
    assert kernel_time_by_trace(wh) == {"work": pytest.approx(10e-6)}
