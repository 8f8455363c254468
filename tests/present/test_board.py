"""`cclq board OUT_DIR`: the leaderboard site, its CCL-Bench data file, incremental rebuilds.

The browser side (sorting, filtering, plots rendering) is in test_board_browser.py.
"""

from __future__ import annotations

import json
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest
from helpers.cli import invoke
from helpers.presentation_traces import SCRIPT_MODEL, board_workloads, two_rank_run
from helpers.warehouse import run_ingest

from cclq.present.board.build import board_specs, build_board
from cclq.present.board.svg import Series, bar_chart, line_chart, nice_ticks
from cclq.present.render import format_number
from cclq.query.metrics import run_metrics
from cclq.query.registry import (
    LEADERBOARD_CATEGORIES,
    parse_metric_file,
    registry,
    resolve,
)
from cclq.query.session import connect
from cclq.store.warehouse import Warehouse

CCL_BENCH_METADATA_KEYS = {
    "workload_name",
    "description",
    "hf_url",
    "trace_url",
    "model_family",
    "phase",
    "precision",
    "moe",
    "granularity",
    "epochs",
    "iteration",
    "batch_size",
    "seq_len",
    "input_len",
    "output_len",
    "dataset",
    "hardware_type",
    "hardware_model",
    "total_count",
    "count_per_node",
    "network_topology",
    "bandwidth_scaleout",
    "bandwidth_scaleup",
    "driver_version",
    "framework",
    "compiler",
    "tp",
    "pp",
    "pp_mb",
    "dp_replicate",
    "dp_shard",
    "ep",
    "cp",
    "comm_library",
    "comm_library_ver",
    "comm_env",
    "protocol_selection",
    "trace_types",
    "metric_traces",
}


class Cells(HTMLParser):
    """The leaderboard's header metric names and, per row, each cell's text and title."""

    def __init__(self) -> None:
        super().__init__()
        self.metrics: list[str] = []
        self.rows: dict[str, list[tuple[str, str | None]]] = {}
        self._row: str | None = None
        self._cell: list[str] | None = None
        self._title: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "th" and a.get("data-metric"):
            self.metrics.append(a["data-metric"] or "")
        if tag == "tr" and a.get("data-trace"):
            self._row = a["data-trace"]
            self.rows[self._row] = []
        if tag == "td" and self._row:
            self._cell, self._title = [], a.get("title")
        if tag == "span" and self._cell is not None and "na" in (a.get("class") or "").split():
            self._title = a.get("title")

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "td" and self._row and self._cell is not None:
            self.rows[self._row].append(("".join(self._cell).strip(), self._title))
            self._cell = None


def parse_index(site: Path) -> Cells:
    cells = Cells()
    cells.feed((site / "index.html").read_text())
    return cells


def summary(spec, rows: list[dict]) -> float:
    """A metric's one number for a trace, computed here from its rows (the test's own code):
    a `ratio A / B` summary pools A and B over the rows with a value."""
    values = [r["value"] for r in rows if r["value"] is not None]
    if spec.summary == "ratio":
        num, den = spec.summary_columns
        kept = [r for r in rows if r["value"] is not None and r[num] is not None and r[den] is not None]
        return sum(r[num] for r in kept) / sum(r[den] for r in kept)
    return {"mean": lambda v: sum(v) / len(v), "sum": sum, "max": max, "min": min, "value": lambda v: v[0]}[
        spec.summary
    ](values)


def test_one_row_per_workload_and_the_leaderboard_columns_come_from_the_headers(board_site):
    wh_root, site, result = board_site
    cells = parse_index(site)
    assert sorted(cells.rows) == ["run_a", "run_b", "run_c", "synthetic_dp4", "synthetic_dp8", "tpu_xla"]
    order = list(LEADERBOARD_CATEGORIES)
    expected = sorted(
        ((v[max(v)].leaderboard, name) for name, v in registry().items() if v[max(v)].leaderboard),
        key=lambda p: (order.index(p[0]), p[1]),
    )
    assert cells.metrics == [name for _, name in expected]
    assert result.computed == sorted(cells.rows) and result.reused == 0


