"""The longest path through HTA's critical path graph: the one Python step of a metric.

sql/views/hta_critical_path.sql builds the graph's edges in SQL (the macro
``hta_critical_path_edges_of``, which the view ``hta_critical_path_edges`` calls); before
the metric hta_critical_path_breakdown runs, ``prepared`` (which metrics.run_metric opens
for any metric that reads ``hta_critical_path_on_path``) computes each rank's path and leaves it
in that temporary table. (Not a DuckDB Python function: DuckDB's Python UDFs need numpy,
which cclq does not depend on.) Why this one step is Python: a longest path needs every
node's best predecessor, visited in dependency order, a sequential recurrence over up to
a million edges. DuckDB can only
express it as a recursive CTE that relaxes one edge of the path per round (the path has
tens of thousands of edges, each round a join over all of them), which is quadratic;
a topological-order pass here is linear. It runs compiled (``dagpath.c``, built at
install where there is a C compiler: 223,524 edges in milliseconds, against 0.45 s in
Python) and otherwise in Python, with the same answer (``longest_path_columns``).

It reproduces ``networkx.dag_longest_path`` (what HTA calls) including its choice between
equally long paths, since HTA's breakdown depends on which one it takes: nodes in
networkx's topological order (Kahn's algorithm by generations, nodes and successors in
insertion order), each node's best predecessor the first in insertion order among the
longest, a node whose best is negative restarts at 0, and the path ends at the first node
(in that order) of greatest length.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

import pyarrow as pa

from cclq.schema import as_type

try:  # the compiled longest path (dagpath.c), where the install built it
    from cclq.query import dagpath  # type: ignore[attr-defined]
except ImportError:  # no C compiler at install: the Python loop below, the same path
    dagpath = None

if TYPE_CHECKING:
    from cclq.query.session import Session

PATH_TABLE = "hta_critical_path_on_path"
WINDOWS_VIEW = "hta_critical_path_windows"  # what the metric says "no ProfilerStep" by
_WINDOW_VARIABLES = ("hta_cp_annotation", "hta_cp_first_instance", "hta_cp_last_instance")
# the views prepared() stores for the edges, in dependency order
STORED_VIEWS = ("hta_critical_path_step", "hta_critical_path_events", "hta_critical_path_rows")


def longest_path(edges: Sequence[tuple[int, int, float, int]]) -> list[int]:
    """The edge numbers on the longest path of a DAG whose edges are
    ``(src, dst, weight, edge_no)`` in insertion order (node ids ordered as inserted);
    a repeated (src, dst) keeps its first position and its last weight and number, as
    networkx's ``add_edge`` does. Raises ValueError on a cycle."""
    src, dst, weight, edge_no = (list(column) for column in zip(*edges, strict=True)) if edges else ([], [], [], [])
    return longest_path_columns(src, dst, weight, edge_no)


def longest_path_columns(
    src: Sequence[int], dst: Sequence[int], weight: Sequence[float], edge_no: Sequence[int]
) -> list[int]:
    """``longest_path`` over the edges as four columns (what ``prepared`` reads from
    DuckDB; no tuple per edge). Node state lives in dicts keyed by node id, and each
    predecessor maps to the index of its edge rather than to a (weight, number) pair."""
    preds: dict[int, dict[int, int]] = {}  # node -> {predecessor: index of its (last) edge}
    succs: dict[int, list[int]] = {}  # node -> successors, first insertion order
    for i, (u, v) in enumerate(zip(src, dst)):
        into = preds.get(v)
        if into is None:
            preds[v] = into = {}
        repeated = u in into
        into[u] = i  # a repeated edge: its last weight and number, its first position
        if repeated:
            continue
        out = succs.get(u)
        if out is None:
            succs[u] = [v]
        else:
            out.append(v)
    indegree = {v: len(into) for v, into in preds.items()}
    generation = sorted(u for u in succs if u not in preds)
    n_nodes = len(indegree) + len(generation)
    topo: list[int] = []
    while generation:
        topo.extend(generation)
        following: list[int] = []
        for v in generation:
            for child in succs.get(v, ()):
                d = indegree[child] - 1
                indegree[child] = d
                if d == 0:
                    following.append(child)
        generation = following
    if len(topo) != n_nodes:
        raise ValueError("the critical path graph has a cycle")
    dist: dict[int, float] = {}
    via: dict[int, int] = {}  # node -> index of the edge into it on its longest path, -1 at a start
    for v in topo:
        into = preds.get(v)
        best = 0.0
        best_edge = -1  # the first predecessor among equally long ones wins
        for u, i in (into or {}).items():
            length = dist[u] + weight[i]
            if best_edge < 0 or length > best:
                best, best_edge = length, i
        if best_edge < 0 or best < 0:
            dist[v] = 0.0
            via[v] = -1
        else:
            dist[v] = best
            via[v] = best_edge
    path: list[int] = []
    if not topo:
        return path
    node = max(topo, key=dist.__getitem__)
    while (i := via[node]) >= 0:
        path.append(edge_no[i])
        node = src[i]
    path.reverse()
    return path


