"""Running metrics: one query per metric over every trace a ``Session`` sees.

The SELECT of a metric (``cclq.query.registry``) reads the views of ``sql/views`` plus
two relations the runner defines: ``metric_scope`` (one row per selected (trace, rank))
and ``metric_params`` (``cclq.query.params``). The runner puts the columns in the
documented order (trace, rank, step, value, unit, reason, details) and the rows in one
total order, and goes through the result cache (``cclq.query.cache``). Several metrics
run in one session share the views they build (``run_metrics``).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from functools import cache, lru_cache, partial
from typing import TYPE_CHECKING, Any, TypeVar

import pyarrow as pa

from cclq.errors import QueryError
from cclq.query.applicability import Plan, plan, trace_facts
from cclq.query.cache import (
    columns_path,
    inputs_key,
    is_cached,
    read_cached,
    result_path,
    store_result,
)
from cclq.query.critical_path import PATH_TABLE
from cclq.query.critical_path import prepared as critical_path_prepared
from cclq.query.engine import COMPILE_ERRORS, arrow_table
from cclq.query.lanes import Lanes, Task, lanes_for
from cclq.query.params import params_for, params_relation
from cclq.query.registry import MetricSpec
from cclq.query.settings import open_database
from cclq.query.sqlfiles import (
    BatchView,
    batch_views,
    calls_read,
    literal_arguments,
    mentions,
    names_reached,
    strip_comments,
    view_modules,
)
from cclq.query.view_catalog import CATALOG
from cclq.schema import as_type
from cclq.sqltext import quote_identifier, quote_literal

T = TypeVar("T")

if TYPE_CHECKING:
    from pathlib import Path

    from cclq.query.session import Session


def run_cached_query(session: Session, label: str, sql: str) -> pa.Table:
    """A query over the views, through the same result cache as the metrics.

    For the fixed queries that report, diff and board read besides the metrics (op
    statistics, step durations): ``label`` names it in the cache, and its key covers the
    SQL, the views and every input, as a metric's does.
    """
    import duckdb

    path = _query_path(session, label, sql)
    if path is not None:
        cached = read_cached(path)
        if cached is not None:
            return cached
    try:
        table = session.arrow(sql)
    except duckdb.Error as e:
        raise session.query_error(e, label) from e
    if path is not None:
        store_result(table, path)
    return table


def _query_path(session: Session, label: str, sql: str) -> Path | None:
    """Where ``run_cached_query`` keeps the result of this query (None: no cache)."""
    if session.cache_dir is None:
        return None
    key = inputs_key(session.snapshot.summary, session.traces, ("query", label, sql))
    return session.cache_dir / f"query.{label}.{key}.parquet"


def uncached_queries(session: Session, queries: Sequence[tuple[str, str]]) -> list[str]:
    """The SQL of those (label, sql) queries of ``run_cached_query`` whose result is not
    cached: what a batch will compute (``shared_views``)."""
    out = []
    for label, sql in queries:
        path = _query_path(session, label, sql)
        if path is None or not path.exists():
            out.append(sql)
    return out


_SCOPE = "CREATE OR REPLACE TEMP VIEW metric_scope AS SELECT DISTINCT trace, rank FROM parts"


def run_metric(
    session: Session,
    spec: MetricSpec,
    params: dict[str, str] | None = None,
    compute: Callable[[MetricSpec, dict[str, str]], pa.Table] | None = None,
) -> pa.Table:
    """Runs one metric over every trace the session sees, in one query.

    A session with a cache stores a result under a key of everything it depends on
    (``cache_key``) and a repeat run with the same inputs reads it back.

    ``compute`` computes a result that is not cached somewhere else than in the session
    (``cclq.query.dask``: by trace partitions on a Dask cluster); it must give what the
    query in the session would. Parameters are checked and the cache is keyed here as always.
    """
    params = params or {}
    session.temp_view("metric_scope", _SCOPE)
    if spec.params or mentions(spec.sql, "metric_params"):  # only for the metrics that read it (1.4 ms each)
        session.temp_view("metric_params", params_relation(spec, params))
    cached = result_path(session, spec, params)
    if cached is not None:
        table = read_cached(cached)
        if table is not None:
            return table
    if compute is not None:
        table = compute(spec, params)
    else:
        table = _run_query(session, spec)
    if cached is not None:
        store_result(table, cached)
    return table


@dataclass
class MetricRun:
    """One metric's outcome in a batch: its result table, or why there is none."""

    spec: MetricSpec
    table: pa.Table | None  # None: it failed, or it applies to no trace (``not_applicable``)
    error: str | None = None  # the metric failed as a whole (its SQL did not run)
    # trace -> why the metric cannot apply, decided from the catalog (``plan_first``)
    not_applicable: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0  # time spent on it (0 when decided from the catalog)
    # the columns its result has, for one that applies to no trace (``empty_result``): the
    # catalog's rows get them, so a metric has one schema whether it ran or not
    empty: pa.Table | None = None


