"""``cclq bench --scale`` and ``--main-loop``: growth with the warehouse, and CCL-Bench's loop.

**Scale.** N copies of one real workload folder (``../shared/traces/dlrm_param_8xV100``
by default), each a folder of symlinks to its files, so every copy is a workload of its
own with file ids of its own, exactly as N separate runs would be. For each N: the
ingest (``cclq ingest``, one parser per CPU, wall-clock and peak RSS), then each metric
as ``cclq metric M --all --no-cache`` in a child process (wall-clock, peak RSS from
``wait4``), and at the largest N once more under ``--memory-limit`` to check that the
result is the same (rows compared after sorting; floats to 1e-9 relative, since the
order DuckDB's threads add in moves the last bits of a sum).

**CCL-Bench's loop.** CCL-Bench's website generator runs ``python tools/main.py --trace
D --metric M`` once per (workload folder, metric). The same loop with ``python -m
cclq.main`` over every folder of a traces directory and a few metrics: first on a fresh
warehouse, as CCL-Bench's first run (the calls ingest, and start the daemon), with the
warm daemon (``cclq/compat/daemon.py``, ``cclq/compat/warm.py``) and with every call its
own process (``CCLQ_DAEMON=0``), each loop run twice (first, repeat); then with the
warehouse already built, each way with the metric results computed in the loop (cache
emptied first) and read back (a second loop).
"""

from __future__ import annotations

import csv
import io
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SCALE_METRICS = (
    "total_kernel_time",
    "avg_step_time",
    "communication_overlap_ratio",
    "collective_skew",
    "hta_temporal_breakdown",
)
LOOP_METRICS = ("avg_step_time", "communication_fraction", "total_kernel_time")
_CLI = [sys.executable, "-c", "from cclq.cli.app import main; main()"]


def _child(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, float, str, int]:
    """Runs ``cmd``: (wall seconds, peak RSS MB, stdout, exit status)."""
    start = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.DEVNULL, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
        out.seek(0)
        text = out.read().decode()
    return seconds, usage.ru_maxrss / 1024, text, os.waitstatus_to_exitcode(status)


def copy_workload(source: Path, root: Path, copies: int) -> Path:
    """``root`` holding ``copies`` workload folders of ``source``'s files, as hard links to
    one copy beside ``root`` (ingest does not follow a symbolic link out of its input
    folder, and N real copies would cost N times the disk)."""
    files = [p for p in sorted(source.iterdir()) if p.is_file()]
    master = root.with_name(root.name + ".source")
    master.mkdir(parents=True, exist_ok=True)
    for f in files:
        if not (master / f.name).exists():
            shutil.copyfile(f, master / f.name)
    for i in range(copies):
        folder = root / f"{source.name}_c{i:04d}"
        if folder.is_dir():
            continue
        folder.mkdir(parents=True)
        for f in files:
            os.link(master / f.name, folder / f.name)
    return root


def _same_rows(a: str, b: str) -> bool:
    rows_a, rows_b = (sorted(csv.reader(io.StringIO(t))) for t in (a, b))
    if len(rows_a) != len(rows_b):
        return False
    for ra, rb in zip(rows_a, rows_b):
        if len(ra) != len(rb):
            return False
        for x, y in zip(ra, rb):
            if x == y:
                continue
            try:
                if not math.isclose(float(x), float(y), rel_tol=1e-9, abs_tol=1e-12):
                    return False
            except ValueError:
                return False
    return True