@contextmanager
def prepared(session: Session, sql: str) -> Iterator[None]:
    """While open, the temporary table ``hta_critical_path_on_path``, when ``sql`` reads
    it: the edges of each rank's longest path through ``hta_critical_path_edges`` (every
    column of the view, and ``position`` on the path from 0), for the ranks of
    ``metric_scope`` (or the one the metric's ``only_rank`` parameter names). The edges
    are read once, here; the metric, run inside, reads only the path (and
    ``hta_critical_path_windows``, answered from the window found here)."""
    if PATH_TABLE not in sql:
        yield
        return
    # the ranks of the scope, or the metric's `only_rank` (filtered before the graph is
    # built: DuckDB pushes the rank into the view's per-rank windows)
    scope = "JOIN metric_scope AS m USING (trace, rank) JOIN metric_params AS p USING (trace) WHERE p.only_rank < 0 OR "
    # The views the edges read several times over, stored first in dependency order
    # and read through temporary views of the same names (DuckDB resolves the
    # temporary schema first, in the compiled views too): the window, the rank's rows
    # the graph reads, then the window's rows. Each read of the plain views expanded
    # the rank's whole hta_events again (five expansions: 31 s and 4.8 GB on a 1 GB
    # rank, issue 42; then four, 10.1 s); now once for the window, once for the rows.
    stored: list[str] = []

    def store(view: str, select: str) -> None:
        session.execute(f"CREATE OR REPLACE TEMP TABLE {view}_table AS {select}")
        stored.append(view)
        session.execute(f"CREATE OR REPLACE TEMP VIEW {view} AS SELECT * FROM {view}_table")

    try:
        for view in STORED_VIEWS:
            store(view, f"SELECT v.* FROM {view} AS v {scope}v.rank = p.only_rank")
        if _default_window(session):
            # HTA's default window, the first ProfilerStep row, is the one the metric's
            # hta_critical_path_windows names (its first such row's [ts, end]): the
            # metric reads it from here, not from one more expansion (1.6 s at 1 GB)
            store(WINDOWS_VIEW, "SELECT trace, rank, start_us, end_us FROM hta_critical_path_step")
        # the edges of the stored rows, read as they are (the plain view holds a copy of
        # the window's rows first, for ad-hoc SQL: over the copy its longest window, the
        # CPU ends' order, took 2.4x as long here, 181 ms instead of 76 on the shared traces)
        session.execute(
            "CREATE OR REPLACE TEMP TABLE __cclq_critical_path_edges AS SELECT e.* "
            "FROM hta_critical_path_edges_of(hta_critical_path_events, hta_critical_path_rows) AS e "
            f"{scope}e.rank = p.only_rank"
        )
        for view in [v for v in stored if v != WINDOWS_VIEW]:  # held no longer than needed
            _drop(session, view)
            stored.remove(view)
        _store_path(session)
        session.execute("DROP TABLE IF EXISTS __cclq_critical_path_edges")
        yield
    finally:
        for view in reversed(stored):
            _drop(session, view)
        session.execute("DROP TABLE IF EXISTS __cclq_critical_path_edges")


