"""The first answer on a new trace: cclq's three CLI calls against HTA 0.5.0's load and the
same two analyses, process start-up included (``cclq bench --first-run``).

A user with a new trace folder runs, as the README shows::

    cclq ingest FOLDER
    cclq metric hta_temporal_breakdown --all
    cclq metric hta_comm_comp_overlap --all

against HTA's ``TraceAnalysis(trace_dir=FOLDER)`` then ``get_temporal_breakdown()`` and
``get_comm_comp_overlap()`` (visualize off), each in one process. cclq's time is the sum of
its three processes' wall times on a fresh warehouse (and a fresh result cache: nothing is
read back), HTA's the wall time of its process; memory is the peak RSS of the largest
process (``wait4``). HTA reads Kineto files only: a folder with other files beside them
(DLRM's execution traces) is given to HTA as a folder of links to its Kineto files.
Every case runs ``repeats`` times, interleaved; the best time and the largest RSS are kept.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from cclq.bench.hta import COPIES_SOURCE, DEFAULT_SHARED_TRACES, rank_copies

FIRST_RUN_METRICS = ("hta_temporal_breakdown", "hta_comm_comp_overlap")
FIRST_RUN_FOLDERS = ("hta_df_index_resolver", "dlrm_param_8xV100")

# Runs in the HTA interpreter: argv = [folder]. Exit status 0 when both analyses answered.
_HTA_FIRST = r"""
import sys
from hta.trace_analysis import TraceAnalysis
a = TraceAnalysis(trace_dir=sys.argv[1])
a.get_temporal_breakdown(visualize=False)
a.get_comm_comp_overlap(visualize=False)
"""


@dataclass
class Timed:
    wall_s: float
    cpu_s: float
    peak_rss_mb: float
    ok: bool
    error: str = ""


def timed_child(cmd: list[str], env: dict[str, str] | None = None, cwd: Path | None = None) -> Timed:
    """Runs ``cmd`` as a child; its wall time, CPU (user + system) and peak RSS."""
    # stderr to a file, not a pipe: a child that writes more than a pipe holds would wait
    # for a reader while this process waits for it to exit (wait4, for its rusage)
    with tempfile.TemporaryFile() as errors:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=errors, env=env, cwd=cwd)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        errors.seek(0)
        err = errors.read().decode(errors="replace")
    code = os.waitstatus_to_exitcode(status)
    last = [line for line in err.splitlines() if line.strip()][-1:] or [""]
    return Timed(
        wall,
        usage.ru_utime + usage.ru_stime,
        usage.ru_maxrss / 1024,
        code == 0,
        "" if code == 0 else f"exit {code}: {last[0][:200]}",
    )


def hta_folder(folder: Path, scratch: Path) -> Path:
    """``folder`` as HTA can load it: links to its Kineto JSON files alone when it holds others."""
    from cclq.formats.detect import detect

    files = [p for p in sorted(folder.iterdir()) if p.is_file() and p.name.endswith((".json", ".json.gz"))]
    kineto = []
    for p in files:
        try:
            if detect(str(p)).flavor == "kineto":
                kineto.append(p)
        except Exception:  # noqa: BLE001 - not a trace: HTA would not read it either
            continue
    if len(kineto) == len(files):
        return folder
    out = scratch / f"hta-{folder.name}"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    for p in kineto:
        (out / p.name).symlink_to(p)
    return out


def cclq_first_run(folder: Path, scratch: Path) -> tuple[Timed, list[Timed]]:
    """The three CLI calls on a fresh warehouse (so no result is cached): (the sum, each
    call). The compiled view catalog is per install, not per warehouse: it is there, as
    for any user after their first command."""
    from cclq.query.view_catalog import catalog_file

    catalog_file()
    work = Path(tempfile.mkdtemp(prefix="first-", dir=scratch))
    env = dict(os.environ)
    env.pop("CCLQ_WAREHOUSE", None)
    cclq = [sys.executable, "-m", "cclq"]
    wh = ["--warehouse", str(work / "wh")]
    calls = [timed_child(cclq + ["ingest", "-q", str(folder), *wh], env, work)]
    for metric in FIRST_RUN_METRICS:
        calls.append(timed_child(cclq + ["metric", metric, "--all", "--allow-partial", *wh], env, work))
    shutil.rmtree(work, ignore_errors=True)
    total = Timed(
        sum(c.wall_s for c in calls),
        sum(c.cpu_s for c in calls),
        max(c.peak_rss_mb for c in calls),
        all(c.ok for c in calls),
        "; ".join(c.error for c in calls if c.error),
    )
    return total, calls


def run_first_run_bench(
    hta_python: str | None,
    copies: int = 8,
    repeats: int = 3,
    workdir: Path | None = None,
    shared_traces: Path = DEFAULT_SHARED_TRACES,
) -> list[dict]:
    """One row per folder: HTA's process and cclq's three, best of ``repeats``."""
    scratch = Path(tempfile.mkdtemp(prefix="cclq-bench-first-"))
    folders = [shared_traces / name for name in FIRST_RUN_FOLDERS if (shared_traces / name).is_dir()]
    if copies:
        (source,) = (shared_traces / COPIES_SOURCE).glob("*.json.gz")
        folders.append(rank_copies(source, copies, (workdir or Path(tempfile.gettempdir())) / "cclq-bench-hta-sets"))
    rows = []
    try:
        for folder in folders:
            hta_runs: list[Timed] = []
            cclq_runs: list[tuple[Timed, list[Timed]]] = []
            env = {**os.environ, "PYTHONWARNINGS": "ignore"}
            env.pop("PYTHONPATH", None)
            for _ in range(max(repeats, 1)):
                if hta_python:
                    hta_runs.append(timed_child([hta_python, "-c", _HTA_FIRST, str(hta_folder(folder, scratch))], env))
                cclq_runs.append(cclq_first_run(folder, scratch))
            rows.append(_row(folder.name, hta_runs, cclq_runs))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return rows


def _row(name: str, hta_runs: list[Timed], cclq_runs: list[tuple[Timed, list[Timed]]]) -> dict:
    best, calls = min(cclq_runs, key=lambda r: r[0].wall_s)
    rss = max(r[0].peak_rss_mb for r in cclq_runs)
    row: dict = {
        "folder": name,
        "cclq_s": round(best.wall_s, 2),
        "cclq_calls_s": " + ".join(f"{c.wall_s:.2f}" for c in calls),
        "cclq_peak_rss_mb": round(rss),
        "cclq_cpu_s": round(best.cpu_s, 2),
    }
    ok_hta = [r for r in hta_runs if r.ok]
    if ok_hta:
        hta = min(ok_hta, key=lambda r: r.wall_s)
        hta_rss = max(r.peak_rss_mb for r in ok_hta)
        row.update(
            hta_s=round(hta.wall_s, 2),
            hta_peak_rss_mb=round(hta_rss),
            hta_cpu_s=round(hta.cpu_s, 2),
            speedup=round(hta.wall_s / best.wall_s, 2),
            memory_ratio=round(rss / hta_rss, 2),
        )
    elif hta_runs:
        row.update(hta_s=None, hta_error=hta_runs[-1].error)
    row["errors"] = best.error
    return row
