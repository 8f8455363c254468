"""The compiled views file (cclq/query/view_catalog.py) is replaced, never rewritten in
place (issue 39): a process that attached it (a daemon, `cclq serve`, a long query) keeps
reading the file it opened while another compiles a new one over its path."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import duckdb
import pytest

from cclq.query import view_catalog


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv(view_catalog.CACHE_ENV, str(folder))
    view_catalog.catalog_file.cache_clear()
    yield folder
    view_catalog.catalog_file.cache_clear()


def test_a_second_compile_replaces_the_file_and_its_readers_keep_theirs(cache: Path):
    path = view_catalog.catalog_file()
    con = duckdb.connect(":memory:")  # a process that has the file attached
    con.execute(f"ATTACH '{path}' AS c (READ_ONLY)")
    views = "SELECT count(*) FROM duckdb_views() WHERE database_name = 'c'"
    n_views = con.execute(views).fetchone()
    with open(path, "rb") as held:  # the bytes that process has loaded
        before = hashlib.sha256(held.read()).hexdigest()
        inode = os.fstat(held.fileno()).st_ino
        view_catalog._compile(path)  # another process compiles it again (a cache cleared meanwhile)
        assert os.stat(path).st_ino != inode  # a new file renamed over the path
        assert os.fstat(held.fileno()).st_nlink == 0  # the old one unlinked, not truncated
        held.seek(0)
        assert hashlib.sha256(held.read()).hexdigest() == before
    assert con.execute(views).fetchone() == n_views
    con.close()
    assert [p.name for p in cache.iterdir()] == [path.name]  # no scratch file left


def test_a_cached_result_is_replaced_too(tmp_path: Path):
    """The result cache (cclq/query/cache.py): a result stored again under the same key
    (two processes computed it at once) is a new file renamed over the first, and so is
    the JSON of its rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from cclq.query.cache import read_rows, rows_file, store_result

    path = tmp_path / "cache" / "metric.x.v1.key.parquet"
    store_result(pa.table({"value": [1.0]}), path)
    with open(path, "rb") as held, open(rows_file(path), "rb") as held_rows:
        before, rows_before = held.read(), held_rows.read()
        store_result(pa.table({"value": [2.0]}), path)
        for f, old in ((held, before), (held_rows, rows_before)):
            assert os.fstat(f.fileno()).st_nlink == 0
            f.seek(0)
            assert f.read() == old
    assert pq.read_table(path).column("value").to_pylist() == [2.0]
    assert read_rows(path) == (["value"], [{"value": 2.0}])
    assert sorted(p.name for p in path.parent.iterdir()) == sorted([path.name, rows_file(path).name])
