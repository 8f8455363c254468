"""Metrics on a Dask cluster (``cclq metric --dask``): a result that is not cached is
computed by one task per group of traces.

This process opens its snapshot and checks the result cache as ``run_metric`` always
does. Each task opens the same snapshot by its id (this process holds it locked, so no
ingest can collect it meanwhile) and runs ``run_metric`` over its traces; the parts are
put together in the order one query gives (``combine_results``) and the whole is cached
under the whole selection's key. The cluster itself (``--dask`` values, the client, the
worker checks) is ``cclq.ingest.dask``'s.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from contextlib import ExitStack
from typing import TYPE_CHECKING

import pyarrow as pa

from cclq.errors import CclqError, UsageError
from cclq.ingest.dask import (
    ClusterSpec,
    check_workers,
    code_content_digest,
    dask_client,
    parse_cluster,
    task_failure,
    this_worker,
    worker_threads,
)
from cclq.store.remote import is_remote, open_warehouse

if TYPE_CHECKING:  # imported for real only when a cluster is used
    from distributed import Client

    from cclq.query.metrics import MetricRun
    from cclq.query.registry import MetricSpec
    from cclq.query.session import Session

# Metric partitions: at most this many tasks per worker thread, and one task per this
# many events in all (a task costs ~0.1-0.3 s to open the snapshot and define the views).
PARTITIONS_PER_THREAD = 4
MIN_EVENTS_PER_PARTITION = 500_000
# A worker's DuckDB gets this share of the worker's memory limit (the rest is Python,
# Arrow results and the nanny's margin before it restarts the worker).
DUCKDB_MEMORY_SHARE = 0.75


def plan_partitions(
    events: dict[str, int], max_partitions: int, min_events: int = MIN_EVENTS_PER_PARTITION
) -> list[list[str]]:
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


def metrics_task(
    root: str, snapshot_id: str, traces: list[str], specs: list[MetricSpec], params: dict[str, str], fingerprint: str
) -> dict[str, pa.Table | str]:
    """What a worker runs for one partition: ``run_metrics`` over its traces, on the
    snapshot the client reads. A metric's result table, or its error message."""
    from cclq.query.metrics import run_metrics
    from cclq.query.session import connect

    if fingerprint != code_content_digest():
        raise UsageError(
            f"Dask worker {this_worker()} runs a different cclq than this process",
            hint="install the same cclq on every worker",
        )
    con = connect(open_warehouse(root), traces=traces, snapshot_id=snapshot_id)
    try:
        _fit_to_worker(con)
        runs = run_metrics(con, specs, params)
    finally:
        con.close()
    return {name: run.table if run.table is not None else str(run.error) for name, run in runs.items()}


def _fit_to_worker(con: Session) -> None:
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


def run_metric_on_dask(
    con: Session,
    spec: MetricSpec,
    params: dict[str, str] | None,
    dask: str,
    partitions: int | None = None,
    on_partition: PartitionProgress | None = None,
) -> pa.Table:
    """``run_metric`` over the traces ``con`` sees, computed on a Dask cluster by trace
    partitions (``partitions`` groups at most; default ``PARTITIONS_PER_THREAD`` per
    worker thread, of ``MIN_EVENTS_PER_PARTITION`` events or more). A cached result is
    read back without starting or joining a cluster. A metric whose SQL fails raises
    ``QueryError`` as ``run_metric`` does."""
    from cclq.errors import QueryError
    from cclq.query.metrics import run_metric

    computed = _LazyBatch(con, parse_cluster(dask), [spec], params or {}, partitions, on_partition)
    with computed:

        def compute(spec: MetricSpec, params: dict[str, str]) -> pa.Table:
            result = computed.result(spec)
            if isinstance(result, str):
                raise QueryError(result)
            return result

        return run_metric(con, spec, params, compute=compute)


