"""Lanes: several connections of one session running a batch's queries at once.

A report on a small trace is some 80 queries (shared views, then metrics), and each is
mostly DuckDB planning it, which runs on one core per connection. A ``Lanes`` holds
``Session.worker`` connections, one thread each (DuckDB plans and runs a query without
Python's lock), and runs tasks on whichever is free (one lane: the session's own
connection, in the calling thread): two lanes took the metric queries of a report on dlrm_param_8xV100 from 0.9 s to
0.55-0.7 s (docs/history/benchmarks-history.md, "Fourth pass").

The views a batch shares (``cclq.query.metrics``) are tables every connection sees and
temporary views or macros each connection needs of its own (its "shadows"): a task
adds the shadow statements of what it made, and every lane runs those it has not run
yet before its next task. A task is started only after the tasks it reads (``start``),
so it always sees them, and the metrics that need no shared view run meanwhile.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from cclq.sqltext import quote_literal

if TYPE_CHECKING:  # DuckDB is not imported by what only reads a cached result (cclq.query.metrics)
    from cclq.query.session import Session

T = TypeVar("T")
MAX_LANES = 4
# Large batches too: a board over 500 workloads (3.66 M events) took 19.3-19.8 s on two
# lanes of one thread each and 21.5-22.3 s on one lane of two threads; one workload of
# 3.62 M events, its board 15.8 s and 17.3 s, its report 21.2 s and 23.5 s (2 cores;
# docs/history/benchmarks-history.md, "Fifth pass"). An earlier build, whose every shared table kept
# its rows' order, had it the other way round (32.3 s on one lane, 34.6-36.6 s on two).


def lanes_for(queries: int) -> int:
    """How many connections a batch of this many queries runs on: one per CPU, at most
    MAX_LANES; one for three queries or fewer, where opening the others costs more than
    it saves."""
    if queries < 4:
        return 1
    return max(1, min(os.cpu_count() or 1, MAX_LANES))


@dataclass(frozen=True)
class Task(Generic[T]):
    """One unit of a batch: ``run(connection)``, after the tasks named in ``after``.
    Among the tasks ready, the lowest ``urgency`` starts first (then the first
    scheduled); a task hands its urgency down to the tasks it comes after, so what a
    long task waits for runs before what nothing waits for."""

    key: str
    run: Callable[[Session], T]
    after: frozenset[str] = frozenset()
    urgency: int = 100


class Lanes:
    """Connections that run a batch's tasks (see the module docstring): with one lane,
    the session's own, and tasks run in the calling thread; with more, that many
    workers, one thread each, while the session stays the caller's (``ready_for`` gives
    it the shared views, which ``Session.execute`` asks for)."""

    def __init__(self, session: Session, count: int) -> None:
        self.session = session
        self.shadows: list[str] = []  # what each lane runs before its next task
        self._applied: dict[int, int] = {}  # connection -> how many of the shadows it has run
        self._lock = threading.RLock()
        self._workers: list[Session] = []
        self._free: queue.SimpleQueue[Session] = queue.SimpleQueue()
        self._pool: ThreadPoolExecutor | None = None
        self._futures: dict[str, Future[object]] = {}
        self._waiting: list[tuple[Task[object], Future[object]]] = []
        self._after: dict[str, frozenset[str]] = {}  # task -> the tasks it comes after
        self._urgency: dict[str, tuple[int, int]] = {}  # task -> (urgency, order scheduled)
        self._closed = False
        self.shared: frozenset[str] = frozenset()  # the views a batch shares (cclq.query.metrics)
        # releasing a shared view's rows once nothing left reads them (``seal``)
        self.release: Callable[[Session, str], None] | None = None  # drops one view's rows on a lane
        self._readers: dict[str, int] = {}  # shared view -> its tasks (and readers') not yet done
        self._sealed = False
        self._released: set[str] = set()
        self._shadow_views: list[str] = []  # the shared view of each of the shadows
        try:
            for _ in range(count if count > 1 else 0):
                self._workers.append(session.worker())
        except BaseException:
            self.close()
            raise
        for lane in self._workers or [session]:
            self._free.put(lane)
        self._idle = max(1, len(self._workers))  # lanes with no task handed to them
        self._given_back: dict[str, str] = {}  # DuckDB setting -> its value before the batch
        if self._workers:
            self._pool = ThreadPoolExecutor(max_workers=count, thread_name_prefix="cclq-lane")
            self._share_cores(count)
        self._unordered_tables()

    def add_shadows(self, statements: Sequence[str], view: str = "") -> None:
        """``view``: the shared view they stand for (dropped with it, ``seal``)."""
        with self._lock:
            self.shadows.extend(statements)
            self._shadow_views.extend([view] * len(statements))

    def catch_up(self, lane: Session) -> None:
        """Runs on ``lane`` the shadow statements it has not run yet, holding the lock: a
        shared view whose rows another lane releases (``_read``) has its shadow replaced
        before its table is dropped, so a shadow is never made over a table dropped in
        between (seen as "Table _cclq_shared_steps does not exist" under load). On the
        connection itself: ``Session.execute`` would wait for the lanes under the lock."""
        with self._lock:
            todo = self.shadows[self._applied.get(id(lane), 0) :]
            self._applied[id(lane)] = len(self.shadows)
            if todo:
                lane.con.execute("\n".join(f"{s};" for s in todo))

    def ready_for(self, session: Session) -> None:
        """Waits for the shared views (the tasks named in ``shared``) and runs their
        shadows on ``session``: the caller's own connection, used inside the batch's block.
        With one lane those are done before the block starts."""
        with self._lock:
            pending = [f for key, f in self._futures.items() if key in self.shared and not f.done()]
        if pending:
            wait(pending)
        self.catch_up(session)

    def _on_a_lane(self, run: Callable[[Session], T], reads: frozenset[str] = frozenset()) -> T:
        lane = self._free.get()
        try:
            self.catch_up(lane)
            return run(lane)
        finally:
            self._read(lane, reads)
            self._free.put(lane)

    def seal(self) -> None:
        """No task is started on these lanes after this: from now each shared view's rows
        are dropped (``release``) as soon as its own task and every task that reads it are
        done, so a batch holds only the shared tables it still needs (issue 42: a report
        on a 127 MB rank held 280 MB of them until its end)."""
        with self._lock:
            self._sealed = True
        if self._pool is None:
            self._read(self.session, frozenset())
        else:  # on a lane: the caller's connection may be the one lane of another thread
            lane = self._free.get()
            try:
                self._read(lane, frozenset())
            finally:
                self._free.put(lane)

    def _read(self, lane: Session, reads: frozenset[str]) -> None:
        """A task that read ``reads`` is done: releases, on ``lane``, what nothing left reads."""
        with self._lock:
            for name in reads:
                self._readers[name] -= 1
            if not self._sealed or self.release is None:
                return
            done = [n for n in self.shared if self._readers.get(n, 0) == 0 and n not in self._released]
            self._released.update(done)
            # a lane that has not made the view yet must not: its table is gone
            self.shadows = ["SELECT 1" if view in done else s for s, view in zip(self.shadows, self._shadow_views)]
        for name in done:
            self.release(lane, name)

    def start(self, tasks: Sequence[Task[T]]) -> dict[str, Future[T]]:
        """Schedules ``tasks``: each starts on a free lane once the tasks it comes after
        (of this call or an earlier one) are done, even when they failed; among those
        ready, the most urgent first (``Task``). Key -> the future of its result."""
        with self._lock:
            futures: dict[str, Future[T]] = {}
            for task in tasks:
                future: Future[T] = Future()
                futures[task.key] = future
                self._futures[task.key] = future  # type: ignore[assignment]
                self._waiting.append((task, future))  # type: ignore[arg-type]
                self._after[task.key] = task.after
                self._urgency[task.key] = (task.urgency, len(self._urgency))
                self._hand_down(task.after, task.urgency)
                for name in self._reads(task):
                    self._readers[name] = self._readers.get(name, 0) + 1
        self._pump()
        return futures

    def _reads(self, task: Task[Any]) -> frozenset[str]:
        """The shared views a task holds: those it comes after, and its own."""
        return (task.after | {task.key}) & self.shared

    def _hand_down(self, keys: frozenset[str], urgency: int) -> None:
        todo = list(keys)
        while todo:
            key = todo.pop()
            if key in self._urgency and self._urgency[key][0] > urgency:
                self._urgency[key] = (urgency, self._urgency[key][1])
                todo.extend(self._after.get(key, ()))

    def _next_ready(self) -> tuple[Task[object], Future[object]] | None:
        with self._lock:
            if self._closed:  # closed while tasks waited (a failure): they never start
                for _, outer in self._waiting:
                    outer.cancel()
                self._waiting.clear()
                return None
            if self._idle == 0:
                return None
            ready = [
                item
                for item in self._waiting
                if all(self._futures[k].done() for k in item[0].after if k in self._futures)
            ]
            if not ready:
                return None
            item = min(ready, key=lambda item: self._urgency[item[0].key])
            self._waiting.remove(item)
            self._idle -= 1
            return item

    def _pump(self) -> None:
        """Starts ready tasks while a lane is idle. A task is handed to a thread only when
        a lane is free for it, so a shared view that becomes ready goes ahead of the
        metrics scheduled after it, instead of queueing behind them."""
        while (item := self._next_ready()) is not None:
            task, outer = item
            if self._pool is None:  # one lane: here, in order
                try:
                    outer.set_result(self._on_a_lane(task.run, self._reads(task)))
                except Exception as e:  # noqa: BLE001 - handed to the caller through the future
                    outer.set_exception(e)
                with self._lock:
                    self._idle += 1
            else:
                inner = self._pool.submit(self._on_a_lane, task.run, self._reads(task))
                inner.add_done_callback(partial(self._finished, outer))

    def _finished(self, outer: Future[object], inner: Future[object]) -> None:
        if inner.cancelled():
            outer.cancel()
        elif (error := inner.exception()) is not None:
            outer.set_exception(error)
        else:
            outer.set_result(inner.result())
        with self._lock:
            self._idle += 1
        self._pump()

    def wait(self) -> None:
        """Returns once every task started is done."""
        try:
            while True:
                with self._lock:
                    pending = [f for f in self._futures.values() if not f.done()]
                if not pending:
                    return
                wait(pending)
        except BaseException:
            self.interrupt()
            raise

    def interrupt(self) -> None:
        """Stops every lane's running query (a failure or Ctrl-C in the caller)."""
        for lane in self._workers or [self.session]:
            lane.con.interrupt()

    def _share_cores(self, count: int) -> None:
        """DuckDB's threads (one pool for every connection) divided among the lanes: with
        a thread per core each, the lanes' small queries spent more time handing work
        between threads than running it (a report on dlrm_param_8xV100: 2.1 s of CPU
        with 2 threads, 1.8 s with 1, on 2 cores)."""
        threads = self._setting("threads")
        if threads is not None:
            self._for_the_batch("threads", str(max(1, int(threads) // count)))

    def _unordered_tables(self) -> None:
        """Tables written in any order for the batch (DuckDB's preserve_insertion_order):
        keeping the order of a scan over many small Parquet files cost a merge of their
        row groups in every table a batch makes (a 500-workload board: 25.8 s instead of
        27.4 s). Nothing a batch makes is read in stored order: each query that returns
        rows (metric results, figure data) and each window over a shared table says its
        order."""
        self._for_the_batch("preserve_insertion_order", "false")

    def _setting(self, name: str) -> str | None:
        row = self.session.execute(f"SELECT current_setting({quote_literal(name)})").fetchone()
        return str(row[0]).lower() if row else None

    def _for_the_batch(self, name: str, value: str) -> None:
        """Sets one of DuckDB's settings (global: every connection of the session) until
        ``close``, which gives the value before it back."""
        before = self._setting(name)
        if before is None or before == value:
            return
        self._given_back.setdefault(name, before)
        self.session.execute(f"SET {name} = {quote_literal(value)}")

    def close(self) -> None:
        """Cancels the tasks not started, waits for the running ones, closes the workers
        and gives DuckDB's settings back (its threads, the tables' order)."""
        with self._lock:
            self._closed = True
        self._pump()
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
        for worker in self._workers:
            worker.close()
        for name, value in self._given_back.items():
            self.session.execute(f"SET {name} = {quote_literal(value)}")
        self._given_back.clear()
