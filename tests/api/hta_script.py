"""An HTA user's script: every public method of HTA 0.5.0's ``TraceAnalysis`` (and the parts
of its ``Trace``, ``ta.t``, that scripts use), called with the default arguments and the
common keyword arguments of HTA's documentation, and the objects they return made
comparable.

It imports nothing of cclq or HTA: ``run_script`` is given the ``TraceAnalysis`` class and
``TimeSeriesTypes`` flag of one library, which is how the same script runs unchanged on
both (HTA: ``from hta.trace_analysis import TraceAnalysis, TimeSeriesTypes``; cclq:
``from cclq import TraceAnalysis, TimeSeriesTypes``). ``tests/hta_golden/generate_api.py``
runs it with HTA 0.5.0 and stores what HTA returned (``encode``) in
``tests/hta_golden/api/``; ``tests/api/test_hta_script.py`` runs it with cclq and compares
(``compare``) with HTA live where HTA is importable, else with those files.

What a call returns is encoded with its type (pandas DataFrame / Series, dict, tuple,
list, scalar), index and column labels (every level), dtypes and values; an exception as
its type and first line; the figures a call showed (plotly's ``Figure.show`` is
intercepted) as their titles and trace types; a file a call wrote as its events counted
by phase, category and name.
"""

from __future__ import annotations

import gzip
import json
import math
import shutil
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

try:  # json takes 5x as long on MTIA's 1.3 M written events; HTA's own Python may lack orjson
    from orjson import loads as _loads
except ImportError:
    from json import loads as _loads

SEQUENCE_OPS = ["aten::linear", "aten::conv2d", "aten::mm", "aten::add_"]


class Raised:
    """What a call raised (type and first line), recorded in place of its result."""

    def __init__(self, exc: BaseException) -> None:
        text = str(exc).splitlines()[0] if str(exc) else ""
        self.error = f"{type(exc).__name__}: {text}"

    def __repr__(self) -> str:
        return f"Raised({self.error})"


@contextmanager
def shown_figures() -> Iterator[list[dict]]:
    """Records every plotly figure shown inside the block instead of rendering it."""
    try:
        from plotly.basedatatypes import BaseFigure
    except ImportError:
        yield []
        return
    seen: list[dict] = []
    original = BaseFigure.show

    def record(self: Any, *args: Any, **kwargs: Any) -> None:
        layout = self.layout
        seen.append(
            {"title": layout.title.text, "traces": sorted({tr.type for tr in self.data}), "n_traces": len(self.data)}
        )

    BaseFigure.show = record
    try:
        yield seen
    finally:
        BaseFigure.show = original


