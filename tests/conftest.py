"""Fixtures every folder of the suite uses, and the session's settings.

Shared code that is not a fixture lives in ``tests/helpers`` (imported as ``helpers.X``);
nothing imports this module.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from cclq.ingest.run import ingest
from cclq.store.warehouse import Warehouse

# --record-skipped / --only-slow-or-skipped: how .ci/run runs each test once (the module says why)
pytest_plugins = ["helpers.tiers"]

try:  # the property tests (hypothesis, in the test extra)
    from hypothesis import settings as _hypothesis_settings
except ImportError:  # pragma: no cover - the test extra is not installed
    _hypothesis_settings = None
if _hypothesis_settings is not None:
    # The suite runs the same examples every time (a fresh clone's CI has no example
    # database, and a landing should not depend on a draw); CCLQ_HYPOTHESIS_RANDOM=1
    # draws new ones, which is how new failures are found (docs/testing.md).
    _hypothesis_settings.register_profile("cclq", derandomize=os.environ.get("CCLQ_HYPOTHESIS_RANDOM") != "1")
    _hypothesis_settings.load_profile("cclq")

# `python -m cclq.main` would start a warm daemon per warehouse (cclq/compat/daemon.py) that
# outlives the test; tests/compat/test_daemon.py turns it on where it is the subject.
os.environ["CCLQ_DAEMON"] = "0"

CACHE_VARIABLES = ("CCLQ_CACHE_DIR", "XDG_CACHE_HOME")


@pytest.fixture(scope="session", autouse=True)
def _cache_in_the_sessions_temp_folder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """cclq's cache (the compiled views, cached results: ``~/.cache/cclq`` by default,
    ``cclq.query.view_catalog.cache_folder``) goes to the session's temporary folder, for
    this process and every ``cclq`` the tests start: the suite writes nothing outside its
    temporary folders, and no run reads what an earlier one cached."""
    folder = tmp_path_factory.mktemp("cache")
    saved = {name: os.environ.get(name) for name in CACHE_VARIABLES}
    os.environ["CCLQ_CACHE_DIR"] = str(folder / "cclq")
    os.environ["XDG_CACHE_HOME"] = str(folder)
    from cclq.query.view_catalog import catalog_file

    catalog_file.cache_clear()  # compiled where the cache now is
    yield folder
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture(params=["compiled", "msgspec"])
def chunked(request: pytest.FixtureRequest) -> str:
    """Each reader of chunks in turn (``helpers.readers.CHUNKED``), to check against ijson."""
    from helpers.readers import chunked_reader

    return chunked_reader(request.param)


@pytest.fixture
def wh(tmp_path: Path) -> Warehouse:
    return Warehouse(tmp_path / "wh")


@pytest.fixture(scope="session")
def board_site(tmp_path_factory: pytest.TempPathFactory):
    """A warehouse of six workloads and the board built from it (once per session):
    (warehouse root, site folder, the BoardResult)."""
    from helpers.presentation_traces import board_workloads

    from cclq.present.board.build import build_board

    root = tmp_path_factory.mktemp("board")
    wh = Warehouse(root / "wh")
    report = ingest([board_workloads(root / "in")], wh, jobs=1)
    assert not report.failed, [o.message for o in report.failed]
    result = build_board(wh, root / "site")
    return wh.root, root / "site", result
