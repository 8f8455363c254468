"""The SQL contract (sql/README.md): released metric versions are frozen, versions that
differ only in a rules version share one body, every metric documents its detail
columns, and the views carry their documentation into DuckDB's catalog."""

from __future__ import annotations

import os
import re

import pytest

from cclq.locations import sql_root
from cclq.query.registry import CHECKSUMS, body_checksum, registry, released_checksums
from cclq.query.sqlfiles import strip_comments, view_modules

UPDATE_ENV = "CCLQ_UPDATE_CHECKSUMS"


def _all_specs():
    return [spec for versions in registry().values() for spec in versions.values()]


def _label(spec) -> str:
    return f"{spec.name}/v{spec.version}"


def test_strip_comments_keeps_strings_and_drops_comments():
    sql = (
        "SELECT 'a--b' AS \"x--y\", 1 -- note\n  /* block\n */ FROM t   \n\n-- only a comment\nWHERE a = 'it''s -- no'"
    )
    assert strip_comments(sql) == "SELECT 'a--b' AS \"x--y\", 1\n   FROM t\nWHERE a = 'it''s -- no'\n"


def test_released_versions_are_frozen():
    """Each version's code (its query and the shared body it calls, comments left out)
    has the checksum recorded in sql/metrics/CHECKSUMS. A changed checksum means a
    released version would change meaning: make a new version file instead. A new
    version is recorded by `CCLQ_UPDATE_CHECKSUMS=1 python -m pytest
    tests/query/test_sql_contract.py -k frozen`, which adds missing versions and never
    rewrites a recorded one."""
    path = sql_root() / "metrics" / CHECKSUMS
    recorded = released_checksums()
    current = {_label(s): body_checksum(s) for s in _all_specs()}
    missing = sorted(set(current) - set(recorded))
    if missing and os.environ.get(UPDATE_ENV) == "1":
        text = path.read_text() if path.exists() else ""
        header = [line for line in text.splitlines() if line.startswith("#")]
        entries = {**recorded, **{label: current[label] for label in missing}}
        path.write_text("\n".join(header + [f"{entries[k]}  {k}" for k in sorted(entries)]) + "\n")
        recorded = released_checksums()
        missing = []
    assert not missing, (
        f"versions not in sql/metrics/{CHECKSUMS}: {', '.join(missing)}; record them with "
        f"`{UPDATE_ENV}=1 python -m pytest tests/query/test_sql_contract.py -k frozen`"
    )
    gone = sorted(set(recorded) - set(current))
    assert not gone, f"sql/metrics/{CHECKSUMS} lists versions that have no file: {', '.join(gone)}"
    changed = sorted(label for label in current if recorded[label] != current[label])
    assert not changed, (
        f"released versions changed their SQL: {', '.join(changed)}. A released version "
        "never changes meaning: put the new definition in a new version file (docs-only "
        "edits, in comments, are fine)"
    )


def test_comment_edits_keep_the_checksum(tmp_path):
    from cclq.query.registry import parse_metric_file

    spec = registry()["coll_call_num"][1]
    copy = tmp_path / "coll_call_num" / "v1.sql"
    copy.parent.mkdir()
    copy.write_text(
        spec.text.replace("-- Differs from CCL-Bench", "-- (reworded) Differs from CCL-Bench") + "-- a trailing note\n"
    )
    assert body_checksum(parse_metric_file(copy)) == body_checksum(spec)
    copy.write_text(spec.text.replace("coll_call_num_rows(1,", "coll_call_num_rows(2,"))
    assert body_checksum(parse_metric_file(copy)) != body_checksum(spec)


def test_shared_bodies_are_frozen_with_their_metric():
    """A version that calls a shared body (sql/views/metric_bodies) is frozen with it."""
    spec = registry()["coll_call_num"][2]
    from cclq.query.registry import frozen_sql

    assert "CREATE OR REPLACE MACRO coll_call_num_rows" in frozen_sql(spec)


# --- 1. no version is a copy of another that differs only in a rules version -----------

# a versioned macro called with its rules version (not a shared body, `<metric>_rows`)
_RULES_CALL = re.compile(r"\b(\w+(?<!_rows))\((\d+)\b")


def test_no_version_is_a_copy_with_another_rules_version():
    """Two versions of a metric whose code is equal once the numbers passed to
    versioned macros (`steps_with(2)`, `gpu_ops_classified_with(1)`, ...) are masked
    are copies: they must share one body (sql/views/metric_bodies/<metric>.sql)."""
    copies = []
    for name, versions in registry().items():
        masked = {}
        for v, spec in versions.items():
            code = _RULES_CALL.sub(lambda m: f"{m.group(1)}(N", strip_comments(spec.sql))
            masked.setdefault(code, []).append(v)
        copies += [f"{name} v{', v'.join(map(str, vs))}" for vs in masked.values() if len(vs) > 1]
    assert not copies, f"versions that differ only in a rules version: {copies}"


