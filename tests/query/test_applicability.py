"""Applicability decided from the catalog (``applies_if`` header facts): a metric that
cannot apply never reaches DuckDB, and the reason given is the one its SQL gives."""

from __future__ import annotations

from pathlib import Path

import pyarrow.compute as pc
import pytest
from helpers.warehouse import run_ingest

from cclq.query.applicability import Fact, TraceFacts, parse_facts, plan, trace_facts, unmet
from cclq.query.metrics import run_metric, run_metrics, summarize
from cclq.query.outcomes import split_by_trace
from cclq.query.registry import latest_specs, parse_metric_file, registry, resolve
from cclq.query.session import connect
from cclq.store.warehouse import Warehouse
from cclq.synth.kineto import generate_workload
from cclq.synth.xla import TpuTraceSpec, write_tpu_trace

# every value `files.format` can hold (the reader flavours)
KNOWN_FORMATS = {
    "kineto",
    "chrome",
    "xprof",
    "horovod",
    "pytorch_et",
    "nsys",
    "ddlb_csv",
    "ddl_benchmarks_log",
    "vllm_bench_json",
    "sglang_bench_jsonl",
}


@pytest.fixture(scope="module")
def wh(tmp_path_factory: pytest.TempPathFactory) -> Warehouse:
    root = tmp_path_factory.mktemp("appl")
    generate_workload(root / "in" / "dp4", ranks=4, steps=3, layers=2, seed=4)
    generate_workload(root / "in" / "one", ranks=1, steps=3, layers=2, seed=5)
    write_tpu_trace(root / "in" / "tpu" / "host0.trace.json", TpuTraceSpec(devices=2, steps=3))
    warehouse = Warehouse(root / "wh")
    assert not run_ingest([root / "in"], warehouse).failed
    return warehouse


def _metric(tmp_path: Path, facts: str, sql: str) -> Path:
    folder = tmp_path / "metrics" / "impossible"
    folder.mkdir(parents=True)
    path = folder / "v1.sql"
    path.write_text(
        "-- metric: impossible\n-- version: 1\n-- unit: s\n-- grain: trace\n"
        "-- category: compute\n-- polarity: neutral\n-- description: cannot apply\n"
        f"{facts}-- columns: none\n{sql}\n"
    )
    return path


def test_a_metric_with_impossible_needs_never_reaches_duckdb(wh: Warehouse, tmp_path: Path):
    spec = parse_metric_file(
        _metric(
            tmp_path,
            "-- applies_if: format no_such_format | never recorded\n",
            "SELECT trace, marker_column_xyz AS value FROM metric_scope",
        )
    )
    con = connect(wh)
    executed: list[str] = []
    real = con.execute
    con.execute = lambda sql, *a: executed.append(sql) or real(sql, *a)  # type: ignore[method-assign]
    runs = run_metrics(con, [spec, resolve("total_kernel_time")], plan_first=True, empty_columns=True)
    # never run: at most bound for its columns, into a table of no rows (empty_result)
    assert all(sql.rstrip().endswith("LIMIT 0") for sql in executed if "marker_column_xyz" in sql)
    run = runs["impossible"]
    assert run.table is None and run.error is None
    assert run.not_applicable == {t: "never recorded" for t in ("dp4", "one", "tpu")}
    outcomes = split_by_trace(runs, ["dp4", "one", "tpu"])
    assert outcomes["dp4"]["impossible"].reason == "never recorded"
    assert not outcomes["dp4"]["impossible"].failed
    # the other metric ran as usual; its own fact (table events) holds everywhere
    assert outcomes["dp4"]["total_kernel_time"].applies
    con.close()
    # a caller that shows no rows of it (a report, a board) asks for no columns: no SQL at all
    con = connect(wh)
    executed.clear()
    real = con.execute
    con.execute = lambda sql, *a: executed.append(sql) or real(sql, *a)  # type: ignore[method-assign]
    run = run_metrics(con, [spec], plan_first=True, empty_columns=False)["impossible"]
    assert run.table is None and run.empty is None and run.not_applicable
    assert not [sql for sql in executed if "marker_column_xyz" in sql]
    con.close()
    # without planning the same metric runs, and fails on its SQL
    con = connect(wh)
    assert "marker_column_xyz" in (run_metrics(con, [spec])["impossible"].error or "")
    con.close()


