"""Every fact about a metric lives in its SQL file's header (issue 43): CCL-Bench's trace
types, ratio-vs-percent, the question it answers (family) and its near-synonyms (see
also). No Python module keeps a list of metric names with a property."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import cclq.present.board.build as board_build
from cclq.query.registry import FAMILIES, latest_specs, metric_card, parse_metric_file, registry

ROOT = Path(__file__).resolve().parents[2]

# What cclq/present/board/build.py's CCL_BENCH_TRACE_TYPES held before the move (main at
# f232dfd), itself CCL-Bench's website/benchmark_config.json metric_info trace_types at 1d257f0.
TRACE_TYPES_BEFORE = {
    "avg_step_time": ("json_tpu", "json"),
    "ttft": ("json_tpu", "json"),
    "tpot": ("json_tpu", "json"),
    "mfu": ("json_tpu", "json"),
    "mean_sm_coverage": ("nsys", "json"),
    "dominant_kernel_concentration": ("nsys", "json", "json_tpu"),
    "moe_fraction": ("nsys", "json"),
    "average_memory_bandwidth": ("nsys", "json", "json_tpu"),
    "memory_transfer_overhead": ("nsys", "json", "json_tpu"),
    "communication_fraction": ("nsys", "json", "json_tpu"),
    "total_communication_time": ("nsys", "json", "json_tpu"),
    "bandwidth_utilization_allgather_group_6": ("json", "json_tpu"),
    "bandwidth_utilization_allreduce_group_6": ("json", "json_tpu"),
    "bandwidth_utilization_alltoall_group_6": ("json",),
    "bandwidth_utilization_reducescatter_group_6": ("json", "json_tpu"),
    "bandwidth_utilization_peertopeer_group_6": ("nsys",),
    "compute_comm_overlap": ("json", "json_tpu", "nsys"),
    "load_imbalance_ratio": ("nsys", "json"),
    "straggler": ("json",),
    "scale_up_bw_utility": ("json",),
    "collective_vol_allreduce_gb": ("json", "tpu_profiler", "json_tpu"),
    "collective_vol_allgather_gb": ("json", "tpu_profiler", "json_tpu"),
    "collective_vol_reducescatter_gb": ("json", "tpu_profiler", "json_tpu"),
    "collective_vol_alltoall_gb": ("json", "tpu_profiler", "json_tpu"),
    "collective_vol_total_gb": ("json", "tpu_profiler", "json_tpu"),
}
# What its RATIOS_AS_RATIOS held: leaderboard ratios the board writes as ratios, not percent.
RATIOS_AS_RATIOS_BEFORE = {"load_imbalance_ratio", "straggler"}
# What cclq/present/board/pages.py's DEFAULT_METRICS held: the board's headline columns.
HEADLINE_BEFORE = {
    "avg_step_time",
    "ttft",
    "tpot",
    "aggregate_gpu_utilization",
    "average_memory_bandwidth",
    "communication_fraction",
    "compute_comm_overlap",
    "scale_up_bw_utility",
}


def test_the_python_constants_are_gone():
    import cclq.present.board.pages as board_pages

    for name in ("CCL_BENCH_TRACE_TYPES", "RATIOS_AS_RATIOS"):
        assert not hasattr(board_build, name), name
    assert not hasattr(board_pages, "DEFAULT_METRICS")
    for path in (ROOT / "cclq").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        assert not {"CCL_BENCH_TRACE_TYPES", "RATIOS_AS_RATIOS", "DEFAULT_METRICS"} & set(text.split()), path


def test_headline_columns_come_from_the_headers_as_before():
    from cclq.present.board.build import leaderboard_columns
    from cclq.present.board.pages import default_metrics

    for versions in registry().values():
        for spec in versions.values():
            assert spec.leaderboard_headline == (spec.name in HEADLINE_BEFORE), spec.label
    assert default_metrics(leaderboard_columns(latest_specs())) == HEADLINE_BEFORE


def test_trace_types_come_from_the_headers_as_before():
    for versions in registry().values():
        for spec in versions.values():
            assert spec.ccl_bench_trace_types == TRACE_TYPES_BEFORE.get(spec.name, ()), spec.label


def test_ratio_or_percent_comes_from_the_headers_as_before():
    """On the board a ratio metric is percent unless its header says CCL-Bench writes a ratio."""
    board = [s for s in latest_specs() if s.leaderboard and s.unit == "ratio"]
    as_ratio = {s.name for s in board if board_build._display(s) == ("ratio", 1.0)}
    assert as_ratio == RATIOS_AS_RATIOS_BEFORE
    assert all(board_build._display(s) == ("%", 100.0) for s in board if s.name not in as_ratio)
    assert {s.name for s in board if s.ccl_bench_unit == "ratio"} == RATIOS_AS_RATIOS_BEFORE


def test_the_batch_computes_ahead_what_ccl_benchs_config_lists():
    from cclq.compat.warm import _ahead

    assert {s.name for s in _ahead({}).values()} == set(TRACE_TYPES_BEFORE)


def test_every_metric_has_a_family_and_relatives_that_exist():
    names = set(registry())
    for versions in registry().values():
        for spec in versions.values():
            assert spec.family in FAMILIES, spec.label
            assert spec.see_also, spec.label
            assert set(spec.see_also) <= names - {spec.name}, (spec.label, set(spec.see_also) - names)
        # a fact about the metric, not a version: every version says the same
        assert len({(s.family, s.see_also) for s in versions.values()}) == 1
    # every family has members
    assert {s.family for s in latest_specs()} == set(FAMILIES)


def test_the_near_synonyms_point_at_each_other():
    groups = [
        ("communication_ratio", "communication_overhead", "communication_fraction"),
        ("total_communication_time", "total_comm_time_s"),
        ("straggler", "straggler_metrics", "straggler_rank", "horovod_straggler"),
    ]
    for group in groups:
        for a in group:
            assert set(group) - {a} <= set(registry()[a][max(registry()[a])].see_also), a


def test_a_bad_family_is_one_clear_error(tmp_path: Path):
    path = tmp_path / "m" / "v1.sql"
    path.parent.mkdir()
    path.write_text(
        "-- metric: m\n-- version: 1\n-- unit: s\n-- grain: trace\n-- category: compute\n"
        "-- family: nonsense\n-- polarity: lower\n-- description: d\nSELECT 1 AS value\n"
    )
    with pytest.raises(ValueError, match=r"v1.sql: family must be one of"):
        parse_metric_file(path)


def test_header_lines_leave_the_checksums_alone():
    """The new keys are header comments: the frozen code (and CHECKSUMS) does not see them."""
    from cclq.query.registry import body_checksum, released_checksums

    frozen = released_checksums()
    spec = registry()["straggler"][1]
    assert "ccl_bench_trace_types" in spec.text and "see_also" in spec.text
    assert "see_also" not in spec.sql and "family" not in spec.sql
    assert body_checksum(spec) == frozen["straggler/v1"]


def test_metrics_name_shows_the_card(capsys: pytest.CaptureFixture[str]):
    from typer.testing import CliRunner

    from cclq.cli.app import app

    done = CliRunner().invoke(app, ["metrics", "total_comm_time_s"])
    assert done.exit_code == 0, done.output
    lines = done.output.splitlines()
    assert lines[0].startswith("total_comm_time_s v1")
    assert f"family: communication ({FAMILIES['communication']})" in lines
    see = next(x for x in lines if x.startswith("see also: "))
    assert "total_communication_time" in see.split(": ", 1)[1].split(", ")
    assert lines == metric_card("total_comm_time_s")
    # a word that is not a whole name still searches
    listed = CliRunner().invoke(app, ["metrics", "total_comm"]).output.splitlines()
    assert {x.split()[0] for x in listed} >= {"total_comm_time_s", "total_communication_time"}


def test_no_python_table_lists_metric_names():
    """No module of cclq/present or cclq/compat holds a dict or set literal keyed by metric
    names (a fact about a metric kept in Python rather than its header)."""
    names = set(registry())
    offenders = []
    for path in [*(ROOT / "cclq" / "present").rglob("*.py"), *(ROOT / "cclq" / "compat").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            keys = node.keys if isinstance(node, ast.Dict) else node.elts if isinstance(node, ast.Set) else []
            consts = [k.value for k in keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
            if len(consts) >= 2 and sum(c in names for c in consts) >= 2:
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not offenders, offenders
