"""A query session: one catalog snapshot of the warehouse opened in DuckDB.

Everything that reads the warehouse (a metric, a report, a diff, the board, ``cclq sql``,
the daemon, a Dask worker) goes through a ``Session``. It holds what a query depends on,
in one object instead of module-level state: the DuckDB connection, the snapshot it
reads (locked against garbage collection while the session lives), the traces it
selected, the memory limit and the spill folder, and the folder of cached results.

``QuerySettings`` (``cclq.query.settings``) are the user's choices: the entry point
reads them once; a library caller passes its own.
"""

from __future__ import annotations

import copy
import glob
import logging
import shutil
import warnings
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol

import duckdb
import pyarrow as pa

from cclq.errors import QueryError
from cclq.query.engine import COMPILE_ERRORS, CONNECTION_SETTINGS, arrow_table, setup_script
from cclq.query.readonly import check_read_only, lock_down, split_statements
from cclq.query.settings import QuerySettings, open_database
from cclq.query.view_catalog import attach_statements, search_path_statement
from cclq.store.catalog import CATALOG_SCHEMAS
from cclq.store.warehouse import Snapshot, Warehouse

# DuckDB 2.0 warns, once per place, that a DB-API result's Arrow table is a copy of its rows.
# cclq's large results go through ``Session.arrow`` (no copy); the rest (ad-hoc SQL, the
# Python API's small frames) would print the notice into a command's stderr, or not,
# depending on what the process ran before (a daemon's answers then differ from a call's).
warnings.filterwarnings("ignore", message="Arrow output on a DB-API result", category=UserWarning)

log = logging.getLogger("cclq")


def open_database_soon() -> Future[duckdb.DuckDBPyConnection]:
    """The database of a ``Session`` still to come, opened on a thread of its own with the
    compiled views attached: for a caller with other work first (``cclq.TraceAnalysis``
    ingests). DuckDB's start and the ATTACH (30 ms, most of a small trace's session)
    release the GIL, so the two overlap."""

    def opening() -> duckdb.DuckDBPyConnection:
        con = open_database()
        try:
            for statement in attach_statements():
                con.execute(statement)
        except BaseException:
            con.close()
            raise
        return con

    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cclq-open-database")
    try:
        return pool.submit(opening)
    finally:
        pool.shutdown(wait=False)


def close_unused(database: Future[duckdb.DuckDBPyConnection]) -> None:
    """Closes a database of ``open_database_soon`` that no session took. Its opening's own
    error is dropped: the caller is already raising the error that matters."""
    try:
        database.result().close()
    except Exception:  # noqa: BLE001 - see the docstring
        log.debug("the database opened for a session failed too", exc_info=True)


class BatchLanes(Protocol):
    """What a session asks of the lanes of the batch it is in (``cclq.query.lanes.Lanes``,
    which imports this module)."""

    def ready_for(self, session: Session) -> None:
        """Returns once the views the batch shares are computed and ``session`` sees them."""


