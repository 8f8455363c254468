"""The daemon's handler of ``python -m cclq.main`` calls: work for the calls to come.

CCL-Bench's website generator asks for every (workload folder, metric) of one folder of
workloads (``trace_collection/``), one process per number. Done call by call, each
folder pays an ingest of its own (a parser pool, a commit, a compaction) and each
(folder, metric) a query of its own, which made the first loop over a fresh warehouse
no faster than CCL-Bench's scripts. So the daemon, before answering a call:

* **ingests the call's sibling folders with it**, once per (warehouse, parent folder)
  in the daemon's life: every workload folder beside the asked one, in one ingest (one
  parser pool over all their files, one compaction), since the generator asks for
  them next. Only folders that are one workload each (what the call itself accepts),
  at most ``MAX_SIBLINGS`` of them and ``MAX_SIBLING_BYTES`` of files together (else
  only the asked folder, as before; ``CCLQ_DAEMON_SIBLINGS=0`` in the caller's
  environment turns this and the next point off). A sibling that fails is left out
  silently: its own call ingests it again and reports the error then.
* **computes the asked metric for all of them in one query** when the asked folder's
  result is not in the result cache, and stores each trace's rows as that trace's
  cached result, under the name a call for that trace alone looks up
  (``cclq.query.cache.result_file``). A metric's rows for one trace do not depend on the
  other traces of its query (the same property ``--dask`` relies on to compute by trace
  partitions, ``cclq.query.metrics.combine_results``), so the next folders' calls read
  what they would have computed.

Then the call itself runs as it does without a daemon (``cclq.compat.main.run_here``):
its own ingest (now a no-op check), the cached result, the same output and exit status.
Nothing here can change an answer: any error in this preparation is logged and the call
goes on as if it had not happened. Nothing it does is printed into the call's output.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from cclq.query.registry import MetricSpec
    from cclq.store.warehouse import Warehouse

T = TypeVar("T")
SIBLINGS_ENV = "CCLQ_DAEMON_SIBLINGS"  # 0: only the asked folder, as a call without the daemon
MAX_SIBLINGS = 200
# A batch's runner waits this long for the metrics of the calls arriving with it (a
# generator's pool sends 32 at once): one batch of 20 metrics shares views 20 queries do not
BATCH_GATHER_S = 0.05
MAX_SIBLING_BYTES = 8 << 30  # 8 GiB of trace files: beyond that a first call would wait too long


class _ReadWriteLock:
    """Calls at once (shared), except a call that ingests (exclusive): an ingest forks its
    parser processes, and a fork while another thread is inside DuckDB would copy into
    the child a lock that thread holds. Waiting writers go first."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.readers = 0
        self.writer = False
        self.waiting = 0

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        with self.cond:
            while self.writer or self.waiting:
                self.cond.wait()
            self.readers += 1
        try:
            yield
        finally:
            with self.cond:
                self.readers -= 1
                if not self.readers:
                    self.cond.notify_all()

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        with self.cond:
            self.waiting += 1
            while self.writer or self.readers:
                self.cond.wait()
            self.waiting -= 1
            self.writer = True
        try:
            yield
        finally:
            with self.cond:
                self.writer = False
                self.cond.notify_all()


@dataclass
class _Call:
    """What the preparation needs of a call's arguments."""

    argv: list[str]
    trace: str  # --trace as the call gives it
    folder: Path  # the workload folder, resolved
    wh: Warehouse
    spec: MetricSpec
    params: dict[str, str]  # the call's overrides the metric declares
    overrides: dict[str, str]  # every override the call gives (--n_chips, --model_params)
    siblings: bool  # the work ahead is wanted (CCLQ_DAEMON_SIBLINGS)

    @property
    def key(self) -> tuple[str, str]:
        return str(self.wh.root), str(self.folder.parent)


