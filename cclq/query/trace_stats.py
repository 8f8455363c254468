"""Per-trace statistics read from the views: op counts and times, step durations.

What the top-kernel plot and the kernel-level diff read (HTA's trace diff compares the
same: per kernel name, how often it ran and for how long). GPU traces count their GPU
activities (``gpu_ops_classified``: kernels with their class and collective type);
a trace with no GPU activity counts its XLA device ops (``xla_ops``) instead, so a TPU
profile gets the same tables. Every query runs once over all the traces of the
connection and is split by trace in Python.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cclq.query.metrics import run_cached_query
from cclq.query.session import Session

# One row per (trace, rank, op name, class): the building block of both users. GPU ops
# win; XLA device ops only for traces with no GPU op (a TensorFlow GPU profile has both
# planes and kernels, and its kernels are in gpu_ops when Kineto wrote them).
_OP_STATS_SQL = """
WITH gpu AS (
  SELECT trace, rank, name, kernel_class AS op_class, any_value(coll_type) AS coll_type,
         count(*) AS calls, sum(dur_ns) AS total_ns
  FROM gpu_ops_classified
  WHERE kind = 'kernel' AND dur_ns IS NOT NULL
  GROUP BY trace, rank, name, kernel_class
),
xla AS (
  SELECT trace, rank, name, coalesce(op_kind, 'other') AS op_class, any_value(coll_type) AS coll_type,
         count(*) AS calls, sum(end_ns - ts_ns) AS total_ns
  FROM xla_ops
  WHERE end_ns IS NOT NULL AND trace NOT IN (SELECT DISTINCT trace FROM gpu)
  GROUP BY trace, rank, name, op_kind
)
SELECT 'gpu' AS source, * FROM gpu
UNION ALL
SELECT 'xla' AS source, * FROM xla
"""


@dataclass(frozen=True)
class OpStat:
    """One op name on one rank of one trace."""

    source: str  # 'gpu' (kernels) or 'xla' (XLA device ops)
    rank: int
    name: str
    op_class: str  # comm / compute / ... (kernel_class), or the XLA op kind
    coll_type: str | None
    calls: int
    total_ns: int


# (label, SQL) of the queries below, as run_cached_query runs them: what a batch that
# reads them shares (cclq.query.metrics.shared_views)
OP_STATS_QUERY = ("op_stats", _OP_STATS_SQL + " ORDER BY trace, rank, total_ns DESC, name")
STEP_DURATIONS_QUERY = (
    "step_durations",
    "SELECT trace, rank, step, dur_ns FROM steps WHERE dur_ns IS NOT NULL AND step IS NOT NULL "
    "ORDER BY trace, rank, step",
)


def op_stats(session: Session) -> dict[str, list[OpStat]]:
    """trace -> every (rank, op name) with its call count and summed duration (through the
    metric result cache when the session has one)."""
    table = run_cached_query(session, *OP_STATS_QUERY)
    out: dict[str, list[OpStat]] = {}
    for r in table.to_pylist():
        out.setdefault(r["trace"], []).append(
            OpStat(
                r["source"], r["rank"], r["name"], r["op_class"], r["coll_type"], int(r["calls"]), int(r["total_ns"])
            )
        )
    return out


def top_ops(stats: list[OpStat], n: int = 12) -> dict[str, Any]:
    """The ``n`` ops with the most time over all ranks, and the total they are part of."""
    merged: dict[tuple[str, str], list[Any]] = {}
    for s in stats:
        entry = merged.setdefault((s.name, s.op_class), [0, 0, set(), s.coll_type])
        entry[0] += s.calls
        entry[1] += s.total_ns
        entry[2].add(s.rank)
    total = sum(e[1] for e in merged.values())
    ranked = sorted(merged.items(), key=lambda kv: (-kv[1][1], kv[0]))[:n]
    return {
        "source": stats[0].source if stats else None,
        "total_s": total / 1e9,
        "ops": [
            {"name": name, "class": cls, "coll_type": e[3], "calls": e[0], "total_s": e[1] / 1e9, "ranks": len(e[2])}
            for (name, cls), e in ranked
        ],
    }


def step_durations(session: Session) -> dict[str, list[tuple[int, int, float]]]:
    """trace -> (rank, step, seconds) of every step (the ``steps`` view)."""
    out: dict[str, list[tuple[int, int, float]]] = {}
    for r in run_cached_query(session, *STEP_DURATIONS_QUERY).to_pylist():
        out.setdefault(r["trace"], []).append((int(r["rank"]), int(r["step"]), r["dur_ns"] / 1e9))
    return out


@dataclass(frozen=True)
class BenchmarkResult:
    """One aggregate number a benchmark reported about itself (a ``results`` row with no
    ``item``): DDLB's ``mean_time_ms`` of one configuration, a serving run's median TTFT."""

    benchmark: str | None
    implementation: str | None
    metric: str
    unit: str | None
    value: float | None
    m: int | None
    n: int | None
    k: int | None
    dtype: str | None
    world_size: int | None
    valid: bool | None


_RESULTS_SQL = """
SELECT trace, benchmark, implementation, metric, unit, value, m, n, k, dtype, world_size, valid
FROM results
WHERE item IS NULL
ORDER BY trace, file_id, run, metric
"""


def benchmark_results(session: Session) -> dict[str, list[BenchmarkResult]]:
    """trace -> the aggregate rows of its benchmark result files (what ``cclq record``'s
    ddlb_results.csv and DDLB's own CSV hold), in file and run order."""
    out: dict[str, list[BenchmarkResult]] = {}
    for trace, *fields in session.execute(_RESULTS_SQL).fetchall():
        out.setdefault(trace, []).append(BenchmarkResult(*fields))
    return out