def written_trace(path: str | Path) -> dict:
    """A trace file a call wrote, as its events counted by (ph, cat, name) and its
    top-level keys (the events' order and formatting aside)."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        doc = _loads(f.read())
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    # a name that is all digits is a symbol id (HTA's compressed names: each library's own numbering)
    counts = Counter(
        (str(e.get("ph")), str(e.get("cat")), "<symbol id>" if str(e.get("name")).isdigit() else str(e.get("name")))
        for e in events
    )
    patterns = Counter(
        json.dumps(e["args"]["Patterns"], sort_keys=True)
        for e in events
        if isinstance(e.get("args"), dict) and "Patterns" in e["args"]
    )
    critical = sum(1 for e in events if isinstance(e.get("args"), dict) and e["args"].get("critical") == 1)
    # the top-level keys other than these (schemaVersion, traceName, ...) are the profiler's
    # own notes, which cclq's warehouse does not keep
    return {
        "keys": sorted(k for k in doc if k in ("distributedInfo", "traceEvents")) if isinstance(doc, dict) else [],
        "events": sorted([*k, n] for k, n in counts.items()),
        "patterns": sorted([k, n] for k, n in patterns.items()),
        "critical": critical,
    }


def run_script(
    TraceAnalysis: Any,
    TimeSeriesTypes: Any,
    trace_dir: Path,
    scratch: Path,  # noqa: N803
    **kwargs: Any,
) -> dict[str, Any]:
    """Runs the script on a copy of ``trace_dir`` in ``scratch`` (HTA writes its counter
    traces beside the trace files); returns {call: result}. ``kwargs`` go to every
    ``TraceAnalysis`` made (cclq: the warehouse)."""
    folder = scratch / trace_dir.name
    shutil.copytree(trace_dir, folder)
    out = scratch / "out"
    out.mkdir()
    results: dict[str, Any] = {}

    def call(name: str, fn: Callable[[], Any]) -> Any:
        with shown_figures() as figures:
            try:
                value = fn()
            except Exception as e:  # noqa: BLE001 (recorded: the comparison says where a library fails)
                value = Raised(e)
        results[name] = value
        if figures:
            results[name + " figures"] = figures
        return value

    ta = call("TraceAnalysis(trace_dir)", lambda: TraceAnalysis(trace_dir=str(folder)))
    if isinstance(ta, Raised):
        return results
    t = ta.t
    ranks = call("t.get_ranks()", t.get_ranks)
    rank = ranks[0]
    call("t.get_iterations()", t.get_iterations)
    call("t.get_trace_duration(rank)", lambda: t.get_trace_duration(rank))
    call("sorted(t.get_all_traces())", lambda: sorted(t.get_all_traces()))
    call("t.trace_files", lambda: {r: Path(p).name for r, p in t.trace_files.items()})
    call("t.get_trace(rank)", lambda: trace_view(t.get_trace(rank), t.symbol_table.get_sym_table()))

    call("get_temporal_breakdown()", ta.get_temporal_breakdown)
    call("get_comm_comp_overlap()", ta.get_comm_comp_overlap)
    call("get_gpu_kernel_breakdown()", ta.get_gpu_kernel_breakdown)
    call(
        "get_gpu_kernel_breakdown(num_kernels=3, include_memory_kernels=False)",
        lambda: ta.get_gpu_kernel_breakdown(visualize=False, num_kernels=3, include_memory_kernels=False),
    )
    call(
        "get_gpu_kernel_breakdown(duration_ratio=0.5)",
        lambda: ta.get_gpu_kernel_breakdown(visualize=False, duration_ratio=0.5, image_renderer="json"),
    )
    call("get_idle_time_breakdown()", ta.get_idle_time_breakdown)
    call(
        "get_idle_time_breakdown(ranks, show_idle_interval_stats=True)",
        lambda: ta.get_idle_time_breakdown(ranks=ranks, visualize=False, show_idle_interval_stats=True),
    )
    call(
        "get_idle_time_breakdown(consecutive_kernel_delay=100, visualize_pctg=False)",
        lambda: ta.get_idle_time_breakdown(ranks=ranks, consecutive_kernel_delay=100, visualize_pctg=False),
    )
    call("get_gpu_user_annotation_breakdown()", ta.get_gpu_user_annotation_breakdown)
    call(
        "get_gpu_user_annotation_breakdown(use_gpu_annotation=False)",
        lambda: ta.get_gpu_user_annotation_breakdown(use_gpu_annotation=False, visualize=False),
    )
    call(
        "get_gpu_user_annotation_breakdown(use_gpu_annotation=False, num_kernels=3)",
        lambda: ta.get_gpu_user_annotation_breakdown(use_gpu_annotation=False, visualize=False, num_kernels=3),
    )
    call(
        "get_gpu_kernels_with_user_annotations(rank)",
        lambda: without_ids(ta.get_gpu_kernels_with_user_annotations(rank)),
    )
    call("get_cuda_kernel_launch_stats()", ta.get_cuda_kernel_launch_stats)
    call(
        "get_cuda_kernel_launch_stats(ranks, include_memory_events=False)",
        lambda: ta.get_cuda_kernel_launch_stats(ranks=ranks, include_memory_events=False, visualize=False),
    )
    call("get_queue_length_summary()", ta.get_queue_length_summary)
    call("get_queue_length_summary(ranks)", lambda: ta.get_queue_length_summary(ranks=ranks))
    series = call("get_queue_length_time_series(ranks)", lambda: ta.get_queue_length_time_series(ranks=ranks))
    if isinstance(series, dict):
        results["ties get_queue_length"] = ties(series, "stream")
    call(
        "get_queue_length_summary_from_time_series(series)",
        lambda: ta.get_queue_length_summary_from_time_series(ta.get_queue_length_time_series(ranks=ranks)),
    )
    call(
        "get_time_spent_blocked_on_full_queue(series)",
        lambda: ta.get_time_spent_blocked_on_full_queue(ta.get_queue_length_time_series(ranks=ranks)),
    )
    call(
        "get_time_spent_blocked_on_full_queue(series, max_queue_length=2)",
        lambda: ta.get_time_spent_blocked_on_full_queue(
            ta.get_queue_length_time_series(ranks=ranks), max_queue_length=2
        ),
    )
    call("get_memory_bw_summary()", ta.get_memory_bw_summary)
    call("get_memory_bw_summary(ranks)", lambda: ta.get_memory_bw_summary(ranks=ranks))
    bw = call("get_memory_bw_time_series(ranks)", lambda: ta.get_memory_bw_time_series(ranks=ranks))
    if isinstance(bw, dict):
        results["ties get_memory_bw"] = ties(bw, "name")
    call("get_profiler_steps()", ta.get_profiler_steps)
    call("get_potential_stragglers()", ta.get_potential_stragglers)
    call("get_potential_stragglers(num_candidates=1)", lambda: ta.get_potential_stragglers(num_candidates=1))
    call("get_cupti_counter_data_with_operators(ranks)", lambda: ta.get_cupti_counter_data_with_operators(ranks=ranks))
    for op in SEQUENCE_OPS:
        seq_dir = out / f"sequences_{op.replace('::', '_')}"
        seq_dir.mkdir()
        call(
            f"get_frequent_cuda_kernel_sequences({op!r}, output_dir, rank)",
            lambda op=op, seq_dir=seq_dir: ta.get_frequent_cuda_kernel_sequences(op, str(seq_dir), rank=rank),
        )
        for written in sorted(seq_dir.iterdir()):
            call(f"get_frequent_cuda_kernel_sequences({op!r}) wrote", lambda w=written: written_trace(w))
    call("get_aten_op_kernels_and_delay()", ta.get_aten_op_kernels_and_delay)
    call("get_aten_op_kernels_and_delay(ranks)", lambda: ta.get_aten_op_kernels_and_delay(ranks=ranks))

    for instance in (0, 1):
        cp = call(
            f"critical_path_analysis(rank, 'ProfilerStep', {instance})",
            lambda i=instance: ta.critical_path_analysis(rank, "ProfilerStep", i),
        )
        if not isinstance(cp, tuple):  # HTA returns None where the annotation is not in the trace
            continue
        graph, ok = cp
        results[f"critical_path_analysis(rank, 'ProfilerStep', {instance})"] = ("CPGraph", ok)
        if not ok:
            continue
        call(f"critical_path_analysis(..., {instance})[0].summary()", graph.summary)
        if instance == 0:
            cp_dir = out / "critical_path"
            cp_dir.mkdir()
            path = call(
                "overlay_critical_path_analysis(rank, graph, output_dir)",
                lambda g=graph: Path(ta.overlay_critical_path_analysis(rank, g, str(cp_dir))).name,  # noqa: B023  called in this iteration
            )
            if not isinstance(path, Raised):
                call("overlay_critical_path_analysis wrote", lambda p=path: written_trace(cp_dir / p))  # noqa: B023  called in this iteration

    call("generate_trace_with_counters()", ta.generate_trace_with_counters)
    call(
        "generate_trace_with_counters(QUEUE_LENGTH, ranks, '_ql')",
        lambda: ta.generate_trace_with_counters(TimeSeriesTypes.QUEUE_LENGTH, ranks=ranks, output_suffix="_ql"),
    )
    for written in sorted(p for p in folder.iterdir() if "_with_counters" in p.name or "_ql" in p.name):
        call(f"generate_trace_with_counters wrote {written.name}", lambda w=written: written_trace(w))

    # the constructor's other arguments: trace_files (rank -> file) and include_last_profiler_step
    files = {r: str(folder / Path(p).name) for r, p in t.trace_files.items()}
    ta2 = call(
        "TraceAnalysis(trace_files, include_last_profiler_step=True)",
        lambda: TraceAnalysis(trace_files=files, trace_dir=str(folder), include_last_profiler_step=True, **kwargs),
    )
    if not isinstance(ta2, Raised):
        results["TraceAnalysis(trace_files, include_last_profiler_step=True)"] = "TraceAnalysis"
        call("last step: get_profiler_steps()", ta2.get_profiler_steps)
        call("last step: get_temporal_breakdown()", lambda: ta2.get_temporal_breakdown(visualize=False))
    results["TraceAnalysis(trace_dir)"] = "TraceAnalysis"
    return results


def without_ids(frame: Any) -> Any:
    """A frame without its symbol-id columns (each library numbers its symbols its own way;
    the decoded s_* columns say the same)."""
    if frame is None:
        return None
    return frame.drop(columns=[c for c in ("cat", "name", "user_annotation") if c in frame.columns])


def ties(series: dict, group: str) -> list:
    """The (rank, series) pairs of counter series with two or more points at one
    timestamp: there HTA's unstable sort decides the order of the points, and with it the
    running values between them and every statistic of them but the last value at each
    timestamp (see SERIES_CALLS)."""
    out = []
    for rank, frame in series.items():
        counts = frame.groupby([group, "ts"]).size()
        out += [[int(rank), str(g)] for g in sorted({str(k[0]) for k, n in counts.items() if n > 1})]
    return sorted(out)


def trace_view(frame: Any, symbols: list[str]) -> Any:
    """The columns of ``t.get_trace(rank)`` that scripts read, names decoded through the
    symbol table (the symbol ids themselves are each library's own numbering), sorted by
    the event's index (the frame's row order follows HTA's internal concatenations)."""
    view = frame[
        ["index", "ts", "dur", "end", "stream", "correlation", "index_correlation", "iteration", "pid", "tid"]
    ].copy()
    view["s_name"] = [symbols[i] for i in frame["name"]]
    view["s_cat"] = [symbols[i] for i in frame["cat"]]
    return view.sort_values("index", kind="stable").reset_index(drop=True)


# --------------------------------------------------------------------------------------
# Encoding and comparison (no pandas needed to read the encoded form)
# --------------------------------------------------------------------------------------


def _cell(v: Any) -> Any:
    if v is None:
        return None
    if isinstance(v, (list, tuple)) or type(v).__name__ == "ndarray":
        return [_cell(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _cell(x) for k, x in v.items()}
    if isinstance(v, bool) or type(v).__name__ == "bool_":
        return bool(v)
    if isinstance(v, str):
        return v
    kind = type(v).__name__
    if "int" in kind:
        return int(v)
    if "float" in kind:
        f = float(v)
        return None if math.isnan(f) else f
    if kind in ("NAType", "NaTType"):
        return None
    return str(v)


def _labels(index: Any) -> dict:
    return {
        "names": [None if n is None else str(n) for n in index.names],
        "values": [_cell(list(v) if isinstance(v, tuple) else v) for v in index.tolist()],
        "dtype": str(index.dtype) if index.nlevels == 1 else "multi",
    }


def encode(obj: Any) -> Any:
    """A JSON-able description of what a call returned."""
    kind = type(obj).__name__
    if kind == "DataFrame":
        return {
            "type": "DataFrame",
            "index": _labels(obj.index),
            "columns": _labels(obj.columns),
            "dtypes": [str(d) for d in obj.dtypes],
            "data": [[_cell(v) for v in obj.iloc[:, i].tolist()] for i in range(obj.shape[1])],
        }
    if kind == "Series":
        return {
            "type": "Series",
            "name": _cell(obj.name),
            "index": _labels(obj.index),
            "dtype": str(obj.dtype),
            "data": [_cell(v) for v in obj.tolist()],
        }
    if isinstance(obj, Raised):
        return {"type": "raised", "error": obj.error}
    if isinstance(obj, dict):
        return {"type": "dict", "items": [[_cell(k), encode(v)] for k, v in obj.items()]}
    if isinstance(obj, (list, tuple)):
        return {"type": kind, "items": [encode(v) for v in obj]}
    return {"type": "scalar", "kind": _scalar_kind(obj), "value": _cell(obj)}


def _scalar_kind(v: Any) -> str:
    if v is None:
        return "None"
    if isinstance(v, bool) or type(v).__name__ == "bool_":
        return "bool"
    if isinstance(v, str):
        return "str"
    name = type(v).__name__
    return "int" if "int" in name else "float" if "float" in name else name


def _same_dtype(a: str, b: str) -> bool:
    """pandas 3 holds text as ``str``; pandas 2 (HTA's goldens) as ``object``."""
    text = {"object", "str", "string"}
    return a == b or (a in text and b in text)


def _close(a: Any, b: Any, rel: float) -> bool:
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y, rel) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k], rel) for k in a)
    if isinstance(a, bool) or isinstance(b, bool) or isinstance(a, str) or isinstance(b, str):
        return a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(a, b, rel_tol=rel, abs_tol=1e-12)
    return a == b


