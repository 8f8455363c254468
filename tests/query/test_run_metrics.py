"""run_metrics: several metrics on one connection, a shared view computed once, a failing
metric recorded instead of ending the batch; cached view queries."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.warehouse import run_batch_recording, run_ingest

from cclq.query import metrics
from cclq.query.metrics import run_cached_query, run_metric, run_metrics
from cclq.query.registry import parse_metric_file, resolve
from cclq.query.session import Session, connect
from cclq.query.sqlfiles import batch_views
from cclq.store.warehouse import Warehouse
from cclq.synth.kineto import generate_workload


@pytest.fixture(scope="module")
def wh(tmp_path_factory: pytest.TempPathFactory) -> Warehouse:
    root = tmp_path_factory.mktemp("runm")
    generate_workload(root / "in" / "dp4", ranks=4, steps=3, layers=2, seed=4)
    generate_workload(root / "in" / "dp2", ranks=2, steps=3, layers=2, seed=9)
    warehouse = Warehouse(root / "wh")
    assert not run_ingest([root / "in"], warehouse).failed
    return warehouse


def sorted_rows(table) -> list[dict]:
    """Rows in a fixed order, floats compared to 1e-12: a mean summed in another order
    (parallel aggregation over a table instead of the view) may differ in the last bit."""
    rows = sorted(table.to_pylist(), key=lambda r: repr({k: v for k, v in r.items() if not isinstance(v, float)}))
    return [{k: pytest.approx(v, rel=1e-12) if isinstance(v, float) else v for k, v in r.items()} for r in rows]


def test_shared_view_is_computed_once_and_changes_no_result(wh: Warehouse, monkeypatch):
    names = (
        "collective_skew",
        "collective_busbw",
        "straggler_rank",
        "total_kernel_time",
        "collective_vol_total_gb",
        "scale_up_bw_utility",
        "coll_call_num",
        "break_down_steps",
        "hta_comm_comp_overlap",
    )
    specs = [resolve(n) for n in names]
    alone = {}
    for spec in specs:
        con = connect(wh)
        alone[spec.name] = sorted_rows(run_metric(con, spec))
        con.close()
    shared: list[list[str]] = []
    real = metrics._share_views
    monkeypatch.setattr(metrics, "_share_views", lambda con, pending: shared.append(real(con, pending)) or shared[-1])
    con = connect(wh)
    runs = run_metrics(con, specs)
    # most of them read collectives, all of them the views under it
    assert len(shared) == 1 and "collectives" in shared[0] and "gpu_ops" in shared[0]
    assert set(shared[0]) <= {v.name for v in batch_views()}
    # straggler_rank and collective_skew read collectives_with(2) through macros: shared too
    assert "collectives_with" in shared[0]
    for spec in specs:
        assert runs[spec.name].error is None and sorted_rows(runs[spec.name].table) == alone[spec.name], spec.name
    # the temporary copies and macros are gone afterwards: the names are the view module's again
    assert con.execute("SELECT count(*) FROM duckdb_tables() WHERE temporary").fetchone() == (0,)
    assert con.execute(
        "SELECT count(*) FROM duckdb_views() WHERE temporary AND view_name IN (SELECT unnest(?))", [sorted(shared[0])]
    ).fetchone() == (0,)
    assert con.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE starts_with(table_name, '_cclq_shared')"
    ).fetchone() == (0,)
    assert con.execute(
        "SELECT count(*) FROM duckdb_functions() WHERE database_name = 'temp' AND function_type = 'table_macro'"
    ).fetchone() == (0,)
    # with every result cached nothing is computed, so nothing is shared
    con.close()
    con = connect(wh, cache=True)
    run_metrics(con, specs)
    run_metrics(con, specs)
    assert not shared[-1]
    con.close()


def test_a_failing_metric_is_recorded_and_the_others_still_run(wh: Warehouse, tmp_path: Path):
    folder = tmp_path / "metrics" / "broken"
    folder.mkdir(parents=True)
    (folder / "v1.sql").write_text(
        "-- metric: broken\n-- version: 1\n-- unit: s\n-- grain: trace\n"
        "-- category: compute\n-- polarity: neutral\n-- description: fails\n"
        "SELECT trace, no_such_column AS value FROM metric_scope\n"
    )
    con = connect(wh)
    done: list[str] = []
    runs = run_metrics(
        con,
        [parse_metric_file(folder / "v1.sql"), resolve("total_kernel_time")],
        on_done=lambda run: done.append(run.spec.name),
    )
    assert done == ["broken", "total_kernel_time"]
    assert runs["broken"].table is None and "does not compile" in runs["broken"].error
    assert runs["total_kernel_time"].table.num_rows == 6  # 4 + 2 ranks
    con.close()


def test_cached_query_is_read_back_and_keyed_by_its_sql(wh: Warehouse, tmp_path: Path):
    con = connect(wh, cache=True)
    cache = wh.cache_dir
    sql = "SELECT trace, count(*) AS kernels FROM kernels GROUP BY trace ORDER BY trace"
    first = run_cached_query(con, "kernel_counts", sql)
    (path,) = cache.glob("query.kernel_counts.*.parquet")
    assert run_cached_query(con, "kernel_counts", sql).equals(first)
    other = run_cached_query(con, "kernel_counts", sql.replace("count(*)", "count(*) + 1"))
    assert [r["kernels"] for r in other.to_pylist()] == [r["kernels"] + 1 for r in first.to_pylist()]
    assert len(list(cache.glob("query.kernel_counts.*.parquet"))) == 2 and path.exists()
    con.close()


def test_shared_macros_are_table_macros_of_one_argument(wh: Warehouse):
    """A shared macro is shadowed by one of one argument, the rules version: a view module
    that gave it another signature would have its other calls broken while shared."""
    con = connect(wh)
    found = dict(
        con.execute(
            "SELECT function_name, parameters FROM duckdb_functions() "
            "WHERE function_type = 'table_macro' AND NOT internal"
        ).fetchall()
    )
    macros = {v.name for v in batch_views() if v.macro}
    assert macros and {m: found.get(m) for m in macros} == {m: ["rules_version"] for m in macros}
    # and a shared view is a view of the compiled catalog, not a macro
    views = {r[0] for r in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()}
    assert {v.name for v in batch_views() if not v.macro} <= views
    con.close()


def test_version_inputs_are_the_only_way_the_version_enters() -> None:
    """metrics.VERSION_INPUTS lets a batch copy one version's rows of a macro for another
    where the input rows agree; that is only right while the rules version enters the
    macro's module through the named input alone. So in that module `rules_version` may
    only be a macro's parameter or be passed on, unchanged, to the module's own
    versioned macros or to the input (no `CASE WHEN rules_version = 1`, no other macro)."""
    import re

    from cclq.query.sqlfiles import strip_comments, view_modules

    for macro, given in metrics.VERSION_INPUTS.items():
        (module,) = [m for m in view_modules() if re.search(rf"MACRO {macro}\(", m.sql)]
        text = strip_comments(module.sql)
        own = set(re.findall(r"MACRO (\w+)\(rules_version\b", text))
        assert macro in own
        uses = {m.start() for m in re.finditer(r"\brules_version\b", text)}
        # a macro's parameter, or the first argument of a call to one of these macros
        passed = {
            m.start(2)
            for m in re.finditer(r"(\w+)\(\s*(rules_version)\s*[,)]", text)
            if m.group(1) in own | {given.macro}
        }
        assert uses and uses <= passed, [text[max(0, u - 60) : u + 20] for u in uses - passed]


def same_rows(con, a: str, b: str) -> tuple[int, int, int]:
    """(rows of a, rows of b, rows in one and not the other, duplicates counted)."""
    return con.execute(
        f"SELECT (SELECT count(*) FROM ({a})), (SELECT count(*) FROM ({b})), "
        f"(SELECT count(*) FROM (({a}) EXCEPT ALL ({b}))) "
        f"+ (SELECT count(*) FROM (({b}) EXCEPT ALL ({a})))"
    ).fetchone()


def test_derived_views_give_the_rows_of_the_view(wh: Warehouse):
    """A batch that shares a derived view's source (``-- batch: shared from <source> via
    <stand_in>``) computes the view from its stand-in: the stand-in must give exactly the
    view's rows."""
    con = connect(wh)
    order = [v.name for v in batch_views()]
    derived = [v for v in batch_views() if v.source is not None]
    assert derived
    for view in derived:
        assert order.index(view.source) < order.index(view.name)
        whole = f"SELECT * FROM {view.name}"
        if view.as_view:  # read as it is in a batch: the view's columns less those it leaves out
            whole = f"SELECT * EXCLUDE ({', '.join(view.without)}) FROM {view.name}"
            names = [[str(d[0]) for d in con.relation(q).description] for q in (whole, f"FROM {view.stand_in}")]
            assert names[0] == names[1], view
        n, m, differ = same_rows(con, whole, f"SELECT * FROM {view.stand_in}")
        assert n == m > 0 and differ == 0, view
    con.close()