@pytest.mark.slow
def test_values_equal_cclq_metric_output_to_the_printed_digits(board_site):
    """Every leaderboard cell: the metric's rows for the trace (what `cclq metric` prints),
    reduced by the metric's summary here, printed with 6 significant digits; n/a cells
    carry the rows' reason as their tooltip."""
    wh_root, site, _ = board_site
    cells = parse_index(site)
    n_card = 8  # card columns before the metric columns
    con = connect(Warehouse(wh_root))
    try:
        specs = [resolve(name) for name in cells.metrics]
        runs = run_metrics(con, specs)  # one batch: each metric one query, as `cclq metric`
        for j, (name, spec) in enumerate(zip(cells.metrics, specs)):
            assert runs[name].error is None and runs[name].table is not None, (name, runs[name].error)
            rows = runs[name].table.to_pylist()
            for trace, row_cells in cells.rows.items():
                mine = [r for r in rows if r["trace"] == trace]
                values = [r["value"] for r in mine if r["value"] is not None]
                text, title = row_cells[n_card + j]
                if values:
                    assert text == format_number(summary(spec, mine)), (trace, name)
                else:
                    assert text == "n/a"
                    assert title == "; ".join(sorted({r["reason"] for r in mine if r["reason"]})), (trace, name)
    finally:
        con.close()


def test_card_text_is_escaped_everywhere(board_site):
    _, site, _ = board_site
    for page in (site / "index.html", site / "w" / "run_a.html"):
        html = page.read_text()
        assert SCRIPT_MODEL not in html and "<b>bold</b>" not in html
        assert "&lt;script&gt;alert(&#x27;card&#x27;)&lt;/script&gt;" in html
    # the page's own script is the only script on the leaderboard
    assert re.findall(r"<script[^>]*>", (site / "index.html").read_text()) == ['<script src="assets/board.js">']


def test_benchmark_data_json_has_ccl_bench_shape(board_site):
    _, site, _ = board_site
    data = json.loads((site / "benchmark_data.json").read_text())
    assert {"generated_at", "all_metrics", "metric_categories", "metric_info", "rows"} <= set(data)
    board = sorted(n for n, v in registry().items() if v[max(v)].leaderboard)
    assert data["all_metrics"] == board
    assert [c["id"] for c in data["metric_categories"]] == list(LEADERBOARD_CATEGORIES)
    assert all({"id", "label", "description"} <= set(c) for c in data["metric_categories"])
    for name, info in data["metric_info"].items():
        spec = resolve(name)
        assert info["category"] == spec.leaderboard and info["cclq_unit"] == spec.unit
        assert info["higher_is_better"] == {"higher": True, "lower": False}.get(spec.polarity)
    rows = {r["trace"]: r for r in data["rows"]}
    assert len(rows) == 6
    a = rows["run_a"]
    assert set(a["metadata"]) == CCL_BENCH_METADATA_KEYS
    assert a["metadata"]["model_family"] == SCRIPT_MODEL and a["metadata"]["total_count"] == 2
    assert rows["run_c"]["metadata"]["model_family"] == ""  # no card: CCL-Bench's empty string
    assert set(a["metrics"]) == set(board)
    assert a["metrics"]["avg_step_time"] == 0.00225  # hand-computed (presentation_traces)
    assert rows["tpu_xla"]["metrics"]["total_kernel_time"] is None
    assert rows["tpu_xla"]["reasons"]["total_kernel_time"]
    js = (site / "data.js").read_text()
    assert json.loads(js.split("const BENCHMARK_DATA = ", 1)[1].rstrip().rstrip(";")) == data


def test_workload_pages_have_every_plot_or_the_reason(board_site):
    _, site, _ = board_site
    dp8 = (site / "w" / "synthetic_dp8.html").read_text()
    # the generated workload launches its kernels and copies (cudaLaunchKernel, cudaMemcpyAsync
    # with a bandwidth arg) in ProfilerSteps: the four HTA figures are drawn too
    assert dp8.count('data-available="true"') == 11 and dp8.count("<svg") == 11
    for key in ("queue_length", "launch_delay", "memory_bw", "critical_path"):
        assert f'id="fig-{key}" data-available="true"' in dp8
    single = (site / "w" / "run_c.html").read_text()
    # one rank: no straggler; the page says why instead of drawing
    assert re.search(r'id="fig-straggler" data-available="false">.*?n/a: single rank', single)
    tpu = (site / "w" / "tpu_xla.html").read_text()
    assert "Top XLA device ops" in tpu and 'id="fig-top_ops" data-available="true"' in tpu
    assert '<a href="../index.html">' in dp8