def run_metrics(
    session: Session,
    specs: list[MetricSpec],
    params: dict[str, str] | None = None,
    on_done: Callable[[MetricRun], None] | None = None,
    plan_first: bool = False,
    last: bool = False,
    empty_columns: bool = False,
) -> dict[str, MetricRun]:
    """Runs several metrics over every trace the session sees, in that one session.

    What report, diff and board share: each metric is one query over all the traces (or a
    cached result, see ``run_metric``), and a metric whose SQL fails is recorded with the
    error instead of ending the batch, so one broken metric cannot hide the others.
    ``params`` may hold parameters for many metrics; each gets the ones it declares.
    ``on_done`` is called after each metric (progress bars).

    ``plan_first``: decide from the catalog which metrics cannot apply to which traces
    (``cclq.query.applicability``); a metric that applies to none of them is not run at
    all (its run has no table, and ``not_applicable`` says why for each trace), one that
    applies to some runs over all of them as usual, with ``not_applicable`` for the rest.

    ``empty_columns``: with ``plan_first``, also bind the columns of each metric that
    applies nowhere (``MetricRun.empty``, the columns ``catalog_rows`` gives its rows), for
    a caller that shows such a metric's rows (``cclq metric``). A report, a diff or a board
    shows none and leaves it off: 24 of the 83 metrics of a report on dlrm_param_8xV100,
    ~10 ms of a lane each.

    ``last``: inside a caller's ``shared_views`` block, no query runs on it after these
    (and the ones already started), so each shared table is dropped once nothing left
    reads it (``Lanes.seal``); always so in a block of its own.
    """
    params = params or {}
    planned, pending = _batch(session, specs, params, plan_first)
    runs: dict[str, MetricRun] = {}

    def one(lane: Session, *, spec: MetricSpec) -> MetricRun:
        skipped = planned.skipped.get(spec.name, {}) if planned is not None else {}
        if planned is not None and planned.applies_nowhere(spec.name):
            empty = empty_result(lane, spec, params_for(spec, params)) if empty_columns else None
            return MetricRun(spec, None, None, skipped, empty=empty)
        start = time.perf_counter()
        try:
            run = MetricRun(spec, run_metric(lane, spec, params_for(spec, params)), None, skipped)
        except QueryError as e:
            run = MetricRun(spec, None, e.message, skipped)
        run.seconds = time.perf_counter() - start
        return run

    own_block = session.lanes is None
    with shared_views(session, [s.sql for s in pending]):
        lanes = session.lanes
        assert isinstance(lanes, Lanes)
        # the one metric with a long Python step (and what it waits for) first, so the
        # others fill the other lanes meanwhile
        done = lanes.start(
            [
                Task(
                    f"metric {spec.name}",
                    partial(one, spec=spec),
                    _shared_reads(lanes, [spec.sql]),
                    urgency=0 if PATH_TABLE in spec.sql else 10,
                )
                for spec in specs
            ]
        )
        if last or own_block:
            lanes.seal()
        for spec in specs:
            run = done[f"metric {spec.name}"].result()
            runs[spec.name] = run
            if on_done is not None:
                on_done(run)
    return runs


def start_on_lanes(session: Session, label: str, queries: Sequence[str], run: Callable[[Session], T]) -> Future[T]:
    """Inside a ``shared_views`` block: ``run(connection)``, which runs ``queries``,
    started on the batch's lanes after the shared views they read, alongside the metrics
    (the report's figure queries); its future."""
    lanes = session.lanes
    assert isinstance(lanes, Lanes), "start_on_lanes runs inside a shared_views block"
    return lanes.start([Task(f"query {label}", run, _shared_reads(lanes, queries), urgency=10)])[f"query {label}"]


def _shared_reads(lanes: Lanes, queries: Sequence[str]) -> frozenset[str]:
    """The batch's shared views that these queries read: the tasks they come after (and
    the source of one that is a view over the source's table: its rows stay till then)."""
    reads = lanes.shared & frozenset().union(*(names_reached(q) for q in queries))
    views = _batch_views()
    sources = {views[n].source for n in reads if views[n].as_view and views[n].source in lanes.shared}
    return reads | frozenset(s for s in sources if s is not None)