class WarmCalls:
    """``run(argv) -> exit status`` for the daemon (``cclq.compat.daemon_server.serve_calls``),
    with the state it keeps between calls: the traces of each parent folder it ingested.
    Called from several threads at once (a generator's thread pool): a call whose folder is
    ingested runs beside the others; the first call of a parent folder ingests the
    siblings alone (``_ReadWriteLock``), and each (metric, folders) is computed by one call
    while the calls that want it wait for its result."""

    def __init__(self, run_call: Callable[..., int]) -> None:
        self.run_call = run_call
        # (warehouse, parent folder) -> {workload folder: trace id} of its siblings ingested whole
        self.siblings: dict[tuple[str, str], dict[str, str]] = {}
        self.rw = _ReadWriteLock()
        # metric batches per (warehouse, parent folder, overrides): the metrics waiting for
        # the next batch, those in the running one, and the groups that have a batch running
        self._batches = threading.Condition()
        self._pending: dict[tuple, dict[str, MetricSpec]] = {}
        self._inflight: dict[tuple, set[str]] = {}
        self._leading: set[tuple] = set()
        self._batched: set[tuple] = set()  # groups that had a batch
        self._done: set[tuple] = set()  # (group, metric label) a batch computed

    def __call__(self, argv: list[str]) -> int:
        call = self._quietly(lambda: self.parse(argv), argv)
        if call is None:  # nothing to prepare (the call reports what is wrong)
            with self.rw.exclusive():
                return self.run_call(argv)
        with self.rw.shared():
            traces = self._ready(call)
            if traces is not None:
                self._quietly(lambda: self.compute(call), argv)
                return self.run_call(argv, fresh=traces)
        with self.rw.exclusive():
            if self._ready(call) is None:
                self._quietly(lambda: self.ingest(call), argv)
                if self._ready(call) is None:
                    return self.run_call(argv)  # it ingests: alone
        with self.rw.shared():
            traces = self._ready(call)
            self._quietly(lambda: self.compute(call), argv)
            return self.run_call(argv, fresh=traces)

    def _quietly(self, step: Callable[[], T], argv: list[str]) -> T | None:
        """A preparation step, with what it prints and any error in the daemon's log, never
        in the call's answer."""
        from cclq.compat.daemon_server import captured

        result: T | None = None
        with captured() as (out, err):
            try:
                result = step()
            except Exception as e:  # noqa: BLE001 - preparation is an optimisation, never the answer
                err.write(f"cclq daemon: preparing {argv} failed: {type(e).__name__}: {e}\n")
        text = out.getvalue() + err.getvalue()
        daemon_log = sys.__stderr__  # the daemon's log file, not the caller's stderr
        if text and daemon_log is not None:
            daemon_log.write(text)
            daemon_log.flush()
        return result

    def parse(self, argv: list[str]) -> _Call | None:
        from cclq.compat.main import arg_parser, metric_params
        from cclq.errors import CclqError
        from cclq.store.warehouse import Warehouse, resolve_warehouse

        try:
            args = arg_parser().parse_args(argv)
        except SystemExit:
            return None  # the call reports it
        folder = Path(args.trace).expanduser()
        if not folder.is_dir():
            return None
        try:
            from cclq.query.registry import resolve

            spec = resolve(args.metric)
            wh = Warehouse(resolve_warehouse(args.warehouse))
            params = metric_params(spec, args)
        except CclqError:
            return None
        # the caller's environment (the daemon takes its CCLQ_* names per call)
        wanted = os.environ.get(SIBLINGS_ENV, "1").strip().lower() not in ("0", "false", "no", "off")
        overrides = {
            k: str(v) for k, v in (("model_params", args.model_params), ("n_chips", args.n_chips)) if v is not None
        }
        return _Call(argv, args.trace, folder.resolve(), wh, spec, params, overrides, wanted)

    def _ready(self, call: _Call) -> dict[str, str] | None:
        """When the call's folder needs no ingest (and its siblings are known): the trace
        ids of the up-to-date check, which the call then need not make again (``run_here``'s
        ``fresh``; no ingest of this daemon's can run meanwhile); else None."""
        from cclq.ingest.run import is_up_to_date

        if call.siblings and call.key not in self.siblings:
            return None
        traces: dict[str, str] = {}
        try:
            # the call's own spelling of the folder: the trace ids are keyed by what
            # plan_inputs makes of it, as run_here looks them up
            fresh = is_up_to_date([call.trace], call.wh, distinct_ids=True, traces=traces)
        except Exception:  # noqa: BLE001 - the call itself says what is wrong
            return None
        return traces if fresh else None

    def ingest(self, call: _Call) -> None:
        """The first call of a parent folder: every sibling in one ingest."""
        if call.siblings and call.key not in self.siblings:
            start = time.perf_counter()
            self.siblings[call.key] = ingest_siblings(call.folder.parent, call.wh)
            print(
                f"cclq daemon: {len(self.siblings[call.key])} folder(s) of {call.folder.parent} ingested "
                f"({time.perf_counter() - start:.2f} s)"
            )

    def compute(self, call: _Call) -> None:
        """The asked metric for every sibling, when the call's result is not cached; with the
        other metrics asked for meanwhile, in one batch (``compute_batch``: the views they
        share computed once, as ``cclq board`` computes them). A call waits for the batch
        that holds its metric; one of the waiting calls runs the next batch."""
        traces = self.siblings.get(call.key, {}) if call.siblings else {}
        group = (call.key, tuple(sorted(call.overrides.items())))
        label = call.spec.label
        # a batch computed it (its results may have gone since: the call computes its own)
        if (
            str(call.folder) not in traces
            or (group, label) in self._done
            or self._cached(call, traces[str(call.folder)])
        ):
            return
        everyone = sorted(set(traces.values()))
        with self._batches:
            self._pending.setdefault(group, {})[label] = call.spec
            while label in self._pending.get(group, {}) or label in self._inflight.get(group, set()):
                if label in self._pending.get(group, {}) and group not in self._leading:
                    self._leading.add(group)  # this call runs the next batch, with what the
                    self._batches.wait(BATCH_GATHER_S)  # calls arriving with it ask for
                    batch = self._pending.pop(group)
                    if group not in self._batched and len(batch) >= 2:
                        batch.update(_ahead(batch))  # a pool of calls: the rest of a website's too
                    self._batched.add(group)
                    self._inflight[group] = set(batch)
                    break
                self._batches.wait()
            else:
                return  # computed by another call's batch
        try:
            start = time.perf_counter()
            done = compute_batch(call.wh, list(batch.values()), call.overrides, everyone)
            self._done.update((group, name) for name in done)
            if done:
                print(
                    f"cclq daemon: {len(done)} metric(s) for {len(everyone)} trace(s) in one batch "
                    f"({time.perf_counter() - start:.2f} s): {', '.join(done)}"
                )
        finally:
            with self._batches:
                self._inflight[group] = set()
                self._leading.discard(group)
                self._batches.notify_all()

    @staticmethod
    def _cached(call: _Call, trace: str) -> bool:
        from cclq.query.cache import result_file

        with call.wh.open_snapshot() as snapshot:
            return result_file(call.wh.cache_dir, snapshot.summary, [trace], call.spec, call.params).exists()

    def prepare(self, argv: list[str]) -> None:
        """The whole preparation in this thread, as one call does it (for tests)."""
        call = self.parse(argv)
        if call is not None:
            self.ingest(call)
            self.compute(call)


