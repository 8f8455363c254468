"""HTA's critical path graph (`hta_critical_path_edges`) stays linear in a rank's rows when
the rows come from a table, as in a board's batch (the shared `hta_events`) and in
`cclq.TraceAnalysis` (the pinned one). Each lookup of a row of the rank is one row-valued
key, `(rk, event_idx) = (...)`: written as two equalities, DuckDB derived `rk = rk` between
the lookups of a kernel's two ends and joined those first, every node of the rank with
every other (MTIA's trace: 45k x 45k rows, a board spilling 77 GB until the disk was full;
issue 41)."""

from __future__ import annotations

import pytest
from helpers.plans import profiled
from helpers.warehouse import run_ingest

from cclq.query.session import connect
from cclq.store.warehouse import Warehouse
from cclq.synth.kineto import generate_workload


# (ranks, steps, layers): the first two gave the quadratic plan before (1.7M rows joined
# for 1,041 HTA rows), the third did not
@pytest.mark.parametrize(("ranks", "steps", "layers"), [(1, 1, 40), (1, 3, 40), (2, 1, 100)])
def test_the_graph_of_a_step_joins_no_row_of_a_rank_with_every_other(tmp_path, ranks, steps, layers):
    generate_workload(tmp_path / "in" / "ddp", ranks=ranks, steps=steps, layers=layers)
    wh = Warehouse(tmp_path / "wh")
    run_ingest([tmp_path / "in"], wh)
    session = connect(wh)
    # what a batch does with a view several metrics read: its rows in a table, shadowed
    session.execute("CREATE TABLE memory.main.hta_rows AS SELECT * FROM hta_events")
    session.execute("CREATE TEMP VIEW hta_events AS SELECT * FROM memory.main.hta_rows")
    events = session.execute("SELECT count(*) FROM hta_events").fetchone()[0]
    rows, ops = profiled(
        session,
        "SELECT rank, count(*), count(DISTINCT dst_node) FROM hta_critical_path_edges GROUP BY rank ORDER BY rank",
        tmp_path / "profile.json",
    )
    assert [r[0] for r in rows] == list(range(ranks)) and all(edges > 100 for _, edges, _ in rows)
    joins = [op for op in ops if "JOIN" in op["name"]]
    assert joins
    # each join gives at most a row per row of the ranks (a edge, a node, a queue point)
    assert max(op["intermediate_rows"] for op in joins) <= 2 * events


def test_the_edges_expand_the_rank_s_hta_events_once(tmp_path, monkeypatch):
    """The edges read the window's rows (`hta_critical_path_rows`) four times, and each
    read expanded the rank's whole `hta_events` again: five materializations of its
    `ev` CTE, 31 s and 4.8 GB for the metric on a 1 GB rank (issue 42). `prepared` stores
    the window, the rank's rows the graph reads and the window's rows first; the edges
    statement then materializes its `ev` once, from those."""
    import json

    from helpers.plans import operators

    from cclq.query.critical_path import STORED_VIEWS, WINDOWS_VIEW
    from cclq.query.metrics import run_metric
    from cclq.query.registry import resolve

    generate_workload(tmp_path / "in" / "ddp", ranks=1, steps=2, layers=20)
    wh = Warehouse(tmp_path / "wh")
    run_ingest([tmp_path / "in"], wh)
    session = connect(wh)
    profile = tmp_path / "edges.json"
    execute = session.execute

    def profiling_the_edges(sql: str, *args, **kwargs):
        if "TEMP TABLE __cclq_critical_path_edges" not in sql:
            return execute(sql, *args, **kwargs)
        execute("PRAGMA enable_profiling = 'json'")
        execute(f"PRAGMA profiling_output = '{profile}'")
        try:
            return execute(sql, *args, **kwargs)
        finally:
            execute("PRAGMA disable_profiling")

    monkeypatch.setattr(session, "execute", profiling_the_edges)
    rows = run_metric(session, resolve("hta_critical_path_breakdown"), {}).to_pylist()
    assert rows and all(r["reason"] is None for r in rows)
    ev = [op for op in operators(json.loads(profile.read_text())) if op.get("extra_info", {}).get("CTE Name") == "ev"]
    assert len(ev) == 1
    # nothing of prepared()'s is left in the session: the views read the catalog's rows again
    names = {n for (n,) in execute("SELECT view_name FROM duckdb_views() WHERE temporary").fetchall()}
    names |= {n for (n,) in execute("SELECT table_name FROM duckdb_tables() WHERE temporary").fetchall()}
    stored = [*STORED_VIEWS, WINDOWS_VIEW]
    assert len(stored) == 4 and not names & ({*stored} | {f"{v}_table" for v in stored})


def test_the_plain_edges_view_reads_the_window_s_rows_once(tmp_path):
    """Ad-hoc SQL over `hta_critical_path_edges` (no `prepared`): the view reads
    `hta_critical_path_rows` once and builds the CPU side, the GPU side and the nodes from
    it. Its CTE `cpu_in` then appears twice in the plan (the rows view's and the edges'
    own), not five times: each read of the rows view expanded the rank's hta_events
    again (18 expansions, 6.8 s of a count of the edges over ../shared/traces)."""
    from collections import Counter

    generate_workload(tmp_path / "in" / "ddp", ranks=2, steps=2, layers=10)
    wh = Warehouse(tmp_path / "wh")
    run_ingest([tmp_path / "in"], wh)
    session = connect(wh)
    rows, ops = profiled(session, "SELECT count(*) FROM hta_critical_path_edges", tmp_path / "profile.json")
    ctes = Counter(op.get("extra_info", {}).get("CTE Name") for op in ops)
    assert ctes["cpu_in"] == 2, ctes
    # the same edges as the macro over the stored inputs, which the metric runs
    (stored,) = session.execute(
        "SELECT count(*) FROM hta_critical_path_edges_of(hta_critical_path_events, hta_critical_path_rows)"
    ).fetchall()
    assert rows == [stored] and stored[0] > 100


def test_the_metric_reads_the_stored_window_only_when_it_is_htas_default(tmp_path):
    """`prepared` answers the metric's "no ProfilerStep" check from the window it stored,
    which is `hta_critical_path_windows`' row only for HTA's default window. With another
    window asked for (the DuckDB variables cclq.TraceAnalysis sets), the check reads the
    view: here an annotation no row has gives no window, while the rank has a
    ProfilerStep, so the reason is the empty window's, not "no ProfilerStep"."""
    from cclq.query.metrics import run_metric
    from cclq.query.registry import resolve

    generate_workload(tmp_path / "in" / "ddp", ranks=1, steps=2, layers=4)
    wh = Warehouse(tmp_path / "wh")
    run_ingest([tmp_path / "in"], wh)
    session = connect(wh)
    spec = resolve("hta_critical_path_breakdown")
    assert all(r["reason"] is None for r in run_metric(session, spec, {}).to_pylist())
    session.execute("SET VARIABLE hta_cp_annotation = 'no row is named this'")
    (row,) = run_metric(session, spec, {}).to_pylist()
    assert row["reason"] == "no operator or kernel in the first ProfilerStep"
