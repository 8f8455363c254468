"""Shared fixtures. Real traces come from ../shared (skipped cleanly when absent)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cclq.ingest.report import IngestReport

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
from cclq.ingest.run import ingest
from cclq.query.session import connect
from cclq.store.warehouse import Warehouse

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("CCLQ_SHARED", REPO.parent / "shared"))
SHARED_TRACES = SHARED / "traces"
GOLDEN = SHARED / "golden" / "hta"

# `python -m cclq.main` would start a warm daemon per warehouse (cclq/daemon.py) that
# outlives the test; tests/compat/test_daemon.py turns it on where it is the subject.
os.environ["CCLQ_DAEMON"] = "0"


def require_shared() -> Path:
    if not SHARED_TRACES.is_dir():
        pytest.skip(f"real traces not available ({SHARED_TRACES} is absent)")
    return SHARED_TRACES


@pytest.fixture(params=["compiled", "msgspec"])
def chunked(request: pytest.FixtureRequest) -> str:
    """Each reader of chunks in turn (``readers.CHUNKED``), to check against ijson."""
    from readers import chunked_reader

    return chunked_reader(request.param)


@pytest.fixture
def wh(tmp_path: Path) -> Warehouse:
    return Warehouse(tmp_path / "wh")


def run_ingest(paths: list[Path], wh: Warehouse, **kw) -> IngestReport:
    return ingest(paths, wh, jobs=kw.pop("jobs", 1), **kw)


def query(wh: Warehouse, sql: str, params: list | None = None) -> list[tuple]:
    con = connect(wh)
    try:
        return con.execute(sql, params or []).fetchall()
    finally:
        con.close()


def metric_rows(wh: Warehouse, name: str, trace: str | None = None, version: int | None = None) -> list[dict]:
    """One metric's rows (the latest version unless one is given; every trace or one), on a
    connection of its own."""
    from cclq.query.metrics import run_metric
    from cclq.query.registry import resolve

    con = connect(wh)
    try:
        rows = run_metric(con, resolve(name, version)).to_pylist()
    finally:
        con.close()
    return [r for r in rows if trace is None or r["trace"] == trace]


def run_cli(*args: str, env: dict | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Runs the real `cclq` entry point in a subprocess (exit codes, stderr)."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-c", "from cclq.cli.app import main; main()", *args],
        capture_output=True, text=True, env=full_env, cwd=cwd,
    )


def write_trace(path: Path, events: list, **top) -> Path:
    """A minimal Kineto-style file: top-level keys, then traceEvents."""
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"schemaVersion": 1, **top, "traceEvents": events}
    path.write_text(json.dumps(doc))
    return path


@pytest.fixture(scope="session")
def board_site(tmp_path_factory: pytest.TempPathFactory):
    """A warehouse of six workloads and the board built from it (once per session):
    (warehouse root, site folder, the BoardResult)."""
    from presentation_traces import board_workloads

    from cclq.present.board.build import build_board

    root = tmp_path_factory.mktemp("board")
    wh = Warehouse(root / "wh")
    report = ingest([board_workloads(root / "in")], wh, jobs=1)
    assert not report.failed, [o.message for o in report.failed]
    result = build_board(wh, root / "site")
    return wh.root, root / "site", result


def gpu_trace(path: Path, rank: int = 0, world: int = 1, kernels: int = 2, dur_ns: int = 4_000) -> Path:
    """A Kineto trace of ``kernels`` GEMM kernels of ``dur_ns`` each, 10 us apart."""
    from cclq.synth.kineto import KinetoTraceBuilder

    b = KinetoTraceBuilder(rank=rank, world_size=world)
    for i in range(kernels):
        b.kernel("gemm", ts=i * 10_000, dur=dur_ns)
    return b.write(path)


def kernel_time_by_trace(wh: Warehouse) -> dict[str, float]:
    """total_kernel_time per trace, through the result cache as `cclq metric` reads it."""
    from cclq.query.metrics import run_metric
    from cclq.query.registry import resolve

    con = connect(wh, cache=True)
    rows = run_metric(con, resolve("total_kernel_time")).to_pylist()
    return {r["trace"]: r["value"] for r in rows}
