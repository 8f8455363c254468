"""The ``-- batch:`` lines of sql/views: which views and macros a batch computes once
into tables, read from the SQL (``cclq.query.sqlfiles.batch_views``) instead of lists
kept in Python."""

from __future__ import annotations

from pathlib import Path

import pytest

from cclq.query.sqlfiles import (
    BatchView,
    ViewModule,
    batch_views,
    calls_read,
    doc_blocks,
    names_reached,
    parse_batch_lines,
    relation_docs,
)


def module(tmp_path: Path, sql: str) -> ViewModule:
    path = tmp_path / "m.sql"
    path.write_text(sql)
    return ViewModule("m", path, (), sql)


def test_the_lines_read_as_written(tmp_path: Path) -> None:
    sql = (
        "-- One row per thing.\n"
        "-- batch: shared\n"
        "CREATE OR REPLACE VIEW a AS SELECT 1 AS x;\n"
        "\n"
        "-- batch: shared always\n"
        "--   why: read three times by one query\n"
        "CREATE OR REPLACE MACRO b_with(rules_version) AS TABLE SELECT * FROM a;\n"
        "CREATE OR REPLACE VIEW c_from_a AS SELECT * FROM a;\n"
        "-- batch: shared from a via c_from_a\n"
        "CREATE OR REPLACE VIEW c AS SELECT 1 AS x;\n"
        "CREATE OR REPLACE VIEW d AS SELECT 1 AS x;\n"
        "-- batch: shared from a via c_from_a without Y,  z\n"
        "CREATE OR REPLACE VIEW e AS SELECT 1 AS x, 2 AS y, 3 AS z;\n"
    )
    m = module(tmp_path, sql)
    assert parse_batch_lines(m) == [
        BatchView("a", m.path, macro=False),
        BatchView("b_with", m.path, macro=True, always=True),
        BatchView("c", m.path, macro=False, source="a", stand_in="c_from_a"),
        BatchView("e", m.path, macro=False, source="a", stand_in="c_from_a", without=("y", "z")),
    ]
    # the line and its note are not the view's documentation
    (a, *_) = doc_blocks(sql)
    assert a.name == "a" and a.text == "One row per thing."


@pytest.mark.parametrize(
    ("sql", "says"),
    [
        ("-- batch: shared\n\nCREATE VIEW a AS SELECT 1;\n", "right above a CREATE"),
        ("-- batch: shared\nSELECT 1;\n", "right above a CREATE"),
        ("-- batch: shred\nCREATE VIEW a AS SELECT 1;\n", "expected `-- batch: shared"),
        ("-- batch: shared sometimes\nCREATE VIEW a AS SELECT 1;\n", "expected `-- batch: shared"),
        ("-- batch: shared\n-- batch: shared always\nCREATE VIEW a AS SELECT 1;\n", "two `-- batch:` lines"),
        ("-- batch: shared\n-- The doc.\nCREATE VIEW a AS SELECT 1;\n", "must end its comment block"),
        ("-- batch: shared\nCREATE MACRO f(x) AS x + 1;\n", "table macro of one argument"),
        ("-- batch: shared\nCREATE MACRO f(v, s) AS TABLE SELECT v;\n", "table macro of one argument"),
        ("-- batch: shared without\nCREATE VIEW a AS SELECT 1;\n", "expected `-- batch: shared"),
        ("-- batch: shared without x\nCREATE MACRO f(v) AS TABLE SELECT v AS x;\n", "`without` is for a view"),
    ],
)
def test_a_misplaced_or_malformed_line_names_the_file_and_line(tmp_path: Path, sql: str, says: str) -> None:
    with pytest.raises(ValueError, match=r"m\.sql:1: ") as e:
        parse_batch_lines(module(tmp_path, sql))
    assert says in str(e.value)


def test_the_order_follows_what_each_reads() -> None:
    """A batch computes each shared view after the shared ones it reads: the order is
    worked out from the SQL, so a view added anywhere lands after its inputs."""
    views = batch_views()
    order = [v.name for v in views]
    assert len(order) == len(set(order))
    for i, view in enumerate(views):
        reads = names_reached(f"SELECT * FROM {view.name}")
        if view.stand_in is not None:
            reads |= names_reached(f"SELECT * FROM {view.stand_in}")
        assert reads & set(order) - {view.name} <= set(order[:i]), view.name
    # what the lines say, checked on a few by hand: a macro is one by its CREATE, and
    # collectives is read several times over by one metric (issue 42)
    by_name = {v.name: v for v in views}
    assert by_name["collectives_with"].macro and not by_name["collectives"].macro
    assert by_name["collectives"].always and not by_name["kernels"].always
    assert order.index("collectives_with") < order.index("collectives")
    derived = by_name["hta_gpu_rows"]
    assert (derived.source, derived.stand_in) == ("hta_events", "hta_gpu_rows_from_events")


def test_the_catalog_comment_leaves_the_line_and_its_note_out() -> None:
    docs = relation_docs()
    for view in batch_views():
        if view.name in docs:
            assert "batch:" not in docs[view.name].text, view.name
    # kernels' note (why sharing it pays) is not part of what `cclq shell` users read
    assert "500-workload board" not in docs["kernels"].text and docs["kernels"].text


@pytest.mark.parametrize(
    ("sql", "read"),
    [
        ("SELECT * FROM collectives_with(2)", True),
        # handed on: collective_volumes_with(rules_version, scope) calls collectives_with(rules_version)
        ("SELECT * FROM collective_volumes_with(2, metric_scope)", True),
        ("SELECT * FROM cclq.main.collectives_with(1)", True),
        ("SELECT * FROM collectives_with((1))", False),
        ('SELECT * FROM "collectives_with"(1)', False),
        ("SELECT * FROM collectives_with (1)", False),
        ("SELECT * FROM t, collectives_with(t.v)", False),
        ("SELECT * FROM collective_volumes_with(1 + 1, metric_scope)", False),
    ],
)
def test_calls_read_tells_a_call_whose_version_cannot_be_read(sql: str, read: bool) -> None:
    """A batch offers only the versions the SQL's calls name where every call is one
    literal_arguments reads (cclq.query.metrics): any other writing of a call says no."""
    assert calls_read((sql,), "collectives_with") is read
    assert calls_read(("SELECT * FROM collectives_with(2)", sql), "collectives_with") is read
