"""cclq on a Dask cluster (``--dask``): files parsed on the workers, metrics computed
over trace partitions on the workers.

Dask (``distributed``) is the optional extra ``dask``; nothing imports this module
unless ``--dask`` is given. The cluster changes where work runs, never what it gives,
because everything that decides a result stays in the process that runs cclq:

* **ingest** keeps planning, the rank checks and every commit (``cclq.ingest``'s
  committer) in this process. A worker runs ``parse_file`` and nothing else: it writes
  temp data files under the warehouse's ``tmp/`` and hands back a ``ParsedFile``, so the
  warehouse must be on storage that every worker sees at the same path (checked before
  the first task). A worker that dies takes its task with it and Dask runs the task again
  on another worker; what the dead attempt wrote is never committed (a snapshot names
  only the files of the result this process took, and temp names are unique per
  process) and ``clean_tmp`` sweeps it at the end. A file that was being parsed each
  time a worker died, twice or more, fails alone (``PARSER_DIED``); files that were only
  queued on a dying worker are run again.
* **metrics**: this process opens its snapshot and checks the result cache as
  ``run_metric`` always does; a result that is not cached is computed by one task per
  group of traces. Each task opens the same snapshot by its id (this process holds it
  locked, so no ingest can collect it meanwhile) and runs ``run_metric`` over its
  traces; the parts are put together in the order one query gives
  (``combine_results``) and the whole is cached under the whole selection's key.

``--dask local`` (or ``local:N``) starts a ``LocalCluster`` of N worker processes
(default: one per CPU) with one thread each; anything else is a scheduler to join: an
address (``tcp://host:8786``) or a scheduler file (``dask scheduler --scheduler-file``,
what dask-jobqueue and dask-mpi write).
"""

from __future__ import annotations

import hashlib
import logging
import os
import queue
import re
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

import cclq
from cclq.errors import CclqError, TraceFileError, UsageError
from cclq.formats.reading import ReadOptions
from cclq.ingest import COMMIT_INTERVAL_S, PARSER_DIED, FileTask, ParsedFile, Reporter
from cclq.sqlfiles import sql_root
from cclq.warehouse import Warehouse

if TYPE_CHECKING:  # imported for real only when a cluster is used
    import duckdb
    from distributed import Client, Future

    from cclq.metrics import MetricRun, MetricSpec

INSTALL_HINT = "pip install 'cclq[dask]' (in a checkout: pip install -e '.[dask]')"
# Deaths of workers that a task may be running at before the scheduler gives up on it
# (Dask's own default is 3). A cluster cclq starts gives up after two, as ``--jobs``
# does; a cluster it joins keeps its own setting.
LOCAL_ALLOWED_FAILURES = 1
# A file that Dask gave up on (KilledWorker) but that was not running at two deaths
# was a bystander (queued on the dying workers): it is submitted again, this often.
MAX_RESUBMITS = 3
# Metric partitions: at most this many tasks per worker thread, and one task per this
# many events in all (a task costs ~0.1-0.3 s to open the snapshot and define the views).
PARTITIONS_PER_THREAD = 4
MIN_EVENTS_PER_PARTITION = 500_000
# A worker's DuckDB gets this share of the worker's memory limit (the rest is Python,
# Arrow results and the nanny's margin before it restarts the worker).
DUCKDB_MEMORY_SHARE = 0.75


# ---------------------------------------------------------------------- cluster
@dataclass(frozen=True)
class ClusterSpec:
    """What ``--dask`` names: a local cluster to start, or a scheduler to join."""

    text: str
    local_workers: int | None = None  # local[:N]
    address: str | None = None  # tcp://host:8786, host:8786, ...
    scheduler_file: str | None = None

    def __str__(self) -> str:
        return self.text


_ADDRESS = re.compile(r"[a-z][a-z0-9+.-]*://\S+|[^\s/:]+:\d+")


