"""HTA 0.5.0's critical path analysis (hta/analyzers/critical_path_analysis.py) for any
annotation instance, its graph object, and its overlay on the trace.

The graph of the window is three views (sql/views/hta_critical_path.sql says how HTA
builds it, CUDA synchronization edges included): ``hta_critical_path_rows`` (the window's
rows), ``hta_critical_path_nodes`` and ``hta_critical_path_edges``; its window is chosen with
the DuckDB variables the views read (the annotation, the first and last instance). The
longest path is ``cclq.query.critical_path.longest_path_columns`` (networkx's
dag_longest_path, as HTA calls it). ``CPGraph`` answers what HTA's CPGraph (a networkx
DiGraph) answers scripts and notebooks: ``nodes``, ``edges`` (``G.edges[u, v]["object"]``),
``node_list``, the path's nodes, events and edges, ``critical_path()``, ``summary()``,
``get_critical_path_breakdown()``, ``get_nodes_for_event``, ``save`` and
``restore_cpgraph``. Not covered: networkx's own algorithms on the object (it is not a
DiGraph) and HTA's graph editing for simulations.
"""

from __future__ import annotations

import json
import zipfile
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from cclq.api.hta_data import HtaData
from cclq.api.hta_frames import pandas
from cclq.api.hta_trace import Trace, shorten_name
from cclq.present.chrome_trace import Event, write_trace
from cclq.query.critical_path import longest_path_columns


class CPEdgeType(Enum):
    """HTA's edge types."""

    OPERATOR_KERNEL = "critical_path_operator"
    DEPENDENCY = "critical_path_dependency"
    KERNEL_LAUNCH_DELAY = "critical_path_kernel_launch_delay"
    KERNEL_KERNEL_DELAY = "critical_path_kernel_kernel_delay"
    SYNC_DEPENDENCY = "critical_path_sync_dependency"


# the view's edge_type -> HTA's
EDGE_TYPES = {
    "operator": CPEdgeType.OPERATOR_KERNEL,
    "dependency": CPEdgeType.DEPENDENCY,
    "launch_delay": CPEdgeType.KERNEL_LAUNCH_DELAY,
    "kernel_kernel_delay": CPEdgeType.KERNEL_KERNEL_DELAY,
    "sync": CPEdgeType.SYNC_DEPENDENCY,
}
# the edges HTA draws as flow arrows in the overlay by default (DEFAULT_EDGE_TYPES_IN_VIZ)
SHOWN_EDGES = (CPEdgeType.DEPENDENCY, CPEdgeType.KERNEL_LAUNCH_DELAY, CPEdgeType.SYNC_DEPENDENCY)
# the edges HTA gives the weight 0 (an int) whatever their nodes' times
ZERO_WEIGHT = (CPEdgeType.DEPENDENCY, CPEdgeType.SYNC_DEPENDENCY)


@dataclass
class CPNode:
    """A point in time of the graph: the start or the end of an event (HTA's CPNode)."""

    idx: int = -1
    ev_idx: int = -1
    ts: float = 0
    is_start: bool = False
    is_blocking: bool = False


@dataclass(frozen=True)
class CPEdge:
    """An edge of the graph (HTA's CPEdge): ``weight`` µs from node ``begin`` to ``end``."""

    begin: int
    end: int
    weight: float = 0
    type: CPEdgeType = CPEdgeType.OPERATOR_KERNEL


class EdgeView:
    """``G.edges`` as networkx gives it: iterates (u, v), ``[u, v]`` is the edge's
    attributes ({"weight", "object"}); a repeated (u, v) keeps its last edge, as add_edge."""

    def __init__(self, edges: dict[tuple[int, int], CPEdge]) -> None:
        self._edges = edges

    def __iter__(self) -> Any:
        return iter(self._edges)

    def __len__(self) -> int:
        return len(self._edges)

    def __contains__(self, uv: object) -> bool:
        return uv in self._edges

    def __getitem__(self, uv: tuple[int, int]) -> dict[str, Any]:
        e = self._edges[uv]
        return {"weight": e.weight, "object": e}


