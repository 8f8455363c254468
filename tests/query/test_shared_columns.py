"""A shared view's table may leave out columns (``-- batch: shared ... without``): every
query a batch can run must bind over the table without them, with the columns it returns
unchanged, so that leaving them out changes no metric's rows (issue 42: memory)."""

from __future__ import annotations

import pytest
from helpers.warehouse import approx_rows, run_batch_recording, run_ingest

from cclq.query.critical_path import PATH_TABLE, STORED_VIEWS
from cclq.query.hta_series import QUERIES as HTA_QUERIES
from cclq.query.metrics import run_metric
from cclq.query.params import params_relation
from cclq.query.registry import MetricSpec, registry, resolve
from cclq.query.session import Session, connect
from cclq.query.sqlfiles import batch_views
from cclq.query.trace_stats import OP_STATS_QUERY, STEP_DURATIONS_QUERY
from cclq.query.view_catalog import CATALOG
from cclq.store.warehouse import Warehouse
from cclq.synth.kineto import generate_workload

pytestmark = pytest.mark.slow
SCOPE = "CREATE OR REPLACE TEMP VIEW metric_scope AS SELECT DISTINCT trace, rank FROM parts"


@pytest.fixture(scope="module")
def wh(tmp_path_factory: pytest.TempPathFactory) -> Warehouse:
    root = tmp_path_factory.mktemp("cols")
    generate_workload(root / "in" / "dp2", ranks=2, steps=3, layers=2, seed=9)
    warehouse = Warehouse(root / "wh")
    assert not run_ingest([root / "in"], warehouse).failed
    return warehouse


def readers() -> list[tuple[str, str, MetricSpec | None]]:
    """(label, SQL, metric) of every query a batch runs over the shared views: each
    version of each metric, the report's and diff's fixed queries, the critical path's
    own queries (``cclq.query.critical_path.prepared``), and each shared view, macro (every
    rules version, 1 to 3) and stand-in, which a batch computes from the others."""
    out: list[tuple[str, str, MetricSpec | None]] = [
        (f"{name} v{v}", spec.sql, spec) for name, versions in registry().items() for v, spec in versions.items()
    ]
    out += [(label, sql, None) for label, sql in (STEP_DURATIONS_QUERY, OP_STATS_QUERY, *HTA_QUERIES)]
    out += [(v, f"SELECT * FROM {v}", None) for v in (*STORED_VIEWS, "hta_critical_path_edges")]
    for view in batch_views():
        if view.macro:
            out += [(f"{view.name}({v})", f"SELECT * FROM {view.name}({v})", None) for v in (1, 2, 3)]
        else:
            out.append((view.name, f"SELECT * FROM {view.name}", None))
        if view.stand_in is not None:
            out.append((view.stand_in, f"SELECT * FROM {view.stand_in}", None))
    return out


def columns(con: Session, sql: str, metric: MetricSpec | None) -> list[tuple[str, str]] | None:
    """The (name, type) of each column ``sql`` returns, or None where it does not bind."""
    import duckdb

    if metric is not None:
        con.temp_view("metric_params", params_relation(metric, {}))
    try:
        return [(str(r[0]), str(r[1])) for r in con.execute(f"DESCRIBE {sql}").fetchall()]
    except duckdb.Error:
        return None


def _shadow(con: Session, views: list) -> None:
    """What a batch's shadow of each view is: a temporary view of the name, over a table
    without the columns its line leaves out."""
    for view in views:
        con.execute(
            f"CREATE OR REPLACE TEMP TABLE _kept_{view.name} AS SELECT * EXCLUDE ({', '.join(view.without)}) "
            f"FROM {CATALOG}.main.{view.name} LIMIT 0"
        )
        con.execute(f"CREATE OR REPLACE TEMP VIEW {view.name} AS SELECT * FROM _kept_{view.name}")


def _unshadow(con: Session, views: list) -> None:
    for view in views:
        con.execute(f"DROP VIEW IF EXISTS temp.main.{view.name}")
        con.execute(f"DROP TABLE IF EXISTS temp.main._kept_{view.name}")


