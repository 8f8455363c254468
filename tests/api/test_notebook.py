"""docs/notebook.ipynb, executed in a real Jupyter kernel: its outputs are checked
against numbers read straight from the bundled trace files."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from helpers.paths import REPO

pytestmark = pytest.mark.slow  # (CONTRIBUTING.md: over ~2 s each)

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")
pytest.importorskip("pandas")  # cclq.TraceAnalysis's tables and figures: the hta extra
pytest.importorskip("plotly")


def _kernels_per_rank() -> dict[int, int]:
    """Kernel events per rank, counted from the Kineto JSON itself (not through cclq)."""
    counts: Counter[int] = Counter()
    for path in (REPO / "trace_collection" / "synthetic_mlp_dp4").glob("*.json*"):
        opener = __import__("gzip").open if path.suffix == ".gz" else open
        with opener(path, "rt") as f:
            doc = json.load(f)
        rank = doc["distributedInfo"]["rank"]
        counts[rank] += sum(1 for e in doc["traceEvents"] if e.get("cat") == "kernel" and e.get("ph") == "X")
    return dict(counts)


def _text(cell: dict) -> str:
    out = []
    for o in cell.get("outputs", []):
        out.append(o.get("text", ""))
        out.append(o.get("data", {}).get("text/plain", ""))
    return "".join(out)


def _figures(cell: dict) -> list[str]:
    """The titles of the plotly figures a cell showed (plotly's own MIME type)."""
    out = []
    for o in cell.get("outputs", []):
        fig = o.get("data", {}).get("application/vnd.plotly.v1+json")
        if fig is not None:
            title = fig.get("layout", {}).get("title", {})
            out.append(title.get("text") if isinstance(title, dict) else title)
    return out


def test_the_notebook_runs_and_shows_what_the_traces_hold(tmp_path: Path) -> None:
    nb = nbformat.read(REPO / "docs" / "notebook.ipynb", as_version=4)
    client = nbclient.NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(REPO / "docs")}}
    )
    client.execute()
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert not [o for c in code for o in c.outputs if o.output_type == "error"]
    assert "4 files, 0 failed" in _text(code[0])
    expected = sorted(_kernels_per_rank().items())
    assert str(expected) in _text(code[3])  # kernels.rows() printed by the SQL cell
    report = code[-1].outputs[0]["data"]
    assert "text/html" in report and report["text/html"].count("<svg") >= 2  # the report's figures
    assert "synthetic_mlp_dp4" in report["text/html"]
    # HTA's API: pandas tables in HTA's shapes, and HTA's plotly figures (visualize=True)
    temporal = code[5]
    tables = [
        o["data"]["text/html"]
        for o in temporal.outputs
        if "text/html" in o.get("data", {}) and "<table" in o["data"]["text/html"]
    ]
    assert tables and "idle_time(us)" in tables[-1] and "compute_time_pctg" in tables[-1]
    plain = [o["data"]["text/plain"] for o in temporal.outputs if "text/plain" in o.get("data", {})][-1]
    assert [line.split()[:2] for line in plain.splitlines()[1:5]] == [["0", "0"], ["1", "1"], ["2", "2"], ["3", "3"]]
    assert _figures(temporal) == ["Temporal breakdown across ranks"]
    assert _figures(code[6]) == [
        "Idle time breakdown on rank 0 per CUDA stream",
        "Idle time breakdown on rank 1 per CUDA stream",
    ]
    kernel_figures = _figures(code[7])
    assert kernel_figures[0] == "Kernel Type Percentage Across All Ranks"
    assert 'Kernel type "COMPUTATION" - kernel distribution on each rank' in kernel_figures
    summary = _text(code[8])
    assert "queue_length" in summary and "count" in summary and "stream" in summary  # two-level columns
