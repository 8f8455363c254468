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

The same rows for several generated ranks (``2000x8``: 8 ranks of 250 MB) and for folders
(``--large-rank-folders``; ``DIR:x8`` makes 8 ranks of DIR's one trace file), the report
again under ``--memory-limit 500MB`` (``same_rows``: its JSON is the unlimited one's) and,
with ``board``, a cold ``cclq board`` of each warehouse (docs/benchmarks.md, Metrics at
size).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

_CLI = [sys.executable, "-c", "from cclq.cli.app import main; main()"]


def run_child(args: list[str], timeout_s: float, stdout: Path | None = None) -> dict[str, Any]:
    """``cclq ARGS`` in a child process: wall and CPU seconds, peak RSS (MB), exit status
    (None when it ran past ``timeout_s`` and was killed). ``stdout``: a file to keep what
    it printed in (to compare two runs' rows) [default: discarded]."""
    start = time.perf_counter()
    out = stdout.open("wb") if stdout is not None else subprocess.DEVNULL
    try:
        proc = subprocess.Popen([*_CLI, *args], stdout=out, stderr=subprocess.PIPE)
    finally:
        if stdout is not None:
            out.close()  # type: ignore[union-attr]
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


def same_rows(a: Any, b: Any, rel: float = 1e-9) -> bool:
    """Two parsed JSON documents equal but for the last bits of floats (DuckDB's parallel
    sums differ between two runs of the same query by ~1e-14 relative)."""
    if isinstance(a, float) or isinstance(b, float):
        if not isinstance(a, (int, float)) or not isinstance(b, (int, float)):
            return False
        return math.isclose(a, b, rel_tol=rel, abs_tol=1e-12)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_rows(a[k], b[k], rel) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_rows(x, y, rel) for x, y in zip(a, b))
    return bool(a == b)


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


def parse_inputs(sizes: str, folders: str | None) -> list[tuple[str, int, int, str | None]]:
    """``--large-rank 32,127,1000,2000x8`` and ``--large-rank-folders DIR,DIR:x8`` ->
    (label, MB, ranks, folder): a generated workload of MB over ranks, or a folder (``:xN``:
    N rank copies of the folder's one trace file, ``cclq.bench.hta.rank_copies``)."""
    out: list[tuple[str, int, int, str | None]] = []
    for part in (p.strip() for p in (sizes or "").split(",") if p.strip()):
        mb, _, r = part.partition("x")
        ranks = int(r) if r else 1
        out.append((f"{mb} MB" if ranks == 1 else f"{ranks} x {int(mb) // ranks} MB", int(mb), ranks, None))
    for part in (p.strip() for p in (folders or "").split(",") if p.strip()):
        path, _, copies = part.rpartition(":x") if ":x" in part else (part, "", "")
        n = int(copies) if copies else 0
        name = Path(path).name
        out.append((f"{name} x{n}" if n else name, 0, n, path))
    return out


def _input_folder(workdir: Path, mb: int, ranks: int, folder: str | None) -> Path:
    from cclq.bench.hta import rank_copies
    from cclq.bench.run import synthetic_workload

    if folder is None:
        return synthetic_workload(workdir / "inputs", mb, ranks)
    if ranks:
        (source,) = [p for p in Path(folder).iterdir() if p.is_file() and ".json" in p.name]
        return rank_copies(source, ranks, workdir / "inputs")
    return Path(folder)


def run_large_rank_bench(
    inputs: list[tuple[str, int, int, str | None]],
    workdir: Path,
    metrics: list[str] | None = None,
    timeout_s: float = 900.0,
    report: bool = True,
    memory_limit: str | None = "500MB",
    board: bool = False,
    on_row: Any = None,
) -> list[dict[str, Any]]:
    """Rows of (input, case): ``ingest``, each metric, ``report``, the report under
    ``--memory-limit`` (``same_rows``: its JSON is the unlimited report's) and, with
    ``board``, a cold ``cclq board`` of the warehouse. ``inputs``: from
    ``parse_inputs``. ``metrics``: the names to time [default: every metric's latest
    version; ``[]``: none]. ``on_row(row)`` is called as each row is done (progress on
    a long run)."""
    from cclq.query.registry import latest_specs

    names = [s.name for s in latest_specs()] if metrics is None else metrics
    rows: list[dict[str, Any]] = []
    previous: dict[str, float] = {}  # case -> wall us per event at the previous single rank
    for label, mb, ranks, source in inputs:
        folder = _input_folder(workdir, mb, ranks, source)
        tag = "".join(c if c.isalnum() else "_" for c in label)
        wh = workdir / f"wh_{tag}"
        ingest = run_child(["ingest", str(folder), "--warehouse", str(wh), "--quiet", "--force"], timeout_s)
        if ingest["exit"] != 0:
            raise RuntimeError(f"ingest of {folder} failed: {ingest['error']}")
        events = _events(wh)
        trace = _trace_id(wh)
        cases: list[tuple[str, list[str], Path | None]] = [("ingest", [], None)]
        cases += [(n, ["metric", n, "--all", "--no-cache", "-w", str(wh), "-f", "csv"], None) for n in names]
        full = workdir / f"report_{tag}.json"
        limited = workdir / f"report_{tag}_{memory_limit}.json"
        if report:
            cases.append(("report", ["report", trace, "--no-cache", "-w", str(wh), "-f", "json"], full))
            if memory_limit:
                args = ["--memory-limit", memory_limit, "report", trace, "--no-cache", "-w", str(wh), "-f", "json"]
                cases.append((f"report --memory-limit {memory_limit}", args, limited))
        if board:
            site = workdir / f"site_{tag}"
            shutil.rmtree(site, ignore_errors=True)
            cases.append(("board", ["board", str(site), "--no-cache", "-q", "-w", str(wh)], None))
        current: dict[str, float] = {}
        chained = source is None and ranks == 1
        for case, args, stdout in cases:
            result = ingest if case == "ingest" else run_child(args, timeout_s, stdout)
            per_event = result["wall_s"] / max(events, 1) * 1e6
            current[case] = per_event
            row = {
                "input": label,
                "events": events,
                "case": case,
                **result,
                "us_per_event": round(per_event, 3),
                "vs_ingest_wall": round(result["wall_s"] / ingest["wall_s"], 2),
                "vs_ingest_cpu": round(result["cpu_s"] / max(ingest["cpu_s"], 1e-9), 2),
                "per_event_vs_prev": round(per_event / previous[case], 2) if chained and case in previous else None,
                "same_rows": None,
                "load": round(os.getloadavg()[0], 1),
            }
            if case.startswith("report --memory-limit") and result["exit"] == 0 and full.exists():
                row["same_rows"] = same_rows(json.loads(full.read_text()), json.loads(limited.read_text()))
            rows.append(row)
            if on_row is not None:
                on_row(row)
        if chained:
            previous = current
    return rows