def test_every_reader_binds_without_the_columns_a_shared_table_leaves_out(wh: Warehouse) -> None:
    """Every query binds, with the same columns where they are a result's, with all the
    shared tables cut at once (a query that binds with every cut binds with any one: fewer
    columns can only fail more); a failure is then traced to the view whose cut breaks it.
    (One view at a time, the same check took 137 s: DESCRIBE binds each view tree anew.)"""
    pruned = [v for v in batch_views() if v.without]
    assert {v.name for v in pruned} >= {"kernels"}
    queries = [q for q in readers() if PATH_TABLE not in q[1]]  # that one reads prepare's table
    results = dict(queries_of_results())
    con = connect(wh)
    try:
        con.temp_view("metric_scope", SCOPE)
        full = {label: columns(con, sql, metric) for label, sql, metric in queries}
        assert sum(c is not None for c in full.values()) > 150  # the queries bind (the check means something)
        for view in pruned:
            have = [str(r[0]) for r in con.execute(f"DESCRIBE SELECT * FROM {CATALOG}.main.{view.name}").fetchall()]
            assert set(view.without) <= set(have), f"{view.name} has no column {set(view.without) - set(have)}"
        names = {v.name for v in pruned}
        checked = [q for q in queries if full[q[0]] is not None and q[0] not in names]
        _shadow(con, pruned)
        try:
            broken = [
                (label, sql, metric)
                for label, sql, metric in checked
                if (got := columns(con, sql, metric)) is None
                or ((metric is not None or label in results) and got != full[label])
            ]
        finally:
            _unshadow(con, pruned)
        problems = []
        for label, sql, metric in broken:  # which cut breaks it
            for view in pruned:
                _shadow(con, [view])
                try:
                    got = columns(con, sql, metric)
                finally:
                    _unshadow(con, [view])
                if got is None:
                    problems.append(f"{label} reads a column of {view.name} its shared table leaves out")
                elif got != full[label]:
                    problems.append(f"{label}'s columns change without {view.name}'s {view.without}")
        assert not broken, "\n".join(problems) or f"broken only by the cuts together: {[b[0] for b in broken]}"
    finally:
        con.close()


def queries_of_results() -> list[tuple[str, str]]:
    """The fixed queries whose rows a report or diff shows: their columns must not change."""
    return [STEP_DURATIONS_QUERY, OP_STATS_QUERY, *HTA_QUERIES]


def test_a_column_left_out_that_a_reader_needs_is_caught(wh: Warehouse) -> None:
    """The check above can fail: without `name`, the kernel metrics do not bind."""
    con = connect(wh)
    try:
        con.temp_view("metric_scope", SCOPE)
        spec = registry()["dominant_kernel_concentration"][1]
        assert columns(con, spec.sql, spec) is not None
        con.execute(f"CREATE TEMP TABLE _kept AS SELECT * EXCLUDE (name) FROM {CATALOG}.main.kernels LIMIT 0")
        con.execute("CREATE TEMP VIEW kernels AS SELECT * FROM _kept")
        assert columns(con, spec.sql, spec) is None
    finally:
        con.close()


def test_a_batch_stores_the_table_without_them_and_the_rows_do_not_change(wh: Warehouse, monkeypatch) -> None:

    specs = [resolve(n) for n in ("dominant_kernel_concentration", "aggregate_gpu_utilization", "mean_sm_coverage")]
    con = connect(wh)
    alone = {s.name: run_metric(con, s).to_pylist() for s in specs}
    con.close()
    runs, ran = run_batch_recording(wh, specs, monkeypatch)
    made = [s for s in ran if s.startswith('CREATE TABLE _cclq_shared.main."_cclq_shared_kernels"')]
    assert len(made) == 1 and "EXCLUDE (" in made[0] and '"args"' in made[0]
    for spec in specs:
        assert runs[spec.name].error is None
        assert runs[spec.name].table.to_pylist() == approx_rows(alone[spec.name]), spec.name


def test_with_gpu_ops_shared_kernels_is_a_view_over_its_table(wh: Warehouse, monkeypatch) -> None:
    """``kernels``' line says ``from gpu_ops via kernels_from_gpu_ops as view``: a batch
    that shares gpu_ops makes no table of kernels, and the kernel metrics' rows do not change."""
    names = ("dominant_kernel_concentration", "mean_sm_coverage", "memory_bound_fraction", "moe_fraction")
    specs = [resolve(n) for n in names]
    con = connect(wh)
    alone = {s.name: run_metric(con, s).to_pylist() for s in specs}
    con.close()
    runs, ran = run_batch_recording(wh, specs, monkeypatch)
    made = [s for s in ran if s.startswith("CREATE TABLE _cclq_shared.main.")]
    assert any('"_cclq_shared_gpu_ops"' in s for s in made)
    assert not any('"_cclq_shared_kernels"' in s for s in made)
    for spec in specs:
        assert runs[spec.name].error is None
        assert runs[spec.name].table.to_pylist() == approx_rows(alone[spec.name]), spec.name
