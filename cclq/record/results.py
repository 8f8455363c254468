"""The results CSV, in DDLB's format, so that DDLB users' tooling reads it unchanged.

DDLB (``ddlb/benchmark.py``) writes one row per (shape, implementation config) with
pandas ``to_csv``: these columns in this order, the header once, booleans as
``True``/``False``, ``valid`` only when validation was asked for. Times are in
milliseconds; each iteration's time is first reduced with MAX across ranks (the
slowest rank decides, as DDLB's all-reduce MAX does), then mean, std (population,
numpy's default), min and max are taken. Throughput is 2mnk FLOPs per iteration
over its time, in TFLOP/s, mean and std over iterations (DDLB's formula for the TP
GEMM primitives); cclq's ``dp_mlp`` counts its forward and backward FLOPs, and the
plain collectives have no FLOPs, so their throughput cells are empty.

For the plain collectives DDLB's ``m``, ``n``, ``k`` hold the message: ``m`` =
elements of the ``message_bytes`` buffer (nccl-tests' size: all_gather's gathered
output, reduce_scatter's input), ``n`` = ``k`` = 1.

Each workload folder gets ``ddlb_results.csv`` (one row); the output folder gets
the rows of every workload in it, as DDLB's single CSV of a run.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any

from cclq.record.config import COLLECTIVE_PRIMITIVES, Run

RESULTS_FILE = "ddlb_results.csv"

COLUMNS = (
    "implementation",
    "mean_time (ms)",
    "std_time",
    "min_time",
    "max_time",
    "m",
    "n",
    "k",
    "dtype",
    "Throughput (TFLOPS)",
    "Throughput std (TFLOPS)",
    "world_size",
    "hostname",
    "time_measurement_backend",
    "barrier_at_each_iteration",
    "option",
    "valid",
)


def flops_per_iteration(run: Run, world_size: int) -> float | None:
    """FLOPs of one iteration over all ranks; None for the plain collectives."""
    s = run.sizes
    if run.primitive in ("tp_columnwise", "tp_rowwise"):
        return 2.0 * s["m"] * s["n"] * s["k"]  # the whole (m x k) @ (k x n) product, as DDLB
    if run.primitive == "dp_mlp":
        # forward 2*b*in*out per Linear, backward twice that (input and weight grads)
        weights = s["k"] * s["n"] + (s["layers"] - 1) * s["n"] * s["n"]
        return 6.0 * s["m"] * weights * world_size
    return None


def ddlb_mnk(run: Run) -> tuple[int, int, int]:
    s = run.sizes
    if run.primitive in COLLECTIVE_PRIMITIVES:
        return s["message_bytes"] // run.elem_bytes, 1, 1
    return s["m"], s["n"], s["k"]


def _mean_std(values: list[float]) -> tuple[float, float]:
    mean = sum(values) / len(values)
    return mean, math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))


def result_row(run: Run, world_size: int, times_ms: list[float], hostname: str, valid: bool | None) -> dict[str, Any]:
    """DDLB's row for one configuration from its per-iteration times (already MAX over ranks)."""
    if not times_ms:
        raise ValueError("no timed iterations")
    mean, std = _mean_std(times_ms)
    flops = flops_per_iteration(run, world_size)
    tput_mean = tput_std = None
    if flops is not None:
        tputs = [flops / (t * 1e9) for t in times_ms if t > 0]  # FLOP / (ms * 1e9) = TFLOP/s
        if tputs:
            tput_mean, tput_std = _mean_std(tputs)
    m, n, k = ddlb_mnk(run)
    row: dict[str, Any] = {
        "implementation": run.label,
        "mean_time (ms)": mean,
        "std_time": std,
        "min_time": min(times_ms),
        "max_time": max(times_ms),
        "m": m,
        "n": n,
        "k": k,
        "dtype": run.dtype,
        "Throughput (TFLOPS)": tput_mean,
        "Throughput std (TFLOPS)": tput_std,
        "world_size": world_size,
        "hostname": hostname,
        "time_measurement_backend": run.time_measurement_backend,
        "barrier_at_each_iteration": run.barrier_at_each_iteration,
        "option": run.option_text,
    }
    if run.validate:
        row["valid"] = bool(valid)
    return row


def _cell(v: Any) -> str:
    """pandas' text for a cell: repr of floats, True/False, empty for missing."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return "True" if v else "False"
    if isinstance(v, float):
        return repr(v)
    return str(v)


def write_rows(path: Path, rows: list[dict[str, Any]]) -> None:
    """Writes rows under DDLB's header (the columns any row has, in DDLB's order)."""
    present = [c for c in COLUMNS if any(c in r for r in rows)]
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", newline="") as f:
        w = csv.writer(f, quoting=csv.QUOTE_MINIMAL, lineterminator="\n")
        w.writerow(present)
        for r in rows:
            w.writerow([_cell(r.get(c)) for c in present])
    tmp.replace(path)


def append_rows(path: Path, rows: list[dict[str, Any]]) -> None:
    """DDLB's own CSV habit: rows appended, the header written only to an empty file
    (so the columns are the first row's, as DDLB's)."""
    if not rows:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fresh = not path.exists() or path.stat().st_size == 0
    columns = list(rows[0])
    if not fresh:
        with open(path, newline="") as f:
            columns = next(csv.reader(f), columns)
    with open(path, "a", newline="") as f:
        w = csv.writer(f, quoting=csv.QUOTE_MINIMAL, lineterminator="\n")
        if fresh:
            w.writerow(columns)
        for r in rows:
            w.writerow([_cell(r.get(c)) for c in columns])


def read_rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def collect(out_dir: Path) -> int:
    """Rewrites ``OUT_DIR/ddlb_results.csv`` from the workload folders' CSVs (folder
    order); returns the number of rows. No file when there are none."""
    rows: list[dict[str, Any]] = []
    for folder in sorted(p for p in out_dir.iterdir() if p.is_dir() and not p.name.startswith(".")):
        csv_path = folder / RESULTS_FILE
        if csv_path.is_file():
            rows.extend(read_rows(csv_path))
    target = out_dir / RESULTS_FILE
    if rows:
        write_rows(target, rows)
    elif target.exists():
        target.unlink()
    return len(rows)
