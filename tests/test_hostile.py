"""What an adversarial review of cclq broke (issue "Reliability"), one test per class.

Each test was written against the landed code first and failed there. Reader-level cases
(NaN timestamps, numbers beyond int64, deep nesting, huge strings) are in
tests/test_hostile_reader.py. Memory-hungry cases run in a subprocess under a memory cap.
"""

from __future__ import annotations

import errno
import logging
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from conftest import REPO, query, run_cli, run_ingest

from cclq.dev.synth.kineto import KinetoTraceBuilder
from cclq.ingest.plan import trace_id_for
from cclq.query.metrics import run_metric
from cclq.query.registry import registry, resolve
from cclq.query.session import connect
from cclq.store.warehouse import Warehouse


def _gpu_trace(path: Path, rank: int = 0, world: int = 1, kernels: int = 2, dur_ns: int = 4_000) -> Path:
    b = KinetoTraceBuilder(rank=rank, world_size=world)
    for i in range(kernels):
        b.kernel("gemm", ts=i * 10_000, dur=dur_ns)
    return b.write(path)


def _kernel_time(wh: Warehouse) -> dict[str, float]:
    con = connect(wh, cache=True)
    rows = run_metric(con, resolve("total_kernel_time")).to_pylist()
    return {r["trace"]: r["value"] for r in rows}


# ---------------------------------------------------------------- 1. trace ids
@pytest.mark.parametrize("names", [
    ["NULL", "null", "Null"],
    ["__HIVE_DEFAULT_PARTITION__", "true", "0123", "2024-01-01", "1e5", "nan"],
])
def test_every_trace_id_survives_the_round_trip(tmp_path, wh, names):
    """A folder named NULL once ingested, then read back as SQL NULL: every metric said
    "no GPU kernels" and several such traces merged into one."""
    for i, name in enumerate(names):
        _gpu_trace(tmp_path / "in" / name / "rank0.json", kernels=i + 1)
    report = run_ingest([tmp_path / "in"], wh)
    assert not report.failed
    expected = {trace_id_for(name): (i + 1) * 4e-6 for i, name in enumerate(names)}
    got = _kernel_time(wh)
    assert got.keys() == expected.keys()
    assert all(got[k] == pytest.approx(v) for k, v in expected.items())
    assert query(wh, "SELECT count(*) FROM events WHERE trace IS NULL") == [(0,)]
    # other engines reading the folders as hive partitions get the same ids back
    import duckdb

    hive = duckdb.connect().execute(
        f"SELECT DISTINCT trace FROM read_parquet('{wh.root}/events/*/*.parquet', hive_partitioning = true, "
        "hive_types = {'trace': VARCHAR})").fetchall()
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
    rows = con.execute(f"SELECT i, trace FROM read_parquet('{tmp_path}/*/*.parquet', hive_partitioning = true, "
                       "hive_types = {'trace': VARCHAR}) ORDER BY i").fetchall()
    assert [t for _, t in rows] == ids


# ------------------------------------------------------- 2, 3. readers vs writers
def test_a_connection_reads_one_snapshot_and_caches_what_it_read(tmp_path, wh):
    """A metric computed while an ingest committed could be cached under a key that
    described other inputs than the query read (3 of 40 runs kept a NULL after the
    ingest). A connection reads one snapshot: its result is right for its key."""
    _gpu_trace(tmp_path / "in" / "a" / "rank0.json")
    run_ingest([tmp_path / "in"], wh)
    early = connect(wh, views=False, cache=True)  # opened before the next ingest
    _gpu_trace(tmp_path / "in" / "b" / "rank0.json", kernels=3)
    run_ingest([tmp_path / "in"], wh)
    spec = resolve("total_kernel_time")
    stale = {r["trace"]: r["value"] for r in run_metric(early, spec).to_pylist()}
    assert stale == {"a": pytest.approx(8e-6)}  # exactly its snapshot: no half of the new trace
    fresh = {r["trace"]: r["value"] for r in run_metric(connect(wh, views=False, cache=True), spec).to_pylist()}
    assert fresh == {"a": pytest.approx(8e-6), "b": pytest.approx(12e-6)}


def test_an_ingest_that_commits_while_a_connection_is_set_up_changes_nothing_it_reads(tmp_path, wh, monkeypatch):
    """The race behind a wrong cached result: a connection listed the event files, an
    ingest committed, then the connection read the catalog. Its `files` then named a
    trace whose events it had not listed: the metric said NULL for it, and that result
    was cached under the key of the new inputs. Here the ingest lands exactly there."""
    import duckdb

    import cclq.query.engine as engine

    _gpu_trace(tmp_path / "in" / "a" / "rank0.json")
    run_ingest([tmp_path / "in"], wh)
    _gpu_trace(tmp_path / "in" / "b" / "rank0.json", kernels=3)
    real_connect = duckdb.connect

    class IngestOnFirstStatement:
        """A DuckDB connection whose first statement runs after another ingest."""

        def __init__(self, *args, **kwargs):
            self._con = real_connect(*args, **kwargs)
            self._first = True

        def execute(self, *args, **kwargs):
            if self._first:
                self._first = False
                run_ingest([tmp_path / "in"], wh)
            return self._con.execute(*args, **kwargs)

        def __getattr__(self, name):
            return getattr(self._con, name)

    monkeypatch.setattr(engine.duckdb, "connect", IngestOnFirstStatement)
    con = connect(wh, views=False, cache=True)
    monkeypatch.undo()
    spec = resolve("total_kernel_time")
    seen = {r["trace"]: r["value"] for r in run_metric(con, spec).to_pylist()}
    assert seen in ({"a": pytest.approx(8e-6)}, {"a": pytest.approx(8e-6), "b": pytest.approx(12e-6)})
    cached = {r["trace"]: r["value"] for r in run_metric(connect(wh, views=False, cache=True), spec).to_pylist()}
    assert cached == {"a": pytest.approx(8e-6), "b": pytest.approx(12e-6)}


def test_queries_during_ingests_see_consistent_snapshots(tmp_path, wh):
    """While ingests commit (and collect old files), every query runs and every answer
    is one snapshot's: the events counted equal the events the catalog says it holds
    (queries failed with `IO Error: Cannot open file ...catalog/files/...` and counts
    disagreed)."""
    for name in ("a", "b", "c", "d"):
        for r in range(4):
            _gpu_trace(tmp_path / "in" / name / f"rank{r}.json", rank=r, world=4, kernels=3 + r)
    run_ingest([tmp_path / "in"], wh)
    stop = threading.Event()
    errors: list[str] = []
    ingests = [0]

    def writer() -> None:
        i = 0
        while not stop.is_set():
            i += 1
            name = "abcd"[i % 4]
            for r in range(4):  # a new version of one trace: other sizes, same names
                _gpu_trace(tmp_path / "in" / name / f"rank{r}.json", rank=r, world=4, kernels=1 + (i + r) % 5)
            done = subprocess.run([sys.executable, "-c", "from cclq.cli.app import main; main()", "ingest",
                                   str(tmp_path / "in" / name), "-w", str(wh.root), "-q", "-j", "1"],
                                  capture_output=True, text=True)
            if done.returncode != 0:
                errors.append(done.stderr)
            ingests[0] += 1

    check = ("SELECT (SELECT count(*) FROM events) = (SELECT sum(events_written) FROM files), "
             "(SELECT count(*) FROM files), (SELECT count(DISTINCT file_id) FROM events)")
    thread = threading.Thread(target=writer)
    thread.start()
    checks = 0
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline or ingests[0] < 3:
            con = connect(wh, cache=True)
            assert con.execute(check).fetchall() == [(True, 16, 16)]
            checks += 1
    finally:
        stop.set()
        thread.join()
    assert checks >= 5 and not errors, errors
    result = run_cli("sql", check, "-w", str(wh.root), "-f", "csv")
    assert result.returncode == 0 and result.stdout.splitlines()[1] == "True,16,16"


# ------------------------------------------------------------- 4. unreadable folder
def test_an_unreadable_folder_is_an_error_that_removes_nothing(tmp_path, wh, monkeypatch):
    """A subfolder unreadable for a moment made the next ingest delete its files' data as
    "no longer in the folder" (and a first ingest skip it without a word)."""
    root = tmp_path / "work"
    _gpu_trace(root / "rank0.json")
    _gpu_trace(root / "sub" / "rank1.json", rank=1, world=2)
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
    _gpu_trace(good / "rank0.json")
    run_ingest([good], wh)
    bad = tmp_path / "b" / "work"
    bad.mkdir(parents=True)
    (bad / "rank0.json").write_text('{"traceEvents": [{"ph": "X", "ts": @}]}')
    report = run_ingest([bad], wh, force=True)
    assert [o.status for o in report.outcomes] == ["failed"]
    assert query(wh, "SELECT path FROM files") == [(str(good / "rank0.json"),)]  # the old trace stays
    assert _kernel_time(wh) == {"work": pytest.approx(8e-6)}
    _gpu_trace(bad / "rank0.json", kernels=5)
    report = run_ingest([bad], wh, force=True)
    assert sorted(o.status for o in report.outcomes) == ["ingested", "removed"]
    assert query(wh, "SELECT path FROM files") == [(str(bad / "rank0.json"),)]
    assert _kernel_time(wh) == {"work": pytest.approx(20e-6)}


