"""The compiled view catalog (cclq/query/view_catalog.py): what DuckDB's name resolution
must do for it, and how the file is made, found and kept."""

from __future__ import annotations

import os
from pathlib import Path

import duckdb
import pytest

from cclq.query import view_catalog


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

    from cclq.query import sqlfiles

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
    monkeypatch.setattr(view_catalog, "_compile_script", lambda: "CREATE VIEW broken AS SELECT * FROM nowhere;")
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