@pytest.mark.slow
def test_rebuild_recomputes_only_what_changed(tmp_path: Path):
    inputs = board_workloads(tmp_path / "in")
    for extra in ("synthetic_dp4", "synthetic_dp8", "tpu_xla"):
        shutil.rmtree(inputs / extra)
    wh = Warehouse(tmp_path / "wh")
    assert not run_ingest([inputs], wh).failed
    site = tmp_path / "site"
    (site / "w").mkdir(parents=True)
    (site / "w" / "notes.html").write_text("mine")  # not the board's: never removed
    first = build_board(wh, site)
    assert first.computed == ["run_a", "run_b", "run_c"]
    again = build_board(wh, site)
    assert (again.computed, again.reused) == ([], 3)
    # a changed card changes one workload
    (inputs / "run_b" / "workload_card.yaml").write_text("description: now with a card\n")
    run_ingest([inputs], wh)
    changed = build_board(wh, site)
    assert (changed.computed, changed.reused) == (["run_b"], 2)
    assert "now with a card" in (site / "w" / "run_b.html").read_text()
    # a new trace is one more computed; a trace that left the warehouse leaves the site
    # (its files left its folder, so ingest removed them)
    two_rank_run(inputs / "run_e", gemm_us=120)
    for path in (inputs / "run_c").iterdir():
        path.unlink()
    run_ingest([inputs], wh)
    wh_after = build_board(wh, site)
    assert wh_after.computed == ["run_e"] and wh_after.removed == 1
    assert not (site / "w" / "run_c.html").exists() and not (site / "data" / "run_c.json").exists()
    assert sorted(parse_index(site).rows) == ["run_a", "run_b", "run_e"]
    assert build_board(wh, site, force=True).computed == ["run_a", "run_b", "run_e"]
    assert (site / "w" / "notes.html").read_text() == "mine"


def test_a_warehouse_without_traces_gives_an_empty_board(tmp_path: Path):
    wh = Warehouse(tmp_path / "wh")
    wh.create()
    result = build_board(wh, tmp_path / "site")
    assert result.workloads == 0 and "holds no traces yet" in (tmp_path / "site" / "index.html").read_text()
    assert json.loads((tmp_path / "site" / "benchmark_data.json").read_text())["rows"] == []


def test_a_failing_metric_shows_as_failed_with_its_reason_not_a_broken_page(tmp_path: Path, monkeypatch):
    folder = tmp_path / "metrics" / "always_fails"
    folder.mkdir(parents=True)
    (folder / "v1.sql").write_text(
        "-- metric: always_fails\n-- version: 1\n-- unit: ratio\n-- grain: trace\n-- category: memory\n"
        "-- polarity: higher\n-- leaderboard: memory\n-- description: a metric whose SQL fails at run time\n"
        "SELECT trace, error('boom: ' || trace)::DOUBLE AS value FROM metric_scope\n"
    )
    broken = parse_metric_file(folder / "v1.sql")
    monkeypatch.setattr("cclq.present.board.build.board_specs", lambda all_metrics=False: [*board_specs(), broken])
    two_rank_run(tmp_path / "in" / "run_a")
    wh = Warehouse(tmp_path / "wh")
    run_ingest([tmp_path / "in"], wh)
    result = build_board(wh, tmp_path / "site")
    cells = parse_index(tmp_path / "site")
    assert "always_fails" in cells.metrics
    text, title = cells.rows["run_a"][8 + cells.metrics.index("always_fails")]
    # failed, never "n/a" (which says the metric does not apply), the error on hover
    assert text == "failed" and title.startswith("the metric failed: always_fails v1") and "boom" in title
    assert [line.split(":")[0] for line in result.failed] == ["always_fails"]
    assert cells.rows["run_a"][8 + cells.metrics.index("avg_step_time")][0] == "0.00225"
    page = (tmp_path / "site" / "w" / "run_a.html").read_text()
    assert "the metric failed" in page
    # stored data with a failed metric is not trusted: the next build computes it again
    assert build_board(wh, tmp_path / "site").computed == ["run_a"] and result.computed == ["run_a"]


@pytest.mark.slow
def test_cli_board_and_its_errors(tmp_path: Path):
    two_rank_run(tmp_path / "in" / "run_a")
    wh = Warehouse(tmp_path / "wh")
    run_ingest([tmp_path / "in"], wh)
    done = invoke("board", str(tmp_path / "site"), "--warehouse", str(wh.root))
    assert done.returncode == 0, done.stderr
    assert "board: 1 workload(s), 1 computed, 0 unchanged" in done.stderr and done.stdout == ""
    assert (tmp_path / "site" / "index.html").exists() and (tmp_path / "site" / "assets" / "board.js").exists()
    missing = invoke("board", str(tmp_path / "site2"), "--warehouse", str(tmp_path / "nowhere"))
    assert missing.returncode == 2 and "Traceback" not in missing.stderr


