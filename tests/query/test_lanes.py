"""Lanes (cclq/query/lanes.py): tasks on several connections of one session, each after
the tasks it reads, results in order, shadows on every lane, nothing left running."""

from __future__ import annotations

import threading
import time

import pytest
from helpers.warehouse import run_ingest

from cclq.query.lanes import Lanes, Task, lanes_for
from cclq.query.session import connect
from cclq.store.warehouse import Warehouse
from cclq.synth.kineto import generate_workload


@pytest.fixture(scope="module")
def wh(tmp_path_factory) -> Warehouse:
    root = tmp_path_factory.mktemp("lanes")
    generate_workload(root / "in" / "dp2", ranks=2, steps=2, layers=2, seed=3)
    warehouse = Warehouse(root / "wh")
    assert not run_ingest([root / "in"], warehouse).failed
    return warehouse


@pytest.mark.parametrize("count", [1, 2, 3])
def test_each_task_runs_after_those_it_reads(wh, count):
    session = connect(wh)
    lanes = Lanes(session, count)
    order: list[str] = []
    lock = threading.Lock()

    def step(name: str, seconds: float = 0.0):
        def run(lane):
            time.sleep(seconds)
            with lock:
                order.append(name)
            return lane.execute("SELECT count(*) FROM events").fetchone()[0]

        return run

    try:
        futures = lanes.start(
            [
                Task("slow", step("slow", 0.2)),
                Task("after_slow", step("after_slow"), frozenset({"slow"})),
                Task("free", step("free")),
            ]
        )
        more = lanes.start([Task("last", step("last"), frozenset({"after_slow", "free"}))])
        lanes.wait()
    finally:
        lanes.close()
        session.close()
    counts = {f.result() for f in [*futures.values(), *more.values()]}
    assert len(counts) == 1 and counts.pop() > 0  # every lane reads the session's relations
    assert order.index("slow") < order.index("after_slow") < order.index("last")
    assert order.index("free") < order.index("last")
    if count > 1:
        assert order.index("free") < order.index("slow")  # it did not wait for the slow one


def test_shadows_reach_every_lane_before_its_next_task(wh):
    session = connect(wh)
    lanes = Lanes(session, 2)
    try:

        def make(lane):
            lane.execute("CREATE TABLE memory.main.shared_rows AS SELECT 42 AS x")
            lanes.add_shadows(["CREATE TEMP VIEW answer AS SELECT x FROM memory.main.shared_rows"])

        def read(lane):
            return lane.execute("SELECT x FROM answer").fetchone()[0]

        first = lanes.start([Task("make", make)])
        readers = lanes.start([Task(f"read{i}", read, frozenset({"make"})) for i in range(6)])
        lanes.wait()
        assert first["make"].exception() is None
        assert {f.result() for f in readers.values()} == {42}
        lanes.catch_up(session)  # the caller's own connection, after the batch
        assert session.execute("SELECT x FROM answer").fetchone() == (42,)
    finally:
        lanes.close()
        session.close()


def test_a_failed_task_is_its_own_result_and_the_rest_still_run(wh):
    session = connect(wh)
    lanes = Lanes(session, 2)
    try:
        done = lanes.start(
            [
                Task("bad", lambda lane: lane.execute("SELECT * FROM no_such_table")),
                Task("after", lambda lane: "ran", frozenset({"bad"})),
            ]
        )
        lanes.wait()
        assert done["bad"].exception() is not None and done["after"].result() == "ran"
    finally:
        lanes.close()
        session.close()


def test_close_cancels_what_has_not_started_and_gives_the_threads_back(wh):
    session = connect(wh)
    before = session.execute("SELECT current_setting('threads')").fetchone()
    lanes = Lanes(session, 2)
    gate = threading.Event()
    done = lanes.start(
        [Task("hold", lambda lane: gate.wait(5)), Task("waits", lambda lane: "never", frozenset({"hold"}))]
    )
    gate.set()
    lanes.close()
    assert done["waits"].cancelled() or done["waits"].result() == "never"
    assert session.execute("SELECT current_setting('threads')").fetchone() == before
    session.close()


@pytest.mark.parametrize("count", [1, 2])
def test_a_batch_writes_tables_in_any_order_and_gives_the_setting_back(wh, count):
    session = connect(wh)
    setting = "SELECT current_setting('preserve_insertion_order')"
    assert session.execute(setting).fetchone() == (True,)
    lanes = Lanes(session, count)
    seen = lanes.start([Task("look", lambda lane: lane.execute(setting).fetchone())])["look"].result()
    lanes.close()
    assert seen == (False,)
    assert session.execute(setting).fetchone() == (True,)
    session.close()


def test_lanes_for_a_small_batch_is_one():
    assert lanes_for(3) == 1
    assert 1 <= lanes_for(80) <= 4


def test_what_an_urgent_task_waits_for_goes_first(wh):
    """Among ready tasks the most urgent starts first, and a task's urgency reaches the
    tasks it comes after: here `needed` runs before `plain`, though scheduled after it."""
    session = connect(wh)
    lanes = Lanes(session, 1)
    order: list[str] = []
    try:
        lanes.start(
            [
                Task("plain", lambda lane: order.append("plain")),
                Task("needed", lambda lane: order.append("needed")),
                Task("urgent", lambda lane: order.append("urgent"), frozenset({"needed"}), urgency=0),
            ]
        )
        lanes.wait()
    finally:
        lanes.close()
        session.close()
    assert order == ["needed", "urgent", "plain"]