def _default_window(session: Session) -> bool:
    """Whether the window is HTA's default (no hta_cp_* variable set, as after
    cclq.TraceAnalysis.critical_path_analysis, which resets them)."""
    row = session.con.execute(
        "SELECT count(*) FROM duckdb_variables() WHERE list_contains(?, name)", [list(_WINDOW_VARIABLES)]
    ).fetchone()
    return row is not None and row[0] == 0


def _drop(session: Session, view: str) -> None:
    """Drops a stored view's stand-in (named in the temporary schema: the catalog's view
    of the same name is read-only)."""
    session.execute(f"DROP VIEW IF EXISTS temp.main.{view}")
    session.execute(f"DROP TABLE IF EXISTS temp.main.{view}_table")


def longest_path_arrays(src: pa.Array, dst: pa.Array, weight: pa.Array, edge_no: pa.Array) -> pa.Array:
    """``longest_path_columns`` over Arrow arrays (one rank's edges): the compiled path
    where it was built and takes the graph, else the Python one. The edge numbers on the
    path, in path order."""
    # the C's types; the stored edges have them already (a cast, or ``take`` for the path's
    # numbers, would import pyarrow.compute: 46 ms of a cold board's lane time; numpy is no
    # dependency of cclq)
    i64, f64 = pa.int64(), pa.float64()
    src, dst, weight, edge_no = (as_type(a, t) for a, t in ((src, i64), (dst, i64), (weight, f64), (edge_no, i64)))
    if dagpath is not None and not (src.null_count or dst.null_count or weight.null_count or edge_no.null_count):
        positions = dagpath.longest_path(_values(src), _values(dst), _values(weight))
        if positions is not None:
            numbers = _values(edge_no).cast("q")
            return pa.array([numbers[i] for i in positions], i64)
    path = longest_path_columns(src.to_pylist(), dst.to_pylist(), weight.to_pylist(), edge_no.to_pylist())
    return pa.array(path, pa.int64())


def _values(array: pa.Array) -> memoryview:
    """The value buffer of a fixed-width Arrow array without nulls, as its rows (an
    array's slice starts ``offset`` values into its buffer)."""
    buffer, width = array.buffers()[1], array.type.bit_width // 8
    start = array.offset * width
    return memoryview(buffer)[start : start + len(array) * width]


def _store_path(session: Session) -> None:
    """The longest path of each rank through ``__cclq_critical_path_edges``, as
    ``PATH_TABLE``."""
    # in the order of `rk`, the macro's number of each (trace, rank): integer keys to sort
    # and join by, where the strings took 3.5x as long to sort
    edges = session.arrow(
        "SELECT src_node, dst_node, path_weight_us, edge_no FROM __cclq_critical_path_edges ORDER BY rk, edge_no"
    )
    columns = [edges.column(name).combine_chunks() for name in ("src_node", "dst_node", "path_weight_us", "edge_no")]
    ranks = session.execute("SELECT rk, count(*) FROM __cclq_critical_path_edges GROUP BY rk ORDER BY rk").fetchall()
    parts: list[pa.Table] = []
    start = 0
    for rk, n in ranks:  # one rank's edges are one run of the sorted rows
        path = longest_path_arrays(*(c.slice(start, n) for c in columns))
        start += n
        parts.append(
            pa.table(
                {
                    "rk": pa.array([rk] * len(path), pa.int64()),
                    "edge_no": path,
                    "position": pa.array(range(len(path)), pa.int64()),
                }
            )
        )
    schema = pa.schema([("rk", pa.int64()), ("edge_no", pa.int64()), ("position", pa.int64())])
    table = pa.concat_tables(parts) if parts else schema.empty_table()
    session.con.register("__cclq_critical_path", table)
    try:
        session.execute(
            f"CREATE OR REPLACE TEMP TABLE {PATH_TABLE} AS "
            "SELECT e.* EXCLUDE (rk), p.position FROM __cclq_critical_path AS p "
            "JOIN __cclq_critical_path_edges AS e USING (rk, edge_no)"
        )
    finally:
        session.con.unregister("__cclq_critical_path")
