"""cclq against Holistic Trace Analysis (HTA) 0.5.0 on the same real traces.

The question is what a user pays, in time and memory, to get HTA's four headline analyses
(temporal breakdown, communication/computation overlap, idle-time breakdown, kernel-type
breakdown) for a set of trace folders: with HTA, or with cclq's HTA-parity metrics
(``hta_temporal_breakdown``, ``hta_comm_comp_overlap``, ``hta_idle_time_breakdown``,
``hta_kernel_type_breakdown``; whichever of them the metric registry has).

Every case runs in a child process so that its peak RSS can be read with ``os.wait4``
(``ru_maxrss``, KiB on Linux: the largest resident set of the child or of any descendant it
waited for, e.g. a multiprocessing pool; not a sum):

* **HTA**: one child per trace folder, started with the interpreter given as
  ``hta_python`` (HTA is not a cclq dependency; install it in a throwaway venv). The child
  imports HTA, then times ``TraceAnalysis(trace_dir=folder)`` (the load, HTA's defaults,
  which parse multi-rank folders in a fork pool) and the four analyses with ``visualize``
  off. The idle-time breakdown is asked for every rank HTA loaded (its default is rank 0
  only, which is less work than cclq does and fails outright on a folder whose only rank is
  not 0). An analysis that raises is reported and the others still run. The HTA total is
  the sum over folders; its peak RSS is the largest over the folders.
* **cclq, first run**: one child that imports cclq, ingests every folder into a fresh
  warehouse (``jobs`` parser processes; by default one per CPU, as ``cclq ingest`` does and
  as HTA's multi-rank load does with its fork pool) and runs each HTA-parity metric on one
  connection, as ``cclq metric`` does.
* **cclq, repeat run**: the same child again on the built warehouse: ingest finds every
  file unchanged and the metrics run — once computed again (``cache_dir=None``), once as
  ``cclq metric`` does by default, reading the results cached by the first run (they are
  keyed by the content hash of every input, so they are only reused when nothing changed).

Two times are kept per case. ``seconds`` is the work, timed inside the child after its
imports (load + analyses; ingest + connect + metrics). ``wall_s`` is the whole child,
interpreter start-up and imports included (HTA pays its pandas/plotly imports once per
folder, cclq once). Speedups and memory ratios are against the HTA total. With
``repeats > 1`` every case runs that many times, interleaved; the best (lowest) time of
each case is kept and the peak RSS is the largest seen over the repeats.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from cclq.locations import PACKAGE_DIR

HTA_FOLDERS = (
    "hta_trace_filter_2rank",
    "hta_nccl_data",
    "hta_df_index_resolver",
    "hta_negative_queue_length",
    "hta_ns_resolution",
    "hta_alexnet",
    "hta_amd_mi250",
    "hta_mtia_single_rank",
)
HTA_METRICS = (
    "hta_temporal_breakdown",
    "hta_comm_comp_overlap",
    "hta_idle_time_breakdown",
    "hta_kernel_type_breakdown",
)
# ../shared/traces beside the repository, or $CCLQ_SHARED/traces (as the tests find them)
DEFAULT_SHARED_TRACES = Path(os.environ.get("CCLQ_SHARED", PACKAGE_DIR.parent.parent / "shared")) / "traces"

# Runs in the HTA interpreter: argv = [folder, result.json]. Writes its timings as JSON.
_HTA_CHILD = r"""
import json, sys, time
t_start = time.perf_counter()
folder, out = sys.argv[1], sys.argv[2]
res = {"errors": {}}
try:
    import importlib.metadata
    from hta.trace_analysis import TraceAnalysis
    res["version"] = importlib.metadata.version("HolisticTraceAnalysis")
except Exception as e:
    res["errors"]["import"] = f"{type(e).__name__}: {e}"
    json.dump(res, open(out, "w"))
    sys.exit(0)
res["import_s"] = time.perf_counter() - t_start
t0 = time.perf_counter()
try:
    a = TraceAnalysis(trace_dir=folder)