@dataclass
class CPGraph:
    """The critical path graph of one rank's window (see the module docstring)."""

    rank: int
    t_full: Trace
    node_list: list[CPNode]
    edge_list: list[CPEdge]  # every edge in HTA's insertion order
    path_weights: list[float]  # the weight the longest path uses (HTA sets weights <= -1 to 0)
    edge_to_event_map: dict[tuple[int, int], int]
    critical_path_nodes: list[int] = field(default_factory=list)
    critical_path_events_set: set[int] = field(default_factory=set)
    critical_path_edges_set: set[CPEdge] = field(default_factory=set)

    def __post_init__(self) -> None:
        self._edges = {(e.begin, e.end): e for e in self.edge_list}
        self.event_to_start_node_map = {n.ev_idx: n.idx for n in self.node_list if n.is_start}
        self.event_to_end_node_map = {n.ev_idx: n.idx for n in self.node_list if not n.is_start}

    @property
    def nodes(self) -> list[int]:
        """The graph's nodes as networkx holds them: those of its edges, in the order the
        edges added them (HTA adds none alone, so a node without edges is not one)."""
        seen: dict[int, None] = {}
        for e in self.edge_list:
            seen.setdefault(e.begin)
            seen.setdefault(e.end)
        return list(seen)

    @property
    def edges(self) -> EdgeView:
        return EdgeView(self._edges)

    def get_nodes_for_event(self, ev_id: int) -> tuple[CPNode | None, CPNode | None]:
        """The start and end node of an event (None where it has none)."""
        s, e = self.event_to_start_node_map.get(ev_id, -1), self.event_to_end_node_map.get(ev_id, -1)
        return (self.node_list[s] if s >= 0 else None, self.node_list[e] if e >= 0 else None)

    def get_events_for_edge(self, edge: CPEdge) -> tuple[int, int]:
        return self.node_list[edge.begin].ev_idx, self.node_list[edge.end].ev_idx

    def get_event_attribution_for_edge(self, edge: CPEdge) -> int | None:
        """The event an operator or kernel-kernel edge is attributed to (None for others)."""
        return self.edge_to_event_map.get((edge.begin, edge.end))

    def get_edges_attributed_to_event(self, ev_idx: int) -> list[CPEdge]:
        return [self._edges[uv] for uv, ev in self.edge_to_event_map.items() if ev == ev_idx]

    def critical_path(self) -> bool:
        """Computes the longest path (networkx's dag_longest_path over the edges in
        insertion order, as HTA); True when it has at least one edge."""
        positions = {uv: i for i, uv in enumerate(self._edges)}  # first insertion of each (u, v)
        order = sorted(
            range(len(self.edge_list)), key=lambda i: positions[(self.edge_list[i].begin, self.edge_list[i].end)]
        )
        path = longest_path_columns(
            [self.edge_list[i].begin for i in order],
            [self.edge_list[i].end for i in order],
            [self.path_weights[i] for i in order],
            order,
        )
        edges = [self.edge_list[i] for i in path]
        self.critical_path_nodes = [edges[0].begin, *(e.end for e in edges)] if edges else []
        self.critical_path_events_set = {self.node_list[n].ev_idx for n in self.critical_path_nodes}
        self.critical_path_edges_set = {self._edges[(e.begin, e.end)] for e in edges}
        self._path = [self._edges[(e.begin, e.end)] for e in edges]
        return bool(edges)

    @property
    def path_edges(self) -> list[CPEdge]:
        """cclq's own: the path's edges in path order."""
        return list(getattr(self, "_path", []))

    def get_critical_path_breakdown(self) -> Any:
        """One row per edge of the path (HTA's columns): the event it is attributed to,
        its weight (``duration``), its type, the event's shortened name, category, pid,
        tid, stream and index, and HTA's ``bound_by`` class."""
        pd = pandas()
        if not self.critical_path_nodes:
            return None
        frame = self.t_full.get_trace(self.rank)
        names = self.t_full.symbol_table.get_sym_table()
        events = frame[["name", "cat", "pid", "tid", "stream", "index"]].drop_duplicates("index")
        # each symbol shortened once (HTA shortens per row: 36 k rows of a 15 MB trace, 0.7 s)
        short = {i: shorten_name(names[i]) for i in events["name"].unique().tolist()}
        events = events.assign(name=events["name"].map(short)).rename(columns={"name": "s_name"})
        edge_df = pd.DataFrame.from_records(
            {"event_idx": self.get_event_attribution_for_edge(e), "duration": e.weight, "type": str(e.type.value)}
            for e in self.critical_path_edges_set
        )
        out = pd.merge(edge_df, events, left_on="event_idx", right_on="index", how="left")
        # a loop over the columns: DataFrame.apply built a Series per row (24 k rows, 0.9 s)
        out["bound_by"] = (
            [
                _bound_by({"type": t, "stream": stream, "s_name": name})
                for t, stream, name in zip(out["type"].tolist(), out["stream"].tolist(), out["s_name"].tolist())
            ]
            if len(out)
            else out.apply(_bound_by, axis=1)
        )
        return out

    def summary(self) -> Any:
        """HTA's CPGraph.summary(): per bound_by class, its percent of the path's duration
        (a Series named ``duration``, indexed by bound_by)."""
        edf = self.get_critical_path_breakdown()
        summary = edf.groupby("bound_by").duration.sum() / edf.duration.sum() * 100
        print("Critical Path broken down by boundedness = (in % of duration)")
        return summary

    def save(self, out_dir: str) -> str:
        """Writes the graph into ``out_dir`` and a zip of it, ``<out_dir>.zip``, which
        ``restore_cpgraph`` reads; returns the zip's path. (cclq's own format: the nodes,
        the edges and their attribution as JSON; HTA pickles its objects.)"""
        folder = Path(out_dir).expanduser()
        folder.mkdir(parents=True, exist_ok=True)
        data = {
            "format": "cclq-cpgraph-1",
            "rank": self.rank,
            "nodes": [[n.idx, n.ev_idx, n.ts, n.is_start, n.is_blocking] for n in self.node_list],
            "edges": [[e.begin, e.end, e.weight, e.type.value, w] for e, w in zip(self.edge_list, self.path_weights)],
            "attribution": [[u, v, ev] for (u, v), ev in self.edge_to_event_map.items()],
            "critical_path_nodes": self.critical_path_nodes,
        }
        (folder / "cp_graph.json").write_text(json.dumps(data))
        zip_filename = f"{folder}.zip"
        with zipfile.ZipFile(zip_filename, "w", compression=zipfile.ZIP_DEFLATED) as z:
            z.write(folder / "cp_graph.json", "cp_graph.json")
        return zip_filename