# ------------------------------------------------------------------------ svg
def test_nice_ticks_cover_the_range_with_round_steps():
    assert nice_ticks(0, 668.87) == [0, 200, 400, 600, 800]
    assert nice_ticks(0, 1) == [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
    assert nice_ticks(0, 0.0123)[-1] >= 0.0123


def test_svg_marks_carry_exact_values_and_escaped_text():
    svg = bar_chart(["<r0>", "r1"], [Series("time & <s>", [0.123456789, None])], value_label="a<b")
    assert "<r0>" not in svg and "&lt;r0&gt;" in svg and "a&lt;b" in svg
    assert "<title>&lt;r0&gt;: time &amp; &lt;s&gt; 0.123457</title>" in svg
    assert svg.count("<rect") == 1  # None draws nothing
    line = line_chart([Series("x", points=[(1024, 2.5), (2048, 5.0)])], log_x=True)
    assert line.count("<circle") == 2 and "<path" in line
    assert "no data" in line_chart([Series("x", points=[])])


def test_headings_are_words_and_na_only_columns_start_hidden(board_site):
    """A metric heading is its name in words (the browser wraps between them); a column
    n/a in every row carries the class that hides it by default; a few columns per
    category are shown before the category is opened."""
    from cclq.query.registry import latest_specs

    headline = {s.name for s in latest_specs() if s.leaderboard_headline}
    _, site, _ = board_site
    html = (site / "index.html").read_text()
    cells = parse_index(site)
    heads = dict(re.findall(r'<th [^>]*data-metric="([^"]+)" class="([^"]+)"', html))
    assert set(heads) == set(cells.metrics)
    n_card = 8
    for j, name in enumerate(cells.metrics):
        all_na = all(row[n_card + j][0] == "n/a" for row in cells.rows.values())
        assert ("empty-col" in heads[name].split()) == all_na, name
        assert ("more" in heads[name].split()) == (name not in headline), name
    assert any("empty-col" in c for c in heads.values())
    assert ">communication fraction<" in html and "communication_<wbr>" not in html
    assert len(headline) <= 8  # with the five default card columns: fits 1400 px (browser test)
    # a trace id wraps between its parts, never mid-word; its text is unchanged
    assert '<a href="w/synthetic_dp4.html">synthetic_<wbr>dp4</a>' in html
    assert [row[0][0] for row in cells.rows.values()] == sorted(cells.rows)


def test_a_category_whose_default_columns_are_empty_shows_one_with_values():
    from cclq.present.board.pages import MetricColumn, default_metrics

    cols = [
        MetricColumn("avg_step_time", "s", "lower", "model_execution", "", headline=True),
        MetricColumn("mfu", "ratio", "higher", "model_execution", ""),
        MetricColumn("total_trace_time", "s", "lower", "model_execution", ""),
        MetricColumn("some_new_metric", "s", "lower", "memory", ""),
    ]
    # avg_step_time has values: it alone; memory names no default: its first column
    assert default_metrics(cols) == {"avg_step_time", "some_new_metric"}
    # avg_step_time is n/a everywhere: the first column with a value joins it
    assert default_metrics(cols, {"avg_step_time"}) == {"avg_step_time", "mfu", "some_new_metric"}
    assert default_metrics(cols, {"avg_step_time", "mfu"}) == {"avg_step_time", "total_trace_time", "some_new_metric"}


def test_pages_written_by_forked_processes_are_the_pages_one_process_writes(board_site, tmp_path, monkeypatch):
    """From PARALLEL_PAGES workloads on, forked processes share the pages: every page is
    written, byte for byte what one process writes."""
    import cclq.present.board.build as build

    root, site, _ = board_site
    one = tmp_path / "one"
    shutil.copytree(site, one)
    for page in (one / "w").glob("*.html"):
        page.unlink()
    monkeypatch.setattr(build, "PARALLEL_PAGES", 2)
    forked = []
    real = build.multiprocessing.get_context
    monkeypatch.setattr(build.multiprocessing, "get_context", lambda method: forked.append(method) or real(method))
    build_board(Warehouse(root), one, force=True)
    assert forked == ["fork"]  # the parallel path ran (this machine has fork)
    expected = {p.name: p.read_text() for p in (site / "w").glob("*.html")}
    assert expected and {p.name: p.read_text() for p in (one / "w").glob("*.html")} == expected