except Exception as e:
    res["errors"]["load"] = f"{type(e).__name__}: {e}"
else:
    res["load_s"] = time.perf_counter() - t0
    res["ranks"] = sorted(int(r) for r in a.t.traces)
    analyses = [
        ("temporal", lambda: a.get_temporal_breakdown(visualize=False)),
        ("overlap", lambda: a.get_comm_comp_overlap(visualize=False)),
        ("idle", lambda: a.get_idle_time_breakdown(ranks=res["ranks"], visualize=False)),
        ("kernel", lambda: a.get_gpu_kernel_breakdown(visualize=False)),
    ]
    for name, fn in analyses:
        t = time.perf_counter()
        try:
            fn()
        except Exception as e:
            res["errors"][name] = f"{type(e).__name__}: {e}"
        res[name + "_s"] = time.perf_counter() - t
res["work_s"] = time.perf_counter() - t0
with open(out, "w") as f:
    json.dump(res, f)
"""

# Runs in this interpreter: argv = [config.json, result.json].
_CCLQ_CHILD = r"""
import json, resource, sys, time
t_start = time.perf_counter()
from pathlib import Path

from cclq.ingest.run import ingest
from cclq.query.metrics import run_metric
from cclq.query.registry import resolve
from cclq.query.session import connect
from cclq.store.warehouse import Warehouse
cfg = json.load(open(sys.argv[1]))
res = {"import_s": time.perf_counter() - t_start, "errors": {}, "metrics": {}}
t0 = time.perf_counter()
wh = Warehouse(Path(cfg["warehouse"]))
report = ingest([Path(p) for p in cfg["folders"]], wh, jobs=cfg["jobs"])
res["ingest_s"] = time.perf_counter() - t0
res["rss_after_ingest_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
res["files"] = {}
for o in report.outcomes:
    res["files"][o.status] = res["files"].get(o.status, 0) + 1
    if o.status == "failed":
        res["errors"][o.path] = o.message
t = time.perf_counter()
con = connect(wh, cache=bool(cfg.get("cache")))  # as `cclq metric`
res["connect_s"] = time.perf_counter() - t
for name in cfg["metrics"]:
    t = time.perf_counter()
    try:
        rows = run_metric(con, resolve(name)).num_rows
        res["metrics"][name] = {"rows": rows, "seconds": time.perf_counter() - t,
                                "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    except Exception as e:
        res["errors"][name] = f"{type(e).__name__}: {e}"
con.close()
res["work_s"] = time.perf_counter() - t0
with open(sys.argv[2], "w") as f:
    json.dump(res, f)
"""


# Every public analysis of HTA 0.5.0's TraceAnalysis, called the same way on both libraries
# (the names are the keys of the timings): every rank where a method takes ranks, the first
# rank where it takes one, figures off (HTA's default draws them; both would pay plotly), the
# files HTA writes (counters beside the trace, overlays into a folder) written by both.
ALL_ANALYSES = (
    "temporal",
    "overlap",
    "kernel",
    "idle",
    "queue_length",
    "full_queue",
    "memory_bw",
    "launch_stats",
    "gpu_annotations",
    "cpu_annotations",
    "kernels_with_annotations",
    "sequences",
    "aten_op_delays",
    "stragglers",
    "critical_path",
    "overlay",
    "counters",
    "profiler_steps",
    "cupti",
)
SEQUENCE_OP = "aten::linear"

# Runs in either interpreter: argv = [config.json, result.json]. The config says which
# library ("hta" or "cclq"), the trace folder (a copy: HTA writes its counter traces beside
# the files), the operator; for cclq the warehouse, cache and jobs. Times the import, the
# constructor (HTA's load; cclq's ingest and session) and ALL_ANALYSES.
_ALL_CHILD = r"""
import json, sys, tempfile, time
t_start = time.perf_counter()
cfg = json.load(open(sys.argv[1]))
res = {"errors": {}}
if cfg["library"] == "hta":
    import importlib.metadata
    from hta.trace_analysis import TimeSeriesTypes, TraceAnalysis
    res["version"] = importlib.metadata.version("HolisticTraceAnalysis")
    kwargs = {}
else:
    from cclq import TimeSeriesTypes, TraceAnalysis
    import cclq
    kwargs = {"warehouse": cclq.open(cfg["warehouse"], cache=cfg["cache"]), "jobs": cfg["jobs"]}
res["import_s"] = time.perf_counter() - t_start
t0 = time.perf_counter()
a = TraceAnalysis(trace_dir=cfg["folder"], **kwargs)
res["load_s"] = time.perf_counter() - t0
res.update({k + "_s": v for k, v in getattr(a, "timings", {}).items()})
ranks = a.t.get_ranks()
rank, op, out = ranks[0], cfg["op"], tempfile.mkdtemp()
graph = {}
def critical_path():
    found = a.critical_path_analysis(rank, "ProfilerStep", 0)
    graph["g"] = found[0] if found and found[1] else None
    return found[0].summary() if graph["g"] is not None else None
def overlay():
    return a.overlay_critical_path_analysis(rank, graph["g"], out) if graph.get("g") is not None else None
analyses = {
    "temporal": lambda: a.get_temporal_breakdown(visualize=False),
    "overlap": lambda: a.get_comm_comp_overlap(visualize=False),
    "kernel": lambda: a.get_gpu_kernel_breakdown(visualize=False),
    "idle": lambda: a.get_idle_time_breakdown(ranks=ranks, visualize=False, show_idle_interval_stats=True),
    "queue_length": lambda: a.get_queue_length_summary(ranks=ranks),
    "full_queue": lambda: a.get_time_spent_blocked_on_full_queue(a.get_queue_length_time_series(ranks=ranks)),
    "memory_bw": lambda: a.get_memory_bw_summary(ranks=ranks),
    "launch_stats": lambda: a.get_cuda_kernel_launch_stats(ranks=ranks, visualize=False),
    "gpu_annotations": lambda: a.get_gpu_user_annotation_breakdown(use_gpu_annotation=True, visualize=False),
    "cpu_annotations": lambda: a.get_gpu_user_annotation_breakdown(use_gpu_annotation=False, visualize=False),
    "kernels_with_annotations": lambda: a.get_gpu_kernels_with_user_annotations(rank),
    "sequences": lambda: a.get_frequent_cuda_kernel_sequences(op, out, rank=rank),
    "aten_op_delays": lambda: a.get_aten_op_kernels_and_delay(ranks=ranks),
    "stragglers": lambda: a.get_potential_stragglers(),
    "critical_path": critical_path,
    "overlay": overlay,
    "counters": lambda: a.generate_trace_with_counters(ranks=ranks),
    "profiler_steps": lambda: a.get_profiler_steps(),
    "cupti": lambda: a.get_cupti_counter_data_with_operators(ranks=ranks),
}
import plotly.basedatatypes  # get_aten_op_kernels_and_delay always draws its table: shown nowhere
plotly.basedatatypes.BaseFigure.show = lambda *args, **kwargs: None
for name, fn in analyses.items():
    t = time.perf_counter()
    try:
        fn()
    except Exception as e:
        res["errors"][name] = f"{type(e).__name__}: {e}"
    res[name + "_s"] = time.perf_counter() - t
res["work_s"] = time.perf_counter() - t0
with open(sys.argv[2], "w") as f:
    json.dump(res, f)
"""


@dataclass
class ChildRun:
    wall_s: float
    peak_rss_mb: float
    result: dict = field(default_factory=dict)
    cpu_s: float = 0.0  # user + system CPU of the child and what it waited for (wait4)


def _run_child(cmd: list[str], scratch: Path, env: dict[str, str] | None = None) -> ChildRun:
    """Runs ``cmd`` (whose last argument is the result path) and reads its JSON result."""
    out = Path(cmd[-1])
    out.unlink(missing_ok=True)
    with open(scratch / "child.stderr", "w+b") as err:
        start = time.perf_counter()
        try:
            proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, cwd=scratch, env=env)
        except OSError as e:
            return ChildRun(0.0, 0.0, {"errors": {"child": f"cannot start {cmd[0]}: {e.strerror}"}})
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped by wait4; keep Popen from waiting
        err.seek(0)
        tail = err.read()[-2000:].decode(errors="replace").strip()
    rss_mb = usage.ru_maxrss / 1024  # KiB on Linux
    cpu = usage.ru_utime + usage.ru_stime
    if proc.returncode != 0 or not out.exists():
        last = tail.splitlines()[-1] if tail else "no output"
        return ChildRun(wall, rss_mb, {"errors": {"child": f"exit {proc.returncode}: {last}"}}, cpu)
    return ChildRun(wall, rss_mb, json.loads(out.read_text()), cpu)


def hta_child(folder: Path, hta_python: str, scratch: Path) -> ChildRun:
    """HTA's load + the four analyses of one trace folder, in a child of ``hta_python``."""
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    env.pop("PYTHONPATH", None)  # the HTA interpreter sees its own venv only
    return _run_child([hta_python, "-c", _HTA_CHILD, str(folder), str(scratch / "hta.json")], scratch, env)


def cclq_child(
    folders: list[Path],
    warehouse: Path,
    metrics: list[str],
    scratch: Path,
    jobs: int | None = None,
    cache: bool = False,
) -> ChildRun:
    """cclq ingest of ``folders`` into ``warehouse`` + ``metrics``, in one child process.

    ``cache``: use the warehouse's metric result cache (what ``cclq metric`` does by default).
    """
    config = scratch / "cclq-config.json"
    config.write_text(
        json.dumps(
            {
                "folders": [str(f) for f in folders],
                "warehouse": str(warehouse),
                "metrics": metrics,
                "jobs": jobs,
                "cache": cache,
            }
        )
    )
    # the child runs in the scratch folder: make sure it imports this cclq even when not installed
    repo = str(PACKAGE_DIR.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [repo, os.environ.get("PYTHONPATH")]))}
    return _run_child([sys.executable, "-c", _CCLQ_CHILD, str(config), str(scratch / "cclq.json")], scratch, env)


