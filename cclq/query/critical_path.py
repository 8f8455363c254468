"""The longest path through HTA's critical path graph: the one Python step of a metric.

sql/views/hta_critical_path.sql builds the graph's edges in SQL; before the metric
hta_critical_path_breakdown runs, ``prepare`` (called by metrics.run_metric for any
metric that reads ``hta_critical_path_on_path``) computes each rank's path and leaves it
in that temporary table. (Not a DuckDB Python function: DuckDB's Python UDFs need numpy,
which cclq does not depend on.) Why this one step is Python: a longest path needs every
node's best predecessor, visited in dependency order, a sequential recurrence over up to
a million edges. DuckDB can only
express it as a recursive CTE that relaxes one edge of the path per round (the path has
tens of thousands of edges, each round a join over all of them), which is quadratic;
a topological-order pass here is linear and takes well under a second per rank.

It reproduces ``networkx.dag_longest_path`` (what HTA calls) including its choice between
equally long paths, since HTA's breakdown depends on which one it takes: nodes in
networkx's topological order (Kahn's algorithm by generations, nodes and successors in
insertion order), each node's best predecessor the first in insertion order among the
longest, a node whose best is negative restarts at 0, and the path ends at the first node
(in that order) of greatest length.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

if TYPE_CHECKING:
    from cclq.query.session import Session

PATH_TABLE = "hta_critical_path_on_path"


def longest_path(edges: Sequence[tuple[int, int, float, int]]) -> list[int]:
    """The edge numbers on the longest path of a DAG whose edges are
    ``(src, dst, weight, edge_no)`` in insertion order (node ids ordered as inserted);
    a repeated (src, dst) keeps its first position and its last weight and number, as
    networkx's ``add_edge`` does. Raises ValueError on a cycle."""
    succ: dict[int, dict[int, tuple[float, int]]] = {}
    pred: dict[int, dict[int, tuple[float, int]]] = {}
    nodes: set[int] = set()
    for src, dst, weight, edge_no in edges:
        nodes.add(src)
        nodes.add(dst)
        succ.setdefault(src, {})[dst] = (weight, edge_no)
        pred.setdefault(dst, {})[src] = (weight, edge_no)
    order = sorted(nodes)
    indegree = {v: len(pred.get(v, ())) for v in order}
    generation = [v for v in order if indegree[v] == 0]
    topo: list[int] = []
    while generation:
        topo.extend(generation)
        following: list[int] = []
        for v in generation:
            for child in succ.get(v, {}):
                indegree[child] -= 1
                if indegree[child] == 0:
                    following.append(child)
        generation = following
    if len(topo) != len(order):
        raise ValueError("the critical path graph has a cycle")
    dist: dict[int, tuple[float, int]] = {}
    for v in topo:
        best: tuple[float, int] | None = None
        for u, (weight, _) in pred.get(v, {}).items():
            length = dist[u][0] + weight
            if best is None or length > best[0]:
                best = (length, u)
        dist[v] = best if best is not None and best[0] >= 0 else (0.0, v)
    path: list[int] = []
    if not topo:
        return path
    node = max(topo, key=lambda n: dist[n][0])
    while dist[node][1] != node:
        before = dist[node][1]
        path.append(pred[node][before][1])
        node = before
    path.reverse()
    return path


def prepare(session: Session, sql: str) -> None:
    """Creates the temporary table ``hta_critical_path_on_path`` when ``sql`` reads it: the
    edges of each rank's longest path through ``hta_critical_path_edges`` (every column of
    the view, and ``position`` on the path from 0), for the ranks of ``metric_scope`` (or
    the one the metric's ``only_rank`` parameter names). The
    edges are read once, here; the metric reads only the path."""
    if PATH_TABLE not in sql:
        return
    # the ranks of the scope, or the metric's `only_rank` (filtered before the graph is
    # built: DuckDB pushes the rank into the view's per-rank windows)
    session.execute(
        "CREATE OR REPLACE TEMP TABLE __cclq_critical_path_edges AS SELECT e.* "
        "FROM hta_critical_path_edges AS e JOIN metric_scope AS m USING (trace, rank) "
        "JOIN metric_params AS p USING (trace) WHERE p.only_rank < 0 OR e.rank = p.only_rank")
    try:
        edges = session.execute(
            "SELECT trace, rank, src_node, dst_node, path_weight_us, edge_no FROM __cclq_critical_path_edges "
            "ORDER BY trace, rank, edge_no").to_arrow_table().to_pydict()
        by_rank: dict[tuple[str, int], list[tuple[int, int, float, int]]] = {}
        for trace, rank, src, dst, weight, edge_no in zip(
                edges["trace"], edges["rank"], edges["src_node"], edges["dst_node"], edges["path_weight_us"],
                edges["edge_no"], strict=True):
            by_rank.setdefault((trace, rank), []).append((src, dst, weight, edge_no))
        out: dict[str, list[Any]] = {"trace": [], "rank": [], "edge_no": [], "position": []}
        for (trace, rank), rank_edges in by_rank.items():
            for position, edge_no in enumerate(longest_path(rank_edges)):
                out["trace"].append(trace)
                out["rank"].append(rank)
                out["edge_no"].append(edge_no)
                out["position"].append(position)
        table = pa.table({"trace": pa.array(out["trace"], pa.string()), "rank": pa.array(out["rank"], pa.int32()),
                          "edge_no": pa.array(out["edge_no"], pa.int64()),
                          "position": pa.array(out["position"], pa.int64())})
        session.con.register("__cclq_critical_path", table)
        try:
            session.execute(
                f"CREATE OR REPLACE TEMP TABLE {PATH_TABLE} AS "
                "SELECT e.*, p.position FROM __cclq_critical_path AS p "
                "JOIN __cclq_critical_path_edges AS e USING (trace, rank, edge_no)")
        finally:
            session.con.unregister("__cclq_critical_path")
    finally:
        session.execute("DROP TABLE IF EXISTS __cclq_critical_path_edges")
