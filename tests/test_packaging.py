"""A built, non-editable wheel carries every SQL file (sql/ sits outside the package)."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(REPO)],
        capture_output=True, text=True,
    )
    if result.returncode != 0:
        pytest.fail(f"pip wheel failed: {result.stderr[-2000:]}")
    (whl,) = out.glob("cclq-*.whl")
    return whl


def _repo_sql_files() -> set[str]:
    return {p.relative_to(REPO / "sql").as_posix() for p in (REPO / "sql").rglob("*.sql")}


def test_wheel_contains_every_sql_file(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    packaged = {n.removeprefix("cclq/sql/") for n in names if n.startswith("cclq/sql/") and n.endswith(".sql")}
    assert packaged == _repo_sql_files()


def test_installed_wheel_finds_its_sql(wheel, tmp_path):
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
                   check=True, capture_output=True)
    code = (
        "import cclq.query.sqlfiles as s, json; root = s.sql_root(); "
        "print(json.dumps([str(root)] + sorted(p.relative_to(root).as_posix() for p in root.rglob('*.sql'))))"
    )
    # -S: no site-packages, so the editable install of this checkout cannot answer
    result = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, check=True,
                            env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"}, cwd=tmp_path)
    import json

    root, *files = json.loads(result.stdout)
    assert root.startswith(str(target))
    assert set(files) == _repo_sql_files()


def test_wheel_contains_the_board_assets(wheel):
    """The board's stylesheet and script are read with importlib.resources from the package."""
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {"cclq/present/board/assets/board.css", "cclq/present/board/assets/board.js"} <= names
