"""The SQL contract (docs/sql.md): released metric versions are frozen, versions that
differ only in a rules version share one body, every metric documents its detail
columns, and the views carry their documentation into DuckDB's catalog."""

from __future__ import annotations

import os
import re

import pytest

from cclq.metrics import CHECKSUMS, body_checksum, registry, released_checksums
from cclq.sqlfiles import sql_root, strip_comments, view_modules

UPDATE_ENV = "CCLQ_UPDATE_CHECKSUMS"


def _all_specs():
    return [spec for versions in registry().values() for spec in versions.values()]


def _label(spec) -> str:
    return f"{spec.name}/v{spec.version}"


def test_strip_comments_keeps_strings_and_drops_comments():
    sql = "SELECT 'a--b' AS \"x--y\", 1 -- note\n  /* block\n */ FROM t   \n\n-- only a comment\nWHERE a = 'it''s -- no'"
    assert strip_comments(sql) == "SELECT 'a--b' AS \"x--y\", 1\n   FROM t\nWHERE a = 'it''s -- no'\n"


def test_released_versions_are_frozen():
    """Each version's code (its query and the shared body it calls, comments left out)
    has the checksum recorded in sql/metrics/CHECKSUMS. A changed checksum means a
    released version would change meaning: make a new version file instead. A new
    version is recorded by `CCLQ_UPDATE_CHECKSUMS=1 python -m pytest
    tests/test_sql_contract.py -k frozen`, which adds missing versions and never
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
        f"`{UPDATE_ENV}=1 python -m pytest tests/test_sql_contract.py -k frozen`")
    gone = sorted(set(recorded) - set(current))
    assert not gone, f"sql/metrics/{CHECKSUMS} lists versions that have no file: {', '.join(gone)}"
    changed = sorted(label for label in current if recorded[label] != current[label])
    assert not changed, (
        f"released versions changed their SQL: {', '.join(changed)}. A released version "
        "never changes meaning: put the new definition in a new version file (docs-only "
        "edits, in comments, are fine)")


def test_comment_edits_keep_the_checksum(tmp_path):
    from cclq.metrics import parse_metric_file

    spec = registry()["coll_call_num"][1]
    copy = tmp_path / "coll_call_num" / "v1.sql"
    copy.parent.mkdir()
    copy.write_text(spec.text.replace("-- Differs from CCL-Bench", "-- (reworded) Differs from CCL-Bench")
                    + "-- a trailing note\n")
    assert body_checksum(parse_metric_file(copy)) == body_checksum(spec)
    copy.write_text(spec.text.replace("coll_call_num_rows(1,", "coll_call_num_rows(2,"))
    assert body_checksum(parse_metric_file(copy)) != body_checksum(spec)


def test_shared_bodies_are_frozen_with_their_metric():
    """A version that calls a shared body (sql/views/metric_bodies) is frozen with it."""
    spec = registry()["coll_call_num"][2]
    from cclq.metrics import frozen_sql

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
        for spec in registry()[metric].values():
            assert f"{metric}_rows(" in spec.sql, spec.path


# --- 3. the inner-step rule, the overlap and the dtype sizes exist once ---------------

def test_shared_rules_are_written_once():
    texts = {str(p.relative_to(sql_root())): strip_comments(p.read_text())
             for p in sorted(sql_root().rglob("*.sql"))}
    inner = [p for p, t in texts.items() if re.search(r"n\s*<=\s*2\s+OR\s*\(\s*i\s*>\s*1", t)]
    assert inner == ["views/steps.sql"], inner
    overlap = [p for p, t in texts.items() if "FILTER (WHERE in_a AND in_b)" in t]
    assert overlap == ["views/intervals.sql"], overlap
    dtype_tables = [p for p, t in texts.items() if re.search(r"'bf16'\s*[:,]\s*2\s*[,)}]", t)]
    assert dtype_tables == ["views/dtypes.sql"], dtype_tables
