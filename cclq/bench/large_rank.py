"""``cclq bench --large-rank``: every metric on ONE large rank, against that file's ingest.

The case the project exists for is one Kineto file per rank, gigabytes each; the Scale
bench grows copies of a small trace, where time is linear by construction. Here one rank
is generated at each size (``cclq.synth.kineto``, the ingest bench's shape: steps,
NCCL all-reduces with their ``record_param_comms`` sizes, memcpys), ingested in a child
process, and then each metric runs in a process of its own (``cclq metric NAME --all
--no-cache``), as a user runs it, then ``cclq report`` of the trace. Each row gives wall
and CPU seconds (``wait4``: the process and its threads; on a shared machine CPU is the
steadier figure), the peak RSS, the wall cost per event and the ratio to the same size's
ingest, and for the sizes after the first the cost per event over the previous size's
(1.0 = linear). The machine's load average is printed beside each row.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

_CLI = [sys.executable, "-c", "from cclq.cli.app import main; main()"]


def run_child(args: list[str], timeout_s: float) -> dict[str, Any]:
    """``cclq ARGS`` in a child process: wall and CPU seconds, peak RSS (MB), exit status
    (None when it ran past ``timeout_s`` and was killed)."""
    start = time.perf_counter()
    proc = subprocess.Popen([*_CLI, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = start + timeout_s
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.perf_counter() > deadline:
            proc.kill()
            pid, status, usage = os.wait4(proc.pid, 0)
            status = -1
            break
        time.sleep(0.02)
    wall = time.perf_counter() - start
    err = proc.stderr.read().decode(errors="replace").strip() if proc.stderr else ""
    code = None if status == -1 else os.waitstatus_to_exitcode(status)
    return {
        "wall_s": round(wall, 2),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
        "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
        "exit": code,
        "error": err.splitlines()[-1] if code not in (0, None) and err else "",
    }


def _events(warehouse: Path) -> int:
    from cclq.query.session import connect
    from cclq.store.warehouse import Warehouse

    with connect(Warehouse(warehouse)) as session:
        (n,) = session.execute("SELECT count(*) FROM events").fetchone() or (0,)
    return int(n)


def _trace_id(warehouse: Path) -> str:
    from cclq.store.warehouse import Warehouse

    state = Warehouse(warehouse).read_state()
    (trace,) = {r["trace"] for r in state.files.values()}
    return str(trace)


def run_large_rank_bench(
    sizes_mb: list[int],
    workdir: Path,
    metrics: list[str] | None = None,
    timeout_s: float = 900.0,
    report: bool = True,
    on_row: Any = None,
) -> list[dict[str, Any]]:
    """Rows of (size, case): ``ingest``, each metric, ``report``. ``metrics``: the names
    to time [default: every metric's latest version]. ``on_row(row)`` is called as each
    row is done (progress on a long run)."""
    from cclq.bench.run import synthetic_workload
    from cclq.query.registry import latest_specs

    names = metrics or [s.name for s in latest_specs()]
    rows: list[dict[str, Any]] = []
    previous: dict[str, float] = {}  # case -> wall us per event at the previous size
    for mb in sizes_mb:
        folder = synthetic_workload(workdir / "inputs", mb, 1)
        wh = workdir / f"wh_{mb}mb"
        ingest = run_child(["ingest", str(folder), "--warehouse", str(wh), "--quiet", "--force"], timeout_s)
        if ingest["exit"] != 0:
            raise RuntimeError(f"ingest of {folder} failed: {ingest['error']}")
        events = _events(wh)
        cases: list[tuple[str, list[str]]] = [("ingest", [])]
        cases += [(name, ["metric", name, "--all", "--no-cache", "-w", str(wh), "-f", "csv"]) for name in names]
        if report:
            cases.append(("report", ["report", _trace_id(wh), "--no-cache", "-w", str(wh), "-f", "json"]))
        current: dict[str, float] = {}
        for case, args in cases:
            result = ingest if case == "ingest" else run_child(args, timeout_s)
            per_event = result["wall_s"] / max(events, 1) * 1e6
            current[case] = per_event
            row = {
                "size_mb": mb,
                "events": events,
                "case": case,
                **result,
                "us_per_event": round(per_event, 3),
                "vs_ingest_wall": round(result["wall_s"] / ingest["wall_s"], 2),
                "vs_ingest_cpu": round(result["cpu_s"] / max(ingest["cpu_s"], 1e-9), 2),
                "per_event_vs_prev": round(per_event / previous[case], 2) if case in previous else None,
                "load": round(os.getloadavg()[0], 1),
            }
            rows.append(row)
            if on_row is not None:
                on_row(row)
        previous = current
    return rows