def _batch(
    session: Session, specs: list[MetricSpec], params: dict[str, str], plan_first: bool
) -> tuple[Plan | None, list[MetricSpec]]:
    """The plan of a batch (``plan_first``), and the metrics whose SQL it will run: those
    that apply somewhere and are not cached."""
    planned = plan(specs, trace_facts(session)) if plan_first else None
    to_run = [s for s in specs if planned is None or not planned.applies_nowhere(s.name)]
    return planned, [s for s in to_run if not is_cached(session, s, params_for(s, params))]


def batch_queries(
    session: Session, specs: list[MetricSpec], params: dict[str, str] | None = None, plan_first: bool = False
) -> list[str]:
    """The SQL that ``run_metrics`` with these arguments will run (for ``shared_views``)."""
    return [s.sql for s in _batch(session, specs, params or {}, plan_first)[1]]


@contextmanager
def shared_views(session: Session, queries: list[str]) -> Iterator[frozenset[str]]:
    """For the block, the views and macros with a ``-- batch: shared`` line that two or
    more of ``queries`` read are computed once into tables (see ``_share_views``); yields
    their names. They are
    computed on ``session.lanes`` (``cclq.query.lanes``) while the block goes on, each
    after the shared ones it reads: a task on the lanes that reads one comes after it
    (``run_metrics``), and a query on the session itself waits for them all
    (``Session.execute``).

    ``run_metrics`` opens one for its metrics; a caller that runs more queries over the
    same views after them (report and board: the figure data) opens one around all of
    it, with every query, and the nested one shares nothing more. Afterwards the names
    are the compiled views and macros again."""
    if isinstance(session.lanes, Lanes):
        yield session.lanes.shared
        return
    _attach_shared(session)
    try:
        lanes = Lanes(session, lanes_for(len(queries)))
    except BaseException:
        _detach_shared(session)
        raise
    try:
        lanes.shared = _share_views(lanes, queries)
        session.lanes = lanes
        yield lanes.shared
        lanes.wait()
    except BaseException:
        lanes.interrupt()  # a failure or Ctrl-C: stop the queries still running
        raise
    finally:
        session.lanes = None
        lanes.close()
        try:
            _unshare(session, sorted(lanes.shared))
        finally:
            _detach_shared(session)


# Views that several metrics read: ``collectives`` matches every communication kernel
# with the CPU ops around it (most of the time of collective_skew, collective_busbw and
# straggler_rank), and every metric over GPU kernels, steps or XLA ops reads the views
# below it. On a small trace most of a metric's time is DuckDB planning the deep stack
# of views under it (collective_vol_total_gb: 0.2 s of 0.37 s on dlrm_param_8xV100),
# planned again by each metric. When two or more metrics of a batch will read one of
# these views, it is computed once into a table ``_cclq_shared.main._cclq_shared_<view>``
# that every connection of the session sees, and each connection gets a temporary view
# of the view's name over it (a "shadow", ``cclq.query.lanes``), which DuckDB resolves
# before the compiled view, so each metric reads (and plans over) the stored rows: the
# same rows, so the result and its cache key do not change. Each holds a row
# per kernel, op, step, collective or HTA row (``hta_events``: the rows HTA keeps of a
# trace, not every event as ``slices`` has), so they stay small next to the events they
# come from.
#
# The versioned table macros (`-- batch:` on a macro of one argument, a rules version, as in
# ``collectives_with(2)``) are shared the same way: the versioned metrics read these, not
# the plain (version-1) views, so sharing only the views left the eleven collective
# metrics on dlrm_param_8xV100 each redoing the version-2 kernel-to-CPU-op matching
# (~3.5 s of a 5.5 s report). A table cannot stand in for a macro, so each version the
# SQL files call (``_sql_versions``) is computed into ``_cclq_shared_<macro>_<version>``,
# and a temporary macro of the macro's name reads that table through ``query_table``,
# which binds a name computed from the argument: nothing left to plan below it, and no
# call back into the macro it shadows (which is reached as ``cclq.main.<macro>``, in the
# compiled view catalog, while the tables are computed, before the shadow exists; a
# temporary macro calling ``<macro>`` by name called itself, until DuckDB's
# expression-depth limit). DuckDB resolves the temporary schema first, for the calls
# inside the compiled macros and views too (``cclq.query.view_catalog``).
#
# Which views and macros these are is said in the SQL, by a ``-- batch: shared`` line
# right above each one's CREATE (sql/README.md), read by ``cclq.query.sqlfiles.batch_views``
# with what its lines say: ``always``, shared even when one query reads it (a query that
# reads it several times over planned its whole stack once per reference); ``from
# <source> via <stand_in>``, a view whose rows a shared source already holds, computed
# from the source's table when the batch shares that source (a filter of a table, so
# shared even for one reader). Each line's note says why it pays for that view. The order
# in which the lanes compute them comes from what each reads (``names_reached``): a
# macro before the views over it (``collectives`` is ``collectives_with(2)``, then read
# from the shared table), each once those it reads are done.
_SHARED_PREFIX = "_cclq_shared_"
# The shared tables live in a database of their own (``_attach_shared``): a file in the
# session's spill folder when the batch's traces hold FILE_FROM_EVENTS events or more, or a
# memory limit was given. DuckDB compresses what a table writes to a file (constant trace
# and file ids, dictionary names, bit-packed integers), which it does not for an in-memory
# table, and a block of it is dropped without a write when memory runs short, where an
# in-memory table's rows are spilled as they are. On the 1 GB rank (issue 42, 3.69 M
# events) the report peaked at 1.66 GB instead of 2.83 GB, in 36.2 s instead of 34.3 s
# (59-60 CPU s both, load 1.3-1.5; docs/benchmarks.md, Metrics at size). A small batch
# pays the file's fixed cost (the file, its WAL, a checkpoint) for little memory: 83
# metrics over dlrm_param_8xV100 (0.1 M events) took 2.9 s instead of 2.67 s, the board over
# ../shared/traces (1.12 M events) 2.69-2.99 s at 534-579 MB instead of 2.49-2.74 s at
# 702-728 MB, while a report on two 250 MB ranks (1.85 M events) took as long either way
# (6.43-6.79 s at 0.91-0.96 GB, in memory 6.40-6.59 s at 1.16 GB; load ~1); so below
# FILE_FROM_EVENTS (~0.6 GB of tables in memory) they stay in memory. Before DuckDB 2.0 the
# lanes' tables waited on each other in the one file (33 -> 44 CPU s). A spill folder that
# cannot take the file leaves them in memory.
FILE_FROM_EVENTS = 1_500_000
SHARED_DB = "_cclq_shared"
_SHARED_FILE = "shared.duckdb"


