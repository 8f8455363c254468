"""Parallel ingest when processes die: a killed ingest's parser workers, and a worker
killed under a running ingest (the OOM killer, kill -9)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.traces import write_trace
from helpers.warehouse import query, run_ingest

import cclq.ingest.parse as ingest_module
from cclq.synth.kineto import generate_rank_trace

GOOD_EVENTS = [{"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 1, "ts": 1, "dur": 2}]


def _children(pid: int) -> list[int]:
    """Linux: the processes forked by ``pid`` (its parser workers)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(c) for c in (task / "children").read_text().split()]
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"  # a zombie no longer holds anything


def _wait_until(condition, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc")
def test_a_killed_parallel_ingest_leaves_no_worker_holding_the_lock(tmp_path, wh):
    """SIGKILL of a `--jobs 2` ingest mid-parse: its workers inherited the lock's file
    descriptor; they must neither keep the lock (the next ingest would wait forever) nor
    live on."""
    big = tmp_path / "big"
    for rank in range(2):
        generate_rank_trace(big / f"rank{rank}.json", rank, 2, target_bytes=20_000_000)
    write_trace(tmp_path / "small" / "rank0.json", GOOD_EVENTS, distributedInfo={"rank": 0, "world_size": 1})
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from cclq.cli.app import main; main()",
            "ingest",
            str(big),
            "-w",
            str(wh.root),
            "-q",
            "-j",
            "2",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        # mid-parse: a worker has written its first batch of events to a temp file
        assert _wait_until(lambda: any(wh.tmp_dir.glob("*.parquet")), 60), "the parse never started"
        workers = _children(proc.pid)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert len(workers) == 2
    try:  # Linux: the workers asked for SIGTERM when their parent dies
        assert _wait_until(lambda: not any(_alive(p) for p in workers), 30), "orphan parser workers live on"
    finally:
        for pid in filter(_alive, workers):  # no orphan outlives a failed test
            os.kill(pid, signal.SIGKILL)
    nxt = subprocess.run(
        [
            sys.executable,
            "-c",
            "from cclq.cli.app import main; main()",
            "ingest",
            str(big),
            str(tmp_path / "small"),
            "-w",
            str(wh.root),
            "-q",
            "-j",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert nxt.returncode == 0, nxt.stderr
    assert query(wh, "SELECT trace, rank FROM files ORDER BY ALL") == [("big", 0), ("big", 1), ("small", 0)]
    assert query(wh, "SELECT count(DISTINCT file_id) FROM events") == [(3,)]
    assert not any(wh.tmp_dir.iterdir())


def _four_ranks(root: Path) -> Path:
    for rank in range(4):
        write_trace(
            root / f"rank{rank}.json", GOOD_EVENTS * (rank + 1), distributedInfo={"rank": rank, "world_size": 4}
        )
    return root


_real_detect = ingest_module.detect
_deadly: dict[str, Path | None] = {}  # file name -> None (always dies) or a flag file (dies once)


def _detect_that_may_die(path: str):
    """Stands in for ``cclq.ingest.parse.detect`` (the first step of reading any file,
    alone or in a group of small files) in the forked parser processes, which inherit the
    patch (a module-level function, so it also pickles by name)."""
    name = Path(path).name
    if name in _deadly:
        once = _deadly[name]
        if once is None or not once.exists():
            if once is not None:
                once.touch()
            os.kill(os.getpid(), signal.SIGKILL)  # what the OOM killer does
    return _real_detect(path)


def test_a_parser_process_that_dies_twice_fails_its_file_alone(tmp_path, wh, monkeypatch):
    root = _four_ranks(tmp_path / "work")
    monkeypatch.setitem(_deadly, "rank1.json", None)
    monkeypatch.setattr(ingest_module, "detect", _detect_that_may_die)
    report = run_ingest([root], wh, jobs=2)
    assert [(Path(o.path).name, o.status) for o in report.outcomes] == [
        ("rank0.json", "ingested"),
        ("rank1.json", "failed"),
        ("rank2.json", "ingested"),
        ("rank3.json", "ingested"),
    ]
    assert [o.message for o in report.failed] == [
        f"{root / 'rank1.json'}: the parser process died while reading it (out of memory?)"
    ]
    assert query(wh, "SELECT rank, events_written FROM files ORDER BY rank") == [(0, 1), (2, 3), (3, 4)]
    assert query(wh, "SELECT DISTINCT rank FROM events ORDER BY rank") == [(0,), (2,), (3,)]
    assert not any(wh.tmp_dir.iterdir())  # no marker, no half-written events


def test_a_file_whose_parser_died_once_is_retried(tmp_path, wh, monkeypatch):
    root = _four_ranks(tmp_path / "work")
    died_once = tmp_path / "died-once"
    monkeypatch.setitem(_deadly, "rank2.json", died_once)
    monkeypatch.setattr(ingest_module, "detect", _detect_that_may_die)
    report = run_ingest([root], wh, jobs=2)
    assert died_once.exists()
    assert [o.status for o in report.outcomes] == ["ingested"] * 4
    assert query(wh, "SELECT rank, events_written FROM files ORDER BY rank") == [(0, 1), (1, 2), (2, 3), (3, 4)]


_ORPHAN_SCRIPT = """
import os, sys, time
import cclq.proc as proc
from cclq.ingest import parse
from cclq.store.warehouse import Warehouse

proc.die_with_parent = lambda parent_pid: None  # here only the closed descriptor protects the lock
wh = Warehouse(sys.argv[1])
with wh.lock():
    pid = os.fork()
    if pid == 0:  # a parser worker that will outlive its parent
        parse.init_worker(None, wh.lock_fd, os.getppid())
        with open(sys.argv[2] + ".tmp", "w") as f:  # once its set-up is done (a loaded machine may be slow)
            f.write(str(os.getpid()))
        os.replace(sys.argv[2] + ".tmp", sys.argv[2])
        time.sleep(120)
        os._exit(0)
    os._exit(0)  # the parent dies holding the lock, without unlocking (as a SIGKILL would)
"""


def test_a_worker_does_not_keep_the_lock_of_a_dead_parent(tmp_path, wh):
    import fcntl

    pid_file = tmp_path / "orphan.pid"
    subprocess.run(
        [sys.executable, "-c", _ORPHAN_SCRIPT, str(wh.root), str(pid_file)],
        check=True,
        timeout=60,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # the orphan keeps no pipe of ours
    deadline = time.monotonic() + 30
    while not pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    orphan = int(pid_file.read_text())
    try:
        with open(wh.root / ".lock", "a+") as f:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)  # raises BlockingIOError if the orphan holds it
            fcntl.flock(f, fcntl.LOCK_UN)
    finally:
        os.kill(orphan, signal.SIGKILL)