def hta_metric_names() -> list[str]:
    """The HTA-parity metrics the registry has now (the others are skipped)."""
    from cclq.query.registry import registry

    have = registry()
    return [m for m in HTA_METRICS if m in have]


def default_folders(shared_traces: Path = DEFAULT_SHARED_TRACES) -> list[Path]:
    return [shared_traces / name for name in HTA_FOLDERS if (shared_traces / name).is_dir()]


COPIES_SOURCE = "hta_df_index_resolver"  # 53.7 MB of JSON: 8 copies make the 430 MB set


def rank_copies(source: Path, copies: int, out_dir: Path) -> Path:
    """A workload of ``copies`` ranks made of one trace file (``rank<r>.json.gz``), each
    with ``distributedInfo`` saying its rank and the world size, as a bigger multi-rank
    set for both tools (cached: made once)."""
    import gzip
    import re

    folder = out_dir / f"{source.stem.split('.')[0]}_x{copies}"
    marker = folder / ".complete"
    if marker.exists():
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    info = re.compile(rb'"distributedInfo"\s*:\s*\{[^{}]*\}')
    for rank in range(copies):
        with gzip.open(source, "rb") as src, gzip.open(folder / f"rank{rank}.json.gz", "wb", compresslevel=1) as dst:
            head = src.read(1 << 20)
            patched = f'"distributedInfo": {{"backend": "nccl", "rank": {rank}, "world_size": {copies}}}'.encode()
            head, n = info.subn(patched, head, count=1)
            if not n:
                raise ValueError(f"{source}: no distributedInfo in its first MB to set the rank in")
            dst.write(head)
            shutil.copyfileobj(src, dst, 1 << 20)
    marker.write_text("ok")
    return folder


