"""``cclq bench --targets DIR``: the three speed targets of the report, diff and board paths.

Each is a ratio of the wall-clock and of the CPU times of ``cclq`` processes (start-up included, nothing
cached: ``--no-cache``; the compiled views of an install are made before, untimed), measured in one run:

* ``report / metric``: a cold ``cclq report T`` against one cold ``cclq metric
  total_kernel_time --trace T`` (target: 3x or less);
* ``board / ingest``: a cold ``cclq board`` over every workload of DIR against the
  ``cclq ingest`` of DIR (target: 1x or less);
* ``board N``: a cold ``cclq board`` over N copies of a generated 8-rank trace, in
  seconds (target: 20 s for 500).

``baseline`` names another source tree of cclq (a checkout of an earlier commit, e.g.
``git archive <commit> | tar -x -C DIR``): every case runs with it too, in the same run,
each repeat of a case once per source in turn, so that before and after share the
machine's load as it drifts (run one source's cases after the other's, the second was
0.05-0.3 s slower in three runs of five where alternated rounds showed no difference).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path


def _cclq(src: Path | None, *args: str) -> tuple[float, float]:
    """(wall, CPU) seconds of one ``cclq`` process (with ``src`` first on the path when
    given). CPU is user + system time of the process and its threads (``wait4``): on a
    machine that others share, wall time measures their load as much as ours."""
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = str(src)
    with tempfile.TemporaryFile("w+") as err:  # a file, not a pipe: nothing blocks on a full pipe
        start = time.perf_counter()
        # run outside any checkout: `python -c` puts the working directory first on the path,
        # before PYTHONPATH, so from a checkout every source tree was that checkout's code
        proc = subprocess.Popen(
            [sys.executable, "-c", "from cclq.cli.app import main; main()", *args],
            env=env,
            cwd=tempfile.gettempdir(),
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            err.seek(0)
            raise RuntimeError(f"cclq {' '.join(args)} failed ({proc.returncode}): {err.read()[-2000:]}")
    return seconds, usage.ru_utime + usage.ru_stime


Source = tuple[str, Path | None]  # (label, source tree: None for the installed cclq)


def _alternated(
    repeats: int, sources: list[Source], run: Callable[[str, Path | None], tuple[float, float]]
) -> dict[str, tuple[float, float]]:
    """label -> (best wall, best CPU) of ``run(label, src)``, each repeat run once per
    source in turn."""
    runs: dict[str, list[tuple[float, float]]] = {label: [] for label, _ in sources}
    for _ in range(max(repeats, 1)):
        for label, src in sources:
            runs[label].append(run(label, src))
    return {label: (min(r[0] for r in rs), min(r[1] for r in rs)) for label, rs in runs.items()}


def _row(target: str, label: str, a: tuple[float, float], b: tuple[float, float] | None) -> dict:
    row = {
        "target": target,
        "source": label,
        "a_wall_s": round(a[0], 2),
        "a_cpu_s": round(a[1], 2),
        "b_wall_s": None,
        "b_cpu_s": None,
        "ratio_wall": None,
        "ratio_cpu": None,
    }
    if b is not None:
        row.update(
            b_wall_s=round(b[0], 2),
            b_cpu_s=round(b[1], 2),
            ratio_wall=round(a[0] / b[0], 2),
            ratio_cpu=round(a[1] / b[1], 2),
        )
    return row


def run_target_bench(
    traces: Path,
    trace: str = "dlrm_param_8xV100",
    board_workloads: int = 500,
    baseline: Path | None = None,
    repeats: int = 1,
) -> list[dict]:
    """One row per (target, source): the times and the ratio (see the module docstring)."""
    from cclq.bench.run import board_warehouse

    scratch = Path(tempfile.mkdtemp(prefix="cclq-bench-targets-"))
    here = Path(__file__).resolve().parents[2]  # the folder that holds this cclq package
    sources: list[Source] = [("this tree", here)]
    if baseline is not None:
        sources.insert(0, ("baseline", baseline.resolve()))
    rows: list[dict] = []
    try:
        one = scratch / "one"
        shutil.copytree(traces / trace, one / trace)
        big = board_warehouse(scratch / "board", board_workloads) if board_workloads else None

        def wh1(label: str) -> str:  # a source's warehouse of the one trace
            return str(scratch / f"wh1-{label}")

        def wh2(label: str) -> str:  # a source's warehouse of every trace of DIR
            return str(scratch / f"wh2-{label}")

        for label, src in sources:
            _cclq(src, "ingest", str(one), "-w", wh1(label))
            # untimed: a first query compiles the views once per install (cclq.query.view_catalog),
            # as Python compiles its modules; then every timed process finds them
            _cclq(src, "sql", "SELECT count(*) FROM collectives", "-w", wh1(label))

        def ingest_all(label: str, src: Path | None) -> tuple[float, float]:
            shutil.rmtree(wh2(label), ignore_errors=True)
            return _cclq(src, "ingest", str(traces.resolve()), "-w", wh2(label))

        def cold(args: Callable[[str], list[str]]) -> Callable[[str, Path | None], tuple[float, float]]:
            """A cold command of each source: ``args(label)``."""
            return lambda label, src: _cclq(src, *args(label))

        def board_of(warehouse: Callable[[str], str], site: str) -> Callable[[str], list[str]]:
            return lambda label: ["board", str(scratch / f"{site}-{label}"), "--no-cache", "-q", "-w", warehouse(label)]

        metric = _alternated(
            repeats,
            sources,
            cold(lambda label: ["metric", "total_kernel_time", "--trace", trace, "--no-cache", "-w", wh1(label)]),
        )
        report = _alternated(repeats, sources, cold(lambda label: ["report", trace, "--no-cache", "-w", wh1(label)]))
        ingest = _alternated(repeats, sources, ingest_all)
        board = _alternated(repeats, sources, cold(board_of(wh2, "site")))
        if big is not None:
            board_big = _alternated(repeats, sources, cold(board_of(lambda label: str(big), "site-big")))
        for label, _ in sources:
            rows.append(_row(f"report / metric on {trace} (<= 3)", label, report[label], metric[label]))
            rows.append(_row(f"board / ingest of {traces.name} (<= 1)", label, board[label], ingest[label]))
            if big is not None:
                rows.append(
                    _row(f"board of {board_workloads} workloads, cold (<= 20 s)", label, board_big[label], None)
                )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return rows