def ingest_siblings(parent: Path, wh: Warehouse) -> dict[str, str]:
    """Ingests every workload folder in ``parent`` in one ingest; {folder: the trace a call
    for it answers for} of those that ingested without a failed file (``answer_trace``: a
    folder of several runs answers for one of them). Empty when there are too many or
    they are too big (then each call ingests its own folder)."""
    from cclq.ingest.plan import Workload, plan_inputs, rename_workload
    from cclq.ingest.run import ingest
    from cclq.store.durable import ReadOnlyWarehouse

    try:
        folders = sorted(p for p in parent.iterdir() if p.is_dir() and not p.name.startswith("."))
    except OSError:
        return {}
    if len(folders) > MAX_SIBLINGS:
        return {}
    accepted, total = [], 0
    planned: dict[str, Workload] = {}
    for folder in folders:
        try:
            workloads = plan_inputs([folder], wh.root)
        except Exception:  # noqa: BLE001 - a folder the call would refuse is no sibling
            continue
        if len(workloads) != 1 or workloads[0].failure is not None or str(workloads[0].root) != str(folder):
            continue
        for path in workloads[0].files:
            with contextlib.suppress(OSError):
                total += os.stat(path).st_size
        accepted.append(folder)
        planned[str(folder)] = workloads[0]
    if not accepted or total > MAX_SIBLING_BYTES:
        return {}
    try:
        report = ingest(accepted, wh, jobs=None, distinct_ids=True)
    except ReadOnlyWarehouse:
        return {}
    failed = {o.trace for o in report.failed}
    out = {}
    for root, trace in report.traces.items():
        w = planned.get(root)
        if w is None or trace in failed:
            continue
        if trace != w.trace:
            rename_workload(w, trace)
        if not w.traces & failed:
            out[root] = w.answer_trace()
    return out