def test_a_batch_sharing_the_source_computes_a_derived_view_from_it(wh: Warehouse, monkeypatch):
    """hta_temporal_breakdown alone reads hta_gpu_rows; with hta_events shared (two more
    readers) it is shared too, computed from hta_events' table, and the result is the same."""
    specs = [resolve(n) for n in ("hta_temporal_breakdown", "hta_critical_path_breakdown", "hta_queue_length_summary")]
    con = connect(wh)
    alone = sorted_rows(run_metric(con, specs[0]))
    con.close()
    runs, ran = run_batch_recording(wh, specs, monkeypatch)
    assert sorted_rows(runs["hta_temporal_breakdown"].table) == alone
    made = [s for s in ran if s.startswith('CREATE TABLE _cclq_shared.main."_cclq_shared_hta_gpu_rows"')]
    assert len(made) == 1 and made[0].endswith("hta_gpu_rows_from_events")


def test_the_shared_tables_are_a_file_removed_afterwards(wh: Warehouse, monkeypatch):
    """A batch over many events, or under a memory limit given, writes its shared tables
    to a database file in the spill folder (compressed, dropped unwritten when memory runs
    short); a small one keeps them in memory. The rows are those the metrics give alone,
    and the file is gone once the batch is done."""
    from cclq.query.settings import QuerySettings

    names = ("collective_skew", "collective_busbw", "hta_comm_comp_overlap", "hta_queue_length_summary")
    specs = [resolve(n) for n in names]
    con = connect(wh)
    alone = {n: sorted_rows(run_metric(con, spec)) for n, spec in zip(names, specs)}
    con.close()
    seen: list[tuple[str, bool]] = []
    real = metrics._release

    def release(lane: Session, name: str) -> None:  # while the batch runs: where its tables are
        (path,) = lane.execute(
            "SELECT path FROM duckdb_databases() WHERE database_name = ?", [metrics.SHARED_DB]
        ).fetchone()
        seen.append((str(path), Path(path).is_file() if path else False))
        real(lane, name)

    monkeypatch.setattr(metrics, "_release", release)
    for settings, file_from_events, in_file in (
        (QuerySettings(), metrics.FILE_FROM_EVENTS, False),  # this warehouse is small
        (QuerySettings(), 1, True),
        (QuerySettings(memory_limit="500MB"), metrics.FILE_FROM_EVENTS, True),
    ):
        monkeypatch.setattr(metrics, "FILE_FROM_EVENTS", file_from_events)
        seen.clear()
        con = connect(wh, settings=settings)
        spill = con.spill_dir
        assert spill is not None
        batch = {n: sorted_rows(r.table) for n, r in run_metrics(con, specs).items()}
        where = (str(spill / "shared.duckdb"), True) if in_file else ("None", False)  # in memory: no path
        assert seen and all(place == where for place in seen), (seen, where)
        assert not list(spill.iterdir())  # the file (and its WAL) removed with the batch
        attached = con.execute("SELECT count(*) FROM duckdb_databases() WHERE database_name = ?", [metrics.SHARED_DB])
        assert attached.fetchone() == (0,)
        con.close()
        assert batch == alone
        assert all(runs for runs in batch.values())


def test_a_spill_folder_that_cannot_take_the_file_keeps_the_shared_tables_in_memory(wh: Warehouse, monkeypatch):
    """A spill folder where the shared tables' file cannot be made (here a folder stands
    at its name) leaves them in memory: the batch runs, with the rows the metrics give
    alone."""
    specs = [resolve(n) for n in ("collective_skew", "collective_busbw")]
    con = connect(wh)
    plain = {spec.name: sorted_rows(run_metric(con, spec)) for spec in specs}
    con.close()
    monkeypatch.setattr(metrics, "FILE_FROM_EVENTS", 1)  # a file even for this small warehouse
    con = connect(wh)
    assert con.spill_dir is not None
    (con.spill_dir / "shared.duckdb").mkdir()
    runs = run_metrics(con, specs)
    con.close()
    assert {n: sorted_rows(r.table) for n, r in runs.items()} == plain
    assert all(r.error is None for r in runs.values())
