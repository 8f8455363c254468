"""CI's two runs (tests/helpers/tiers.py): the first records what skipped, the second runs the
slow tier and those, so that every test runs once and none in neither run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent

PROJECT = {
    "pyproject.toml": (
        "[tool.pytest.ini_options]\n"
        "addopts = \"--strict-markers -m 'not slow' -p no:cacheprovider\"\n"
        'markers = ["slow: slow"]\n'
    ),
    "conftest.py": 'pytest_plugins = ["helpers.tiers"]\n',
    "test_a.py": (
        "import os, pytest\n"
        "needs = pytest.mark.skipif(os.environ.get('EXTRA') != '1', reason='no extra')\n"
        "def test_plain(): pass\n"
        "@needs\n"
        "def test_needs_extra(): pass\n"
        "@pytest.mark.parametrize('x', ['a b', 'c'])\n"
        "def test_param(x):\n"
        "    if x == 'c' and os.environ.get('EXTRA') != '1': pytest.skip('no extra')\n"
        "@pytest.mark.slow\n"
        "def test_slow(): pass\n"
    ),
    "test_c.py": (
        "import os, pytest\n"
        "if os.environ.get('EXTRA') != '1': pytest.skip('no extra', allow_module_level=True)\n"
        "def test_in_a_module_that_skips(): pass\n"
        "class TestIt:\n"
        "    def test_method(self): pass\n"
    ),
    "test_b.py": (
        "import os, pytest\n"
        "@pytest.fixture\n"
        "def extra():\n"
        "    if os.environ.get('EXTRA') != '1': pytest.skip('no extra')\n"
        "def test_fixture_skips(extra): pass\n"
        "def test_other(): pass\n"
    ),
}


def _run(root: Path, *args: str, extra: bool) -> list[str]:
    """The node ids that passed, from ``-rA``'s summary lines."""
    env = {"PYTHONPATH": str(TESTS), "EXTRA": "1" if extra else "0", "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-rA", *args], cwd=root, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return sorted(line.split(" ", 1)[1] for line in done.stdout.splitlines() if line.startswith("PASSED "))


@pytest.mark.slow  # six pytest runs in subprocesses (CONTRIBUTING.md: over ~2 s)
@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_the_second_run_is_the_slow_tier_and_what_skipped(tmp_path: Path, workers: list[str]) -> None:
    if workers:
        pytest.importorskip("xdist")
    for name, text in PROJECT.items():
        (tmp_path / name).write_text(text)
    skipped = tmp_path / "skipped.txt"
    first = _run(tmp_path, *workers, "--record-skipped", str(skipped), extra=False)
    assert first == ["test_a.py::test_param[a b]", "test_a.py::test_plain", "test_b.py::test_other"]
    assert skipped.read_text().splitlines() == [
        "test_a.py::test_needs_extra",
        "test_a.py::test_param[c]",
        "test_b.py::test_fixture_skips",
        "test_c.py",
    ]
    second = _run(tmp_path, *workers, "-m", "", "--only-slow-or-skipped", str(skipped), extra=True)
    assert second == [
        "test_a.py::test_needs_extra",
        "test_a.py::test_param[c]",
        "test_a.py::test_slow",
        "test_b.py::test_fixture_skips",
        "test_c.py::TestIt::test_method",
        "test_c.py::test_in_a_module_that_skips",
    ]
    # together: every test of the project, each once
    assert sorted(first + second) == sorted(_run(tmp_path, *workers, "-m", "", extra=True))
