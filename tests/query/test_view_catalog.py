"""The compiled view catalog (cclq/query/view_catalog.py): what DuckDB's name resolution
must do for it, and how the file is made, found and kept."""

from __future__ import annotations

import os
from pathlib import Path

import duckdb
import pytest

from cclq.query import sqlfiles, view_catalog


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    """A cache folder of the test's own, and no compiled file remembered from before."""
    folder = tmp_path / "cache"
    monkeypatch.setenv(view_catalog.CACHE_ENV, str(folder))
    view_catalog.catalog_file.cache_clear()
    yield folder
    view_catalog.catalog_file.cache_clear()


def test_name_resolution_the_catalog_relies_on(tmp_path):
    """A view of an attached catalog binds a name in its own catalog, else in the default
    database; the temporary schema comes before both, for macros too. (If DuckDB changed
    any of this, the shared views of a batch or the base relations would stop reaching
    the compiled views.)"""
    path = tmp_path / "views.duckdb"
    build = duckdb.connect(str(path))
    build.execute(
        "CREATE TABLE base (x INTEGER); CREATE VIEW v AS SELECT x FROM base; "
        "CREATE MACRO m(a) AS TABLE SELECT x + a AS y FROM v; CREATE VIEW w AS SELECT * FROM m(1); "
        "DROP TABLE base;"
    )
    build.close()
    con = duckdb.connect(":memory:")
    con.execute(f"ATTACH '{path}' AS c (READ_ONLY); SET search_path = 'memory.main,c.main';")
    con.execute("CREATE TABLE base AS SELECT 1 AS x")  # a base relation, in the default database
    assert con.execute("SELECT * FROM w").fetchall() == [(2,)]
    con.execute("CREATE TABLE v AS SELECT 50 AS x")  # the default database does not shadow the catalog's own
    assert con.execute("SELECT * FROM w").fetchall() == [(2,)]
    con.execute("CREATE TEMP VIEW v AS SELECT 100 AS x")  # the temporary schema does
    assert con.execute("SELECT * FROM w").fetchall() == [(101,)]
    con.execute("CREATE TEMP MACRO m(a) AS TABLE SELECT 7 AS y")
    assert con.execute("SELECT * FROM w").fetchall() == [(7,)]
    assert con.execute("SELECT * FROM c.main.m(1)").fetchall() == [(101,)]  # the compiled one, by its full name


def test_compiled_once_then_reused(cache):
    path = view_catalog.catalog_file()
    assert path.parent == cache and path.name == f"views-{view_catalog.catalog_key()}.duckdb"
    made = path.stat().st_mtime_ns
    view_catalog.catalog_file.cache_clear()
    assert view_catalog.catalog_file() == path and path.stat().st_mtime_ns == made
    assert [p.name for p in cache.iterdir()] == [path.name]  # no scratch file, no WAL left
    con = duckdb.connect(":memory:")
    con.execute(f"ATTACH '{path}' AS c (READ_ONLY)")
    names = {n for (n,) in con.execute("SELECT view_name FROM duckdb_views() WHERE database_name = 'c'").fetchall()}
    assert {"collectives", "steps", "gpu_ops", "kernels"} <= names
    tables = con.execute("SELECT count(*) FROM duckdb_tables() WHERE database_name = 'c'").fetchone()
    assert tables == (0,)  # the placeholders are dropped: a session's base relations are found instead
    comment = con.execute("SELECT comment FROM duckdb_views() WHERE database_name = 'c' AND view_name = 'collectives'")
    assert comment.fetchone()[0]


def test_the_key_covers_the_layout_and_duckdb(cache, monkeypatch):
    before = view_catalog.catalog_key()
    monkeypatch.setattr(view_catalog, "FORMAT", view_catalog.FORMAT + 1)
    assert view_catalog.catalog_key() != before
    monkeypatch.setattr(view_catalog, "FORMAT", view_catalog.FORMAT - 1)
    monkeypatch.setattr(duckdb, "__version__", "0.0.1")
    assert view_catalog.catalog_key() != before


def test_the_key_covers_every_modules_sql_and_the_code_that_compiles_it(cache, monkeypatch, tmp_path):
    """The key hashes what makes the script, not the script: an edit of any module's SQL,
    or of the code that turns modules into the script, is another file."""
    import dataclasses

    before = view_catalog.catalog_key()
    modules = view_catalog.view_modules()
    for i in (0, len(modules) - 1):
        edited = list(modules)
        edited[i] = dataclasses.replace(modules[i], sql=modules[i].sql + "\n-- an edit\n")
        with monkeypatch.context() as m:
            m.setattr(view_catalog, "view_modules", lambda edited=edited: edited)
            assert view_catalog.catalog_key() != before, modules[i].name
    code = tmp_path / "sqlfiles.py"
    code.write_bytes(Path(sqlfiles.__file__).read_bytes() + b"\n# an edit\n")
    monkeypatch.setattr(sqlfiles, "__file__", str(code))
    assert view_catalog.catalog_key() != before


def test_a_failed_compile_leaves_nothing(cache, monkeypatch):
    broken = sqlfiles.ViewModule("broken", Path("broken.sql"), (), "CREATE VIEW broken AS SELECT * FROM nowhere;")
    monkeypatch.setattr(view_catalog, "view_modules", lambda: (broken,))
    cache.mkdir()
    with pytest.raises(duckdb.Error):
        view_catalog._compile(cache / "views-x.duckdb")
    assert list(cache.iterdir()) == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes to a read-only folder")