def compute_for_all(wh: Warehouse, spec: MetricSpec, params: dict[str, str], trace: str, traces: list[str]) -> bool:
    """When ``trace``'s result of ``spec`` is not cached: one query over ``traces``, and
    each trace's rows stored as its own cached result (those already cached are kept).
    Whether it computed anything."""
    import pyarrow.compute as pc

    from cclq.query.cache import result_file, store_result
    from cclq.query.metrics import run_metric
    from cclq.query.session import QuerySettings, connect

    with wh.open_snapshot() as snapshot:
        paths = {t: result_file(wh.cache_dir, snapshot.summary, [t], spec, params) for t in traces}
        snapshot_id = snapshot.id
    if paths[trace].exists():
        return False
    todo = [t for t in traces if not paths[t].exists()]
    con = connect(wh, traces=todo, settings=QuerySettings.from_env(), snapshot_id=snapshot_id)
    try:
        table = run_metric(con, spec, params)
    finally:
        con.close()
    if "trace" not in table.column_names:
        return True
    for t in todo:
        store_result(table.filter(pc.equal(table.column("trace"), t)), paths[t])
    return True


def _ahead(batch: dict[str, MetricSpec]) -> dict[str, MetricSpec]:
    """What the first batch of a parent folder computes besides what was asked, when it was
    asked for several metrics at once (a website generator's pool, not one user's call):
    the metrics of CCL-Bench's website config (its metric_info), so the calls that come
    later for another folder's metrics (an Nsight folder's, an inference folder's) find
    them computed instead of waiting for a batch of their own."""
    from cclq.query.registry import latest_specs

    # CCL-Bench's website config lists these (the header's ccl_bench_trace_types)
    return {s.label: s for s in latest_specs() if s.ccl_bench_trace_types and s.label not in batch}


def compute_batch(wh: Warehouse, specs: list[MetricSpec], overrides: dict[str, str], traces: list[str]) -> list[str]:
    """``compute_for_all`` for several metrics at once: one batch (``run_metrics``: the views
    they share computed once) over the traces that miss a cached result of any of them,
    each trace's rows stored as its own cached result. The labels of those computed."""
    import pyarrow.compute as pc

    from cclq.query.cache import result_file, store_result
    from cclq.query.metrics import run_metrics
    from cclq.query.params import params_for
    from cclq.query.session import QuerySettings, connect

    with wh.open_snapshot() as snapshot:
        paths = {
            (s.label, t): result_file(wh.cache_dir, snapshot.summary, [t], s, params_for(s, overrides))
            for s in specs
            for t in traces
        }
        snapshot_id = snapshot.id
    todo = [s for s in specs if any(not paths[(s.label, t)].exists() for t in traces)]
    if not todo:
        return []
    scope = sorted({t for s in todo for t in traces if not paths[(s.label, t)].exists()})
    con = connect(wh, traces=scope, settings=QuerySettings.from_env(), snapshot_id=snapshot_id)
    try:
        runs = run_metrics(con, todo, overrides)
    finally:
        con.close()
    done = []
    for s in todo:
        table = runs[s.name].table
        if table is None or "trace" not in table.column_names:
            continue  # failed: each call computes (and reports) it itself
        for t in scope:
            if not paths[(s.label, t)].exists():
                store_result(table.filter(pc.equal(table.column("trace"), t)), paths[(s.label, t)])
        done.append(s.label)
    return done