def compare(got: Any, want: Any, where: str = "", rel: float = 1e-9) -> list[str]:
    """Differences between two encoded objects, as lines naming where (empty: the same)."""
    if got.get("type") != want.get("type"):
        return [
            f"{where}: {got.get('type')} {got.get('error', '')} where HTA has {want.get('type')} "
            f"{want.get('error', '')}".rstrip()
        ]
    kind = want["type"]
    if kind == "raised":
        return []
    if kind in ("dict", "list", "tuple"):
        key = "items"
        if len(got[key]) != len(want[key]):
            return [
                f"{where}: {len(got[key])} items where HTA has {len(want[key])}"
                + (f" (keys {[k for k, _ in got[key]]} vs {[k for k, _ in want[key]]})" if kind == "dict" else "")
            ]
        out: list[str] = []
        for i, (g, w) in enumerate(zip(got[key], want[key])):
            if kind == "dict":
                if g[0] != w[0]:
                    out.append(f"{where}: key {g[0]!r} where HTA has {w[0]!r}")
                    continue
                out += compare(g[1], w[1], f"{where}[{w[0]!r}]", rel)
            else:
                out += compare(g, w, f"{where}[{i}]", rel)
        return out
    if kind == "scalar":
        if got["kind"] != want["kind"] or not _close(got["value"], want["value"], rel):
            return [f"{where}: {got['kind']} {got['value']!r} where HTA has {want['kind']} {want['value']!r}"]
        return []
    out = []
    for part in ("index", "columns") if kind == "DataFrame" else ("index",):
        g, w = got[part], want[part]
        if g["names"] != w["names"]:
            out.append(f"{where}: {part} names {g['names']} where HTA has {w['names']}")
        if not _close(g["values"], w["values"], rel):
            out.append(f"{where}: {part} {_short(g['values'])} where HTA has {_short(w['values'])}")
        if not _same_dtype(g["dtype"], w["dtype"]):
            out.append(f"{where}: {part} dtype {g['dtype']} where HTA has {w['dtype']}")
    if kind == "Series":
        if got["name"] != want["name"]:
            out.append(f"{where}: name {got['name']!r} where HTA has {want['name']!r}")
        if not _same_dtype(got["dtype"], want["dtype"]):
            out.append(f"{where}: dtype {got['dtype']} where HTA has {want['dtype']}")
        if not _close(got["data"], want["data"], rel):
            out.append(f"{where}: values {_short(got['data'])} where HTA has {_short(want['data'])}")
        return out
    if out:
        return out
    for i, label in enumerate(want["columns"]["values"]):
        if not _same_dtype(got["dtypes"][i], want["dtypes"][i]):
            out.append(f"{where}[{label!r}]: dtype {got['dtypes'][i]} where HTA has {want['dtypes'][i]}")
        if not _close(got["data"][i], want["data"][i], rel):
            bad = [r for r, (x, y) in enumerate(zip(got["data"][i], want["data"][i])) if not _close(x, y, rel)]
            out.append(
                f"{where}[{label!r}]: {len(bad)} values differ, first at row {bad[0] if bad else '?'}: "
                f"{_short(got['data'][i][bad[0]] if bad else got['data'][i])} where HTA has "
                f"{_short(want['data'][i][bad[0]] if bad else want['data'][i])}"
            )
    return out