@pytest.mark.parametrize("count", [1, 2])
def test_a_sealed_batch_drops_a_shared_table_once_its_last_reader_is_done(wh, count):
    """Issue 42: a batch held every shared table to its end. Once sealed, a shared view's
    rows are released as soon as its own task and every task that reads it are done, never
    before, and a lane that has not made its shadow yet does not try to."""
    session = connect(wh)
    lanes = Lanes(session, count)
    released: list[tuple[str, list[str]]] = []
    finished: list[str] = []
    lock = threading.Lock()

    def release(lane, name):
        lane.execute(f"DROP TABLE memory.main.rows_{name}")
        with lock:
            released.append((name, list(finished)))

    def make(name):
        def run(lane):
            lane.execute(f"CREATE TABLE memory.main.rows_{name} AS SELECT 7 AS x")
            lanes.add_shadows([f"CREATE TEMP VIEW {name} AS SELECT x FROM memory.main.rows_{name}"], name)

        return run

    def read(key, view, seconds=0.0):
        def run(lane):
            time.sleep(seconds)
            value = lane.execute(f"SELECT x FROM {view}").fetchone()[0]
            with lock:
                finished.append(key)
            return value

        return run

    lanes.release = release
    lanes.shared = frozenset({"a", "b"})
    try:
        lanes.start([Task("a", make("a")), Task("b", make("b"))])
        readers = lanes.start(
            [
                Task("read_a", read("read_a", "a"), frozenset({"a"})),
                Task("slow_b", read("slow_b", "b", 0.3), frozenset({"b"})),
                Task("late_b", read("late_b", "b"), frozenset({"b", "a"})),
            ]
        )
        lanes.seal()
        lanes.wait()
        assert {f.result() for f in readers.values()} == {7}
        by_name = dict(released)
        assert sorted(by_name) == ["a", "b"]  # each once
        assert {"read_a", "late_b"} <= set(by_name["a"])  # after every reader of a
        assert {"slow_b", "late_b"} <= set(by_name["b"])
        lanes.catch_up(session)  # the released views' shadows are no longer made
        tables = session.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name LIKE 'rows_%'").fetchone()
        assert tables == (0,)
    finally:
        lanes.close()
        session.close()


def test_an_unsealed_batch_keeps_its_shared_tables(wh):
    session = connect(wh)
    lanes = Lanes(session, 2)
    released: list[str] = []
    lanes.release = lambda lane, name: released.append(name)
    lanes.shared = frozenset({"a"})
    try:
        lanes.start([Task("a", lambda lane: None)])
        lanes.start([Task("read", lambda lane: None, frozenset({"a"}))])
        lanes.wait()
        assert released == []  # more tasks may still come: nothing is dropped
    finally:
        lanes.close()
        session.close()


def test_a_lane_has_the_sessions_connection_settings(wh):
    """Issue 42: DuckDB keeps asof_loop_join_threshold per connection; the lanes lacked it
    and planned collectives' ASOF join as a nested loop (27 M rows on a 127 MB rank)."""
    session = connect(wh)
    worker = session.worker()
    try:
        wanted = "SELECT current_setting('asof_loop_join_threshold'), current_setting('parquet_metadata_cache')"
        assert session.execute(wanted).fetchone() == (0, True)
        assert worker.execute(wanted).fetchone() == (0, True)
    finally:
        worker.close()
        session.close()


def test_a_shadow_is_never_made_over_a_table_released_meanwhile(wh):
    """A lane catching up on the shadows, and another lane releasing a shared view's rows
    at the same moment: the shadow was made after the lock was let go, so the table could
    be dropped in between ("Table _cclq_shared_steps does not exist", a flaky CLI test).
    The lane here is slow to run its statements (0.3 s): the release must wait for it."""
    session = connect(wh)
    lanes = Lanes(session, 1)
    session.execute("CREATE TABLE memory.main.rows_a AS SELECT 7 AS x")
    lanes.shared = frozenset({"a"})
    lanes.add_shadows(["CREATE TEMP VIEW a AS SELECT x FROM memory.main.rows_a"], "a")
    running = threading.Event()

    class SlowConnection:
        def __init__(self, con):
            self.con = con

        def execute(self, sql):
            running.set()
            time.sleep(0.3)
            return self.con.execute(sql)

    class CatchingUpLane:
        con = SlowConnection(session.con.cursor())
        execute = con.execute  # a Session's execute, for a lanes that calls it

    lanes.release = lambda lane, name: session.execute("DROP TABLE memory.main.rows_a")
    lanes._sealed = True  # as after seal(): rows are released once nothing reads them
    errors: list[BaseException] = []

    def catch_up():
        try:
            lanes.catch_up(CatchingUpLane())
        except BaseException as e:  # noqa: BLE001 - the assertion below reports it
            errors.append(e)

    thread = threading.Thread(target=catch_up)
    try:
        thread.start()
        assert running.wait(5)
        lanes._read(session, frozenset())  # nothing reads "a" any more: released now
        thread.join(5)
        assert errors == []
        assert session.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'rows_a'").fetchone() == (0,)
    finally:
        lanes.close()
        session.close()