def _attach_shared(session: Session) -> None:
    """Attaches the batch's database of shared tables (see above), a new one, removed by
    ``_detach_shared``."""
    import duckdb

    path = _shared_file(session)
    if path is not None and _in_a_file(session):
        try:
            for stale in (path, path.with_name(path.name + ".wal")):  # a batch before this one that failed
                stale.unlink(missing_ok=True)
            session.execute(f"ATTACH {quote_literal(str(path))} AS {SHARED_DB}")
            return
        except (OSError, duckdb.Error):  # a spill folder that cannot take it: in memory, as a small batch
            pass
    session.execute(f"ATTACH ':memory:' AS {SHARED_DB}")


def _shared_file(session: Session) -> Path | None:
    """Where the shared tables' file is when there is one: None for a session without a
    spill folder."""
    return None if session.spill_dir is None else session.spill_dir / _SHARED_FILE


def _in_a_file(session: Session) -> bool:
    """Whether the batch writes its shared tables to the file (see above): a memory limit
    was given, or its traces hold FILE_FROM_EVENTS events or more."""
    if session.settings.memory_limit is not None:
        return True
    (events,) = session.execute("SELECT coalesce(sum(events_written), 0) FROM files").fetchone() or (0,)
    return bool(events >= FILE_FROM_EVENTS)


def _detach_shared(session: Session) -> None:
    """Detaches the shared tables' database and removes its file, if any."""
    session.execute(f"DETACH DATABASE IF EXISTS {SHARED_DB}")
    if (path := _shared_file(session)) is not None:
        for made in (path, path.with_name(path.name + ".wal")):
            with suppress(OSError):  # not made (in memory, or ``_attach_shared`` fell back to it)
                made.unlink(missing_ok=True)


@lru_cache(maxsize=1)
def _batch_views() -> dict[str, BatchView]:
    """The views and macros a batch may share, by name, in dependency order."""
    return {v.name: v for v in batch_views()}


def shared_in_order(names: frozenset[str] | set[str]) -> list[str]:
    """``names`` (shared views of a batch) in the order a batch computes them."""
    return [n for n in _batch_views() if n in names]


@dataclass(frozen=True)
class VersionInput:
    """Where a shared macro's rules version enters it: only through these ``columns`` of
    the rows of ``macro`` (another shared macro, computed before it) that meet ``rows``.
    For a trace whose such rows are the same in two versions, the macro's rows are the
    same too, so one version's rows are copied and only the traces that differ are
    computed again (``_share_macro``). tests/query/test_run_metrics.py checks the claim
    against the SQL and the rows against the macro's own."""

    macro: str
    rows: str
    columns: str


