"""Queries under a memory limit: parsed once, applied to every connection, spilling to a
folder of the connection's own that goes away with it."""

from __future__ import annotations

import gc
import os
import socket
import subprocess
import sys

import duckdb
import pytest
from helpers.cli import invoke
from helpers.warehouse import run_ingest

from cclq.errors import UsageError
from cclq.query.session import connect
from cclq.query.settings import QuerySettings
from cclq.synth.kineto import generate_workload

# DuckDB 2.x: async I/O threads, and plans that keep repeated Parquet reads apart
DUCKDB_2 = int(duckdb.__version__.split(".")[0]) >= 2


def _phys() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


@pytest.mark.parametrize(
    "text, mib",
    [
        ("500MB", 500 * 10**6 >> 20),
        ("4GiB", 4096),
        ("2gb", 2 * 10**9 >> 20),
        ("1073741824", 1024),
    ],
)
def test_sizes(text, mib):
    assert QuerySettings(text).duckdb_memory_limit() == f"{mib}MiB"


def test_shares_the_environment_and_the_default(monkeypatch):
    assert QuerySettings("25%").duckdb_memory_limit() == f"{int(_phys() * 0.25) >> 20}MiB"
    monkeypatch.setenv("CCLQ_MEMORY_LIMIT", "300MB")
    assert QuerySettings.from_env().duckdb_memory_limit() == f"{300 * 10**6 >> 20}MiB"
    assert QuerySettings.from_env("1GB").duckdb_memory_limit() == f"{10**9 >> 20}MiB"  # the option first
    default = f"{min(int(_phys() * 0.5), 600 * 2**20 * (os.cpu_count() or 1)) >> 20}MiB"
    assert QuerySettings().duckdb_memory_limit() == default  # a library caller's own
    monkeypatch.delenv("CCLQ_MEMORY_LIMIT")
    assert QuerySettings.from_env().duckdb_memory_limit() == default


@pytest.mark.parametrize("text", ["lots", "10MB", "0%", "150%", "-5GB"])
def test_bad_limits_are_usage_errors(text):
    with pytest.raises(UsageError, match="memory limit"):
        QuerySettings.from_env(text)


@pytest.mark.slow
def test_a_connection_runs_under_the_limit_and_its_spill_folder_goes_with_it(wh, tmp_path, monkeypatch):
    generate_workload(tmp_path / "w", ranks=2, steps=2, layers=1, seed=3)
    run_ingest([tmp_path / "w"], wh)
    con = connect(wh, settings=QuerySettings("100MiB"))
    assert con.execute("SELECT current_setting('memory_limit')").fetchone()[0] == "100.0 MiB"
    spill = con.execute("SELECT current_setting('temp_directory')").fetchone()[0]
    assert os.path.dirname(spill) == str(wh.root / "spill") and os.path.isdir(spill)
    # a sort of ~240 MB of rows fits only by spilling; the answer is still exact
    n = 10_000_000
    top = con.execute(
        f"SELECT max(i) FROM (SELECT row_number() OVER (ORDER BY hash(range)) AS i, range * 2 AS x FROM range({n}))"
    ).fetchone()[0]
    assert top == n
    con.close()
    del con
    gc.collect()
    assert not os.path.exists(spill)


def test_writers_collect_the_spill_folders_of_dead_processes_of_this_host_only(wh, tmp_path):
    generate_workload(tmp_path / "w", ranks=1, steps=1, layers=1, seed=4)
    run_ingest([tmp_path / "w"], wh)
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    ).stdout.strip()
    host = socket.gethostname()
    folders = {
        name: wh.root / "spill" / name
        for name in (f"{dead}@{host}-abc", f"{os.getpid()}@{host}-def", f"{dead}@another-host-ghi", "notes")
    }
    for folder in folders.values():
        folder.mkdir(parents=True)
    with wh.lock():
        wh.collect_garbage()
    assert sorted(p.name for p in (wh.root / "spill").iterdir()) == sorted(
        [f"{os.getpid()}@{host}-def", f"{dead}@another-host-ghi", "notes"]
    )


@pytest.mark.slow
def test_the_cli_takes_the_limit_anywhere_and_refuses_a_bad_one(wh, tmp_path):
    generate_workload(tmp_path / "w", ranks=2, steps=2, layers=1, seed=5)
    run_ingest([tmp_path / "w"], wh)
    plain = invoke("metric", "total_kernel_time", "--all", "-w", str(wh.root), "-f", "csv", "--no-cache")
    limited = invoke(
        "metric", "total_kernel_time", "--all", "--memory-limit", "128MB", "-w", str(wh.root), "-f", "csv", "--no-cache"
    )
    assert plain.returncode == limited.returncode == 0 and plain.stdout == limited.stdout
    shown = invoke(
        "--memory-limit=200MiB", "sql", "SELECT current_setting('memory_limit') AS m", "-w", str(wh.root), "-f", "csv"
    )
    assert shown.stdout.splitlines() == ["m", "200.0 MiB"]
    bad = invoke("sql", "SELECT 1", "-w", str(wh.root), "--memory-limit", "lots")
    assert bad.returncode == 2 and bad.stderr.count("\n") <= 2 and "memory limit 'lots'" in bad.stderr