def parse_cluster(text: str) -> ClusterSpec:
    """``local``, ``local:N``, a scheduler address or a scheduler file; anything else is
    a usage error. Also checks that Dask is installed, so a run fails before it starts."""
    spec = text.strip()
    if spec == "local" or spec.startswith("local:"):
        count = spec.partition(":")[2]
        if not count:
            workers = os.cpu_count() or 1
        elif count.isdigit() and int(count) >= 1:
            workers = int(count)
        else:
            raise UsageError(f"--dask {text}: local:N wants a number of worker processes, 1 or more")
        cluster = ClusterSpec(text, local_workers=workers)
    elif _ADDRESS.fullmatch(spec):
        cluster = ClusterSpec(text, address=spec)
    elif Path(spec).expanduser().is_file():
        cluster = ClusterSpec(text, scheduler_file=str(Path(spec).expanduser()))
    else:
        raise UsageError(f"--dask {text}: not local[:N], a scheduler address (tcp://host:8786) "
                         "or an existing scheduler file")
    require_distributed()
    return cluster


def require_distributed() -> None:
    try:
        import distributed  # noqa: F401
    except ImportError as e:
        raise UsageError(f"--dask needs Dask's distributed scheduler, which is not installed ({e})",
                         hint=INSTALL_HINT) from e


@contextmanager
def dask_client(cluster: ClusterSpec) -> Iterator[Client]:
    """A client of the cluster; a local cluster lives as long as the block."""
    import dask
    from distributed import Client, LocalCluster

    if cluster.local_workers is not None:
        try:
            with dask.config.set({"distributed.scheduler.allowed-failures": LOCAL_ALLOWED_FAILURES}):
                # no dashboard; the scheduler's HTTP server (health checks) on any free port,
                # not 8787, which a second cclq or a user's own cluster may hold
                local = LocalCluster(n_workers=cluster.local_workers, threads_per_worker=1, processes=True,
                                     dashboard_address=None, scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
                                     silence_logs=logging.CRITICAL)
        except Exception as e:
            raise CclqError(f"--dask {cluster}: could not start a local Dask cluster: {type(e).__name__}: {e}") from e
        with local, Client(local) as client:
            yield client
        return
    try:
        if cluster.scheduler_file is not None:
            client = Client(scheduler_file=cluster.scheduler_file)
        else:
            client = Client(cluster.address)
    except (OSError, TimeoutError, ValueError) as e:
        raise UsageError(f"--dask {cluster}: cannot reach the Dask scheduler: {e}",
                         hint="start it first (dask scheduler, or a dask-jobqueue cluster), and pass its address "
                              "or scheduler file") from e
    with client:
        _wait_for_a_worker(client, cluster)
        yield client


def _wait_for_a_worker(client: Client, cluster: ClusterSpec) -> None:
    """Tasks sent to a scheduler without workers would wait silently (a batch job that
    has not started yet): say so once, then wait."""
    if client.scheduler_info(n_workers=1).get("workers"):
        return
    print(f"cclq: note: waiting for a Dask worker to join {cluster} (Ctrl-C stops)", file=sys.stderr)
    client.wait_for_workers(1)


def _worker_threads(client: Client) -> int:
    workers = client.scheduler_info(n_workers=-1).get("workers", {})
    return max(1, sum(w.get("nthreads", 1) for w in workers.values()))


@lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """A digest of this cclq's Python and SQL files: a worker that runs other code (an
    older install on the cluster) would parse or compute differently."""
    h = hashlib.blake2b(cclq.__version__.encode(), digest_size=12)
    for root, pattern in ((Path(cclq.__file__).parent, "*.py"), (sql_root(), "*.sql")):
        for path in sorted(root.rglob(pattern)):
            h.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def _file_signature(path: str) -> str | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return f"{st.st_size}:{st.st_mtime_ns}"


def _worker_view(probe: str, writable: str | None) -> dict[str, Any]:
    """Runs on every worker (``Client.run``): what it sees of the warehouse, its code."""
    return {"fingerprint": code_fingerprint(), "probe": _file_signature(probe),
            "writable": writable is None or os.access(writable, os.W_OK)}