def test_shared_bodies_belong_to_a_metric():
    bodies = [m for m in view_modules() if m.name.startswith("metric_bodies.")]
    assert bodies
    for module in bodies:
        metric = module.name.split(".", 1)[1]
        assert metric in registry(), module.path
        assert f"CREATE OR REPLACE MACRO {metric}_rows(" in module.sql, module.path
        users = [spec for spec in registry()[metric].values() if f"{metric}_rows(" in spec.sql]
        assert len(users) >= 2, module.path  # a body is shared, or it would be in its metric file
        # a later version with a query of its own says how it differs from the body's
        for spec in registry()[metric].values():
            assert spec in users or "Differs from version" in spec.text, spec.path


# --- 3. the inner-step rule, the overlap and the dtype sizes exist once ---------------


def test_shared_rules_are_written_once():
    texts = {str(p.relative_to(sql_root())): strip_comments(p.read_text()) for p in sorted(sql_root().rglob("*.sql"))}
    inner = [p for p, t in texts.items() if re.search(r"n\s*<=\s*2\s+OR\s*\(\s*i\s*>\s*1", t)]
    assert inner == ["views/steps.sql"], inner
    overlap = [p for p, t in texts.items() if "FILTER (WHERE in_a AND in_b)" in t]
    assert overlap == ["views/intervals.sql"], overlap
    dtype_tables = [p for p, t in texts.items() if re.search(r"'bf16'\s*[:,]\s*2\s*[,)}]", t)]
    assert dtype_tables == ["views/dtypes.sql"], dtype_tables


# --- 4. generic views do not require domain views -------------------------------------

DOMAIN_MODULES = {"horovod", "execution_traces", "xla"}


def _required(name: str) -> set[str]:
    by_name = {m.name: m for m in view_modules()}
    seen: set[str] = set()
    todo = [name]
    while todo:
        for dep in by_name[todo.pop()].requires:
            if dep not in seen:
                seen.add(dep)
                todo.append(dep)
    return seen


@pytest.mark.parametrize("generic", ["collectives", "steps", "kernel_classes", "gpu", "intervals"])
def test_generic_modules_do_not_require_domain_modules(generic):
    assert not _required(generic) & DOMAIN_MODULES, _required(generic)


def test_domain_parts_come_with_the_generic_module():
    from cclq.query.sqlfiles import modules_for

    names = [m.name for m in modules_for("SELECT * FROM collectives")]
    for extension in ("collectives_horovod", "collectives_execution_traces"):
        assert extension in names
        assert names.index(extension) > names.index("collectives")
    names = [m.name for m in modules_for("SELECT * FROM steps_with(1)")]
    assert "steps_xla" in names and names.index("steps_xla") > names.index("steps")
    # a domain query alone does not pull in the generic stack
    assert "collectives" not in [m.name for m in modules_for("SELECT * FROM horovod_ops")]
    for module in view_modules():
        for base in module.extends:
            assert base in module.requires, module.name


# --- a small generated warehouse (tests/helpers/presentation_traces.py) -----------------------


@pytest.fixture(scope="module")
def small_wh(tmp_path_factory):
    from helpers.presentation_traces import board_workloads

    from cclq.ingest.run import ingest
    from cclq.store.warehouse import Warehouse

    root = tmp_path_factory.mktemp("contract")
    wh = Warehouse(root / "wh")
    report = ingest([board_workloads(root / "in")], wh, jobs=1)
    assert not report.failed, [o.message for o in report.failed]
    return wh


def test_extensions_replace_their_extension_points(small_wh):
    from cclq.query.session import connect

    con = connect(small_wh)
    views = dict(con.execute("SELECT view_name, sql FROM duckdb_views() WHERE NOT internal").fetchall())
    assert "horovod_ops" in views["_collectives_extra"]
    assert "et_links" in views["_collective_cpu_op_sizes_extra"]
    assert "xla_steps" in views["_steps_extra"]
    # the XLA profile's steps are steps, as before the split
    assert con.execute("SELECT count(*) FROM steps WHERE trace = 'tpu_xla' AND source LIKE 'xla_%'").fetchone()[0] > 0


# --- 5. every metric documents its detail columns -------------------------------------


