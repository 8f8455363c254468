"""``cclq bench --targets DIR``: the three speed targets of the report, diff and board paths.

Each is a ratio of wall-clock times of ``cclq`` processes (start-up included, nothing
cached: ``--no-cache``), measured in one run:

* ``report / metric``: a cold ``cclq report T`` against one cold ``cclq metric
  total_kernel_time --trace T`` (target: 3x or less);
* ``board / ingest``: a cold ``cclq board`` over every workload of DIR against the
  ``cclq ingest`` of DIR (target: 1x or less);
* ``board N``: a cold ``cclq board`` over N copies of a generated 8-rank trace, in
  seconds (target: 20 s for 500).

``baseline`` names another source tree of cclq (a checkout of an earlier commit, e.g.
``git archive <commit> | tar -x -C DIR``): every case runs with it too, on the same
warehouses in the same run, so before and after are measured under the same load.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _cclq(src: Path | None, *args: str) -> float:
    """Seconds one ``cclq`` process takes (with ``src`` first on the path when given)."""
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = str(src)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", "from cclq.cli.app import main; main()", *args],
                          env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seconds = time.perf_counter() - start
    if done.returncode not in (0, 1):
        raise RuntimeError(f"cclq {' '.join(args)} failed ({done.returncode}): {done.stderr[-2000:]}")
    return seconds


def _best(repeats: int, run) -> float:  # noqa: ANN001 - a callable returning seconds
    return min(run() for _ in range(max(repeats, 1)))


def run_target_bench(traces: Path, trace: str = "dlrm_param_8xV100", board_workloads: int = 500,
                     baseline: Path | None = None, repeats: int = 1) -> list[dict]:
    """One row per (target, source): the times and the ratio (see the module docstring)."""
    from cclq.dev.bench.run import board_warehouse

    scratch = Path(tempfile.mkdtemp(prefix="cclq-bench-targets-"))
    here = Path(__file__).resolve().parents[3]
    sources: list[tuple[str, Path | None]] = [("this tree", here)]
    if baseline is not None:
        sources.insert(0, ("baseline", baseline.resolve()))
    rows: list[dict] = []
    try:
        one = scratch / "one"
        shutil.copytree(traces / trace, one / trace)
        big = board_warehouse(scratch / "board", board_workloads) if board_workloads else None
        for label, src in sources:
            wh1, wh2 = scratch / f"wh1-{label}", scratch / f"wh2-{label}"
            _cclq(src, "ingest", str(one), "-w", str(wh1))
            metric = _best(repeats, lambda: _cclq(src, "metric", "total_kernel_time", "--trace", trace,
                                                  "--no-cache", "-w", str(wh1)))
            report = _best(repeats, lambda: _cclq(src, "report", trace, "--no-cache", "-w", str(wh1)))
            rows.append({"target": f"report / metric on {trace} (<= 3)", "source": label,
                         "a_s": round(report, 2), "b_s": round(metric, 2), "ratio": round(report / metric, 2)})

            def ingest_all() -> float:
                shutil.rmtree(wh2, ignore_errors=True)
                return _cclq(src, "ingest", str(traces), "-w", str(wh2))

            ingest = _best(repeats, ingest_all)
            site = scratch / f"site-{label}"
            board = _best(repeats, lambda: _cclq(src, "board", str(site), "--no-cache", "-q", "-w", str(wh2)))
            rows.append({"target": f"board / ingest of {traces.name} (<= 1)", "source": label,
                         "a_s": round(board, 2), "b_s": round(ingest, 2), "ratio": round(board / ingest, 2)})
            if big is not None:
                site = scratch / f"site-big-{label}"
                seconds = _best(repeats, lambda: _cclq(src, "board", str(site), "--no-cache", "-q", "-w", str(big)))
                rows.append({"target": f"board of {board_workloads} workloads, cold (<= 20 s)", "source": label,
                             "a_s": round(seconds, 2), "b_s": None, "ratio": None})
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return rows