def _short(v: Any) -> str:
    text = repr(v)
    return text if len(text) < 200 else text[:200] + "..."


# --------------------------------------------------------------------------------------
# Canonical forms and digests
# --------------------------------------------------------------------------------------

# HTA sorts its counter series with pandas' default sort (numpy's unstable quicksort), so
# the order of points at one timestamp, and the running value between them, is not
# defined (it differs between numpy builds). The comparable form of such a series: its
# points sorted by (series, ts, index), the value only at the last point of each
# timestamp (where every order agrees).
SERIES_CALLS = ("get_queue_length_time_series", "get_memory_bw_time_series")


# HTA sorts these tables by a column with ties (numpy's unstable sort again), after a
# reset_index that numbered the rows: the comparable form has the rows in that numbering.
BY_INDEX_CALLS = ("get_aten_op_kernels_and_delay",)


# The describe() of those series: with points at one timestamp (ties), every statistic
# but the keys can move with HTA's order (the memory bandwidth's count too: a running sum
# of doubles leaves a 1e-16 residue in one order and 0 in another); without, all agree.
SUMMARY_CALLS = {"get_queue_length_summary": "ties get_queue_length", "get_memory_bw_summary": "ties get_memory_bw"}


def canonical(name: str, enc: Any, results: dict[str, Any] | None = None) -> Any:
    """The form of an encoded result that two correct answers share (see SERIES_CALLS,
    SUMMARY_CALLS and BY_INDEX_CALLS); ``results``: the run's other encoded results (for
    the ties a summary's series have)."""
    for prefix, key in SUMMARY_CALLS.items():
        if name.startswith(prefix) and enc.get("type") == "DataFrame" and results is not None:
            tied = {tuple(t) for t in _plain(results.get(key)) or []}
            return _untied(enc, tied)
    if enc.get("type") != "dict":
        return enc
    if name.startswith(SERIES_CALLS):
        return {"type": "dict", "items": [[k, _canonical_series(v)] for k, v in enc["items"]]}
    if name.startswith(BY_INDEX_CALLS):
        return {"type": "dict", "items": [[k, _by_index(v)] for k, v in enc["items"]]}
    return enc