# collectives_with(v) reads v only as gpu_ops_classified_with(v) in
# _collective_kernels_with (sql/views/collectives.sql): the comm kernels and their type.
# Versions 1 and 2 differ only on DeepEP's kernels, so on most traces the kernel-to-op
# matching of version 1 is version 2's (half of collectives' time on a 500-workload board).
VERSION_INPUTS = {
    "collectives_with": VersionInput(
        "gpu_ops_classified_with",
        "kind = 'kernel' AND kernel_class = 'comm'",
        "trace, rank, file_id, event_idx, coll_type",
    ),
}


@cache
def _sql_versions(texts: tuple[str, ...]) -> tuple[int, ...]:
    """The rules versions the SQL calls a versioned macro with: every integer literal
    that is the first argument of a ``*_with(`` call, in the view modules and ``texts``.
    A version comes from such a literal (a macro passes its own argument on), so the
    shadowing macro has a table for every version a query can ask for."""
    calls = re.compile(r"\b\w+_with\(\s*(\d+)\s*[,)]")
    sources = [m.sql for m in view_modules()] + list(texts)
    return tuple(sorted({int(v) for text in sources for v in calls.findall(strip_comments(text))}))


def _users(queries: list[str], name: str) -> int:
    """How many of these queries read ``name`` (directly or through other views)."""
    return sum(1 for sql in queries if name in names_reached(sql))


def _share_views(lanes: Lanes, queries: list[str]) -> frozenset[str]:
    """Starts materializing the views and macros with a ``-- batch: shared`` line that two
    or more ``queries`` read (one, for an ``always`` one, or a derived one whose source is
    shared), on the lanes, each after the shared ones it reads; their names. One that fails
    is not shared: a query then reads the compiled one (slower, the same rows), and a
    metric reports its own error."""
    names: list[str] = []
    stand_ins: dict[str, str] = {}  # a derived view whose source is shared -> what computes it
    views = _batch_views()
    for name, view in views.items():
        if view.source in names and view.stand_in is not None:
            stand_ins[name] = view.stand_in
        if _users(queries, name) >= (1 if name in stand_ins or view.always else 2):
            names.append(name)
    calls: dict[str, Any] = {}

    def read_calls(lane: Session) -> None:
        """The versions the SQL calls the macros with: some 60 ms of reading SQL text, done
        on a lane while the others start on the views."""
        calls["versions"] = _sql_versions(tuple(queries))
        calls["called"] = literal_arguments(tuple(queries))
        calls["read"] = {n for n in names if views[n].macro and calls_read(tuple(queries), n)}

    def share(lane: Session, name: str) -> None:
        import duckdb

        try:
            if views[name].macro:
                versions, called = calls["versions"], calls["called"]
                wanted = tuple(v for v in versions if (0, v) in called.get(name, ()))
                # the other versions' views only where a call may ask for one unseen (each
                # view binds the macro's stack: 0.2 CPU s of a board over the shared traces)
                offered = wanted if wanted and name in calls["read"] else versions
                shadow = _share_macro(lane, name, offered, wanted)
            elif name in stand_ins and views[name].as_view:  # read from the source's table as it is
                shadow = f"CREATE TEMP VIEW {name} AS SELECT * FROM {CATALOG}.main.{stand_ins[name]}"
            else:
                source = stand_ins.get(name, name)
                kept = _kept_columns(views[name].without)
                lane.execute(f"CREATE TABLE {_stored(name)} AS SELECT {kept} FROM {CATALOG}.main.{source}")
                shadow = f"CREATE TEMP VIEW {name} AS SELECT * FROM {_stored(name)}"
        except duckdb.Error:
            return
        lanes.add_shadows([shadow], name)  # before the task is done: what comes after it sees the table

    def after(name: str) -> frozenset[str]:  # the shared views it reads, and the calls for a macro
        first = {_READ_CALLS} if views[name].macro else set()
        reads = names_reached(f"SELECT * FROM {stand_ins.get(name, name)}")
        return frozenset(names) & (reads - {name}) | first

    lanes.shared = frozenset(names)  # before the tasks: each holds what it reads (Lanes.seal)
    lanes.release = _release
    lanes.start(
        [Task(_READ_CALLS, read_calls)] + [Task(name, partial(share, name=name), after(name)) for name in names]
    )
    return frozenset(names)


_READ_CALLS = "read the macros' versions"  # a task of _share_views (not a view name)