def _errors(result: dict) -> str:
    return "; ".join(f"{k}: {v.splitlines()[0] if v else ''}"[:160] for k, v in result.get("errors", {}).items())


def _row(
    case: str,
    seconds: float | None,
    wall_s: float | None,
    rss: float | None,
    base: dict | None,
    detail: str,
    errors: str = "",
) -> dict:
    def ratio(a: float | None, b: float | None) -> float | None:
        return round(a / b, 2) if a and b else None

    def rounded(x: float | None, digits: int) -> float | None:
        return None if x is None or x != x else round(x, digits)  # x != x: NaN (the child failed)

    seconds, wall_s, rss = rounded(seconds, 3), rounded(wall_s, 3), rounded(rss, 1)
    return {
        "case": case,
        "seconds": seconds,
        "wall_s": wall_s,
        "peak_rss_mb": rss,
        "speedup_vs_hta": ratio(base["seconds"], seconds) if base else None,
        "wall_speedup_vs_hta": ratio(base["wall_s"], wall_s) if base else None,
        "memory_ratio_vs_hta": ratio(rss, base["peak_rss_mb"]) if base else None,
        "detail": detail,
        "errors": errors,
    }


def _best(runs: list[ChildRun], key: str = "work_s") -> tuple[ChildRun, float, float, float]:
    """(run with the lowest work time, that time, lowest wall time, largest peak RSS)."""
    best = min(runs, key=lambda r: r.result.get(key, float("inf")))
    return best, best.result.get(key, float("nan")), min(r.wall_s for r in runs), max(r.peak_rss_mb for r in runs)