def run_scale_bench(
    source: Path,
    copies: list[int],
    metrics: tuple[str, ...] = SCALE_METRICS,
    memory_limit: str = "500MB",
    scratch: Path | None = None,
) -> list[dict]:
    """Rows of (copies, case, seconds, peak RSS MB, same-as-unlimited)."""
    rows: list[dict] = []
    own = scratch is None
    scratch = Path(tempfile.mkdtemp(prefix="cclq-scale-")) if scratch is None else scratch
    try:
        for n in copies:
            inputs = copy_workload(source, scratch / f"in{n}", n)
            wh = scratch / f"wh{n}"
            shutil.rmtree(wh, ignore_errors=True)
            seconds, peak, _, rc = _child([*_CLI, "ingest", str(inputs), "-w", str(wh), "-q"])
            if rc != 0:
                raise RuntimeError(f"ingest of {n} copies failed (exit {rc})")
            rows.append(
                {"copies": n, "case": "ingest", "seconds": round(seconds, 2), "peak_rss_mb": round(peak), "same": None}
            )
            for metric in metrics:
                cmd = [*_CLI, "metric", metric, "--all", "--no-cache", "-w", str(wh), "-f", "csv"]
                seconds, peak, text, rc = _child(cmd)
                rows.append(
                    {
                        "copies": n,
                        "case": metric,
                        "seconds": round(seconds, 2),
                        "peak_rss_mb": round(peak),
                        "same": None if rc == 0 else False,
                    }
                )
                if n == max(copies):
                    lim_s, lim_peak, lim_text, lim_rc = _child([*cmd, "--memory-limit", memory_limit])
                    rows.append(
                        {
                            "copies": n,
                            "case": f"{metric} --memory-limit {memory_limit}",
                            "seconds": round(lim_s, 2),
                            "peak_rss_mb": round(lim_peak),
                            "same": lim_rc == 0 and _same_rows(text, lim_text),
                        }
                    )
            if n != max(copies):
                shutil.rmtree(wh, ignore_errors=True)
    finally:
        if own:
            shutil.rmtree(scratch, ignore_errors=True)
    return rows


def _loop(folders: list[Path], metrics: tuple[str, ...], wh: Path, env: dict[str, str]) -> tuple[float, int]:
    """Seconds for every (folder, metric) call of ``python -m cclq.main``; calls failed."""
    failed = 0
    start = time.perf_counter()
    for folder in folders:
        for metric in metrics:
            proc = subprocess.run(
                [sys.executable, "-m", "cclq.main", "--trace", str(folder), "--metric", metric, "--warehouse", str(wh)],
                capture_output=True,
                env=env,
            )
            failed += proc.returncode != 0
    return time.perf_counter() - start, failed


def run_main_loop_bench(traces_dir: Path, metrics: tuple[str, ...] = LOOP_METRICS) -> list[dict]:
    """CCL-Bench's calling loop, six ways (see the module notes)."""
    folders = [p for p in sorted(traces_dir.iterdir()) if p.is_dir()]
    scratch = Path(tempfile.mkdtemp(prefix="cclq-loop-"))
    calls = len(folders) * len(metrics)
    rows: list[dict[str, Any]] = []

    def row(case: str, seconds: float, failed: int) -> None:
        rows.append(
            {
                "case": case,
                "calls": calls,
                "failed": failed,
                "seconds": round(seconds, 2),
                "ms_per_call": round(1000 * seconds / calls),
            }
        )

    try:
        base = {**os.environ, "TMPDIR": str(scratch)}  # the daemon's socket folder: this run's own
        # CCL-Bench's first run: a fresh warehouse, so the calls ingest, and start the daemon
        fresh = scratch / "fresh"
        for label, daemon in (("warm daemon", "1"), ("a process per call", "0")):
            env = {**base, "CCLQ_DAEMON": daemon}
            wh = fresh / label.replace(" ", "_")
            seconds, failed = _loop(folders, metrics, wh, env)
            row(f"fresh warehouse, {label}: first loop", seconds, failed)
            seconds, failed = _loop(folders, metrics, wh, env)
            row(f"fresh warehouse, {label}: repeat loop", seconds, failed)
            if daemon == "1":
                _stop_daemon(wh, env)
        shutil.rmtree(fresh, ignore_errors=True)

        wh = scratch / "wh"
        _child([*_CLI, "ingest", *map(str, folders), "-w", str(wh), "-q"])  # a folder that fails fails its calls
        for label, daemon in (("a process per call", "0"), ("warm daemon", "1")):
            env = {**base, "CCLQ_DAEMON": daemon}
            shutil.rmtree(wh / "cache", ignore_errors=True)
            for results in ("computed", "cached"):
                seconds, failed = _loop(folders, metrics, wh, env)
                row(f"ingested, {label}, results {results}", seconds, failed)
            if daemon == "1":
                _stop_daemon(wh, env)
        return rows
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _stop_daemon(wh: Path, env: dict[str, str]) -> None:
    subprocess.run(
        [sys.executable, "-m", "cclq.compat.daemon_process", "--stop", "--warehouse", str(wh)],
        env=env,
        capture_output=True,
    )
