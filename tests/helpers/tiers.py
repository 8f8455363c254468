"""How CI runs every test once: the default tier first, then the slow tier and what skipped.

``.ci/run`` runs the default tier (``pytest``) right after the README's install, before any
extra is installed, so that a test needing an extra without skipping fails there. It then
installs the extras and runs the rest: the slow tier, plus the default-tier tests that
skipped in the first run (for want of an extra, or of chromium). Running ``pytest -m ""``
there instead would run the default tier's ~1,000 tests a second time for nothing.

- ``--record-skipped FILE``: write the node ids of the tests that skipped, one a line (and
  of the modules that skipped as they were collected: every test in them).
- ``--only-slow-or-skipped FILE``: of the tests not marked slow, keep only those FILE lists
  (with ``-m ""``: the slow tier and what the first run skipped); the rest are deselected.

Recorded from the outcomes rather than declared with a marker for "needs an extra": a
marker has to be kept in step with each ``importorskip`` by hand, and misses skips for
other reasons (a system browser, a tool); the record is what did skip, so a test cannot
run in neither step. Works under pytest-xdist: the controller receives every report.
The options come from ``tests/conftest.py``, which pytest reads before it parses the command
line only when ``tests`` (or a path in it) is given: ``pytest --record-skipped F tests``.
"""

from __future__ import annotations

from pathlib import Path

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("cclq tiers", "the two test runs of .ci/run (tests/helpers/tiers.py)")
    group.addoption(
        "--record-skipped",
        metavar="FILE",
        default=None,
        help="write the node ids of the tests that skipped to FILE, one a line",
    )
    group.addoption(
        "--only-slow-or-skipped",
        metavar="FILE",
        default=None,
        help='of the tests not marked slow, run only those FILE lists (with -m "": the slow tier '
        "and the tests an earlier --record-skipped run skipped)",
    )


class SkipRecorder:
    """Collects the node ids of skipped tests; writes them when the session ends."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.skipped: set[str] = set()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.skipped:
            self.skipped.add(report.nodeid)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        # a module that skips as it is collected (a module-level importorskip or skip):
        # its id (the file) stands for every test in it
        if report.skipped:
            self.skipped.add(report.nodeid)

    def pytest_sessionfinish(self) -> None:
        # a new file renamed over the old one: never a half-written list
        new = self.path.with_name(self.path.name + ".new")
        new.write_text("".join(f"{nodeid}\n" for nodeid in sorted(self.skipped)))
        new.replace(self.path)


def pytest_configure(config: pytest.Config) -> None:
    path = config.getoption("record_skipped")
    # under xdist only the controller (which has no workerinput) writes: it gets every report
    if path and not hasattr(config, "workerinput"):
        config.pluginmanager.register(SkipRecorder(Path(path)), "cclq-skip-recorder")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    path = config.getoption("only_slow_or_skipped")
    if not path:
        return
    listed = set(Path(path).read_text().splitlines())

    def wanted(item: pytest.Item) -> bool:
        if item.get_closest_marker("slow"):
            return True
        parts = item.nodeid.split("::")  # the test, or its file or class, skipped before
        return any("::".join(parts[:n]) in listed for n in range(1, len(parts) + 1))

    keep = [item for item in items if wanted(item)]
    dropped = [item for item in items if not wanted(item)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep
