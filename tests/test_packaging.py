"""A built, non-editable wheel carries every SQL file (sql/ sits outside the package)."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # (CONTRIBUTING.md: over ~2 s each)

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(REPO)],
        capture_output=True,
        text=True,
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
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
        check=True,
        capture_output=True,
    )
    code = (
        "import cclq.query.sqlfiles as s, json; root = s.sql_root(); "
        "print(json.dumps([str(root)] + sorted(p.relative_to(root).as_posix() for p in root.rglob('*.sql'))))"
    )
    # -S: no site-packages, so the editable install of this checkout cannot answer
    result = subprocess.run(
        [sys.executable, "-S", "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"},
        cwd=tmp_path,
    )
    import json

    root, *files = json.loads(result.stdout)
    assert root.startswith(str(target))
    assert set(files) == _repo_sql_files()


def test_wheel_carries_the_compiled_modules_where_a_compiler_is(wheel):
    import shutil

    import pytest

    if not (shutil.which("cc") or shutil.which("gcc")):
        pytest.skip("no C compiler here: the wheel is built without the compiled parser")
    names = zipfile.ZipFile(wheel).namelist()
    assert [n for n in names if n.startswith("cclq/formats/chrome/eventparse.") and n.endswith((".so", ".pyd"))]
    assert [n for n in names if n.startswith("cclq/query/dagpath.") and n.endswith((".so", ".pyd"))]


def test_wheel_contains_the_board_assets(wheel):
    """The board's stylesheet and script are read with importlib.resources from the package."""
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {"cclq/present/board/assets/board.css", "cclq/present/board/assets/board.js"} <= names


def test_without_a_compiler_the_install_works_and_reads_with_msgspec(tmp_path):
    """The compiled modules are optional: where the build finds no C compiler they are
    skipped, the install goes on, ``cclq --version`` says so, the fast reader reads with
    msgspec (the same table as the ijson reference) and the critical path's longest path
    is found in Python."""
    import os
    import shutil

    # a clean copy of the checkout: no module this checkout's own install compiled
    source = tmp_path / "src"
    shutil.copytree(
        REPO,
        source,
        ignore=shutil.ignore_patterns(
            "*.so", "*.pyd", ".venv", ".git", ".cclq", "build", "__pycache__", "*.egg-info", ".hypothesis"
        ),
    )
    out = tmp_path / "wheel"
    env = {**os.environ, "CC": "/bin/false", "LDSHARED": "/bin/false"}
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(source)],
        capture_output=True,
        text=True,
        env=env,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    (whl,) = out.glob("cclq-*.whl")
    names = zipfile.ZipFile(whl).namelist()
    assert not [n for n in names if n.endswith((".so", ".pyd"))]
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(whl)],
        check=True,
        capture_output=True,
    )
    trace = tmp_path / "t.json"
    trace.write_text(
        '{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1.5, '
        '"dur": 2, "args": {"stream": 7, "grid": [1, 2, 3]}}]}'
    )
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); sys.path.insert(1, sys.argv[2])\n"
        "from cclq.formats.base import ReadOptions\n"
        "from cclq.formats.chrome import compiled\n"
        "from cclq.formats.chrome.reader import parser_name\n"
        "from helpers.readers import both, assert_same\n"
        "from pathlib import Path\n"
        "fast, ref = both(Path(sys.argv[3])); assert_same(fast, ref)\n"
        "from cclq.query import critical_path as cp\n"
        "import pyarrow as pa\n"
        "i = lambda v: pa.array(v, pa.int64())\n"
        "assert cp.dagpath is None\n"
        "assert cp.longest_path_arrays(i([0, 1]), i([1, 2]), pa.array([1.0, 2.0]), i([4, 5])).to_pylist() == [4, 5]\n"
        "print(compiled.AVAILABLE, parser_name(fast.result, ReadOptions()), compiled.description())\n"
    )
    # the installed copy first, then the tests' helpers; site-packages for the dependencies
    done = subprocess.run(
        [sys.executable, "-c", code, str(target), str(REPO / "tests"), str(trace)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    available, parser, description = done.stdout.strip().split(" ", 2)
    assert available == "False" and parser.startswith("chrome_json/fast-msgspec-")
    assert description.startswith("msgspec (the compiled parser was not built")