def _by_index(enc: dict) -> dict:
    if enc.get("type") != "DataFrame":
        return enc
    index = enc["index"]["values"]
    order = sorted(range(len(index)), key=lambda r: index[r])
    return {
        **enc,
        "index": {**enc["index"], "values": [index[r] for r in order]},
        "data": [[column[r] for r in order] for column in enc["data"]],
    }


def _canonical_series(enc: dict) -> dict:
    if enc.get("type") != "DataFrame":
        return enc
    columns = enc["columns"]["values"]
    group = "stream" if "stream" in columns else "name"
    value = "queue_length" if "queue_length" in columns else "memory_bw_gbps"
    cols = {c: enc["data"][i] for i, c in enumerate(columns)}
    index = enc["index"]["values"]
    after: dict = {}  # (series, ts) -> the value after every point at ts: the last in the frame's order
    for r in range(len(index)):
        after[(str(cols[group][r]), cols["ts"][r])] = cols[value][r]
    order = sorted(range(len(index)), key=lambda r: (str(cols[group][r]), cols["ts"][r], index[r]))
    data = []
    for c in columns:
        data.append([cols[c][r] if c != value else after[(str(cols[group][r]), cols["ts"][r])] for r in order])
    return {**enc, "index": {**enc["index"], "values": [index[r] for r in order]}, "data": data}