def restore_cpgraph(zip_filename: str, t_full: Trace, rank: int) -> CPGraph:
    """The graph ``CPGraph.save`` wrote, over ``t_full`` (the TraceAnalysis's ``t``), with
    its critical path as saved (``critical_path()`` computes it again)."""
    with zipfile.ZipFile(Path(zip_filename).expanduser()) as z:
        data = json.loads(z.read("cp_graph.json"))
    if data.get("format") != "cclq-cpgraph-1":
        raise ValueError(f"{zip_filename}: not a critical path graph saved by cclq's CPGraph.save")
    nodes = [CPNode(int(i), int(ev), ts, bool(s), bool(b)) for i, ev, ts, s, b in data["nodes"]]
    edges = [CPEdge(int(u), int(v), w, CPEdgeType(t)) for u, v, w, t, _ in data["edges"]]
    graph = CPGraph(
        rank,
        t_full,
        nodes,
        edges,
        [pw for *_, pw in data["edges"]],
        {(int(u), int(v)): int(ev) for u, v, ev in data["attribution"]},
    )
    path_nodes = [int(n) for n in data["critical_path_nodes"]]
    graph.critical_path_nodes = path_nodes
    graph.critical_path_events_set = {nodes[n].ev_idx for n in path_nodes}
    graph._path = [graph._edges[(u, v)] for u, v in zip(path_nodes, path_nodes[1:])]
    graph.critical_path_edges_set = set(graph._path)
    return graph


def _bound_by(row: Any) -> str:
    """HTA's bound_by(): the resource an edge of the path waits on."""
    if row["type"] == CPEdgeType.KERNEL_KERNEL_DELAY.value:
        return "gpu_kernel_kernel_overhead"
    if row["type"] == CPEdgeType.KERNEL_LAUNCH_DELAY.value:
        return "gpu_kernel_launch_overhead"
    if row["type"] in (CPEdgeType.DEPENDENCY.value, CPEdgeType.SYNC_DEPENDENCY.value):
        return ""
    if row["stream"] < 0:
        return "cpu_bound"
    name = row["s_name"]
    if isinstance(name, str) and name.startswith("nccl") and "Kernel" in name:
        return "gpu_communication_bound"
    return "gpu_compute_bound"