def test_an_unwritable_cache_folder_falls_back_to_the_temporary_folder(cache, tmp_path, monkeypatch):
    cache.mkdir()
    cache.chmod(0o500)
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    try:
        path = view_catalog.catalog_file()
    finally:
        cache.chmod(0o700)
    assert path.parent == tmp_path / "tmp" / f"cclq-{os.getuid()}"


def test_an_unwritable_cache_folder_falls_back_as_root_too(tmp_path, monkeypatch):
    """The cache folder is a file (root can write anywhere else): the temporary folder is used."""
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    monkeypatch.setenv(view_catalog.CACHE_ENV, str(blocker))
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    view_catalog.catalog_file.cache_clear()
    try:
        path = view_catalog.catalog_file()
    finally:
        view_catalog.catalog_file.cache_clear()
    assert path.parent == tmp_path / "tmp" / f"cclq-{os.getuid()}" and path.is_file()


# Names that exercise the rules: each family and class, case, anchors, a newline, none.
_NAMES = [
    "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
    "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t",
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>",
    "sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x64_warpgroupsize2x1x1",
    "fbgemm_gpu::embedding_forward_kernel",
    "Memcpy HtoD (Pageable -> Device)",
    "Stream Sync",
    "flash_fwd_kernel<Flash_fwd_kernel_traits<128, 64>>",
    "void deep_ep::intranode::dispatch<8, 768>(int4*, float*)",
    "FUSED_MOE_kernel\nsecond line",
    "triton_red_fused_softmax_0",
    "c10d::allreduce_",
    "record_param_comms",
    "nccl:all_reduce",
    "nothing at all",
    "",
]


@pytest.mark.parametrize(
    ("macro", "rules", "columns"),
    [
        ("kernel_family_matches", "kernel_family_rules", ("version",)),
        ("kernel_class_matches", "kernel_class_rules", ("version", "applies_to")),
    ],
)
def test_a_matcher_names_the_rules_a_join_on_the_pattern_matches(macro, rules, columns):
    """The generated macro (``-- matcher:``) against the join it replaces, computed
    independently: every rule of the same column values whose pattern regexp_matches the
    text, lowest priority first, for each combination of the rules' column values and
    names that hit every kind of rule (and a NULL text: no rule)."""
    con = duckdb.connect()
    for statement in view_catalog.attach_statements():
        con.execute(statement)
    con.execute("CREATE TEMP TABLE names AS SELECT unnest($names) AS text", {"names": _NAMES + [None]})
    keys = ", ".join(columns)
    condition = " AND ".join(f"r.{c} = k.{c}" for c in columns)
    differ = con.execute(
        f"""
        WITH k AS (SELECT DISTINCT {keys} FROM {rules}),
        joined AS (
          SELECT n.text, k.*, list(r.priority ORDER BY r.priority) FILTER (WHERE r.priority IS NOT NULL) AS hits
          FROM names AS n CROSS JOIN k
          LEFT JOIN {rules} AS r ON {condition} AND regexp_matches(n.text, r.pattern)
          GROUP BY ALL
        )
        SELECT text, {keys}, coalesce(hits, []) AS hits, {macro}(text, {keys}) AS generated
        FROM joined
        WHERE coalesce(hits, []) IS DISTINCT FROM {macro}(text, {keys})
        """
    ).fetchall()
    assert differ == []
    hits = con.execute(
        f"SELECT count(*) FROM names, (SELECT DISTINCT {keys} FROM {rules}) k WHERE len({macro}(text, {keys})) > 0"
    ).fetchone()
    assert hits is not None and hits[0] >= 10  # the names do hit rules


def test_a_malformed_matcher_line_names_its_file_and_line():
    module = sqlfiles.ViewModule("m", Path("sql/views/m.sql"), (), "-- requires: x\n-- matcher: broken FROM rules\n")
    with pytest.raises(ValueError, match=r"m\.sql:2: a matcher line is"):
        sqlfiles.module_matchers(module)
    good = sqlfiles.ViewModule("m", Path("m.sql"), (), "-- matcher: m_matches(text, version, kind) FROM m_rules\n")
    assert sqlfiles.module_matchers(good) == [sqlfiles.Matcher("m_matches", ("version", "kind"), "m_rules")]


def test_a_matcher_refuses_two_rules_of_one_priority():
    """A rule is named by its priority: two of the same values and priority are an error
    (the join would apply both; a list of priorities could not say which)."""
    con = duckdb.connect()
    con.execute(
        "CREATE VIEW m_rules AS "
        "SELECT * FROM (VALUES (1, 10, 'a'), (1, 10, 'b'), (2, 10, 'c')) t(version, priority, pattern)"
    )
    matcher = sqlfiles.Matcher("m_matches", ("version",), "m_rules")
    with pytest.raises(ValueError, match="two rules with priority 10"):
        view_catalog.matcher_macro(con, matcher)
    con.execute("CREATE VIEW ok_rules AS SELECT * FROM m_rules WHERE pattern <> 'b'")
    ok = sqlfiles.Matcher("m_matches", ("version",), "ok_rules")
    con.execute(view_catalog.matcher_macro(con, ok))
    assert con.execute(
        "SELECT m_matches('xa', 1), m_matches('xb', 1), m_matches('c', 2), m_matches('c', 3)"
    ).fetchone() == (
        [10],
        [],
        [10],
        [],
    )