def _kept_columns(without: tuple[str, ...]) -> str:
    """The select list of a shared view's table: every column but those its ``-- batch:``
    line says no query of a batch reads (``BatchView.without``)."""
    if not without:
        return "*"
    return f"* EXCLUDE ({', '.join(quote_identifier(c) for c in without)})"


def _release(lane: Session, name: str) -> None:
    """Drops a shared view's rows once the batch no longer reads them (``Lanes.seal``)."""
    if _batch_views()[name].macro:
        _drop_shared(lane, f"{name}_")
    else:
        lane.execute(f"DROP TABLE IF EXISTS {_stored(name)}")


def _stored(name: str) -> str:
    """Where a shared view's rows are kept: a table in the session's own database, which
    every connection of the session reads (``Session.worker``)."""
    return f"{SHARED_DB}.main.{quote_identifier(_SHARED_PREFIX + name)}"


def _share_macro(session: Session, macro: str, versions: tuple[int, ...], wanted: tuple[int, ...]) -> str:
    """Computes ``macro(v)`` for each ``wanted`` version into a table; returns the
    temporary macro that shadows the macro by reading them (see the comment above
    ``_SHARED_PREFIX``). Each other of ``versions`` is a view that calls the compiled
    macro, so a call the reading of the SQL cannot see (``calls_read``: the caller then
    offers every version the SQL names) is still answered, only not shared; a version
    with neither is an error of the query. Each shared macro is a table macro of one
    argument, the rules version (``parse_batch_lines`` refuses another; and
    tests/query/test_run_metrics.py checks the compiled macros)."""
    import duckdb

    computed: list[int] = []
    try:
        # the newest wanted version first: an older one may be mostly a copy of it
        for v in sorted(versions, key=lambda v: (v not in wanted, -v)):
            table = _shared_table(macro, v)
            call = f"{CATALOG}.main.{quote_identifier(macro)}({int(v)})"
            if v not in wanted:
                session.execute(f"CREATE VIEW {table} AS SELECT * FROM {call}")
            elif computed and macro in VERSION_INPUTS:
                _share_version_from(session, macro, v, computed[0], call)
            else:
                session.execute(f"CREATE TABLE {table} AS SELECT * FROM {call}")
            if v in wanted:
                computed.append(v)
    except duckdb.Error:
        _drop_shared(session, f"{macro}_")
        raise
    return (
        f"CREATE TEMP MACRO {quote_identifier(macro)}(rules_version) AS TABLE SELECT * FROM "
        f"query_table({quote_literal(SHARED_DB + '.main.' + _SHARED_PREFIX + macro + '_')} || rules_version)"
    )


def _shared_name(macro: str, version: int) -> str:
    """The name of the table that holds ``macro(version)`` in a batch."""
    return f"{_SHARED_PREFIX}{macro}_{int(version)}"


def _shared_table(macro: str, version: int) -> str:
    return _stored(f"{macro}_{int(version)}")


def _share_version_from(session: Session, macro: str, version: int, base: int, call: str) -> None:
    """``macro(version)`` into its shared table as ``macro(base)``'s rows (already shared)
    for the traces whose VERSION_INPUTS rows are the same in both versions, and
    ``call`` for the others (none, on most warehouses: then nothing is computed)."""
    given = VERSION_INPUTS[macro]
    ours, theirs = _shared_table(given.macro, version), _shared_table(given.macro, base)
    names = [_shared_name(given.macro, v) for v in (version, base)]
    tables = {
        name
        for (name,) in session.execute(
            "SELECT table_name FROM duckdb_tables() WHERE database_name = ? AND table_name IN (?, ?)",
            [SHARED_DB, *names],
        ).fetchall()
    }
    target = _shared_table(macro, version)
    if tables != set(names):  # the input is not shared: nothing to compare with
        session.execute(f"CREATE TABLE {target} AS SELECT * FROM {call}")
        return
    side = f"SELECT {given.columns} FROM {{}} WHERE {given.rows}"
    a, b = side.format(ours), side.format(theirs)
    differ = [
        str(t)
        for (t,) in session.execute(
            f"SELECT DISTINCT trace FROM (({a} EXCEPT ALL {b}) UNION ALL ({b} EXCEPT ALL {a})) ORDER BY trace"
        ).fetchall()
    ]
    copied = f"SELECT * FROM {_shared_table(macro, base)}"
    if not differ:
        session.execute(f"CREATE TABLE {target} AS {copied}")
        return
    listed = ", ".join(quote_literal(t) for t in differ)
    session.execute(
        f"CREATE TABLE {target} AS {copied} WHERE trace NOT IN ({listed}) "
        f"UNION ALL SELECT * FROM {call} WHERE trace IN ({listed})"
    )


