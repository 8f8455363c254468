"""``cclq bench --startup``: what a command costs before it does anything.

The start-up figures (``cclq --help``, a cached metric) regress quietly when a module
imported by ``cclq.cli.app`` starts importing something heavy at its top. This times, each
in fresh child processes (best of ``repeats``): the import of ``cclq.cli.app`` and of each
command's own modules (``python -X importtime``: the cumulative microseconds of the
top-level import), ``cclq --help``, and a cached ``cclq metric total_kernel_time --all`` on
the bundled workload. It asserts nothing: a guard to read, not a test.

The children run with Python's bytecode cache on, as a user's interpreter runs, whatever
this process's ``PYTHONDONTWRITEBYTECODE`` says (some CI images and sandboxes set it: then
every command compiles cclq's ~300 modules from source, ~70 ms of each start here), and
each case runs once untimed first, so that the cache is written before the timed runs.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from cclq.locations import package_dir

# the modules each command imports when it runs (besides cclq.cli.app)
COMMAND_MODULES = {
    "ingest": "cclq.ingest.run",
    "metric": "cclq.query.metrics",
    "report": "cclq.present.report",
    "board": "cclq.present.board.build",
    "bench": "cclq.bench.run",
}


def _child_env() -> dict[str, str]:
    """This environment with the bytecode cache on (see the module docstring)."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def import_seconds(module: str, after: str | None = None) -> float:
    """Seconds to import ``module`` in a fresh interpreter (after ``after``, already
    imported, when given), from ``-X importtime``'s cumulative figure."""
    code = (f"import {after}; " if after else "") + f"import {module}"
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True, env=_child_env()
    )
    total = 0
    for line in done.stderr.splitlines():
        m = re.match(r"import time:\s+\d+ \|\s+(\d+) \| (\S.*)$", line)
        if m and m.group(2).strip() == module:
            total = int(m.group(1))
    return total / 1e6


def _wall(args: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "cclq", *args], capture_output=True, cwd=cwd, check=True, env=_child_env())
    return time.perf_counter() - start


def run_startup_bench(repeats: int = 3) -> list[dict[str, Any]]:
    """One row per case: best seconds of ``repeats`` runs, after one untimed run."""
    rows: list[dict[str, Any]] = []

    def row(case: str, seconds: float) -> None:
        rows.append({"case": case, "best_s": round(seconds, 3), "load": round(os.getloadavg()[0], 1)})

    row("import cclq.cli.app", min(import_seconds("cclq.cli.app") for _ in range(repeats + 1)))
    for command, module in COMMAND_MODULES.items():
        row(
            f"import for `cclq {command}` ({module}, after cclq.cli.app)",
            min(import_seconds(module, "cclq.cli.app") for _ in range(repeats + 1)),
        )
    with tempfile.TemporaryDirectory(prefix="cclq-bench-startup-") as tmp:
        cwd = Path(tmp)
        _wall(["--help"], cwd)
        row("cclq --help", min(_wall(["--help"], cwd) for _ in range(repeats)))
        bundled = package_dir().parent / "trace_collection"
        if bundled.is_dir():
            _wall(["ingest", str(bundled), "-q", "-w", "wh"], cwd)
            _wall(["metric", "total_kernel_time", "--all", "-w", "wh"], cwd)  # computes and caches
            row(
                "cclq metric total_kernel_time --all (cached)",
                min(_wall(["metric", "total_kernel_time", "--all", "-w", "wh"], cwd) for _ in range(repeats)),
            )
    return rows