# ------------------------------------------------ 6. file rewritten while read
def test_a_file_rewritten_while_it_is_read_is_read_again(tmp_path, wh, monkeypatch):
    """Rows of two versions, a state the file never had, were recorded as up to date."""
    from cclq.formats.chrome.reader import ChromeReader

    path = _gpu_trace(tmp_path / "work" / "rank0.json", kernels=2)
    real_read = ChromeReader.read
    rewrites = {"left": 1}

    def read(self, *args, **kwargs):
        result = real_read(self, *args, **kwargs)
        if rewrites["left"]:
            rewrites["left"] -= 1
            time.sleep(0.01)
            _gpu_trace(path, kernels=7)  # the writer of the file was not done
        return result

    monkeypatch.setattr(ChromeReader, "read", read)
    report = run_ingest([tmp_path / "work"], wh)
    assert [o.status for o in report.outcomes] == ["ingested"]
    assert _kernel_time(wh) == {"work": pytest.approx(28e-6)}  # the 7-kernel version, whole
    rewrites["left"] = 5  # a file that keeps changing fails
    _gpu_trace(path, kernels=3)
    report = run_ingest([tmp_path / "work"], wh)
    assert [o.status for o in report.outcomes] == ["failed"]
    assert "changed while it was being read" in report.failed[0].message
    assert _kernel_time(wh) == {"work": pytest.approx(28e-6)}  # the last good version stays


# ----------------------------------------------------------- 7. cclq sql writes
def test_ad_hoc_sql_is_read_only(tmp_path, wh):
    """`COPY ... TO` a path in the warehouse changed total_kernel_time from 0.0027 s to
    2.69 s; ATTACH and COPY created files anywhere."""
    _gpu_trace(tmp_path / "in" / "work" / "rank0.json")
    run_ingest([tmp_path / "in"], wh)
    before = _kernel_time(wh)
    (data,) = query(wh, "SELECT path FROM parts")
    target = wh.root / data[0]
    elsewhere = tmp_path / "out.csv"
    for sql in (f"COPY (SELECT * FROM events) TO '{target}' (FORMAT parquet)",
                f"COPY (SELECT 1) TO '{elsewhere}'",
                f"ATTACH '{tmp_path / 'x.db'}' AS x",
                "SELECT * FROM read_csv('/etc/hostname')",
                "SET enable_external_access = true",
                "SELECT 1; CREATE TABLE t AS SELECT 1"):
        result = run_cli("sql", sql, "-w", str(wh.root))
        assert result.returncode == 3, (sql, result.stderr)
        assert result.stderr.startswith("cclq: error:") and "Traceback" not in result.stderr
    assert not elsewhere.exists() and not (tmp_path / "x.db").exists()
    assert _kernel_time(wh) == before
    ok = run_cli("sql", "SELECT count(*) AS n FROM kernels", "-w", str(wh.root), "-f", "csv")
    assert ok.returncode == 0 and ok.stdout.splitlines() == ["n", "2"]
    rw = run_cli("sql", f"COPY (SELECT 1 AS x) TO '{elsewhere}'", "--read-write", "-w", str(wh.root))
    assert rw.returncode == 0 and elsewhere.exists()


# ---------------------------------------------- 8. failures stay with their file
def test_an_unforeseen_error_in_a_reader_fails_that_file_alone(tmp_path, wh, monkeypatch):
    """An exception that was not cclq's per-file error type aborted the whole run with
    "this is a bug in cclq", naming no file, and skipped every workload not yet committed."""
    from cclq.formats.chrome.reader import ChromeReader

    for name in ("a", "b", "c"):
        _gpu_trace(tmp_path / "in" / name / "rank0.json")
    real_read = ChromeReader.read

    def read(self, path, *args, **kwargs):
        if "/b/" in path:
            raise RecursionError("maximum recursion depth exceeded")
        return real_read(self, path, *args, **kwargs)

    monkeypatch.setattr(ChromeReader, "read", read)
    report = run_ingest([tmp_path / "in"], wh)
    assert [o.status for o in report.outcomes] == ["ingested", "failed", "ingested"]
    message = report.failed[0].message
    assert message.startswith(f"{tmp_path / 'in' / 'b' / 'rank0.json'}: unexpected error while reading it "
                              "(RecursionError: maximum recursion depth exceeded)")
    assert report.failed[0].detail and "RecursionError" in report.failed[0].detail
    assert sorted(_kernel_time(wh)) == ["a", "c"]