def test_trace_facts_come_from_the_catalog(wh: Warehouse):
    con = connect(wh)
    facts = trace_facts(con)
    con.close()
    assert facts["dp4"].formats == {"kineto"} and facts["dp4"].ranks == 4 and "events" in facts["dp4"].tables
    assert facts["one"].ranks == 1
    assert facts["tpu"].formats == {"xprof"}
    # the generator's card says `phase: training`; the TPU trace has no card
    assert facts["dp4"].card_phase == "training" and facts["tpu"].card_phase is None


def test_fact_kinds():
    kineto = TraceFacts("t", frozenset({"kineto"}), frozenset({"events"}), 1)
    assert Fact("format", ("xprof", "chrome"), "r").holds(kineto) is False
    assert Fact("format", ("kin*",), "r").holds(kineto) is True
    assert Fact("table", ("results", "events"), "r").holds(kineto) is True
    assert Fact("table", ("results",), "r").holds(kineto) is False
    assert Fact("ranks", ("2",), "r").holds(kineto) is False
    inference = Fact("card_phase", ("inference", "serving", "none"), "the card says phase {phase}")
    assert inference.holds(kineto) is True  # no card: `none`
    training = TraceFacts("t", card_phase="training")
    assert inference.holds(training) is False and inference.reason_for(training) == "the card says phase training"
    assert inference.holds(TraceFacts("t", card_phase="serving")) is True
    assert inference.holds(TraceFacts("t", card_phase="none")) is False  # a card's own word, not the absence


def test_every_shipped_fact_parses_and_names_a_known_format():
    for versions in registry().values():
        for spec in versions.values():
            for fact in parse_facts(spec):
                if fact.kind == "format":
                    assert {v.rstrip("*") for v in fact.values} <= KNOWN_FORMATS | {"nsys"}, spec.label
                if fact.kind == "table":
                    assert set(fact.values) <= {"events", "et_nodes", "et_tensors", "results"}, spec.label
                if fact.kind == "card_phase":
                    assert set(fact.values) <= {"inference", "serving", "training", "none"}, spec.label


@pytest.mark.slow
def test_planned_reason_is_what_the_sql_says(wh: Warehouse):
    """For every (metric, trace) the catalog rules out, the metric's SQL agrees: no value,
    and the same reason (so a report reads the same planned or not)."""
    con = connect(wh)
    facts = trace_facts(con)
    specs = [s for s in latest_specs() if parse_facts(s)]
    decided = plan(specs, facts)
    checked = 0
    for spec in specs:
        skipped = decided.skipped.get(spec.name, {})
        if not skipped:
            continue
        table = run_metric(con, spec)
        for trace, reason in skipped.items():
            value, sql_reason = summarize(spec, table.filter(pc.equal(table["trace"], trace)))
            assert value is None, (spec.name, trace)
            assert sql_reason == reason, (spec.name, trace)
            checked += 1
    con.close()
    assert checked >= 20  # the XLA metrics on the Kineto traces, the skew metrics on one rank, ...
    assert unmet(resolve("total_comm_time_s"), facts["dp4"]) == "no XLA ops (not an XLA/xprof profile)"
    assert unmet(resolve("total_comm_time_s"), facts["tpu"]) is None


def test_metric_category_answers_what_the_catalog_rules_out_without_its_sql(wh: Warehouse):
    """`cclq metric --category` plans like the report: on the Kineto trace, the XLA-only
    `total_comm_time_s` is answered from the catalog (one row, no value, the reason
    its SQL would give) and the progress line says it did not run."""
    import csv
    import io

    from helpers.cli import invoke

    r = invoke("metric", "--category", "communication", "--trace", "dp4", "-w", str(wh.root), "-f", "csv")
    assert r.returncode == 0, r.stderr
    rows = [row for row in csv.DictReader(io.StringIO(r.stdout)) if row["metric"] == "total_comm_time_s"]
    assert [(row["trace"], row["rank"], row["value"], row["reason"]) for row in rows] == [
        ("dp4", "", "", "no XLA ops (not an XLA/xprof profile)")
    ]
    assert "total_comm_time_s: not applicable (from the catalog)" in r.stderr
    # metrics the catalog cannot rule out still ran: the NCCL time of every rank
    assert {
        row["rank"] for row in csv.DictReader(io.StringIO(r.stdout)) if row["metric"] == "total_communication_time"
    } == {"0", "1", "2", "3"}