def _plain(enc: Any) -> Any:
    """An encoded list or scalar as the plain value."""
    if not isinstance(enc, dict):
        return enc
    if enc.get("type") in ("list", "tuple"):
        return [_plain(v) for v in enc["items"]]
    return enc.get("value")


def _untied(enc: dict, tied: set) -> dict:
    """A summary with the statistics of its tied series left out (see SUMMARY_CALLS)."""
    keys = [(int(k[0]), str(k[1])) if isinstance(k, list) else k for k in enc["index"]["values"]]
    hidden = [isinstance(k, tuple) and (k[0], k[1]) in {(int(a), str(b)) for a, b in tied} for k in keys]
    data = [[None if hide else v for v, hide in zip(column, hidden)] for column in enc["data"]]
    return {**enc, "data": data}


DIGEST_ROWS = 200  # frames longer than this are stored as digests in the golden files


def digest(enc: Any) -> Any:
    """An encoded result with every frame of more than DIGEST_ROWS rows replaced by a
    digest: its labels' and each column's count, nulls, sum, min, max and a hash of its
    values (rounded to 12 significant digits), so that the golden files stay small."""
    kind = enc.get("type")
    if kind == "dict":
        return {**enc, "items": [[k, digest(v)] for k, v in enc["items"]]}
    if kind in ("list", "tuple"):
        return {**enc, "items": [digest(v) for v in enc["items"]]}
    if kind == "DataFrame" and len(enc["index"]["values"]) > DIGEST_ROWS:
        return {
            **enc,
            "type": "DataFrame digest",
            "index": {**enc["index"], "values": _column_digest(enc["index"]["values"])},
            "data": [_column_digest(c) for c in enc["data"]],
        }
    return enc


