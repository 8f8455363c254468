"""The warehouse side of one ``cclq.TraceAnalysis``: a query session on its trace, open as
long as the object lives, with HTA's rows computed once.

HTA loads a trace into memory once and answers every analysis from it; the same here:
the session pins the views every analysis starts from (``hta_events``, the rows HTA
holds, and the views over it that several analyses read) as tables of the session the
first time one is read, under the views' own names (a temporary view over each table
resolves before the compiled view, as ``cclq.query.metrics``' shared views do), so that
the rows are the same and each analysis plans and reads only those. The metrics read
them too, and go through the warehouse's result cache as ``cclq metric`` does, except
with ``include_last_profiler_step`` (a DuckDB variable the views read, which the cache
keys do not see: such a session computes everything and caches nothing).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import InitVar, dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from cclq.api.hta_frames import RankDtypes
from cclq.api.workspace import Workspace
from cclq.query.metrics import run_metric
from cclq.query.registry import resolve
from cclq.query.session import Session
from cclq.query.sqlfiles import batch_views
from cclq.sqltext import quote_identifier

if TYPE_CHECKING:
    from concurrent.futures import Future

    import duckdb

# The views pinned on first use, each before the ones that read it (a view pinned after
# one that reads it would be read from the compiled stack below the older table).
PINNED = (
    "hta_events",
    "hta_gpu_rows",
    "hta_loaded",
    "hta_iterations",
    "hta_rank_dtypes",
    "hta_queue_length",
    "hta_call_stack",
)


def _from_hta_events(name: str) -> str | None:
    """The query that computes view ``name`` from pinned hta_events instead of loading
    the events again: its stand-in, where its ``-- batch: shared from hta_events via
    <stand_in>`` line names one (as a batch computes it, ``cclq.query.metrics``)."""
    for view in batch_views():
        if view.name == name and view.source == "hta_events" and view.stand_in is not None:
            return f"SELECT * FROM {view.stand_in}"
    return None


@dataclass
class HtaData:
    """The session of one TraceAnalysis (see the module docstring)."""

    workspace: Workspace
    trace: str
    include_last_profiler_step: bool = False
    database: InitVar[Future[duckdb.DuckDBPyConnection] | None] = None  # the session's (see Session)
    session: Session = field(init=False)
    pinned: set[str] = field(default_factory=set)
    _dtypes: dict[int, RankDtypes] | None = None
    _origin: float | None = None
    _restricted: bool = False  # within only_rank

    def __post_init__(self, database: Future[duckdb.DuckDBPyConnection] | None) -> None:
        cache = self.workspace.cache and not self.include_last_profiler_step
        self.session = Session(
            self.workspace.warehouse,
            traces=[self.trace],
            settings=self.workspace.settings,
            cache=cache,
            database=database,
        )
        if self.include_last_profiler_step:
            self.session.execute("SET VARIABLE hta_include_last_profiler_step = true")

    def restrict(self, ranks: list[int]) -> None:
        """From now on the session sees those ranks only (HTA's trace_files): the files of
        the others and their events are left out, and results are not cached (the cache's
        keys do not know of this). Call it before any analysis."""
        self.session.cache_dir = None
        listed = ", ".join(str(int(r)) for r in ranks)
        self.session.execute(f"DELETE FROM files WHERE rank NOT IN ({listed})")
        self.session.execute("ALTER VIEW events RENAME TO _cclq_events_of_every_rank")
        self.session.execute(f"CREATE VIEW events AS SELECT * FROM _cclq_events_of_every_rank WHERE rank IN ({listed})")

    def close(self) -> None:
        self.session.close()

    def pin(self, *names: str) -> None:
        """Computes each view of ``names`` (and those of PINNED before it) into a table the
        session reads instead, once."""
        assert not self._restricted, "a view pinned within only_rank would hold one rank's rows"
        wanted = set(names)
        last = max(PINNED.index(n) for n in wanted)
        for name in PINNED[: last + 1]:
            if name in self.pinned or (name not in wanted and name not in ("hta_events",)):
                continue
            table = f"memory.main.{quote_identifier('_cclq_hta_' + name)}"
            source = _from_hta_events(name) if "hta_events" in self.pinned else None
            self.session.execute(f"CREATE OR REPLACE TABLE {table} AS {source or f'SELECT * FROM {name}'}")
            self._point(name)
            self.pinned.add(name)

    @contextmanager
    def only_rank(self, rank: int, *views: str) -> Iterator[None]:
        """Within: the session's ``hta_events`` (and ``hta_call_stack`` where pinned) hold
        ``rank``'s rows alone, for an analysis of one rank over views that materialize
        their input before they filter by rank (the critical path's, the kernel
        sequences'): they read every rank otherwise. Nothing is pinned meanwhile (a
        table would lack the other ranks): ``hta_call_stack``, when not pinned yet, is
        computed for that rank alone. A trace of one rank has nothing to leave out:
        ``views`` are pinned as ``rows`` does, and read whole."""
        if self._dtypes is None:
            self._facts()  # of every rank, not from the rows of one
        if self.ranks == [rank]:
            self.pin("hta_events", *views)
            yield
            return
        self.pin("hta_events")
        restricted = [name for name in ("hta_events", "hta_call_stack") if name in self.pinned]
        for name in restricted:
            self._point(name, f"WHERE rank = {int(rank)}")
        self._restricted = True
        try:
            yield
        finally:
            self._restricted = False
            for name in restricted:
                self._point(name)

    def _point(self, name: str, where: str = "") -> None:
        """The temporary view ``name`` over its pinned table (``where``: its filter)."""
        table = f"memory.main.{quote_identifier('_cclq_hta_' + name)}"
        self.session.execute(f"CREATE OR REPLACE TEMP VIEW {name} AS SELECT * FROM {table} {where}")

    def rows(self, sql: str, *views: str, params: list[Any] | None = None) -> pa.Table:
        """A query over the views (those of ``views`` pinned first), as an Arrow table."""
        if views and not self._restricted:
            self.pin(*views)
        return self.session.arrow(sql, params)

    def metric(self, name: str, **params: Any) -> pa.Table:
        """One metric's rows for this trace (through the result cache, see above)."""
        assert not self._restricted, "a metric of one rank's rows would be cached as the trace's"
        self.pin("hta_events", "hta_gpu_rows")
        given = {k: str(v) for k, v in params.items()}
        return run_metric(self.session, resolve(name), given)

    # -- facts every frame needs ---------------------------------------------------
    def _facts(self) -> None:
        table = self.rows("SELECT * FROM hta_rank_dtypes ORDER BY rank", "hta_rank_dtypes")
        rows = table.to_pylist()
        self._dtypes = {int(r["rank"]): RankDtypes.of(r) for r in rows}
        self._origin = rows[0]["origin_us"] if rows else 0.0

    def dtypes(self, rank: int) -> RankDtypes:
        """The dtypes of ``rank``'s columns in HTA's trace frame."""
        if self._dtypes is None:
            self._facts()
        assert self._dtypes is not None
        return self._dtypes[rank]

    @property
    def ranks(self) -> list[int]:
        """The ranks HTA would load, sorted (its ``Trace.get_ranks()``)."""
        if self._dtypes is None:
            self._facts()
        assert self._dtypes is not None
        return sorted(self._dtypes)

    def require_ranks(self, *ranks: int) -> None:
        """HTA's error for a rank it did not load: a ValueError naming the first such rank."""
        known = set(self.ranks)
        missing = [r for r in ranks if r not in known]
        if missing:
            raise ValueError(f"no trace for rank {missing[0]}")

    @property
    def origin_us(self) -> float:
        """HTA's ``Trace.min_ts``: the smallest ts of the loaded rows of every rank (µs)."""
        if self._origin is None:
            self._facts()
        assert self._origin is not None
        return self._origin
