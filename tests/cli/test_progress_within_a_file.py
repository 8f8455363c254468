"""Long work says what it is doing in a log (issue 41): an ingest of one large file
writes bytes done of the total and a rate every interval while the file is parsed (not
only once it is done), and compiling the views on the first use after an install is a
line of its own, before any metric's."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers.cli import run_cli

from cclq.cli.progress import DEFAULT_INTERVAL_S, IngestProgress, progress_interval
from cclq.synth.kineto import generate_workload

pytestmark = pytest.mark.slow  # (CONTRIBUTING.md: over ~2 s each)

BYTES_LINE = re.compile(
    r"ingest: (\d+\.\d) of (\d+\.\d) MB \((\d+)%\), (\d+\.\d) MB/s, (\d+)/(\d+) files done, "
    r"(\d+\.\d) s"
)


def _one_big_file(tmp_path: Path) -> tuple[Path, list[str]]:
    """The ~24 MB file both progress tests ingest, and the ingest's arguments: one job,
    and the reference reader (the compiled one parses the file in ~0.1 s, often before any
    line or redraw from inside it: the terminal test failed in 3 runs of 6)."""
    (path,) = generate_workload(
        tmp_path / "in" / "big", ranks=1, steps=6, layers=2, seed=1, target_bytes_per_rank=24_000_000, card=False
    )
    return path, ["ingest", str(path.parent), "-w", str(tmp_path / "wh"), "-j", "1", "--reader", "ijson"]


def test_one_big_file_reports_bytes_and_rate_while_it_is_parsed(tmp_path: Path):
    """One file of ~24 MB with a line every 0.05 s (CCLQ_PROGRESS_INTERVAL, 10 s by
    default): lines with 0/1 files done and bytes strictly between 0 and the total come
    before the file's own line."""
    path, ingest = _one_big_file(tmp_path)
    size_mb = path.stat().st_size / 1e6
    done = run_cli(*ingest, env={"CCLQ_PROGRESS_INTERVAL": "0.05"})
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    file_line = next(i for i, x in enumerate(lines) if x.startswith("ingest 1/1 big/"))
    during = [BYTES_LINE.fullmatch(x) for x in lines[:file_line]]
    during = [m for m in during if m]
    assert during, done.stderr
    for m in during:
        assert float(m.group(2)) == round(size_mb, 1)
        assert (m.group(5), m.group(6)) == ("0", "1")
    inside = [m for m in during if 0 < float(m.group(1)) < float(m.group(2))]
    assert inside, done.stderr  # a line from inside the file, bytes done of the total
    assert all(float(m.group(4)) > 0 for m in inside)
    done_mb = [float(m.group(1)) for m in during]
    assert done_mb == sorted(done_mb)


def test_the_interval_comes_from_the_environment(monkeypatch):
    monkeypatch.delenv("CCLQ_PROGRESS_INTERVAL", raising=False)
    assert progress_interval() == DEFAULT_INTERVAL_S == 10.0
    monkeypatch.setenv("CCLQ_PROGRESS_INTERVAL", "2.5")
    assert progress_interval() == 2.5
    for bad in ("0", "-1", "soon"):
        monkeypatch.setenv("CCLQ_PROGRESS_INTERVAL", bad)
        assert progress_interval() == 10.0


def test_bytes_line_by_hand(monkeypatch):
    """250 MB of 1000 MB after 5 s: 25%, 50.0 MB/s."""
    monkeypatch.setattr("cclq.cli.progress.time.perf_counter", lambda: 105.0)
    bar = IngestProgress(interval_s=60)
    bar._start, bar._total, bar._files = 100.0, 1_000_000_000, 2  # as start() sets them, no thread
    bar.advance(250_000_000)
    assert bar.bytes_line() == "ingest: 250.0 of 1000.0 MB (25%), 50.0 MB/s, 0/2 files done, 5.0 s"


def test_compiling_the_views_is_its_own_line(tmp_path: Path):
    """A fresh cache folder (the first use after an install): two notes say the views are
    being compiled and how long it took, before the first metric's line; the next command
    finds them compiled and says nothing of it."""
    generate_workload(tmp_path / "in" / "w", ranks=1, steps=2, layers=1, seed=2, card=False)
    wh = str(tmp_path / "wh")
    env = {"CCLQ_CACHE_DIR": str(tmp_path / "cache")}
    assert run_cli("ingest", str(tmp_path / "in"), "-w", wh, env=env).returncode == 0
    first = run_cli("metric", "total_kernel_time", "communication_fraction", "--all", "-w", wh, env=env)
    assert first.returncode == 0, first.stderr
    lines = first.stderr.splitlines()
    start = [i for i, x in enumerate(lines) if x.startswith("cclq: note: compiling the SQL views")]
    end = [i for i, x in enumerate(lines) if re.fullmatch(r"cclq: note: views compiled in \d+\.\d s", x)]
    metrics = [i for i, x in enumerate(lines) if x.startswith("metrics ")]
    assert len(start) == 1 and len(end) == 1 and metrics, first.stderr
    assert start[0] < end[0] < metrics[0], first.stderr
    again = run_cli("metric", "total_kernel_time", "communication_fraction", "--all", "-w", wh, env=env)
    assert again.returncode == 0, again.stderr
    assert "compil" not in again.stderr, again.stderr


def test_on_a_terminal_the_bar_shows_bytes_and_rate_inside_the_file(tmp_path: Path):
    """stderr on a pseudo-terminal: rich's bar redraws at least every 2 s while the one
    file is parsed, with bytes done of the total strictly inside the file and a rate."""
    import os
    import pty
    import select
    import subprocess
    import sys
    import time

    path, ingest = _one_big_file(tmp_path)
    total = f"{path.stat().st_size / 1e6:.1f}"
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-c", "from cclq.cli.app import main; main()", *ingest],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=slave,
        env={**os.environ, "COLUMNS": "140"},
    )
    os.close(slave)
    chunks: list[tuple[float, str]] = []
    while True:
        ready, _, _ = select.select([master], [], [], 0.5)
        if ready:
            try:
                data = os.read(master, 65536)
            except OSError:  # the child closed the terminal
                break
            if not data:
                break
            chunks.append((time.monotonic(), data.decode(errors="replace")))
        elif proc.poll() is not None:
            break
    proc.wait(timeout=60)
    os.close(master)
    assert proc.returncode == 0
    text = "".join(c for _, c in chunks)
    inside = {float(d) for d in re.findall(rf"(\d+\.\d)/{re.escape(total)} MB", text)} - {0.0, float(total)}
    assert inside, text[-2000:]
    assert re.search(r"\d+\.\d+ MB/s", text), text[-2000:]
    bar = [t for t, c in chunks if f"/{total} MB" in c]
    assert max((b - a for a, b in zip(bar, bar[1:])), default=0.0) < 2.0