def test_a_card_with_numbers_that_fit_no_column_does_not_stop_the_ingest(tmp_path, wh):
    for name, count in (("inf", ".inf"), ("huge", "1e30"), ("ok", "8")):
        _gpu_trace(tmp_path / "in" / name / "rank0.json")
        (tmp_path / "in" / name / "workload_card.yaml").write_text(
            f"workload:\n  hardware:\n    xpu_spec:\n      total_count: {count}\n")
    report = run_ingest([tmp_path / "in"], wh)
    assert not report.failed
    assert query(wh, "SELECT trace, total_count, card_json::JSON IS NOT NULL FROM cards ORDER BY trace") == [
        ("huge", None, True), ("inf", None, True), ("ok", 8, True)]


# ---------------------------------------------------------------- 9. disk full
def test_a_full_disk_fails_the_file_and_stops_the_run_cleanly(tmp_path, wh, monkeypatch):
    import cclq.store.writer as writer_module

    for r in range(4):
        _gpu_trace(tmp_path / "work" / f"rank{r}.json", rank=r, world=4)
    real_write = writer_module.DataFileWriter._write

    def write(self, batch):
        if self.rank == 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(self, batch)

    monkeypatch.setattr(writer_module.DataFileWriter, "_write", write)
    report = run_ingest([tmp_path / "work"], wh)
    assert [o.status for o in report.outcomes] == ["ingested", "failed", "failed", "failed"]
    assert report.failed[0].message == f"{tmp_path / 'work' / 'rank1.json'}: no space left on device"
    assert all(o.message.endswith("not ingested: the disk is full (no space left on device)")
               for o in report.failed[1:])
    assert query(wh, "SELECT rank FROM files") == [(0,)]
    assert not any(wh.tmp_dir.iterdir())
    monkeypatch.undo()
    assert sorted(o.status for o in run_ingest([tmp_path / "work"], wh).outcomes) == ["ingested"] * 3 + ["unchanged"]