def test_without_a_limit_a_limited_address_space_caps_the_default():
    """Under ``ulimit -v`` / ``prlimit --as`` DuckDB gets a quarter of the address space
    (it does not look at that limit itself), unless 600 MiB a core or half the RAM is less."""
    code = (
        "import resource; resource.setrlimit(resource.RLIMIT_AS, (2_000_000_000, 2_000_000_000)); "
        "from cclq.query.settings import QuerySettings; print(QuerySettings().duckdb_memory_limit())"
    )
    capped = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    ram_half = (os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2) >> 20
    per_core = 600 * (os.cpu_count() or 1)
    assert capped == f"{min(500_000_000 >> 20, ram_half, per_core)}MiB"
    assert QuerySettings("1GB").duckdb_memory_limit() == "953MiB"  # a limit given is taken as it is


def test_a_database_cclq_opens_keeps_one_async_io_thread():
    """DuckDB 2.0 starts 8 async I/O threads per database (670 MB of address space with
    their stacks and arenas); every database cclq opens keeps one (1.5 has no such threads)."""
    from cclq.query.settings import ASYNC_THREADS, open_database

    def threads() -> int:
        return len(os.listdir("/proc/self/task"))

    if not DUCKDB_2 or not os.path.isdir("/proc/self/task"):
        pytest.skip("DuckDB before 2.0 has no async I/O threads, or no /proc to count threads in")
    start = threads()
    con = open_database()
    mine = threads() - start
    plain = duckdb.connect()
    theirs = threads() - start - mine
    try:
        assert con.execute("SELECT current_setting('async_threads')").fetchone() == (ASYNC_THREADS,)
        # the default's 8 async threads against cclq's one (less 2, for any other thread of
        # the process that starts or ends meanwhile)
        assert theirs - mine >= 8 - ASYNC_THREADS - 2
    finally:
        plain.close()
        con.close()


def _hta_events(con, hold: bool) -> list[tuple]:
    con.execute(f"SET VARIABLE hta_hold_scan = {str(hold).lower()}")
    return con.execute("SELECT * FROM hta_events ORDER BY file_id, event_idx").fetchall()


def test_hta_events_holds_its_scan_only_while_the_events_fit_a_quarter_of_the_limit(wh, tmp_path):
    """hta_events holds the events it reads (one Parquet read) while the session's events,
    at HELD_SCAN_BYTES_PER_EVENT, fit HELD_SCAN_SHARE of the memory limit, and reads them
    again in each step beyond: the same rows either way (the tail filter and links over
    two ranks with profiler steps)."""
    generate_workload(tmp_path / "w", ranks=2, steps=3, layers=1, seed=6)
    run_ingest([tmp_path / "w"], wh)
    settings = QuerySettings("64MiB")
    con = connect(wh, settings=settings)
    events = con.execute("SELECT sum(events_written) FROM files").fetchone()[0]
    assert settings.held_scan_events() == (64 << 20) // 4 // 160  # a quarter of 64 MiB at 160 B an event
    assert events <= settings.held_scan_events()
    assert con.execute("SELECT getvariable('hta_hold_scan')").fetchone()[0] is True
    lane = con.worker()  # a lane of a batch: its own connection, the same choice
    assert lane.execute("SELECT getvariable('hta_hold_scan')").fetchone()[0] is True
    plan = con.execute("EXPLAIN SELECT * FROM hta_events").fetchall()[0][1]
    held, read_again = _hta_events(con, True), _hta_events(con, False)
    plan_again = con.execute("EXPLAIN SELECT * FROM hta_events").fetchall()[0][1]
    assert held == read_again and len(held) > 100
    # held: the one read of the files; read again, one per step (DuckDB 1.5's optimizer
    # folds the repeated reads back into one shared subplan, so only the rows are compared)
    if DUCKDB_2:
        assert plan.count("PARQUET") == 1 < plan_again.count("PARQUET")
    # a limit the events held would take more than a quarter of
    statement = settings.connection_statements()[0]
    few = statement.replace(str(settings.held_scan_events()), str(events - 1))
    con.execute(few)
    assert con.execute("SELECT getvariable('hta_hold_scan')").fetchone()[0] is False
    lane.close()
    con.close()