def check_workers(client: Client, warehouse: Path, probe: Path, writable: Path | None = None) -> None:
    """Every worker runs this cclq and sees ``probe``, a file of the warehouse, as this
    process does (size and modification time agree), so the warehouse is on shared
    storage at the same path; ``writable`` must be writable there. A usage error names
    the first worker that does not."""
    want = _file_signature(str(probe))
    views = client.run(_worker_view, str(probe), None if writable is None else str(writable))
    for address, view in sorted(views.items()):
        if view["fingerprint"] != code_fingerprint():
            raise UsageError(f"Dask worker {address} runs a different cclq than this process "
                             f"(cclq {cclq.__version__} here)",
                             hint="install the same cclq (and sql/ files) in the workers' environment")
        if view["probe"] != want:
            raise UsageError(f"Dask worker {address} does not see the warehouse at {warehouse} "
                             "as this process does",
                             hint="put the warehouse on storage that every worker mounts at the same path")
        if not view["writable"]:
            raise UsageError(f"Dask worker {address} cannot write to {writable}",
                             hint="the workers write parsed data to the warehouse's tmp/ folder")


def _this_worker() -> str:
    try:
        from distributed import get_worker

        return get_worker().address
    except (ImportError, ValueError):
        return "?"


# ------------------------------------------------------------------------ ingest
def parse_on_dask(todo: list[FileTask], warehouse: Warehouse, dask: str, reporter: Reporter,
                  options: ReadOptions | None = None) -> Iterator[tuple[FileTask, ParsedFile | TraceFileError] | None]:
    """``cclq.ingest._run_parsers`` on a Dask cluster, with its contract: (task, result)
    in ``todo`` order, and None when ``COMMIT_INTERVAL_S`` passed without one (so that
    the committer can commit meanwhile). A file's bytes count on the progress bar when
    its result arrives. Closing the generator cancels the parses that have not ended."""
    if not todo:
        return
    cluster = parse_cluster(dask)
    tmp_dir = warehouse.tmp_dir.resolve()
    with dask_client(cluster) as client:
        probe = tmp_dir / f"dask-probe-{uuid.uuid4().hex}"
        probe.write_text(uuid.uuid4().hex)
        try:
            check_workers(client, warehouse.root.resolve(), probe, writable=tmp_dir)
        finally:
            probe.unlink(missing_ok=True)
        yield from _DaskParses(client, todo, tmp_dir, reporter, options).results()


def _running_marker(tmp_dir: str, file_id: str) -> Path:
    """Left in ``tmp/`` while a worker parses the file: one left behind is an attempt
    whose worker died while parsing it."""
    return Path(tmp_dir) / f"{file_id}.running.{uuid.uuid4().hex[:12]}"


def parse_task(path: str, file_id: str, tmp_dir: str, trace: str, fingerprint: str,
               options: ReadOptions | None = None) -> ParsedFile | TraceFileError:
    """What a worker runs for one file: ``cclq.ingest.parse_file``, with a marker in
    ``tmp/`` for as long as it runs."""
    from cclq import ingest

    if fingerprint != code_fingerprint():
        return TraceFileError(path, f"not parsed: Dask worker {_this_worker()} runs a different cclq than "
                                    "the ingest; install the same cclq on every worker")
    if not os.path.lexists(path):
        return TraceFileError(path, f"cannot read on Dask worker {_this_worker()}: no such file (inputs must "
                                    "be on storage that every worker sees at the same path)")
    marker = _running_marker(tmp_dir, file_id)
    try:
        marker.touch()
    except OSError as e:
        return TraceFileError(path, f"Dask worker {_this_worker()} cannot write to {tmp_dir}: {e.strerror or e}")
    try:
        return ingest.parse_file(path, file_id, tmp_dir, trace, options or ReadOptions())
    finally:
        marker.unlink(missing_ok=True)


