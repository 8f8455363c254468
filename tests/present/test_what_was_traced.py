"""Report, diff and board say what was traced (issue 41): the ranks traced of the world
size, partial marked wherever numbers are shown, the GPU model and count from the
trace's deviceProperties when there is no workload card, and what differs between the
two sides of a diff before its tables.

Two workloads without cards, numbers by hand:
* ``h100_part``: rank 0 of a world of 4 (Kineto's distributedInfo), deviceProperties of
  H100s: 1 of 4 ranks traced, partial, 4 x NVIDIA H100 80GB HBM3.
* ``v100_whole``: ranks 0 and 1 of a world of 2, deviceProperties of a V100: whole,
  2 x Tesla V100-SXM2-16GB.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from helpers.cli import invoke
from helpers.traces import write_trace
from helpers.warehouse import run_ingest

from cclq.store.warehouse import Warehouse
from cclq.synth.kineto import KinetoTraceBuilder

pytestmark = pytest.mark.slow  # (CONTRIBUTING.md: over ~2 s each)

H100 = "NVIDIA H100 80GB HBM3"
V100 = "Tesla V100-SXM2-16GB"


def _v100_rank(path: Path, rank: int) -> None:
    events = [
        {
            "ph": "X",
            "cat": "kernel",
            "name": "volta_sgemm_128x64_nn",
            "pid": 0,
            "tid": 7,
            "ts": 100.0 + rank,
            "dur": 50.0,
            "args": {"device": 0, "stream": 7, "correlation": 1},
        },
        {
            "ph": "X",
            "cat": "kernel",
            "name": "volta_sgemm_128x64_nn",
            "pid": 0,
            "tid": 7,
            "ts": 200.0,
            "dur": 30.0,
            "args": {"device": 0, "stream": 7, "correlation": 2},
        },
    ]
    write_trace(
        path,
        events,
        distributedInfo={"backend": "nccl", "rank": rank, "world_size": 2},
        deviceProperties=[{"id": 0, "name": V100, "numSms": 80, "computeMajor": 7, "computeMinor": 0}],
    )


@pytest.fixture(scope="module")
def wh(tmp_path_factory) -> Warehouse:
    root = tmp_path_factory.mktemp("traced")
    b = KinetoTraceBuilder(rank=0, world_size=4)
    b.kernel("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n", 0, 40_000)
    b.kernel("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n", 50_000, 40_000)
    b.write(root / "in" / "h100_part" / "rank0.json")
    for rank in range(2):
        _v100_rank(root / "in" / "v100_whole" / f"rank{rank}.json", rank)
    w = Warehouse(root / "wh")
    report = run_ingest([root / "in"], w)
    assert not report.failed, [o.message for o in report.failed]
    return w


def test_report_json_says_what_was_traced(wh):
    part = invoke("report", "h100_part", "-w", str(wh.root), "--format", "json")
    assert part.returncode == 0, part.stderr
    data = json.loads(part.stdout)
    assert data["traced"] == {
        "ranks_seen": 1,
        "world_size": 4,
        "text": "1 of 4 ranks traced",
        "partial": "1 of 4 ranks",
    }
    assert data["hardware"] == {"model": H100, "count": 4, "source": "trace"}
    assert "PARTIAL: 1 of 4 ranks traced" in data["headline"] and f"4 x {H100}" in data["headline"]
    whole = json.loads(invoke("report", "v100_whole", "-w", str(wh.root), "--format", "json").stdout)
    assert whole["traced"] == {"ranks_seen": 2, "world_size": 2, "text": "2 of 2 ranks traced", "partial": None}
    assert whole["hardware"] == {"model": V100, "count": 2, "source": "trace"}
    assert "PARTIAL" not in whole["headline"]


def test_report_text_and_html_mark_partial(wh):
    text = invoke("report", "h100_part", "-w", str(wh.root))
    assert text.returncode == 0, text.stderr
    out = text.stdout
    assert "1 of 4 ranks traced" in out
    assert f"4 x {H100} (from the trace's deviceProperties)" in out
    assert "PARTIAL: 1 of 4 ranks traced; every number below covers those ranks only" in out
    assert "4 ranks," not in out  # never the world size alone as if it were traced
    titles = [line for line in out.splitlines() if "(partial: 1 of 4 ranks)" in line]
    assert titles, out  # every category table that shows numbers
    html = invoke("report", "h100_part", "-w", str(wh.root), "--format", "html").stdout
    assert "<strong>Partial:</strong> 1 of 4 ranks traced" in html
    assert "(partial: 1 of 4 ranks)</h3>" in html
    assert f"4 x {H100}" in html
    whole = invoke("report", "v100_whole", "-w", str(wh.root)).stdout
    assert "2 of 2 ranks traced" in whole and "partial" not in whole.lower()


def test_diff_states_what_differs_before_the_tables(wh):
    done = invoke("diff", "h100_part", "v100_whole", "-w", str(wh.root))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    at = lines.index("A and B differ in what was traced:")
    assert lines[at + 1 : at + 4] == [
        f"  hardware: A 4 x {H100}, B 2 x {V100}",
        "  world size: A 4, B 2",
        "  partial: A 1 of 4 ranks, B no",
    ]
    assert not any("framework:" in x for x in lines)  # both Kineto traces without a card
    first_table = next(i for i, x in enumerate(lines) if x.startswith("metrics: B against A"))
    assert at < first_table
    assert "A partial: 1 of 4 ranks" in lines[first_table]
    assert any(x.startswith("A is PARTIAL (1 of 4 ranks traced)") for x in lines[:at])
    data = json.loads(invoke("diff", "h100_part", "v100_whole", "-w", str(wh.root), "--format", "json").stdout)
    assert data["differences"] == [
        f"hardware: A 4 x {H100}, B 2 x {V100}",
        "world size: A 4, B 2",
        "partial: A 1 of 4 ranks, B no",
    ]


def test_board_shows_hardware_from_the_trace_and_partial(wh, tmp_path):
    from cclq.present.board.build import build_board

    build_board(wh, tmp_path / "site")
    index = (tmp_path / "site" / "index.html").read_text()
    assert f"{H100}" in index.replace("<wbr>", "") and V100 in index.replace("<wbr>", "")
    assert '<span title="1 of 4 ranks traced">1 of 4</span>' in index
    assert 'class="badge partial"' in index
    assert '<sup class="partial">*</sup>' in index
    row_v100 = next(x for x in index.splitlines() if 'data-trace="v100_whole"' in x)
    assert "partial" not in row_v100


def test_diff_html_has_the_differences_and_the_reports_plots(wh, tmp_path):
    """The page says what differs, marks A partial, and draws for each side the figures
    `cclq report --format html` draws for that trace (the same figure keys)."""
    page = tmp_path / "diff.html"
    done = invoke("diff", "h100_part", "v100_whole", "-w", str(wh.root), "--format", "html", "-o", str(page))
    assert done.returncode == 0, done.stderr
    html = page.read_text()
    assert "<strong>A and B differ in what was traced:</strong>" in html
    assert f"<li>hardware: A 4 x {H100}, B 2 x {V100}</li>" in html
    assert "<li>world size: A 4, B 2</li><li>partial: A 1 of 4 ranks, B no</li>" in html
    assert "metrics: B against A (A partial: 1 of 4 ranks)</h3>" in html
    for side, trace in (("A", "h100_part"), ("B", "v100_whole")):
        report = invoke("report", trace, "-w", str(wh.root), "--format", "html").stdout
        keys = re.findall(r'<figure class="plot" id="fig-([\w-]+)"', report)
        assert keys, report[:500]
        assert re.findall(rf'<figure class="plot" id="fig-([\w-]+)-{side}-{trace}"', html) == keys