def run_hta_bench(
    folders: list[Path] | None = None,
    hta_python: str | None = None,
    repeats: int = 1,
    jobs: int | None = None,
    metrics: list[str] | None = None,
) -> list[dict]:
    """HTA total, cclq first run and cclq repeat run on ``folders`` (rows as documented above).

    Without ``hta_python`` only the cclq cases run (no speedups). Per-folder HTA rows follow
    the three summary rows.
    """
    folders = [Path(f).resolve() for f in (folders if folders is not None else default_folders())]
    if not folders:
        raise ValueError("no trace folders to benchmark")
    metrics = hta_metric_names() if metrics is None else metrics
    scratch = Path(tempfile.mkdtemp(prefix="cclq-bench-hta-"))
    hta_runs: dict[Path, list[ChildRun]] = {f: [] for f in folders}
    first_runs: list[ChildRun] = []
    repeat_runs: list[ChildRun] = []
    cached_runs: list[ChildRun] = []
    try:
        for _ in range(max(repeats, 1)):
            if hta_python:
                for folder in folders:
                    hta_runs[folder].append(hta_child(folder, hta_python, scratch))
            warehouse = scratch / "wh"
            shutil.rmtree(warehouse, ignore_errors=True)
            first_runs.append(cclq_child(folders, warehouse, metrics, scratch, jobs, cache=True))
            repeat_runs.append(cclq_child(folders, warehouse, metrics, scratch, jobs, cache=False))
            cached_runs.append(cclq_child(folders, warehouse, metrics, scratch, jobs, cache=True))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    rows: list[dict] = []
    base: dict | None = None
    folder_rows: list[dict] = []
    if hta_python:
        total_s = total_wall = peak = 0.0
        version = None
        for folder, runs in hta_runs.items():
            best, work_s, wall_s, rss = _best(runs)
            version = version or best.result.get("version")
            total_s += work_s
            total_wall += wall_s
            peak = max(peak, rss)
            parts = [
                f"{k} {best.result[k + '_s']:.3f}s"
                for k in ("load", "temporal", "overlap", "idle", "kernel")
                if k + "_s" in best.result
            ]
            folder_rows.append(
                _row(f"  HTA {folder.name}", work_s, wall_s, rss, None, ", ".join(parts), _errors(best.result))
            )
        base = _row(
            f"HTA {version or '?'}: load + 4 analyses, {len(folders)} folders",
            total_s,
            total_wall,
            peak,
            None,
            "sum over one process per folder; peak = largest",
            "; ".join(f"{r['case'].strip()}: {r['errors']}" for r in folder_rows if r["errors"]),
        )
        rows.append(base)
    for label, runs in (
        ("cclq first run: ingest + metrics", first_runs),
        ("cclq repeat run: built warehouse, metrics computed", repeat_runs),
        ("cclq repeat run: built warehouse, cached results", cached_runs),
    ):
        best, work_s, wall_s, rss = _best(runs)
        r = best.result
        files = ", ".join(f"{n} {s}" for s, n in sorted(r.get("files", {}).items()))
        detail = (
            f"ingest {r.get('ingest_s', float('nan')):.3f}s ({files}; peak RSS so far "
            f"{r.get('rss_after_ingest_mb', float('nan')):.0f} MB); "
            f"connect {r.get('connect_s', float('nan')):.3f}s; "
            + ", ".join(
                f"{m} {v['seconds']:.3f}s (peak RSS so far {v['peak_rss_mb']:.0f} MB)"
                for m, v in r.get("metrics", {}).items()
            )
        )
        rows.append(_row(label, work_s, wall_s, rss, base, detail, _errors(r)))
    if base:
        base.update(speedup_vs_hta=1.0, wall_speedup_vs_hta=1.0, memory_ratio_vs_hta=1.0)
    return rows + folder_rows