class _DaskParses:
    """The parses of one ingest on a cluster, and their results in task order."""

    def __init__(self, client: Client, todo: list[FileTask], tmp_dir: Path, reporter: Reporter,
                 options: ReadOptions | None = None) -> None:
        self.client = client
        self.options = options
        self.todo = todo
        self.tmp_dir = str(tmp_dir)
        self.reporter = reporter
        self.futures: dict[int, Future] = {}  # by index in todo: the attempt in flight
        self.finished: queue.SimpleQueue[tuple[int, Future]] = queue.SimpleQueue()
        self.resubmits: dict[int, int] = {}

    def submit(self, i: int) -> None:
        task = self.todo[i]
        future = self.client.submit(
            parse_task, str(task.path), task.file_id, self.tmp_dir, task.trace, code_fingerprint(), self.options,
            key=f"cclq-parse-{task.file_id}-{uuid.uuid4().hex[:8]}", pure=False,
            priority=task.size,  # largest first, so no big file starts last
        )
        self.futures[i] = future
        future.add_done_callback(lambda f, i=i: self.finished.put((i, f)))

    def results(self) -> Iterator[tuple[FileTask, ParsedFile | TraceFileError] | None]:
        for i in range(len(self.todo)):
            self.submit(i)
        ready: dict[int, ParsedFile | TraceFileError] = {}
        next_out = 0
        last_yield = time.monotonic()
        try:
            while next_out < len(self.todo):
                try:
                    i, future = self.finished.get(timeout=max(0.0, last_yield + COMMIT_INTERVAL_S - time.monotonic()))
                except queue.Empty:
                    last_yield = time.monotonic()
                    yield None
                    continue
                if self.futures.get(i) is not future:
                    continue  # an attempt that was replaced
                result = self.outcome(i, future)
                if result is None:
                    continue  # submitted again
                del self.futures[i]
                for marker in Path(self.tmp_dir).glob(f"{self.todo[i].file_id}.running.*"):
                    marker.unlink(missing_ok=True)
                self.reporter.advance(self.todo[i].size)
                ready[i] = result
                while next_out in ready:
                    yield self.todo[next_out], ready.pop(next_out)
                    next_out += 1
                    last_yield = time.monotonic()
        finally:  # a stopped run (or an error): no new parses
            pending = [f for f in self.futures.values() if not f.done()]
            if pending:
                self.client.cancel(pending)

    def outcome(self, i: int, future: Future) -> ParsedFile | TraceFileError | None:
        """The file's result; None when it was submitted again."""
        from distributed import KilledWorker

        task = self.todo[i]
        try:
            return future.result()
        except KilledWorker:
            # Dask gives up on a task after a number of worker deaths while it was assigned
            # to them, running or only queued there. The markers left behind tell which.
            died = len(list(Path(self.tmp_dir).glob(f"{task.file_id}.running.*")))
            if died >= 2 or self.resubmits.get(i, 0) >= MAX_RESUBMITS:
                return TraceFileError(str(task.path), f"{PARSER_DIED}; {max(died, 1)} Dask worker(s) died "
                                                      "while parsing it")
            self.resubmits[i] = self.resubmits.get(i, 0) + 1
            self.submit(i)
            return None
        except Exception as e:  # the task did not run to its end (the scheduler went away, ...)
            return TraceFileError(str(task.path), f"not parsed: {_task_failure(e)}")


def _task_failure(e: BaseException) -> str:
    """One line for a task that did not run to its end."""
    reason = getattr(e, "reason", None)  # FutureCancelledError: scheduler-connection-lost, ...
    if reason:
        return f"Dask cancelled the task ({reason})"
    first = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"the Dask task failed: {type(e).__name__}" + (f": {first}" if first else "")