def _unshare(session: Session, shared: list[str]) -> None:
    """Drops what ``_share_views`` made: the shadowing views and macros first, then the
    tables."""
    for name in shared:
        kind = "MACRO TABLE" if _batch_views()[name].macro else "VIEW"
        session.execute(f"DROP {kind} IF EXISTS temp.main.{quote_identifier(name)}")
    _drop_shared(session)


def _drop_shared(session: Session, prefix: str = "") -> None:
    """Drops the shared tables and the views of the shared macros' other versions (those
    whose shared name starts with ``prefix``)."""
    start = _SHARED_PREFIX + prefix
    made = session.execute(
        "SELECT 'VIEW', view_name FROM duckdb_views() WHERE database_name = $db AND starts_with(view_name, $start) "
        "UNION ALL SELECT 'TABLE', table_name FROM duckdb_tables() "
        "WHERE database_name = $db AND starts_with(table_name, $start)",
        {"db": SHARED_DB, "start": start},
    ).fetchall()
    for kind, name in made:
        session.execute(f"DROP {kind} IF EXISTS {SHARED_DB}.main.{quote_identifier(name)}")


# The metric's rows, computed once: DESCRIBE of the query and then the query itself
# planned its (deep) stack of views twice, a third of a small report's time.
_ROWS = "_cclq_metric_rows"


def _run_query(session: Session, spec: MetricSpec) -> pa.Table:
    import duckdb

    try:
        with critical_path_prepared(session, spec.sql):  # the Python step of hta_critical_path_breakdown
            session.execute(f"CREATE OR REPLACE TEMP TABLE {_ROWS} AS {spec.sql}")
    except duckdb.Error as e:
        if type(e).__name__ in COMPILE_ERRORS:
            raise QueryError(f"{spec.label} ({spec.path.name}) does not compile: {str(e).splitlines()[0]}") from e
        raise session.query_error(e, spec.label) from e
    try:
        try:
            return _result_of_rows(session, spec)
        except duckdb.Error as e:
            raise session.query_error(e, spec.label) from e
    finally:
        session.execute(f"DROP TABLE IF EXISTS temp.{_ROWS}")


def _result_of_rows(session: Session, spec: MetricSpec) -> pa.Table:
    """The metric's result from its query's rows in ``_ROWS`` (``_run_query``; none for
    ``empty_result``): the common columns first, typed, sorted by the output columns (not
    m's), exactly as combine_results sorts them."""
    names = list(session.con.table(_ROWS).columns)  # from the catalog: no query (DESCRIBE was 0.3 ms)
    select, out_names = _result_columns(spec, names)
    return session.arrow(
        f"SELECT * FROM (SELECT {', '.join(select)} FROM {_ROWS} AS m) ORDER BY {_order_by(out_names)}"
    )


def _result_columns(spec: MetricSpec, names: list[str]) -> tuple[list[str], list[str]]:
    """The select list that turns a metric query's columns ``names`` into its result (the
    common columns first, typed), and the result's column names."""
    if "trace" not in names or "value" not in names:
        raise QueryError(f"{spec.label}: the query must return `trace` and `value` columns")
    fixed = {"trace", "rank", "step", "value", "reason"}
    extras = [f'm."{n}"' for n in names if n not in fixed]
    select = [
        "m.trace",
        "CAST(m.rank AS INTEGER) AS rank" if "rank" in names else "CAST(NULL AS INTEGER) AS rank",
        "CAST(m.step AS BIGINT) AS step" if "step" in names else "CAST(NULL AS BIGINT) AS step",
        "CAST(m.value AS DOUBLE) AS value",
        f"{quote_literal(spec.unit)} AS unit",
        "CAST(m.reason AS VARCHAR) AS reason" if "reason" in names else "CAST(NULL AS VARCHAR) AS reason",
    ] + extras
    return select, ["trace", "rank", "step", "value", "unit", "reason"] + [n for n in names if n not in fixed]


