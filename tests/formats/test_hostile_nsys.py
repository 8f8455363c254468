"""Hostile Nsight Systems exports: an export is an input file like any other, so its table
names, values and sizes are untrusted. Each case once hung ingest, wrapped a time
silently, or lost the file as "a bug"; the costly ones run as ``cclq`` processes under a
memory cap and a timeout."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest
from helpers.cli import run_capped
from helpers.warehouse import query, run_ingest

from cclq.formats.base import ReadOptions
from cclq.formats.limits import MIB, ReadLimits
from cclq.synth.nsys import NsysExportBuilder


def _q(name: str) -> str:  # the test's own quoting (the code's quote_ident is under test)
    return '"' + name.replace('"', '""') + '"'


def _export(path: Path, session: int = 1_700_000_000_000_000_000, kernels: int = 2) -> Path:
    b = NsysExportBuilder(session_start_ns=session)
    p = b.process(100, mpi_rank=0)
    for i in range(kernels):
        b.kernel(p, 0, 7, 1_000 + i * 10_000, 5_000 + i * 10_000, "gemm")
    return b.write(path)


def _stats(wh, dropped: bool = True) -> dict[tuple[str, str], int]:
    return {(s, p): n for s, p, n in query(wh, f"SELECT stat, ph, count FROM ingest_stats WHERE dropped = {dropped}")}


# ------------------------------------------------------------------ table names
HOSTILE_TABLE = (
    "MPI_A_EVENTS AS t CROSS JOIN (WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) "
    "SELECT x FROM r ORDER BY x) AS s --_EVENTS"
)


@pytest.mark.slow
def test_a_table_name_that_is_sql_is_never_read(tmp_path):
    """A table named ``MPI_A_EVENTS AS t CROSS JOIN (WITH RECURSIVE ...) --_EVENTS`` was
    pasted into ``FROM``: ingest hung while SQLite's temp file grew. Only tables named as
    Nsight names them are read, and names go into SQL quoted."""
    path = _export(tmp_path / "in" / "w" / "nsys_0.sqlite")
    con = sqlite3.connect(path)
    con.execute(f"CREATE TABLE {_q(HOSTILE_TABLE)} (start INTEGER, end INTEGER, globalTid INTEGER, nameId INTEGER)")
    con.execute(f"INSERT INTO {_q(HOSTILE_TABLE)} VALUES (1, 2, 3, 1)")
    con.commit()
    con.close()
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    done, seconds = run_capped(
        "ingest", str(tmp_path / "in"), "-w", str(tmp_path / "wh"), "-q", "--jobs", "1", timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert seconds < 30
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before  # read-only
    assert sorted(p.name for p in path.parent.iterdir()) == ["nsys_0.sqlite"]  # no journal, no -wal


def test_quote_ident_quotes_every_character():
    from cclq.formats.nsys import quote_ident

    con = sqlite3.connect(":memory:")
    for name in ['a"b', "x; DROP TABLE y --", "new\nline", HOSTILE_TABLE]:
        con.execute(f"CREATE TABLE {quote_ident(name)} (v INTEGER)")
    names = {n for (n,) in con.execute("SELECT name FROM sqlite_master")}
    assert names == {'a"b', "x; DROP TABLE y --", "new\nline", HOSTILE_TABLE}


def test_an_export_in_a_folder_named_like_a_uri_is_read_read_only(tmp_path, wh):
    """The path went into a ``file:`` URI unescaped: in ``run?1`` or ``run#1`` SQLite took
    the rest for URI parameters, opened another file and lost ``mode=ro``."""
    path = _export(tmp_path / "in" / "run#1?mode=rwc" / "nsys_0.sqlite")
    report = run_ingest([tmp_path / "in"], wh)
    assert not report.failed, [o.message for o in report.failed]
    assert query(wh, "SELECT count(*) FROM events WHERE cat = 'kernel'") == [(2,)]
    assert sorted(p.name for p in path.parent.iterdir()) == ["nsys_0.sqlite"]


# ----------------------------------------------------------------- bounds
def test_sqlite_time_is_bounded_per_file(tmp_path, wh):
    _export(tmp_path / "in" / "w" / "nsys_0.sqlite", kernels=20_000)
    report = run_ingest([tmp_path / "in"], wh, options=ReadOptions(limits=ReadLimits(max_sqlite_seconds=1e-6)))
    (failed,) = report.failed
    assert failed.message.endswith("(limit --max-sqlite-seconds)"), failed.message
    assert "a bug" not in failed.message


@pytest.mark.slow
def test_a_huge_string_fails_the_file_with_the_string_bound(tmp_path):
    """A 200 MB ``StringIds.value`` ran out of memory; SQLite now refuses a value past
    the string bound (``--max-string-mb``), under a memory cap."""
    path = _export(tmp_path / "in" / "w" / "nsys_0.sqlite")
    con = sqlite3.connect(path)
    con.execute("UPDATE StringIds SET value = ? WHERE value = 'gemm'", ("k" * (24 * MIB),))
    con.commit()
    con.close()
    done, seconds = run_capped("ingest", str(tmp_path / "in"), "-w", str(tmp_path / "wh"), "-q", "--jobs", "1")
    assert done.returncode == 1
    (line,) = [ln for ln in done.stderr.splitlines() if ln.startswith("cclq: error:")]
    assert "nsys_0.sqlite" in line and line.endswith("(limit --max-string-mb)"), done.stderr
    assert "Traceback" not in done.stderr and "a bug" not in done.stderr


def test_sqlite_memory_is_bounded(tmp_path, wh):
    """Temp store in memory, under the heap bound: a sort that needs more fails the file."""
    path = _export(tmp_path / "in" / "w" / "nsys_0.sqlite")
    con = sqlite3.connect(path)
    con.executemany(
        "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, streamId, globalPid) VALUES (?, ?, ?, ?, ?)",
        [(i, i + 1, i, i, i << 24) for i in range(300_000)],
    )
    con.commit()
    con.close()
    report = run_ingest([tmp_path / "in"], wh, options=ReadOptions(limits=ReadLimits(max_sqlite_bytes=2 * MIB)))
    (failed,) = report.failed
    assert failed.message.endswith("(limit --max-sqlite-mb)"), failed.message
    from cclq.formats.nsys.export import open_readonly

    open_readonly(str(path)).close()  # the process-wide heap limit back to the default for the suite


# ------------------------------------------------------ values (items 7 and 11)
def test_times_that_leave_int64_are_dropped_and_counted(tmp_path, wh):
    """A session start near 2^63 wrapped every time to -9.2e18 silently. Like the JSON
    readers, rows whose epoch time leaves int64 are dropped as ``bad ts``, counted."""
    _export(tmp_path / "in" / "w" / "nsys_0.sqlite", session=(1 << 63) - 3_000)
    report = run_ingest([tmp_path / "in"], wh)
    assert not report.failed, [o.message for o in report.failed]
    assert query(wh, "SELECT count(*) FROM events WHERE ts_ns < 0") == [(0,)]
    # session = 2^63 - 3000 ns; kernels at [1000, 5000] and [11000, 15000], their launches
    # at 0 and 10000: the first kernel ends past int64 (bad dur), the second kernel and
    # launch start past it (bad ts), the first launch fits
    assert _stats(wh) == {("bad ts", "X"): 2, ("bad dur", "X"): 1}
    assert query(wh, "SELECT cat, ts_ns FROM events WHERE ph = 'X'") == [("cuda_runtime", (1 << 63) - 3_000)]


def test_text_in_an_integer_column_is_not_a_bug(tmp_path, wh):
    """A text where nsys writes an integer lost the whole file as "a bug": a start that is
    text is a ``bad ts`` drop, any other such value NULL."""
    path = _export(tmp_path / "in" / "w" / "nsys_0.sqlite", kernels=3)
    con = sqlite3.connect(path)
    con.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = 'soon' WHERE rowid = 1")
    con.execute(
        "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET streamId = 'x', gridX = 'big', staticSharedMemory = ? WHERE rowid = 2",
        (1 << 62,),
    )
    con.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET dynamicSharedMemory = ? WHERE rowid = 2", (1 << 62,))
    con.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = X'00ff' WHERE rowid = 3")
    con.execute("UPDATE StringIds SET value = X'ff00' WHERE value = 'python'")
    con.commit()
    con.close()
    report = run_ingest([tmp_path / "in"], wh)
    assert not report.failed, [o.message for o in report.failed]
    assert query(wh, "SELECT tid, shared_memory_bytes FROM events WHERE cat = 'kernel'") == [(None, None)]
    stats = _stats(wh)
    assert stats[("bad ts", "X")] == 1 and stats[("bad dur", "X")] == 1


def test_no_name_from_the_file_enters_sql_unquoted():
    """Every f-string SQL in the nsys reader puts a table name through ``quote_ident``;
    column names come from the code's own lists (checked against the file's columns)."""
    import re

    import cclq.formats.nsys as nsys

    source = "\n".join(p.read_text() for p in Path(nsys.__file__).parent.glob("*.py"))
    assert "FROM {quote_ident(table)}" in source  # the package's modules were read
    assert re.findall(r"(?:FROM|JOIN|table_info\()\s*\{(?!quote_ident\()", source) == []
    assert "FROM {table}" not in source and '"{table}"' not in source