class Session:
    """One snapshot of a warehouse, opened in an in-memory DuckDB with every view.

    ``traces`` restricts every relation to those trace ids (None: all). The views come
    compiled (``cclq.query.view_catalog``): a session has all of them at once.
    ``comments``: the base relations carry their documentation too (for what users read:
    ``cclq sql``, ``cclq.open``). ``snapshot_id`` opens that snapshot instead of the
    current one (a Dask worker reading what its client reads). ``cache``: metric results
    are stored in and read from the warehouse's cache. ``database``: the DuckDB database
    to open it in, being opened meanwhile (``open_database_soon``; the session closes it,
    or, when it fails, drops it); default a new one.
    """

    def __init__(
        self,
        warehouse: Warehouse,
        *,
        traces: Sequence[str] | None = None,
        settings: QuerySettings | None = None,
        comments: bool = False,
        snapshot_id: str | None = None,
        cache: bool = False,
        database: Future[duckdb.DuckDBPyConnection] | None = None,
    ) -> None:
        self.warehouse = warehouse
        self.settings = settings or QuerySettings()
        self.traces: list[str] | None = None if traces is None else list(traces)
        self.cache_dir: Path | None = warehouse.cache_dir if cache else None
        try:
            self.snapshot: Snapshot = warehouse.open_snapshot(snapshot_id=snapshot_id)
        except BaseException:
            if database is not None:
                close_unused(database)
            raise
        self.spill_dir: Path | None = None
        self._closed = False
        # inside cclq.query.metrics.shared_views: the connections the batch runs on
        self.lanes: BatchLanes | None = None
        self._worker = False
        self._relations: dict[str, str] = {}  # temporary view -> the statement that made it
        # what is computed once from the snapshot's catalog (cclq.query.applicability)
        self.memo: dict[str, Any] = {}
        try:
            self.spill_dir = self.settings.make_spill_folder(warehouse)
            self.con = open_database() if database is None else database.result()
            self.con.execute("\n".join(self.settings.set_statements(self.spill_dir)))
            _no_progress_bar(self.con)
            script = setup_script(self.snapshot, self.traces, comments=comments, attach=database is None)
            self.con.execute(script)
            self.con.execute("\n".join(self.settings.connection_statements()))
        except BaseException:
            if database is not None and getattr(self, "con", None) is None:
                close_unused(database)
            self.close()
            raise

    # -- the connection -------------------------------------------------------
    def execute(self, sql: str, parameters: Sequence[Any] | dict[str, Any] | None = None) -> duckdb.DuckDBPyConnection:
        """Runs SQL on the session's connection (DuckDB's ``execute``). Inside a batch's
        block (``cclq.query.metrics.shared_views``) it first waits for the views the batch
        shares, and sees them."""
        if self.lanes is not None:
            self.lanes.ready_for(self)
        return self.con.execute(sql, parameters)

    def arrow(self, query: str, parameters: Sequence[Any] | dict[str, Any] | None = None) -> pa.Table:
        """One query's result as an Arrow table, as ``execute`` runs it: through DuckDB's
        relational API, which hands Arrow the result without the extra copy of the rows
        that a DB-API result makes (DuckDB 2.0 warns of that copy; 1.5 made it silently)."""
        return arrow_table(self.relation(query, parameters))

    def relation(self, query: str, parameters: Sequence[Any] | dict[str, Any] | None = None) -> duckdb.DuckDBPyRelation:
        """A query as DuckDB's relation (see ``arrow``)."""
        if self.lanes is not None:
            self.lanes.ready_for(self)
        # a result of ``execute`` that its caller left unread (``fetchone`` of a longer
        # result) is dropped, as the next ``execute`` drops it: DuckDB 2.0's relational
        # API refuses to run beside one (1.5 has no ``abort`` and no such rule)
        abort = getattr(self.con, "abort", None)
        if abort is not None:
            abort()
        return self.con.sql(query, params=parameters)

    def temp_view(self, name: str, statement: str) -> None:
        """Runs ``statement``, which makes the temporary view ``name``, unless the last one
        that made it was the same (``metric_scope`` and ``metric_params``, set before each
        metric of a batch, were 0.17 s of a report)."""
        if self._relations.get(name) != statement:
            self.execute(statement)
            self._relations[name] = statement

    def worker(self) -> Session:
        """Another connection to the session's database, for a thread of its own
        (``cclq.query.lanes``): it sees the base relations and the compiled views, and
        has its own temporary objects (``metric_scope``, a metric's rows, the shadows of
        shared views). Closing it closes only that connection."""
        other = copy.copy(self)  # the same warehouse, snapshot, settings, cache and memo
        other._closed, other.lanes, other._worker, other._relations = False, None, True, {}
        other.con = self.con.cursor()
        try:
            _no_progress_bar(other.con)
            other.con.execute(search_path_statement())
            other.con.execute("\n".join(CONNECTION_SETTINGS))  # connection-local (CONNECTION_SETTINGS)
            other.con.execute("\n".join(self.settings.connection_statements()))
        except BaseException:
            other.con.close()
            raise
        return other

    def close(self) -> None:
        """Closes the connection, releases the snapshot and removes the spill folder."""
        if self._closed:
            return
        self._closed = True
        con = getattr(self, "con", None)
        if con is not None:
            con.close()
        if self._worker:
            return
        self.snapshot.close()
        if self.spill_dir is not None:
            shutil.rmtree(self.spill_dir, ignore_errors=True)

    def __enter__(self) -> Session:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def __del__(self) -> None:  # a session dropped without close() still frees its snapshot
        try:
            self.close()
        except Exception:  # noqa: BLE001 (interpreter shutdown: nothing left to report to)
            pass

    # -- what it reads --------------------------------------------------------
    def readable_files(self) -> list[Path]:
        """Every file the session reads: its snapshot's catalog files and the data files
        of the traces it selected."""
        root = self.warehouse.root
        data = [root / p for (p,) in self.con.execute("SELECT DISTINCT path FROM parts ORDER BY path").fetchall()]
        return [self.snapshot.catalog_file(name) for name in CATALOG_SCHEMAS] + data

    def run_user_query(self, query: str, read_only: bool = True) -> pa.Table:
        """Runs ad-hoc SQL. Read-only (the default): queries all the way down, no file
        readable but the snapshot's, none writable, the configuration locked
        (``cclq.query.readonly``), so ad-hoc SQL can never change what metrics read."""
        con = self.con
        if read_only:
            statements = check_read_only(con, query)
            files = [str(p) for p in self.readable_files()]
            # the views name files glob-escaped (a warehouse in `runs[1]/wh`): both spellings
            lock_down(con, sorted({*files, *(glob.escape(f) for f in files)}))
        else:
            statements = [st.query for st in split_statements(con, query)]
        try:
            *before, last = statements
            for statement in before:
                con.execute(statement)
            # the last one's rows through the relational API (no extra copy of the rows; a
            # statement that is no query runs at once, and DuckDB before 2.0 gives no relation
            # for it), but one that does not bind is run by ``execute`` for its error, whose
            # message has the query's line and a caret under the place
            try:
                relation = con.sql(last)
            except duckdb.Error as e:
                if type(e).__name__ in COMPILE_ERRORS:  # nothing ran: it fails again, with the caret
                    con.execute(last)
                raise
            return arrow_table(relation) if relation is not None else pa.table({})
        except duckdb.Error as e:
            raise self.query_error(e, whole=True) from e

    def query_error(self, e: duckdb.Error, label: str = "", whole: bool = False) -> QueryError:
        """A DuckDB error as the one line a user reads, or with ``whole`` (the user's own
        SQL: ``cclq sql``, ``ws.sql``) DuckDB's whole message, its hints (``Did you mean
        "kernels"?``, ``Candidate bindings``) and the query line it points at included; a
        disk that filled up while the query spilled says so, and where."""
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        if "failed to offload" in first or "No space left" in first or "Could not write" in first:
            return QueryError(
                f"{label + ': ' if label else ''}disk full: the query spills beyond its memory "
                f"limit to {self.spill_dir}, and that disk has no room left ({first})",
                hint="free space there, or give --spill-dir DIR (or $CCLQ_SPILL_DIR) on a "
                "disk with room, or a larger --memory-limit",
            )
        text = str(e).rstrip() if whole and str(e).strip() else first
        return QueryError(f"{label}: {text}" if label else text)


def _no_progress_bar(con: duckdb.DuckDBPyConnection) -> None:
    """DuckDB draws its progress bar on stdout for a query past 2 s, into the middle of
    `cclq metric -f csv > file` (found by the scale bench at 400 traces). In a Jupyter
    kernel without ipywidgets DuckDB refuses to touch the setting at all (it cannot draw
    its bar there either): the setting is then left as it is."""
    try:
        con.execute("SET enable_progress_bar = false")
    except duckdb.InvalidInputException:
        pass


def connect(
    wh: Warehouse,
    require: bool = True,
    traces: Sequence[str] | None = None,
    comments: bool = False,
    snapshot_id: str | None = None,
    settings: QuerySettings | None = None,
    cache: bool = False,
) -> Session:
    """Opens a query session on the warehouse's current snapshot (see ``Session``)."""
    del require  # kept for callers written before sessions: a session always needs a warehouse
    return Session(wh, traces=traces, settings=settings, comments=comments, snapshot_id=snapshot_id, cache=cache)