def empty_result(session: Session, spec: MetricSpec, params: dict[str, str]) -> pa.Table | None:
    """The metric's result with no rows: its columns and types, bound by DuckDB without
    running the query (``LIMIT 0``). None where it cannot be bound that way (a metric with
    a Python step, or a query that does not compile: its run says so). A session with a
    cache keeps it beside where the result would be (``columns_path``)."""
    import duckdb

    if PATH_TABLE in spec.sql:
        return None
    cached = result_path(session, spec, params)
    if cached is not None:
        cached = columns_path(cached)
        table = read_cached(cached)
        if table is not None:
            return table
    session.temp_view("metric_scope", _SCOPE)
    if spec.params or mentions(spec.sql, "metric_params"):
        session.temp_view("metric_params", params_relation(spec, params))
    try:
        # bound once, into a table without rows (binding the deep stack of views twice,
        # for the names and then for the typed columns, was ~20 ms of each such metric:
        # a quarter of a small trace's report)
        session.execute(f"CREATE OR REPLACE TEMP TABLE {_ROWS} AS SELECT * FROM ({spec.sql}) LIMIT 0")
        try:
            table = _result_of_rows(session, spec)
        finally:
            session.execute(f"DROP TABLE IF EXISTS temp.{_ROWS}")
    except (duckdb.Error, QueryError):
        return None
    if cached is not None:
        store_result(table, cached)
    return table


def catalog_rows(run: MetricRun) -> pa.Table:
    """The result of a metric the catalog rules out for every trace (it ran no SQL): a row
    per trace with no value and the catalog's reason (the words its SQL would give), in
    the columns and types the metric has when it runs (``run.empty``), so that a metric
    has one schema alone, in a batch and under Dask."""
    n = len(run.not_applicable)
    given = {
        "trace": pa.array(list(run.not_applicable), pa.string()),
        "unit": pa.array([run.spec.unit] * n, pa.string()),
        "reason": pa.array(list(run.not_applicable.values()), pa.string()),
    }
    schema = (
        run.empty.schema
        if run.empty is not None
        else pa.schema(
            [
                ("trace", pa.string()),
                ("rank", pa.int32()),
                ("step", pa.int64()),
                ("value", pa.float64()),
                ("unit", pa.string()),
                ("reason", pa.string()),
            ]
        )
    )
    return pa.table(
        {f.name: as_type(given[f.name], f.type) if f.name in given else pa.nulls(n, f.type) for f in schema},
        schema=schema,
    )


def _order_by(columns: list[str]) -> str:
    """The ORDER BY list of a result with these columns (``ROW_ORDER``)."""
    first, last = ["trace", "rank", "step"], ["value", "reason"]
    middle = [c for c in columns if c not in first + last + ["unit"]]  # unit is one constant
    return ", ".join('"' + c.replace('"', '""') + '"' for c in first + middle + last if c in columns)


def combine_results(parts: list[pa.Table]) -> pa.Table:
    """One metric's results over disjoint sets of traces, as the one result a query over
    all of them gives: concatenated, then sorted by DuckDB with the ORDER BY of
    ``_run_query`` (so that strings, NULLs and NaNs sort exactly as there). The rows
    keep their Arrow values; only their order changes."""

    # ``take`` copies into fresh buffers: tables unpickled from another process may have
    # unaligned ones, which DuckDB's Arrow scan (Acero) warns about
    table = pa.concat_tables(parts)
    table = table.take(pa.array(range(table.num_rows), pa.int64()))
    index = "__cclq_row"
    con = open_database()
    try:
        con.register("result_parts", table.append_column(index, pa.array(range(table.num_rows), pa.int64())))
        order = arrow_table(con.sql(f"SELECT {index} FROM result_parts ORDER BY {_order_by(table.column_names)}"))
    finally:
        con.close()
    return table.take(order.column(0)).combine_chunks()


def summarize(spec: MetricSpec, table: pa.Table) -> tuple[float | None, str | None]:
    """One number for one trace (CCL-Bench's interface), and the reason if there is none."""
    return summarize_rows(spec, table.to_pylist())


def summarize_rows(spec: MetricSpec, rows: list[dict[str, Any]]) -> tuple[float | None, str | None]:
    """``summarize`` over one trace's rows as dicts (``value`` and ``reason`` keys)."""
    values = [r["value"] for r in rows if r["value"] is not None]
    if not values:
        reasons = sorted({r["reason"] for r in rows if r["reason"]})
        return None, "; ".join(reasons) or "no value"
    if spec.summary == "sum":
        return float(sum(values)), None
    if spec.summary == "max":
        return float(max(values)), None
    if spec.summary == "min":
        return float(min(values)), None
    if spec.summary == "value":
        return float(values[0]), None
    if spec.summary == "ratio" and spec.summary_columns is not None:
        num, den = spec.summary_columns
        given = [(r.get(num), r.get(den)) for r in rows if r["value"] is not None]
        pairs = [(a, b) for a, b in given if a is not None and b is not None]
        total = sum(b for _, b in pairs)
        if not pairs or total == 0:
            return None, f"no rows with {num} and a non-zero {den}"
        return float(sum(a for a, _ in pairs) / total), None
    return float(sum(values) / len(values)), None
