"""HTA 0.5.0's critical path analysis (hta/analyzers/critical_path_analysis.py) for any
annotation instance, and its overlay on the trace.

The graph of the window is the view ``hta_critical_path_edges`` (sql/views/
hta_critical_path.sql says how HTA builds it); its window is chosen with the DuckDB
variables the view reads (the annotation, the first and last instance). The longest path
is ``cclq.query.critical_path.longest_path_columns`` (networkx's dag_longest_path, as HTA
calls it). ``CPGraph`` holds the path's edges and answers what HTA's CPGraph answers
scripts: ``summary()``, ``get_critical_path_breakdown()``, the path's events and edges.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cclq.api.hta_data import HtaData
from cclq.api.hta_frames import pandas
from cclq.api.hta_trace import Trace, shorten_name
from cclq.present.chrome_trace import Event, write_trace
from cclq.query.critical_path import longest_path_columns

# HTA's CPEdgeType values, by the view's edge_type
EDGE_TYPES = {"operator": "critical_path_operator", "dependency": "critical_path_dependency",
              "launch_delay": "critical_path_kernel_launch_delay",
              "kernel_kernel_delay": "critical_path_kernel_kernel_delay", "sync": "critical_path_sync_dependency"}
# the edges HTA draws as flow arrows in the overlay by default (DEFAULT_EDGE_TYPES_IN_VIZ)
SHOWN_EDGES = ("dependency", "launch_delay", "sync")


@dataclass
class CPGraph:
    """The critical path of one rank's window (the parts of HTA's CPGraph scripts use)."""

    rank: int
    edges: list[dict[str, Any]]  # the path's edges in path order (hta_critical_path_edges' columns)
    trace: Trace

    @property
    def critical_path_events_set(self) -> set[int]:
        """The event indices of the path's nodes."""
        return {e["src_event_idx"] for e in self.edges} | {e["dst_event_idx"] for e in self.edges}

    @property
    def critical_path_edges_set(self) -> list[dict[str, Any]]:
        return self.edges

    def get_critical_path_breakdown(self) -> Any:
        """One row per edge of the path: the event it is attributed to, its weight
        (``duration``), its type and HTA's ``bound_by`` class, with the event's
        shortened name, category, pid, tid and stream."""
        pd = pandas()
        frame = self.trace.get_trace(self.rank)
        names = self.trace.symbol_table.get_sym_table()
        by_index = frame.drop_duplicates("index").set_index("index")
        rows = []
        for e in self.edges:
            ev = by_index.loc[e["event_idx"]] if e["event_idx"] in by_index.index else None
            rows.append({
                "event_idx": e["event_idx"], "duration": e["weight_us"], "type": EDGE_TYPES[e["edge_type"]],
                "s_name": shorten_name(names[ev["name"]]) if ev is not None else None,
                "cat": ev["cat"] if ev is not None else None, "pid": ev["pid"] if ev is not None else None,
                "tid": ev["tid"] if ev is not None else None, "stream": ev["stream"] if ev is not None else None,
                "index": e["event_idx"], "bound_by": e["bound_by"]})
        return pd.DataFrame(rows)

    def summary(self) -> Any:
        """HTA's CPGraph.summary(): per bound_by class, its percent of the path's duration
        (a Series named ``duration``, indexed by bound_by)."""
        pd = pandas()
        edges = pd.DataFrame({"bound_by": [e["bound_by"] for e in self.edges],
                              "duration": pd.array([e["weight_us"] for e in self.edges], dtype="float64")})
        print("Critical Path broken down by boundedness = (in % of duration)")
        result: Any = edges.groupby("bound_by").duration.sum() / edges.duration.sum() * 100
        return result


def critical_path(data: HtaData, trace: Trace, rank: int, annotation: str,
                  instance_id: int | tuple[int, int] | None) -> tuple[CPGraph, bool] | None:
    """HTA's critical_path_analysis: (graph, success); None where no name contains the
    annotation, as HTA returns."""
    if instance_id is None:
        first, last = 0, 0
    elif isinstance(instance_id, tuple):
        first, last = (int(v) for v in instance_id)
    else:
        first = last = int(instance_id)
    if rank not in data.ranks:
        raise ValueError(f"no trace for rank {rank}")
    if annotation and not data.rows("SELECT count(*) FROM hta_loaded WHERE contains(name, ?) OR contains(cat, ?)",
                                    "hta_loaded", params=[annotation, annotation]).column(0)[0].as_py():
        return None
    found = data.rows("SELECT count(*) FROM hta_events WHERE rank = ? AND contains(name, ?)", "hta_events",
                      params=[rank, annotation]).column(0)[0].as_py()
    if annotation and found <= first:
        raise ValueError(f"critical_path_analysis: rank {rank} has {found} instance(s) of {annotation!r}; "
                         f"instance {first} does not exist (instances count from 0)")
    s = data.session
    s.execute("SET VARIABLE hta_cp_annotation = ?", [annotation])
    s.execute("SET VARIABLE hta_cp_first_instance = ?", [first])
    s.execute("SET VARIABLE hta_cp_last_instance = ?", [last])
    try:
        table = data.rows("SELECT * FROM hta_critical_path_edges WHERE rank = ? ORDER BY edge_no", "hta_events",
                          "hta_call_stack", params=[rank])
    finally:
        for name in ("hta_cp_annotation", "hta_cp_first_instance", "hta_cp_last_instance"):
            s.execute(f"RESET VARIABLE {name}")
    columns = table.to_pydict()
    if table.num_rows and any(columns["has_sync_events"]):
        raise NotImplementedError(
            f"critical_path_analysis: rank {rank} has CUDA sync events (cuda_sync); cclq does not build HTA's sync "
            "edges yet, so it gives no path rather than a different one")
    path = longest_path_columns(columns["src_node"], columns["dst_node"], columns["path_weight_us"],
                                columns["edge_no"])
    by_no = {no: i for i, no in enumerate(columns["edge_no"])}
    edges = [{k: columns[k][by_no[no]] for k in columns} for no in path]
    return CPGraph(rank, edges, trace), bool(edges)


def overlay(data: HtaData, trace: Trace, graph: CPGraph, output_dir: str | Path, only_show_critical_events: bool,
            show_all_edges: bool) -> str:
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
    wanted = [e for e in graph.edges if show_all_edges and not only_show_critical_events
              or e["edge_type"] in SHOWN_EDGES]
    needed = {e["src_event_idx"] for e in wanted} | {e["dst_event_idx"] for e in wanted}
    seen: dict[int, Event] = {}

    def mark(event: Event) -> Event | None:
        idx = event["__idx"]
        if idx in critical:
            event.setdefault("args", {})["critical"] = 1
        if idx in needed:
            seen[idx] = {k: event.get(k) for k in ("pid", "tid", "ts", "dur", "args")}
        if only_show_critical_events and event.get("ph") == "X" and event.get("cat", "") not in (
                "user_annotation", "python_function") and idx not in critical:
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
                flow: Event = {"ph": "s" if is_start else "f", "id": flow_id, "pid": ev["pid"], "tid": ev["tid"],
                               "ts": int(end_ts if is_end_node else ev["ts"]), "cat": EDGE_TYPES[e["edge_type"]],
                               "name": "critical_path", "args": {"weight": int(e["weight_us"]), "critical": True}}
                if not is_start:
                    flow["bp"] = "e"
                out_events.append(flow)
        return out_events

    class _Flows:
        def __iter__(self) -> Any:  # after the events are written: the endpoints are seen by then
            return iter(flows())

    write_trace(data.session, file_id, out, mark, _Flows(), written_from=source.name)
    return str(out)