def critical_path(
    data: HtaData, trace: Trace, rank: int, annotation: str, instance_id: int | tuple[int, int] | None
) -> tuple[CPGraph, bool] | None:
    """HTA's critical_path_analysis: (graph, success); None where no name contains the
    annotation, as HTA returns."""
    if instance_id is None:
        first, last = 0, 0
    elif isinstance(instance_id, tuple):
        first, last = (int(v) for v in instance_id)
    else:
        first = last = int(instance_id)
    data.require_ranks(rank)
    if (
        annotation
        and not data.rows(
            "SELECT count(*) FROM hta_loaded WHERE contains(name, ?) OR contains(cat, ?)",
            "hta_loaded",
            params=[annotation, annotation],
        )
        .column(0)[0]
        .as_py()
    ):
        return None
    found = (
        data.rows(
            "SELECT count(*) FROM hta_events WHERE rank = ? AND contains(name, ?)",
            "hta_events",
            params=[rank, annotation],
        )
        .column(0)[0]
        .as_py()
    )
    if annotation and found <= first:
        raise ValueError(
            f"critical_path_analysis: rank {rank} has {found} instance(s) of {annotation!r}; "
            f"instance {first} does not exist (instances count from 0)"
        )
    s = data.session
    s.execute("SET VARIABLE hta_cp_annotation = ?", [annotation])
    s.execute("SET VARIABLE hta_cp_first_instance = ?", [first])
    s.execute("SET VARIABLE hta_cp_last_instance = ?", [last])
    # the views materialize hta_events (and the call stacks) before they filter by rank:
    # given that rank's rows alone (a third of the CPU and 400 MB less at the peak on
    # 8 ranks of 54 MB)
    try:
        with data.only_rank(rank, "hta_events", "hta_call_stack"):
            node_rows = data.rows(
                "SELECT node_id, event_idx, time_us, is_end, hta_critical_path_is_blocking_call(name) AS blocking "
                "FROM hta_critical_path_nodes WHERE rank = ? ORDER BY node_id",
                params=[rank],
            ).to_pydict()
            columns = data.rows(
                "SELECT * FROM hta_critical_path_edges WHERE rank = ? ORDER BY edge_no", params=[rank]
            ).to_pydict()
            cpu_rows = data.rows(
                "SELECT event_idx, pid, tid, ts_us, dur_us FROM hta_critical_path_rows WHERE rank = ? AND side = 'cpu'",
                params=[rank],
            ).to_pydict()
    finally:
        for name in ("hta_cp_annotation", "hta_cp_first_instance", "hta_cp_last_instance"):
            s.execute(f"RESET VARIABLE {name}")
    # HTA's node times are float64 (an end is ts + dur, and dur is float64); its weights are
    # their differences, or the int 0 of a dependency or sync edge
    nodes = [
        CPNode(int(i), int(ev), float(ts), not end, blocking)
        for i, ev, ts, end, blocking in zip(
            node_rows["node_id"],
            node_rows["event_idx"],
            node_rows["time_us"],
            node_rows["is_end"],
            node_rows["blocking"],
        )
    ]
    edges = [
        CPEdge(int(u), int(v), 0 if EDGE_TYPES[t] in ZERO_WEIGHT else float(w), EDGE_TYPES[t])
        for u, v, w, t in zip(columns["src_node"], columns["dst_node"], columns["weight_us"], columns["edge_type"])
    ]
    graph = CPGraph(
        rank, trace, nodes, edges, list(columns["path_weight_us"]), _attribution(nodes, edges, _parents(cpu_rows))
    )
    return graph, graph.critical_path()


def _parents(rows: dict[str, list[Any]]) -> dict[int, int]:
    """The call stack parent of each CPU row of the window (-1 at the top), per thread in
    HTA's order of the rows' ends (time; closes before opens; opens longest first)."""
    ends: dict[tuple[Any, Any], list[tuple[Any, ...]]] = {}
    for ev, pid, tid, ts, dur in zip(rows["event_idx"], rows["pid"], rows["tid"], rows["ts_us"], rows["dur_us"]):
        ends.setdefault((pid, tid), []).extend([(ts, 1, -dur, ev, 1), (ts + dur, 0, dur, -ev, -1)])
    parent: dict[int, int] = {}
    for thread in ends.values():
        stack: list[int] = []
        for _, _, _, key, delta in sorted(thread, key=lambda x: x[:4]):
            ev = key if delta == 1 else -key
            if delta == 1:
                parent[ev] = stack[-1] if stack else -1
                stack.append(ev)
            elif stack and stack[-1] == ev:
                stack.pop()
            elif ev in stack:
                stack.remove(ev)
    return parent


