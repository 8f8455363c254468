"""Runs HTA 0.5.0's example notebooks (tests/hta_golden/notebooks/ipynb, HTA's examples/
with their outputs stripped) as Jupyter would, cell by cell, and describes what each cell
shows, so that HTA's answers (recorded by tests/hta_golden/generate_notebooks.py in a venv
with HTA) and cclq's (tests/api/test_hta_notebooks.py) can be compared.

Imports nothing of cclq or pytest at module level: the generator runs it under HTA.

What is changed in a notebook, and only that:
* the import lines, with ``use_cclq``: ``from hta.`` -> ``from cclq.hta.``, ``import hta``
  -> ``import cclq.hta`` (the mechanical change docs/api.md promises);
* the path of the HTA checkout every notebook asks its reader to fill in (``hta_dir``,
  ``trace_prefix``, ``base_dir``, ``path_to_hta``, ``~/HolisticTraceAnalysis``, the
  ``!find`` that looks for it) -> a folder laid out like HTA's checkout
  (``make_tree``), and ``/tmp/`` output folders -> a temporary folder;
* IPython-only lines: ``obj?`` (help), ``%%time``;
* identify_stragglers' cell 7 reads ``trace_path``, a name the notebook never defines (a
  NameError in HTA too): it reads ``trace_dir``, the variable set on the line before;
* ``VARIANTS`` below: the critical path notebook also on ``cuda_event_sync`` (its trace
  folder, and the annotation and instance HTA's own test uses for that trace).

Figures: ``plotly``'s ``BaseFigure.show`` is replaced while a notebook runs by one that
records the figure (its title and each trace's type, name and point count) instead of
rendering it (no browser, no kaleido), under both HTA and cclq.
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import math
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent.parent / "hta_golden" / "notebooks"
NOTEBOOKS = HERE / "ipynb"
ANSWERS = HERE / "answers"
BUNDLED = HERE / "tree"  # HTA's test-data files small enough to keep here (see README.md there)

# HTA's test-data folders the notebooks read -> where the trace is found: a folder of
# ../shared/traces, or None for one bundled in BUNDLED
SHARED_FOLDERS = {
    # HTA's vision_transformer (8 ranks, 150 MB, not in the shared set): the 2-rank NCCL
    # trace stands in for it (ranks 0 and 1 as the notebooks ask; steps recorded with HTA)
    "vision_transformer": "hta_trace_filter_2rank",
    "ns_resolution_trace": "hta_ns_resolution",
}


@dataclass
class Variant:
    """One run of a notebook: ``name`` keys its answers file."""

    name: str
    notebook: str
    replace: list[tuple[str, str]] = field(default_factory=list)  # extra (regex, replacement) on every cell
    probes: list[str] = field(default_factory=list)  # expressions evaluated after the last cell
    # cells whose printed lines come from an unstable sort (pandas' default quicksort) over
    # tied keys: the order of the ties is numpy's (it changed in numpy 2), not HTA's or
    # cclq's, so their lines are compared as a multiset, and the sort key's order is
    # checked by the cells that print it
    unordered_stdout: set[int] = field(default_factory=set)


# what HTA's CPGraph and cclq's both answer about the graph, beyond the cells' outputs:
# the path's edges and every sync edge, by (event, start/end) so that node numbering
# (HTA sorts its nodes with an unstable sort) does not matter
CP_PROBES = [
    "sorted((cp_graph.node_list[e.begin].ev_idx, cp_graph.node_list[e.begin].is_start, "
    "cp_graph.node_list[e.end].ev_idx, cp_graph.node_list[e.end].is_start, e.weight, e.type.value) "
    "for e in cp_graph.critical_path_edges_set)",
    "sorted((cp_graph.node_list[u].ev_idx, cp_graph.node_list[u].is_start, cp_graph.node_list[v].ev_idx, "
    "cp_graph.node_list[v].is_start) for u, v in cp_graph.edges "
    "if cp_graph.edges[u, v]['object'].type.value == 'critical_path_sync_dependency')",
    "len(cp_graph.nodes)",
    "len(cp_graph.edges)",
    # HTA builds it from a set: its row order is the set's (hash) order
    # (and `cat` is a symbol id, which HTA numbers in a set's order, different on every run)
    "cp_graph.get_critical_path_breakdown().drop(columns=['cat'])"
    ".sort_values(['event_idx', 'type', 'duration'], na_position='first').reset_index(drop=True)",
    "sorted(cp_graph.critical_path_events_set)",
]

VARIANTS = [
    Variant("trace_analysis_demo", "trace_analysis_demo"),
    Variant("kernel_breakdown_demo", "kernel_breakdown_demo"),
    Variant("critical_path_analysis", "critical_path_analysis", probes=CP_PROBES),
    Variant(
        "critical_path_analysis_cuda_event_sync",
        "critical_path_analysis",
        replace=[
            (r"critical_path/simple_add", "critical_path/cuda_event_sync"),
            (
                r'annotation = "\[param\|pytorch\.model\.alex_net\|0\|0\|0\|measure\|forward\]"',
                'annotation = "ProfilerStep"',
            ),
            (r"instance_id = 1 ", "instance_id = 0 "),
        ],
        probes=CP_PROBES,
    ),
    Variant(
        "critical_path_analysis_cuda_event_sync_multi_stream",
        "critical_path_analysis",
        replace=[
            (r"critical_path/simple_add", "critical_path/cuda_event_sync_multi_stream"),
            (r'annotation = "\[param\|pytorch\.model\.alex_net\|0\|0\|0\|measure\|forward\]"', 'annotation = ""'),
            (r"instance_id = 1 ", "instance_id = None "),
        ],
        probes=CP_PROBES,
    ),
    # cell 26 prints the ops of sort_values(by="Control_counts", ascending=False): many tie
    Variant("trace_diff_demo", "trace_diff_demo", unordered_stdout={26}),
    Variant("identify_stragglers", "identify_stragglers"),
]


def make_tree(root: Path, shared: Path) -> None:
    """A folder laid out like HTA's checkout, with the trace folders the notebooks read
    (copied: the notebooks write beside the traces)."""
    (root / "hta").mkdir(parents=True, exist_ok=True)  # trace_diff_demo checks for it
    shutil.copytree(BUNDLED, root, dirs_exist_ok=True)
    for folder, source in SHARED_FOLDERS.items():
        if not (shared / source).is_dir():
            continue
        dest = root / "tests" / "data" / folder
        dest.mkdir(parents=True, exist_ok=True)
        for f in sorted((shared / source).iterdir()):
            if f.name.endswith((".json", ".json.gz", ".gz")):
                shutil.copy(f, dest / f.name)


def code_cells(notebook: str) -> list[tuple[int, str]]:
    nb = json.loads((NOTEBOOKS / f"{notebook}.ipynb").read_text())
    return [(i, "".join(c["source"])) for i, c in enumerate(nb["cells"]) if c["cell_type"] == "code"]


def adapt(source: str, variant: Variant, root: Path, tmp: Path, use_cclq: bool) -> str:
    """The cell as run (see the module docstring for every change)."""
    lines = []
    for line in source.splitlines():
        stripped = line.strip()
        if stripped.endswith("?") and not stripped.startswith("#") or stripped.startswith("%%time"):
            continue
        if "=!find" in stripped.replace(" ", ""):
            line = line.split("=")[0].rstrip() + f" = [{str(root)!r}]"
        lines.append(line)
    text = "\n".join(lines)
    text = re.sub(
        r'(hta_dir|trace_prefix|path_to_hta)\s*=\s*"[^"\n]*"', lambda m: f"{m.group(1)} = {str(root)!r}", text
    )
    text = re.sub(r"base_dir\s*=\s*<update base path here>", f"base_dir = {str(root)!r}", text)
    text = text.replace("~/HolisticTraceAnalysis", str(root))
    text = text.replace('"/tmp/', f'"{tmp}/')
    text = text.replace("TraceAnalysis(trace_dir = trace_path)", "TraceAnalysis(trace_dir = trace_dir)")
    for pattern, repl in variant.replace:
        text = re.sub(pattern, repl, text)
    if use_cclq:
        text = re.sub(r"^(\s*)from hta\.", r"\1from cclq.hta.", text, flags=re.M)
        text = re.sub(r"^(\s*)import hta\b", r"\1import cclq.hta", text, flags=re.M)
    return text


@dataclass
class CellResult:
    cell: int
    value: Any  # describe() of the cell's Out[], or None
    stdout: str
    figures: list[dict[str, Any]]
    error: str | None


def _figure(fig: Any) -> dict[str, Any]:
    layout = fig.layout
    title = layout.title.text if layout.title is not None else None
    return {
        "title": title,
        "traces": [
            {
                "type": t.type,
                "name": getattr(t, "name", None),
                "points": len(t.x)
                if getattr(t, "x", None) is not None
                else (len(t.values) if getattr(t, "values", None) is not None else None),
            }
            for t in fig.data
        ],
    }


def run(
    variant: Variant, root: Path, tmp: Path, use_cclq: bool, namespace: dict[str, Any] | None = None
) -> tuple[list[CellResult], dict[str, Any]]:
    """Runs the notebook's code cells in order in one namespace; each cell's result."""
    import plotly.basedatatypes as bdt

    ns: dict[str, Any] = namespace if namespace is not None else {"__name__": "__notebook__"}
    shown: list[Any] = []
    original = bdt.BaseFigure.show
    bdt.BaseFigure.show = lambda self, *a, **kw: shown.append(self)  # type: ignore[method-assign]
    results = []
    try:
        for i, source in code_cells(variant.notebook):
            code = adapt(source, variant, root, tmp, use_cclq)
            out = io.StringIO()
            shown.clear()
            value, error = None, None
            try:
                with contextlib.redirect_stdout(out):
                    value = _exec(code, ns)
            except Exception as e:  # noqa: BLE001 (a failing cell is an answer too)
                error = f"{type(e).__name__}: {e}".splitlines()[0]
            printed = out.getvalue().replace(str(tmp), "<TMP>").replace(str(root), "<ROOT>")
            results.append(CellResult(i, describe(value, root, tmp), printed, [_figure(f) for f in shown], error))
    finally:
        bdt.BaseFigure.show = original  # type: ignore[method-assign]
    return results, ns


def _exec(code: str, ns: dict[str, Any]) -> Any:
    tree = ast.parse(code)
    if not tree.body:
        return None
    last = tree.body[-1]
    if isinstance(last, ast.Expr):
        exec(compile(ast.Module(tree.body[:-1], []), "<cell>", "exec"), ns)
        return eval(compile(ast.Expression(last.value), "<cell>", "eval"), ns)
    exec(compile(tree, "<cell>", "exec"), ns)
    return None


def probe(variant: Variant, ns: dict[str, Any], root: Path, tmp: Path) -> list[Any]:
    out = []
    for expr in variant.probes:
        try:
            out.append(describe(eval(expr, ns), root, tmp))
        except Exception as e:  # noqa: BLE001
            out.append({"error": f"{type(e).__name__}: {e}".splitlines()[0]})
    return out


def describe(value: Any, root: Path, tmp: Path) -> Any:
    """A JSON-able description of what a cell shows: frames and series with their shape,
    index, columns, dtypes and values; containers element-wise; paths under the tree or
    the temporary folder relative to them."""
    import numpy as np
    import pandas as pd

    def plain(v: Any) -> Any:
        if isinstance(v, np.generic):
            v = v.item()
        if isinstance(v, float) and math.isnan(v):
            return {"nan": True}
        if isinstance(v, str):
            return v.replace(str(tmp), "<TMP>").replace(str(root), "<ROOT>")
        if isinstance(v, tuple):
            return {"tuple": [plain(x) for x in v]}
        if v is pd.NA or v is None:
            return None
        if isinstance(v, (bool, int, float)):
            return v
        return {"repr": type(v).__name__}

    def index(ix: Any) -> dict[str, Any]:
        return {
            "names": [plain(n) for n in ix.names],
            "dtype": str(ix.dtype),
            "levels_dtypes": [str(ix.get_level_values(i).dtype) for i in range(ix.nlevels)],
            "values": [plain(v) for v in ix.tolist()],
        }

    if isinstance(value, pd.DataFrame):
        return {
            "kind": "DataFrame",
            "shape": list(value.shape),
            "index": index(value.index),
            "columns": index(value.columns),
            "dtypes": [str(d) for d in value.dtypes],
            "values": [[plain(v) for v in value.iloc[:, j].tolist()] for j in range(value.shape[1])],
        }
    if isinstance(value, pd.Series):
        return {
            "kind": "Series",
            "shape": list(value.shape),
            "name": plain(value.name),
            "index": index(value.index),
            "dtype": str(value.dtype),
            "values": [plain(v) for v in value.tolist()],
        }
    if isinstance(value, dict):
        return {"kind": "dict", "items": [[plain(k), describe(v, root, tmp)] for k, v in value.items()]}
    if isinstance(value, (list, tuple)):
        return {"kind": type(value).__name__, "items": [describe(v, root, tmp) for v in value]}
    if isinstance(value, (set, frozenset)):
        return {"kind": "set", "items": sorted(json.dumps(describe(v, root, tmp), sort_keys=True) for v in value)}
    return plain(value)


def overlays(root: Path) -> list[Any]:
    """What the overlaid traces written under the tree show: per file, the events marked
    critical (name, ts, dur) and the flow arrows (phase, category, ts, pid, tid, weight),
    sorted (ids and file order aside)."""
    import gzip

    out = []
    for path in sorted(root.rglob("overlaid_critical_path_*.json.gz")):
        with gzip.open(path, "rt") as f:
            events = json.load(f)["traceEvents"]
        critical = sorted(
            [str(e.get("name")), e.get("ts"), e.get("dur")]
            for e in events
            if e.get("ph") == "X" and (e.get("args") or {}).get("critical") == 1
        )
        flows = sorted(
            [
                e["ph"],
                e.get("cat"),
                e.get("ts"),
                str(e.get("pid")),
                str(e.get("tid")),
                (e.get("args") or {}).get("weight"),
            ]
            for e in events
            if e.get("ph") in ("s", "f")
        )
        out.append({"file": path.name, "events": len(events), "critical": critical, "flows": flows})
    return out


def record(results: list[CellResult], probes: list[Any], overlaid: list[Any]) -> dict[str, Any]:
    return {
        "cells": [
            {"cell": r.cell, "value": r.value, "stdout": r.stdout, "figures": r.figures, "error": r.error}
            for r in results
        ],
        "probes": probes,
        "overlays": overlaid,
    }


def differences(
    expected: Any, actual: Any, where: str = "", rel: float = 1e-9, out: list[str] | None = None, limit: int = 20
) -> list[str]:
    """Where ``actual`` differs from ``expected`` (both describe() output): numbers to
    ``rel`` relative (or 1e-9 absolute near 0), everything else exactly."""
    out = [] if out is None else out
    if len(out) >= limit:
        return out
    if isinstance(expected, bool) or isinstance(actual, bool):
        if expected is not actual:
            out.append(f"{where}: {expected!r} != {actual!r}")
    elif isinstance(expected, (int, float)) and isinstance(actual, (int, float)):
        if not math.isclose(expected, actual, rel_tol=rel, abs_tol=1e-9):
            out.append(f"{where}: {expected!r} != {actual!r}")
    elif isinstance(expected, dict) and isinstance(actual, dict):
        if set(expected) != set(actual):
            out.append(f"{where}: keys {sorted(expected)} != {sorted(actual)}")
        for k in expected:
            if k in actual:
                differences(expected[k], actual[k], f"{where}.{k}", rel, out, limit)
    elif isinstance(expected, list) and isinstance(actual, list):
        if len(expected) != len(actual):
            out.append(f"{where}: length {len(expected)} != {len(actual)}")
        for i, (e, a) in enumerate(zip(expected, actual)):
            differences(e, a, f"{where}[{i}]", rel, out, limit)
    elif expected != actual:
        out.append(f"{where}: {str(expected)[:200]!r} != {str(actual)[:200]!r}")
    return out
