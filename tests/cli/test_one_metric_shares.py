"""``cclq metric NAME`` alone stores the views its query reads several times over once
(`-- batch: shared always`, issue 42), as a batch does: the command ran the metric's query bare, so
collective_busbw expanded the collectives' stack per reference (2.3 s of query on a
127 MB rank instead of 0.8 s)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from helpers.rows import close

from cclq.synth.kineto import generate_workload

SPY = """
import json, sys
from contextlib import contextmanager
import cclq.query.metrics as metrics
real = metrics.shared_views
seen = []

@contextmanager
def recording(session, queries):  # the real block, its names written down
    with real(session, queries) as names:
        seen.append(sorted(names))
        yield names

metrics.shared_views = recording
sys.argv = ["cclq", *sys.argv[1:]]
from cclq.cli.app import main
try:
    main()
finally:
    print("SHARED " + json.dumps(seen), file=sys.stderr)
"""


def _cclq(args: list[str], cwd: Path) -> tuple[str, list[list[str]]]:
    done = subprocess.run([sys.executable, "-c", SPY, *args], capture_output=True, text=True, cwd=cwd, timeout=300)
    assert done.returncode == 0, done.stderr
    line = [x for x in done.stderr.splitlines() if x.startswith("SHARED ")][-1]
    return done.stdout, json.loads(line.removeprefix("SHARED "))


def test_one_metric_shares_what_it_reads_many_times_and_gives_the_batch_rows(tmp_path):
    generate_workload(tmp_path / "in" / "ddp", ranks=2, steps=3, layers=4)
    wh = str(tmp_path / "wh")
    done = subprocess.run(
        [sys.executable, "-m", "cclq", "ingest", str(tmp_path / "in"), "-q", "-w", wh],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    alone, shared = _cclq(["metric", "collective_busbw", "--all", "--no-cache", "-w", wh, "-f", "json"], tmp_path)
    assert len(shared) == 1 and {"_collective_cpu_ops", "collectives_with", "collectives"} <= set(shared[0])
    out = tmp_path / "batch"
    _cclq(
        [
            "metric",
            "collective_busbw",
            "total_kernel_time",
            "--all",
            "--no-cache",
            "-w",
            wh,
            "-f",
            "json",
            "-o",
            str(out),
        ],
        tmp_path,
    )
    rows, batch = json.loads(alone), json.loads((out / "collective_busbw.json").read_text())
    assert rows and len(rows) == len(batch)
    for row, other in zip(rows, batch):  # a mean's last bits: see helpers.rows.close
        assert close(row, other), (row, other)