@pytest.mark.slow
def test_every_metric_documents_its_detail_columns(small_wh):
    """The header's `-- columns:` block lists exactly the detail columns the metric
    returns (beyond trace, rank, step, value, unit, reason), in order, each with a phrase."""
    from helpers.warehouse import run_every_version

    from cclq.query.registry import documented_columns
    from cclq.query.session import connect

    fixed = {"trace", "rank", "step", "value", "unit", "reason"}
    runs = run_every_version(connect(small_wh))
    problems = []
    for spec in _all_specs():
        documented = documented_columns(spec)
        if documented is None:
            problems.append(f"{spec.label}: no `-- columns:` block")
            continue
        run = runs[spec.label]
        if run.table is None:
            problems.append(f"{spec.label}: {run.error}")
            continue
        details = [c for c in run.table.column_names if c not in fixed]
        if list(documented) != details:
            problems.append(f"{spec.label}: documents {list(documented)}, returns {details}")
        problems += [f"{spec.label}: {c} has no phrase" for c, phrase in documented.items() if not phrase]
    assert not problems, "\n".join(problems)


# --- 6. the views' documentation is in DuckDB's catalog --------------------------------

KEY_VIEWS = ("events", "slices", "gpu_ops", "kernels", "collectives", "steps")


def _undocumented(con, views=KEY_VIEWS) -> list[str]:
    missing = [
        f"view {v}"
        for v, c in con.execute(
            "SELECT view_name, comment FROM duckdb_views() WHERE view_name IN (SELECT unnest(?))", [list(views)]
        ).fetchall()
        if not c
    ]
    missing += [
        f"{t}.{c}"
        for t, c, comment in con.execute(
            "SELECT table_name, column_name, comment FROM duckdb_columns() WHERE table_name IN (SELECT unnest(?))",
            [list(views)],
        ).fetchall()
        if not comment
    ]
    return missing


def test_key_views_and_their_columns_have_comments(small_wh):
    from cclq.query.session import connect

    con = connect(small_wh, comments=True)
    present = {v for (v,) in con.execute("SELECT view_name FROM duckdb_views()").fetchall()}
    assert set(KEY_VIEWS) <= present
    assert _undocumented(con) == []
    # text with a quote in it survives the quoting
    assert (
        con.execute(
            "SELECT comment FROM duckdb_columns() WHERE table_name = 'kernels' AND column_name = 'device'"
        ).fetchone()[0]
        == "the GPU: the event's `device` argument, else its pid"
    )
    # every documented view of every module has its comment (all modules are loaded here)
    from cclq.query.sqlfiles import relation_docs

    comments = dict(con.execute("SELECT view_name, comment FROM duckdb_views() WHERE NOT internal").fetchall())
    uncommented = [n for n, d in relation_docs().items() if d.text and n in comments and not comments[n]]
    assert not uncommented


def test_comments_reach_read_only_sql_and_views_made_later(small_wh):
    from cclq.query.session import connect

    # `cclq sql` (read-only): a question about the catalog loads every view
    query = (
        "SELECT table_name, column_name, comment FROM duckdb_columns() "
        "WHERE table_name IN ('collectives', 'steps', 'kernels', 'events')"
    )
    rows = connect(small_wh, comments=True).run_user_query(query).to_pylist()
    assert rows and all(r["comment"] for r in rows), [r for r in rows if not r["comment"]]
    # the compiled views carry their comments in every session; the base relations' are
    # added for what users read only
    con = connect(small_wh)
    assert con.execute("SELECT comment FROM duckdb_views() WHERE view_name = 'collectives'").fetchone()[0]
    assert con.execute("SELECT comment FROM duckdb_views() WHERE view_name = 'events'").fetchone() == (None,)
    assert _undocumented(connect(small_wh, comments=True)) == []


def test_the_shell_script_carries_the_comments(small_wh):
    import duckdb

    from cclq.query.engine import setup_script

    with small_wh.open_snapshot() as snapshot:
        script = setup_script(snapshot, comments=True)
        con = duckdb.connect(":memory:")
        con.execute(script)
        assert _undocumented(con) == []


def test_comments_on_temporary_views():
    import duckdb

    from cclq.query.sqlfiles import comment_statements

    con = duckdb.connect(":memory:")
    con.execute(
        "CREATE TEMP VIEW steps AS SELECT NULL::VARCHAR AS trace, 1 AS rank, 1 AS step, 0 AS ts_ns, "
        "0 AS end_ns, 0 AS dur_ns, '' AS source, 1 AS records, NULL AS phase"
    )
    con.execute("\n".join(comment_statements("steps")))
    assert con.execute(
        "SELECT temporary, comment IS NOT NULL FROM duckdb_views() WHERE view_name = 'steps'"
    ).fetchone() == (True, True)
    assert _undocumented(con, ("steps",)) == []