def run_metrics_on_dask(
    con: Session,
    specs: list[MetricSpec],
    params: dict[str, str] | None,
    dask: str,
    partitions: int | None = None,
    on_partition: PartitionProgress | None = None,
    on_done: Callable[[MetricRun], None] | None = None,
) -> dict[str, MetricRun]:
    """``run_metrics`` on a Dask cluster: the metrics that are not cached are computed
    together, one task per trace partition running all of them on one connection, and
    cached as ``run_metrics`` caches them; a metric whose SQL fails is recorded with its
    error. ``on_done`` is called after each metric, in ``specs`` order."""
    from cclq.errors import QueryError
    from cclq.query.cache import is_cached
    from cclq.query.metrics import MetricRun, run_metric
    from cclq.query.params import params_for

    params = params or {}
    pending = [s for s in specs if not is_cached(con, s, params_for(s, params))]
    runs: dict[str, MetricRun] = {}
    with _LazyBatch(con, parse_cluster(dask), pending, params, partitions, on_partition) as computed:
        for spec in specs:
            try:
                result = computed.result(spec) if spec in pending else None
                if isinstance(result, str):
                    raise QueryError(result)
                # cached: read back (computed here if it went missing meanwhile); else stored now
                compute = None if result is None else (lambda _s, _p, table=result: table)
                run = MetricRun(spec, run_metric(con, spec, params_for(spec, params), compute))
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

    def __init__(
        self,
        con: Session,
        cluster: ClusterSpec,
        specs: list[MetricSpec],
        params: dict[str, str],
        partitions: int | None,
        on_partition: PartitionProgress | None,
    ) -> None:
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
                from cclq.query.metrics import run_metrics

                self.results = {
                    n: r.table if r.table is not None else str(r.error)
                    for n, r in run_metrics(self.con, self.specs, self.params).items()
                }
            else:
                client = self._stack.enter_context(dask_client(self.cluster))
                self.results = _compute(
                    client, self.con, self.specs, self.params, events, self.partitions, self.on_partition
                )
        return self.results[spec.name]


def _shown(traces: list[str]) -> str:
    return ", ".join(traces[:3]) + (f" and {len(traces) - 3} more" if len(traces) > 3 else "")


def _events_by_trace(con: Session) -> dict[str, int]:
    """Every selected trace (also one without data files) and its rows."""
    return dict(
        con.execute(
            "SELECT t.trace, coalesce(sum(p.rows), 0)::BIGINT FROM (SELECT trace FROM files UNION SELECT trace FROM parts) "  # noqa: E501
            "AS t LEFT JOIN parts AS p USING (trace) GROUP BY t.trace"
        ).fetchall()
    )


def _compute(
    client: Client,
    con: Session,
    specs: list[MetricSpec],
    params: dict[str, str],
    events: dict[str, int],
    partitions: int | None,
    on_partition: PartitionProgress | None,
) -> dict[str, pa.Table | str]:
    """Every metric of ``specs`` over the traces of ``events``, by partitions: each
    metric's parts combined, or the first error a partition gave for it."""
    from distributed import KilledWorker, as_completed

    from cclq.query.metrics import combine_results
    from cclq.query.params import params_for

    snapshot = con.snapshot  # held by this process until the session is closed
    if is_remote(snapshot.warehouse):
        # on object storage: each worker reads the snapshot through a copy of its own (its
        # CCLQ_REMOTE_CACHE), fetching its traces' files; the grace period of the garbage
        # collection keeps the snapshot's objects while the tasks run
        root = str(snapshot.warehouse)
        check_workers(client, root, None)
    else:
        root = str(snapshot.warehouse.root.resolve())
        check_workers(client, snapshot.warehouse.root.resolve(), snapshot.catalog_file("files"))
    groups = plan_partitions(
        events,
        partitions or PARTITIONS_PER_THREAD * worker_threads(client),
        min_events=0 if partitions else MIN_EVENTS_PER_PARTITION,
    )
    # only the parameters some metric of the batch declares (as run_metrics passes them)
    declared = {k: v for s in specs for k, v in params_for(s, params).items()}
    label = specs[0].name if len(specs) == 1 else f"{len(specs)}-metrics"
    futures = {
        client.submit(
            metrics_task,
            root,
            snapshot.id,
            group,
            specs,
            declared,
            code_content_digest(),
            key=f"cclq-metrics-{label}-{n}-{uuid.uuid4().hex[:8]}",
            pure=False,
        ): n
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
                raise CclqError(
                    f"Dask workers died while computing metrics over {_shown(groups[n])} "
                    "(out of memory?); the workers' logs say why"
                ) from e
            except Exception as e:
                raise CclqError(f"computing metrics over {_shown(groups[n])}: {task_failure(e)}") from e
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