def format_table(rows: list[dict]) -> str:
    cols = [
        "case",
        "seconds",
        "wall_s",
        "peak_rss_mb",
        "speedup_vs_hta",
        "wall_speedup_vs_hta",
        "memory_ratio_vs_hta",
    ] + [c for c in ("cpu_s", "cpu_speedup_vs_hta") if rows and c in rows[0]]
    cells = [[("" if r[c] is None else str(r[c])) for c in cols] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cols, widths)))]
    for row in cells:
        lines.append("  ".join(v.ljust(w) if i == 0 else v.rjust(w) for i, (v, w) in enumerate(zip(row, widths))))
    lines.append("")
    lines += [f"{r['case'].strip()}: {r['detail']}" for r in rows if r["detail"]]
    # the HTA total repeats its folders' errors, so it is left out here
    lines += [
        f"errors in {r['case'].strip()}: {r['errors']}"
        for r in rows
        if r["errors"] and not r["case"].startswith("HTA ")
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m cclq.bench.hta", description=__doc__.splitlines()[0])
    p.add_argument("folders", nargs="*", type=Path, help="trace folders (default: the HTA folders of ../shared/traces)")
    p.add_argument("--hta-python", help="an interpreter with HolisticTraceAnalysis installed")
    p.add_argument("--repeats", type=int, default=3, help="runs of every case; the best time is kept (default 3)")
    p.add_argument("--jobs", type=int, default=None, help="cclq ingest parser processes (default: one per CPU)")
    p.add_argument(
        "--rank-copies",
        type=int,
        default=0,
        help=f"benchmark N ranks made of {COPIES_SOURCE}'s trace instead (8: the 430 MB set)",
    )
    p.add_argument(
        "--workdir",
        type=Path,
        default=Path(tempfile.gettempdir()) / "cclq-bench-hta-sets",
        help="where the copies are made (kept and reused)",
    )
    args = p.parse_args(argv)
    folders = args.folders or None
    if args.rank_copies:
        (source,) = (DEFAULT_SHARED_TRACES / COPIES_SOURCE).glob("*.json.gz")
        folders = [rank_copies(source, args.rank_copies, args.workdir)]
    rows = run_hta_bench(folders, args.hta_python, repeats=args.repeats, jobs=args.jobs)
    print(format_table(rows))


def run_hta_all_bench(folder: Path, hta_python: str, repeats: int = 1, jobs: int | None = None) -> list[dict]:
    """Every analysis of HTA 0.5.0's ``TraceAnalysis`` (``ALL_ANALYSES``), the same script on
    both libraries, on one trace folder: HTA's load + analyses; cclq's first run (a fresh
    warehouse: ingest on construction, then the analyses, results cached as the API does);
    the repeat with results computed again (``cclq.open(cache=False)``); the repeat as a
    notebook reruns it (cached results). Each case is one child process (peak RSS from
    ``wait4``) on its own copy of the folder (both write counter traces beside its files);
    best time over ``repeats``, largest peak. ``detail`` gives the time of the import, the
    load and each analysis; ``errors`` an analysis that failed (on either side).
    """
    folder = folder.resolve()
    # the SQL views compiled before any timing: once per install of cclq (as Python's .pyc,
    # which HTA's venv has too), not per trace; 5-6 s that would land on the first folder
    from cclq.query.view_catalog import catalog_file

    catalog_file()
    scratch = Path(tempfile.mkdtemp(prefix="cclq-bench-hta-all-"))
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    env.pop("PYTHONPATH", None)
    repo = str(PACKAGE_DIR.parent)
    cclq_env = {
        **os.environ,
        "PYTHONWARNINGS": "ignore",
        "PYTHONPATH": os.pathsep.join(filter(None, [repo, os.environ.get("PYTHONPATH")])),
    }
    runs: dict[str, list[ChildRun]] = {"hta": [], "first": [], "again": [], "cached": []}
    copy = scratch / "trace" / folder.name

    def child(python: str, child_env: dict[str, str], **cfg: object) -> ChildRun:
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(folder, copy)  # outside the timing: a fresh copy, without earlier counter traces
        config = scratch / "config.json"
        config.write_text(json.dumps({"folder": str(copy), "op": SEQUENCE_OP, **cfg}))
        return _run_child([python, "-c", _ALL_CHILD, str(config), str(scratch / "result.json")], scratch, child_env)

    def cclq_run(cache: bool) -> ChildRun:
        return child(sys.executable, cclq_env, library="cclq", warehouse=str(scratch / "wh"), cache=cache, jobs=jobs)

    try:
        for _ in range(max(repeats, 1)):
            runs["hta"].append(child(hta_python, env, library="hta"))
            shutil.rmtree(scratch / "wh", ignore_errors=True)
            runs["first"].append(cclq_run(cache=True))
            runs["again"].append(cclq_run(cache=False))
            runs["cached"].append(cclq_run(cache=True))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    def detail(result: dict) -> str:
        phases = ("import", "load", "ingest", "session", *ALL_ANALYSES)
        return ", ".join(f"{k} {result[k + '_s']:.3f}s" for k in phases if k + "_s" in result)

    def cpu(case: list[ChildRun]) -> float:
        return round(min(r.cpu_s for r in case), 3)

    rows: list[dict] = []
    best, work_s, wall_s, rss = _best(runs["hta"])
    base = _row(
        f"HTA {best.result.get('version', '?')}: load + {len(ALL_ANALYSES)} analyses, {folder.name}",
        work_s,
        wall_s,
        rss,
        None,
        detail(best.result),
        _errors(best.result),
    )
    base["cpu_s"] = cpu(runs["hta"])
    rows.append(base)
    for key, label in (
        ("first", "cclq.TraceAnalysis first run: ingest + analyses"),
        ("again", "cclq.TraceAnalysis repeat, computed again (cache=False)"),
        ("cached", "cclq.TraceAnalysis repeat, cached results"),
    ):
        best, work_s, wall_s, rss = _best(runs[key])
        row = _row(label, work_s, wall_s, rss, base, detail(best.result), _errors(best.result))
        row["cpu_s"] = cpu(runs[key])
        row["cpu_speedup_vs_hta"] = round(base["cpu_s"] / row["cpu_s"], 2) if row["cpu_s"] and base["cpu_s"] else None
        rows.append(row)
    base.update(speedup_vs_hta=1.0, wall_speedup_vs_hta=1.0, memory_ratio_vs_hta=1.0, cpu_speedup_vs_hta=1.0)
    return rows


if __name__ == "__main__":
    main()