def _column_digest(values: list) -> dict:
    import hashlib

    def rounded(v: Any) -> Any:  # 1e-9 relative, and a running sum's residue (1e-16 for 0) as 0
        if isinstance(v, float) and v == v and v not in (float("inf"), float("-inf")):
            return 0.0 if abs(v) < 1e-9 else float(f"{v:.9g}")
        if isinstance(v, list):
            return [rounded(x) for x in v]
        return v

    numbers = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return {
        "n": len(values),
        "nulls": sum(v is None for v in values),
        "sum": math.fsum(numbers) if numbers else None,
        "min": min(numbers) if numbers else None,
        "max": max(numbers) if numbers else None,
        "hash": hashlib.sha1(json.dumps([rounded(v) for v in values]).encode()).hexdigest(),
    }


def compare_digest(got: dict, want: dict, where: str, rel: float = 1e-9) -> list[str]:
    """compare() for a golden digest: ``got`` is the full encoding, digested here."""
    got = digest(got)
    if got.get("type") != "DataFrame digest":
        return [f"{where}: {len(got['index']['values'])} rows where HTA has {want['index']['values']['n']}"]
    out = []
    for part in ("index", "columns"):
        if got[part]["names"] != want[part]["names"]:
            out.append(f"{where}: {part} names {got[part]['names']} where HTA has {want[part]['names']}")
    if got["columns"]["values"] != want["columns"]["values"]:
        return out + [f"{where}: columns {got['columns']['values']} where HTA has {want['columns']['values']}"]
    pairs = [("index", got["index"]["values"], want["index"]["values"], got["index"]["dtype"], want["index"]["dtype"])]
    pairs += [
        (repr(c), g, w, gd, wd)
        for c, g, w, gd, wd in zip(want["columns"]["values"], got["data"], want["data"], got["dtypes"], want["dtypes"])
    ]
    for label, g, w, gd, wd in pairs:
        if not _same_dtype(gd, wd):
            out.append(f"{where}[{label}]: dtype {gd} where HTA has {wd}")
        for key in ("n", "nulls", "min", "max", "sum"):
            if not _close(g[key], w[key], rel) and not (g[key] is None and w[key] is None):
                out.append(f"{where}[{label}]: {key} {g[key]!r} where HTA has {w[key]!r}")
        if g["hash"] != w["hash"] and not out:
            out.append(f"{where}[{label}]: the same count, sum, min and max, other values")
    return out


def compare_any(got: Any, want: Any, where: str = "", rel: float = 1e-9) -> list[str]:
    """compare(), where ``want`` may hold digests (a golden file) in place of frames."""
    if isinstance(want, dict) and want.get("type") == "DataFrame digest":
        return (
            compare_digest(got, want, where, rel)
            if got.get("type") == "DataFrame"
            else [f"{where}: {got.get('type')} {got.get('error', '')} where HTA has a DataFrame"]
        )
    if isinstance(want, dict) and want.get("type") in ("dict", "list", "tuple") and got.get("type") == want["type"]:
        if len(got["items"]) != len(want["items"]):
            return compare(got, want, where, rel)
        out: list[str] = []
        for i, (g, w) in enumerate(zip(got["items"], want["items"])):
            if want["type"] == "dict":
                if g[0] != w[0]:
                    out.append(f"{where}: key {g[0]!r} where HTA has {w[0]!r}")
                    continue
                out += compare_any(g[1], w[1], f"{where}[{w[0]!r}]", rel)
            else:
                out += compare_any(g, w, f"{where}[{i}]", rel)
        return out
    return compare(got, want, where, rel)
