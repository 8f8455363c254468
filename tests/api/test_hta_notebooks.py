"""HTA 0.5.0's own example notebooks, run with ``hta`` imports changed to ``cclq.hta`` and
nothing else (tests/helpers/hta_notebooks.py lists every change, and the path settings every
reader of those notebooks fills in), against HTA's answers to the same cells recorded by
tests/hta_golden/generate_notebooks.py with HTA itself: every cell's output (values to
1e-9, shapes, index, columns, dtypes), its error if HTA's failed, what it printed and the
figures it drew; for the critical path, the path's edges, every sync edge, the graph's
size, the breakdown and the overlaid trace's critical events and arrows.

trace_analysis_demo runs twice on the same folder: its first run writes
``<file>_with_counters.json.gz`` beside the rank-1 trace, and the second run must read the
folder again and give the same answers (HTA does).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from helpers import hta_notebooks as nb
from helpers.paths import SHARED_TRACES

pytestmark = pytest.mark.slow  # (CONTRIBUTING.md: over ~2 s each)

NEEDS_SHARED = {"trace_analysis_demo", "kernel_breakdown_demo", "identify_stragglers"}


def _answers(name: str) -> dict:
    with gzip.open(nb.ANSWERS / f"{name}.json.gz", "rt") as f:
        return json.load(f)


def _compare(
    expected: dict, results: list[nb.CellResult], probes: list, overlays: list, unordered: set[int]
) -> list[str]:
    problems: list[str] = []
    got = {r.cell: r for r in results}
    assert [c["cell"] for c in expected["cells"]] == [r.cell for r in results]
    for cell in expected["cells"]:
        r = got[cell["cell"]]
        where = f"cell {cell['cell']}"
        if cell["error"] != r.error:
            problems.append(f"{where}: error {cell['error']!r} != {r.error!r}")
        nb.differences(cell["value"], r.value, f"{where} value", out=problems)
        if cell["cell"] in unordered:
            if sorted(cell["stdout"].splitlines()) != sorted(r.stdout.splitlines()):
                problems.append(f"{where}: printed lines {cell['stdout'][:300]!r} != {r.stdout[:300]!r}")
        elif cell["stdout"] != r.stdout:
            problems.append(f"{where}: printed {cell['stdout'][:300]!r} != {r.stdout[:300]!r}")
        nb.differences(cell["figures"], r.figures, f"{where} figures", out=problems)
    nb.differences(expected["probes"], probes, "probes", out=problems)
    nb.differences(expected["overlays"], overlays, "overlays", out=problems)
    return problems


def _run(variant: nb.Variant, root: Path, tmp: Path) -> list[str]:
    results, ns = nb.run(variant, root, tmp, use_cclq=True)
    return _compare(
        _answers(variant.name), results, nb.probe(variant, ns, root, tmp), nb.overlays(root), variant.unordered_stdout
    )


@pytest.mark.parametrize("variant", nb.VARIANTS, ids=[v.name for v in nb.VARIANTS])
def test_notebook_gives_htas_answers(variant: nb.Variant, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("pandas")
    pytest.importorskip("plotly")
    if variant.name in NEEDS_SHARED and not SHARED_TRACES.is_dir():
        pytest.skip(f"real traces not available ({SHARED_TRACES} is absent)")
    monkeypatch.setenv("CCLQ_WAREHOUSE", str(tmp_path / "wh"))
    monkeypatch.delenv("CCLQ_FIGURES_DIR", raising=False)
    root, scratch = tmp_path / "HolisticTraceAnalysis", tmp_path / "scratch"
    scratch.mkdir()
    nb.make_tree(root, SHARED_TRACES)
    problems = _run(variant, root, scratch)
    assert not problems, "\n".join(problems)
    if variant.name == "trace_analysis_demo":
        written = sorted(p.name for p in (root / "tests/data/vision_transformer").iterdir())
        assert any(name.endswith("_with_counters.json.gz") for name in written), written
        problems = _run(variant, root, scratch)  # again, on the same folder
        assert not problems, "second run:\n" + "\n".join(problems)