# ----------------------------------------------------------------------- metrics
def plan_partitions(events: dict[str, int], max_partitions: int,
                    min_events: int = MIN_EVENTS_PER_PARTITION) -> list[list[str]]:
    """Traces in groups of about equal size in events: one group per ``min_events``
    events in all, at most ``max_partitions`` and no more than there are traces; the
    largest trace first, each into the group that holds the fewest events so far."""
    import heapq

    if not events:
        return []
    total = sum(events.values())
    count = max(1, min(len(events), max_partitions, total // max(min_events, 1)))
    groups: list[tuple[int, int, list[str]]] = [(0, g, []) for g in range(count)]
    for trace in sorted(events, key=lambda t: (-events[t], t)):
        size, g, members = heapq.heappop(groups)
        members.append(trace)
        heapq.heappush(groups, (size + events[trace], g, members))
    return sorted(sorted(members) for _size, _g, members in groups if members)


def metrics_task(root: str, snapshot_id: str, traces: list[str], specs: list[MetricSpec],
                 params: dict[str, str], fingerprint: str) -> dict[str, pa.Table | str]:
    """What a worker runs for one partition: ``run_metrics`` over its traces, on the
    snapshot the client reads. A metric's result table, or its error message."""
    from cclq.engine import connect
    from cclq.metrics import run_metrics

    if fingerprint != code_fingerprint():
        raise UsageError(f"Dask worker {_this_worker()} runs a different cclq than this process",
                         hint="install the same cclq on every worker")
    con = connect(Warehouse(Path(root)), traces=traces, views=False, snapshot_id=snapshot_id)
    try:
        _fit_to_worker(con)
        runs = run_metrics(con, specs, params)
    finally:
        con.close()
    return {name: run.table if run.table is not None else str(run.error) for name, run in runs.items()}


def _fit_to_worker(con: duckdb.DuckDBPyConnection) -> None:
    """DuckDB uses the worker's threads and a share of its memory limit, not the whole
    node's (several workers share a node)."""
    try:
        from distributed import get_worker

        worker = get_worker()
    except (ImportError, ValueError):
        return
    con.execute(f"SET threads = {max(1, worker.state.nthreads)}")
    limit = getattr(getattr(worker, "memory_manager", None), "memory_limit", None)
    if limit:
        con.execute(f"SET memory_limit = '{int(limit * DUCKDB_MEMORY_SHARE)}B'")


PartitionProgress = Callable[[int, int], None]  # (partitions done, partitions in all)


def run_metric_on_dask(con: duckdb.DuckDBPyConnection, spec: MetricSpec, params: dict[str, str] | None,
                       cache_dir: Path | None, dask: str, partitions: int | None = None,
                       on_partition: PartitionProgress | None = None) -> pa.Table:
    """``run_metric`` over the traces ``con`` sees, computed on a Dask cluster by trace
    partitions (``partitions`` groups at most; default ``PARTITIONS_PER_THREAD`` per
    worker thread, of ``MIN_EVENTS_PER_PARTITION`` events or more). A cached result is
    read back without starting or joining a cluster. A metric whose SQL fails raises
    ``QueryError`` as ``run_metric`` does."""
    from cclq.errors import QueryError
    from cclq.metrics import run_metric

    computed = _LazyBatch(con, parse_cluster(dask), [spec], params or {}, partitions, on_partition)
    with computed:

        def compute(spec: MetricSpec, params: dict[str, str]) -> pa.Table:
            result = computed.result(spec)
            if isinstance(result, str):
                raise QueryError(result)
            return result

        return run_metric(con, spec, params, cache_dir, compute=compute)


def run_metrics_on_dask(con: duckdb.DuckDBPyConnection, specs: list[MetricSpec], params: dict[str, str] | None,
                        cache_dir: Path | None, dask: str, partitions: int | None = None,
                        on_partition: PartitionProgress | None = None,
                        on_done: Callable[[MetricRun], None] | None = None) -> dict[str, MetricRun]:
    """``run_metrics`` on a Dask cluster: the metrics that are not cached are computed
    together, one task per trace partition running all of them on one connection, and
    cached as ``run_metrics`` caches them; a metric whose SQL fails is recorded with its
    error. ``on_done`` is called after each metric, in ``specs`` order."""
    from cclq.errors import QueryError
    from cclq.metrics import MetricRun, params_for, result_path, run_metric

    params = params or {}
    pending = [s for s in specs
               if cache_dir is None or not result_path(con, s, params_for(s, params), cache_dir).exists()]
    runs: dict[str, MetricRun] = {}
    with _LazyBatch(con, parse_cluster(dask), pending, params, partitions, on_partition) as computed:
        for spec in specs:
            try:
                result = computed.result(spec) if spec in pending else None
                if isinstance(result, str):
                    raise QueryError(result)
                # cached: read back (computed here if it went missing meanwhile); else stored now
                compute = None if result is None else (lambda _s, _p, table=result: table)
                run = MetricRun(spec, run_metric(con, spec, params_for(spec, params), cache_dir, compute))
            except QueryError as e:
                run = MetricRun(spec, None, e.message)
            runs[spec.name] = run
            if on_done is not None:
                on_done(run)
    return runs


class _LazyBatch:
    """Metrics computed on the cluster the first time one of their results is asked for
    (so that a cached result never starts or joins a cluster); the cluster is left at
    the end of the ``with`` block."""

    def __init__(self, con: duckdb.DuckDBPyConnection, cluster: ClusterSpec, specs: list[MetricSpec],
                 params: dict[str, str], partitions: int | None, on_partition: PartitionProgress | None) -> None:
        self.con = con
        self.cluster = cluster
        self.specs = specs
        self.params = params
        self.partitions = partitions
        self.on_partition = on_partition
        self.results: dict[str, pa.Table | str] | None = None
        self._stack = ExitStack()

    def __enter__(self) -> _LazyBatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def result(self, spec: MetricSpec) -> pa.Table | str:
        if self.results is None:
            events = _events_by_trace(self.con)
            if not events:  # nothing to partition: computed here, as one query gives it
                from cclq.metrics import run_metrics

                self.results = {n: r.table if r.table is not None else str(r.error)
                                for n, r in run_metrics(self.con, self.specs, self.params).items()}
            else:
                client = self._stack.enter_context(dask_client(self.cluster))
                self.results = _compute(client, self.con, self.specs, self.params, events, self.partitions,
                                        self.on_partition)
        return self.results[spec.name]


def _shown(traces: list[str]) -> str:
    return ", ".join(traces[:3]) + (f" and {len(traces) - 3} more" if len(traces) > 3 else "")


def _events_by_trace(con: duckdb.DuckDBPyConnection) -> dict[str, int]:
    """Every selected trace (also one without data files) and its rows."""
    return dict(con.execute(
        "SELECT t.trace, coalesce(sum(p.rows), 0)::BIGINT FROM (SELECT trace FROM files UNION SELECT trace FROM parts) "
        "AS t LEFT JOIN parts AS p USING (trace) GROUP BY t.trace"
    ).fetchall())


def _compute(client: Client, con: duckdb.DuckDBPyConnection, specs: list[MetricSpec], params: dict[str, str],
             events: dict[str, int], partitions: int | None,
             on_partition: PartitionProgress | None) -> dict[str, pa.Table | str]:
    """Every metric of ``specs`` over the traces of ``events``, by partitions: each
    metric's parts combined, or the first error a partition gave for it."""
    from distributed import KilledWorker, as_completed

    from cclq.engine import connection_snapshot
    from cclq.metrics import combine_results, params_for

    snapshot, _traces = connection_snapshot(con)  # held by this process until con is closed
    check_workers(client, snapshot.warehouse.root.resolve(), snapshot.catalog_file("files"))
    groups = plan_partitions(events, partitions or PARTITIONS_PER_THREAD * _worker_threads(client),
                             min_events=0 if partitions else MIN_EVENTS_PER_PARTITION)
    root = str(snapshot.warehouse.root.resolve())
    # only the parameters some metric of the batch declares (as run_metrics passes them)
    declared = {k: v for s in specs for k, v in params_for(s, params).items()}
    label = specs[0].name if len(specs) == 1 else f"{len(specs)}-metrics"
    futures = {
        client.submit(metrics_task, root, snapshot.id, group, specs, declared, code_fingerprint(),
                      key=f"cclq-metrics-{label}-{n}-{uuid.uuid4().hex[:8]}", pure=False): n
        for n, group in enumerate(groups)
    }
    parts: list[dict[str, pa.Table | str]] = [{} for _ in groups]
    if on_partition is not None:
        on_partition(0, len(groups))
    try:
        for done, future in enumerate(as_completed(futures), start=1):
            n = futures[future]
            try:
                parts[n] = future.result()
            except CclqError:
                raise  # a QueryError or UsageError the worker raised, as a local run raises it
            except KilledWorker as e:
                raise CclqError(f"Dask workers died while computing metrics over {_shown(groups[n])} "
                                "(out of memory?); the workers' logs say why") from e
            except Exception as e:
                raise CclqError(f"computing metrics over {_shown(groups[n])}: {_task_failure(e)}") from e
            if on_partition is not None:
                on_partition(done, len(groups))
    finally:
        client.cancel([f for f in futures if not f.done()])
    results: dict[str, pa.Table | str] = {}
    for spec in specs:
        pieces = [part[spec.name] for part in parts]
        errors = [p for p in pieces if isinstance(p, str)]
        results[spec.name] = errors[0] if errors else combine_results([p for p in pieces if not isinstance(p, str)])
    return results