def _attribution(nodes: list[CPNode], edges: list[CPEdge], parents: dict[int, int]) -> dict[tuple[int, int], int]:
    """HTA's _attribute_edge for every operator and kernel-kernel edge: the source's event
    when it is a start, else the destination's when it is an end, else (an end to a
    start) HTA's last_ev_parent: the call stack parent of the event its walk of the thread
    last entered or left (the edges are that walk's steps; a thread's first event is
    entered with no edge into it)."""
    out: dict[tuple[int, int], int] = {}
    seen: set[int] = set()
    last: int | None = None
    for e in edges:
        src, dst = nodes[e.begin], nodes[e.end]
        if src.is_start and src.idx not in seen:
            last = src.ev_idx
        seen.add(src.idx)
        seen.add(dst.idx)
        if e.type == CPEdgeType.KERNEL_KERNEL_DELAY:
            out[(e.begin, e.end)] = src.ev_idx
        elif e.type == CPEdgeType.OPERATOR_KERNEL:
            if src.is_start:
                out[(e.begin, e.end)] = src.ev_idx
            elif not dst.is_start:
                out[(e.begin, e.end)] = dst.ev_idx
            else:
                out[(e.begin, e.end)] = parents.get(last, -1) if last is not None else -1
        if e.type in (CPEdgeType.OPERATOR_KERNEL, CPEdgeType.DEPENDENCY):
            last = dst.ev_idx
    return out


def overlay(
    data: HtaData,
    trace: Trace,
    graph: CPGraph,
    output_dir: str | Path,
    only_show_critical_events: bool,
    show_all_edges: bool,
) -> str:
    """HTA's overlay_critical_path_analysis: the rank's trace with ``args.critical = 1`` on
    the path's events (only those, user annotations, python functions and the events
    that are not complete slices, with ``only_show_critical_events``) and a flow arrow
    per path edge of the types HTA shows (``show_all_edges``: every path edge), written
    to ``output_dir/overlaid_critical_path_<file>``."""
    path = Path(output_dir).expanduser()
    path.mkdir(parents=True, exist_ok=True)
    source = Path(trace.trace_files[graph.rank])
    out = path / f"overlaid_critical_path_{source.name}"
    file_id = data.rows("SELECT file_id FROM files WHERE rank = ?", params=[graph.rank]).column(0)[0].as_py()
    critical = graph.critical_path_events_set
    wanted: list[dict[str, Any]] = []
    for e in graph.path_edges:
        if show_all_edges and not only_show_critical_events or e.type in SHOWN_EDGES:
            src, dst = graph.node_list[e.begin], graph.node_list[e.end]
            wanted.append(
                {
                    "src_event_idx": src.ev_idx,
                    "src_is_end": not src.is_start,
                    "dst_event_idx": dst.ev_idx,
                    "dst_is_end": not dst.is_start,
                    "edge_type": e.type,
                    "weight_us": e.weight,
                }
            )
    needed = {e["src_event_idx"] for e in wanted} | {e["dst_event_idx"] for e in wanted}
    seen: dict[int, Event] = {}

    def mark(event: Event) -> Event | None:
        idx = event["__idx"]
        if idx in critical:
            event.setdefault("args", {})["critical"] = 1
        if idx in needed:
            seen[idx] = {k: event.get(k) for k in ("pid", "tid", "ts", "dur", "args")}
        if (
            only_show_critical_events
            and event.get("ph") == "X"
            and event.get("cat", "") not in ("user_annotation", "python_function")
            and idx not in critical
        ):
            return None
        return event

    def flows() -> list[Event]:
        out_events: list[Event] = []
        for flow_id, e in enumerate(wanted):
            for is_start in (True, False):
                ev = seen[e["src_event_idx"] if is_start else e["dst_event_idx"]]
                is_end_node = e["src_is_end"] if is_start else e["dst_is_end"]
                end_ts = ev["ts"] + ev["dur"]
                if (ev.get("args") or {}).get("device", -1) >= 0:
                    end_ts -= min(1, ev["dur"])
                flow: Event = {
                    "ph": "s" if is_start else "f",
                    "id": flow_id,
                    "pid": ev["pid"],
                    "tid": ev["tid"],
                    "ts": int(end_ts if is_end_node else ev["ts"]),
                    "cat": e["edge_type"].value,
                    "name": "critical_path",
                    "args": {"weight": int(e["weight_us"]), "critical": True},
                }
                if not is_start:
                    flow["bp"] = "e"
                out_events.append(flow)
        return out_events

    class _Flows:
        def __iter__(self) -> Any:  # after the events are written: the endpoints are seen by then
            return iter(flows())

    write_trace(data.session, file_id, out, mark, _Flows(), written_from=source.name)
    return str(out)