# -------------------------------------------------------- 11. YAML alias bomb
_CAPPED = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (1 << 31, 1 << 31))  # 2 GiB: the bomb needs > 3 GB
from cclq.cli.app import main
sys.argv = ["cclq", *sys.argv[1:]]
main()
"""


def test_a_yaml_alias_bomb_in_a_card_is_refused(tmp_path):
    root = tmp_path / "work"
    _gpu_trace(root / "rank0.json")
    levels = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    levels += [f"a{i}: &a{i} [{', '.join(['*a' + str(i - 1)] * 9)}]" for i in range(1, 10)]
    (root / "workload_card.yaml").write_text("\n".join(levels) + "\n")
    assert len((root / "workload_card.yaml").read_bytes()) < 1000
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-c", _CAPPED, "ingest", str(root), "-w", str(tmp_path / "wh"), "-q"],
                          capture_output=True, text=True, timeout=120)
    assert time.monotonic() - start < 60
    assert done.returncode == 0, done.stderr
    assert (f"cclq: warning: {root / 'workload_card.yaml'}: invalid YAML: YAML aliases (*a0) are not allowed "
            "in a workload card") in done.stderr


# ------------------------------------------------------------- 12. glob chars
def test_a_warehouse_path_with_glob_characters_reads_back(tmp_path):
    wh = Warehouse(tmp_path / "we[ir]d*?")
    _gpu_trace(tmp_path / "in" / "work" / "rank0.json")
    run_ingest([tmp_path / "in"], wh)
    assert _kernel_time(wh) == {"work": pytest.approx(8e-6)}
    result = run_cli("metric", "total_kernel_time", "--all", "-w", str(wh.root), "-f", "csv")
    assert result.returncode == 0, result.stderr


# -------------------------------------------------------- 13. trace id clash
def test_two_folders_mapping_to_one_trace_id_fail_the_second_alone(tmp_path, wh):
    for name in ("a=b", "a\u2215b", "c"):
        _gpu_trace(tmp_path / "in" / name / "rank0.json")
    report = run_ingest([tmp_path / "in"], wh)
    failed = report.failed
    assert len(failed) == 1 and failed[0].message.startswith(f"{tmp_path / 'in' / 'a∕b'}: its trace id 'a_b' is "
                                                             f"already taken by {tmp_path / 'in' / 'a=b'}")
    assert sorted(_kernel_time(wh)) == ["a_b", "c"]


# ----------------------------------------------------- 14. newline in a name
def test_a_newline_in_a_file_name_stays_on_one_error_line(tmp_path):
    root = tmp_path / "work"
    _gpu_trace(root / "rank0.json")
    (root / "bad\nrank1.json").write_text("not json")
    result = run_cli("ingest", str(root), "-w", str(tmp_path / "wh"), "-q")
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if line.startswith("cclq: error:")]
    assert errors == [f'cclq: error: "{root}/bad\\nrank1.json": not a recognised trace format (text; not JSON, '
                      "SQLite, xplane.pb or a results file)"]
    assert len(result.stderr.splitlines()) == 1


# ---------------------------------------------------- 15. read-only warehouse
def test_a_read_only_warehouse_still_computes_metrics(tmp_path, wh, monkeypatch, caplog):
    import cclq.query.cache as metrics_module

    _gpu_trace(tmp_path / "in" / "work" / "rank0.json")
    run_ingest([tmp_path / "in"], wh)

    def refuse(*args, **kwargs):
        raise PermissionError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(metrics_module.pq, "write_table", refuse)
    monkeypatch.setattr(metrics_module, "_noted", set())
    con = connect(wh, views=False, cache=True)
    with caplog.at_level(logging.INFO, logger="cclq"):
        rows = run_metric(con, resolve("total_kernel_time")).to_pylist()
    assert [r["value"] for r in rows] == [pytest.approx(8e-6)]
    assert "results are not cached" in caplog.text


def test_ingest_into_a_read_only_warehouse_is_a_clean_refusal(tmp_path, monkeypatch):
    import builtins

    _gpu_trace(tmp_path / "in" / "work" / "rank0.json")
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

    _gpu_trace(tmp_path / "in" / "work" / "rank0.json")
    run_ingest([tmp_path / "in"], wh)
    (data,) = query(wh, "SELECT path FROM parts")
    (rows,) = query(wh, "SELECT count(*) FROM events")
    orphan = wh.root / "events" / "trace=work" / "0123456789abcdef.deadbeef0000.parquet"
    shutil.copy(wh.root / data[0], orphan)  # renamed into place; the snapshot never written
    result = run_cli("sql", "SELECT count(*) AS n FROM events", "-w", str(wh.root), "-f", "csv")
    assert result.stdout.splitlines() == ["n", str(rows[0])]
    run_ingest([tmp_path / "in"], wh)  # the next writer collects it
    assert not orphan.exists()


# ----------------------------------------------------- 17. metric header edits
def test_a_changed_metric_header_is_not_served_from_the_cache(tmp_path, wh, monkeypatch):
    _gpu_trace(tmp_path / "in" / "work" / "rank0.json")
    run_ingest([tmp_path / "in"], wh)
    sql = tmp_path / "sql"
    (sql / "metrics" / "demo").mkdir(parents=True)
    (sql / "views").symlink_to(REPO / "sql" / "views")
    text = textwrap.dedent("""\
        -- metric: demo
        -- version: 1
        -- unit: {unit}
        -- grain: trace
        -- category: compute
        -- polarity: neutral
        -- description: kernels
        SELECT trace, count(*) AS value FROM kernels GROUP BY trace
    """)
    monkeypatch.setattr("cclq.query.registry.sql_root", lambda: sql)
    units = []
    for unit in ("count", "kernels"):
        (sql / "metrics" / "demo" / "v1.sql").write_text(text.format(unit=unit))
        registry.cache_clear()
        units.append(run_metric(connect(wh, views=False, cache=True), resolve("demo"))
                     .column("unit").to_pylist())
    registry.cache_clear()
    assert units == [["count"], ["kernels"]]


# ------------------------------------------------------- same size, same mtime
def test_checksum_sees_a_change_that_keeps_size_and_mtime(tmp_path, wh):
    path = _gpu_trace(tmp_path / "work" / "rank0.json", dur_ns=4_000)
    run_ingest([tmp_path / "work"], wh)
    st = path.stat()
    path.write_text(path.read_text().replace('"dur": 4.000', '"dur": 5.000'))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_size == st.st_size
    assert [o.status for o in run_ingest([tmp_path / "work"], wh).outcomes] == ["unchanged"]  # rsync-like
    assert [o.status for o in run_ingest([tmp_path / "work"], wh, checksum=True).outcomes] == ["ingested"]
    assert _kernel_time(wh) == {"work": pytest.approx(10e-6)}
