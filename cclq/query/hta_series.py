"""The data of the HTA figures of a workload page, downsampled to what a screen shows.

HTA's queue length and memory bandwidth series have one point per change (a launch, a
kernel start, a copy start or end): tens of thousands per stream on a real run. A figure
needs a few hundred, so each series is cut into ``BINS`` equal time bins over its rank's span
and each bin keeps its highest value (a peak is what one looks for in these plots); the
launch delays become counts per power-of-two bucket. Only the trace's first rank is drawn
for the series (HTA's default rank too), at most ``MAX_SERIES`` streams or kinds, those with
the most points. The queries read the views of ``sql/views/hta_analyses.sql`` and go through
the metric result cache like the other figure data (``cclq.query.trace_stats``).
"""

from __future__ import annotations

from typing import Any

from cclq.query.metrics import run_cached_query
from cclq.query.session import Session

BINS = 300
MAX_SERIES = 6


def _binned(source: str, key: str, value: str) -> str:
    """The binned series of ``source`` (a view, or a subquery in parentheses)."""
    return f"""
WITH s AS (SELECT trace, rank, {key} AS key, ts_us, {value} AS v FROM {source}),
first_rank AS (SELECT trace, min(rank) AS rank FROM s GROUP BY trace),
drawn AS (SELECT * FROM s SEMI JOIN first_rank USING (trace, rank)),
span AS (SELECT trace, min(ts_us) AS lo_us, max(ts_us) AS hi_us FROM drawn GROUP BY trace),
keys AS (
  SELECT trace, key, count(*) AS n FROM drawn GROUP BY trace, key
  QUALIFY row_number() OVER (PARTITION BY trace ORDER BY count(*) DESC, key) <= {MAX_SERIES}
)
SELECT
  d.trace,
  any_value(d.rank) AS rank,
  CAST(d.key AS VARCHAR) AS key,
  least(floor((d.ts_us - p.lo_us) * {BINS} / greatest(p.hi_us - p.lo_us, 1)), {BINS - 1}) AS bin,
  min(d.ts_us) - any_value(p.lo_us) AS t_us,
  max(d.v) AS peak
FROM drawn AS d
JOIN keys USING (trace, key)
JOIN span AS p USING (trace)
GROUP BY d.trace, d.key, bin
ORDER BY d.trace, key, bin
"""


_LAUNCH_DELAYS = """
SELECT
  trace,
  CASE WHEN launch_delay_us < 1 THEN 0 ELSE CAST(floor(log2(launch_delay_us)) AS INTEGER) + 1 END AS bucket,
  count(*) AS launches
FROM hta_kernel_launches
GROUP BY ALL
ORDER BY trace, bucket
"""


# (label, SQL) of the figure queries, as run_cached_query runs them (what a batch that
# reads them shares: cclq.query.metrics.shared_views)
# hta_queue_length of each trace's first rank with points, two ways to the same rows (the
# view is hta_queue_series(hta_queue_points), whose windows are per rank):
# * alone, the running sums of that rank only: the view computes every rank's, and a
#   filter on it cannot reach them (0.7 s of 1.05 s on a 500-workload board);
# * in a batch that shares the view (its queue metrics read it), a filter of its table:
#   the points and sums again took 1.5 CPU s of the report on 8 ranks of 250 MB.
_FIRST_RANK_QUEUE = """(
  WITH points AS MATERIALIZED (SELECT * FROM hta_queue_points),
  first_rank AS (SELECT trace, min(rank) AS rank FROM points GROUP BY trace),
  drawn AS (SELECT * FROM points SEMI JOIN first_rank USING (trace, rank))
  SELECT * FROM hta_queue_series(drawn)
)"""
_FIRST_RANK_OF_SHARED_QUEUE = """(
  WITH first_rank AS (SELECT trace, min(rank) AS rank FROM hta_queue_length GROUP BY trace)
  SELECT * FROM hta_queue_length SEMI JOIN first_rank USING (trace, rank)
)"""
QUEUE_LENGTH_QUERY = ("hta_queue_length_bins", _binned(_FIRST_RANK_QUEUE, "stream", "queue_length"))
SHARED_QUEUE_LENGTH_QUERY = ("hta_queue_length_bins", _binned(_FIRST_RANK_OF_SHARED_QUEUE, "stream", "queue_length"))
MEMORY_BW_QUERY = ("hta_memory_bw_bins", _binned("hta_memory_bw", "name", "memory_bw_gbps"))
LAUNCH_DELAY_QUERY = ("hta_launch_delay_buckets", _LAUNCH_DELAYS)
# what a batch plans with: the queue read from the view, so that it counts as one more
# reader of it (hta_figure_data then reads it so only where the batch shares it)
QUERIES = (SHARED_QUEUE_LENGTH_QUERY, MEMORY_BW_QUERY, LAUNCH_DELAY_QUERY)
SHARED_QUEUE = "hta_queue_length"


def _series(session: Session, label: str, sql: str) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for r in run_cached_query(session, label, sql).to_pylist():
        entry = out.setdefault(r["trace"], {"rank": r["rank"], "series": {}})
        entry["series"].setdefault(r["key"], []).append([r["t_us"], r["peak"]])
    return out


def hta_figure_data(session: Session, shared: frozenset[str] = frozenset()) -> dict[str, dict[str, Any]]:
    """trace -> {"queue_length": {rank, series: {stream: [[t_us, peak], ...]}},
    "memory_bw": {rank, series: {kind: ...}}, "launch_delay": [[bucket, launches], ...]}.
    ``t_us`` counts from the first point of the drawn rank; bucket 0 holds delays under
    1 µs, bucket k >= 1 those in [2**(k-1), 2**k) µs. A trace without such data has no key.
    ``shared``: the views the caller's batch shares (``cclq.query.metrics.shared_views``)."""
    queue = SHARED_QUEUE_LENGTH_QUERY if SHARED_QUEUE in shared else QUEUE_LENGTH_QUERY
    out: dict[str, dict[str, Any]] = {}
    for name, data in (
        ("queue_length", _series(session, *queue)),
        ("memory_bw", _series(session, *MEMORY_BW_QUERY)),
    ):
        for trace, entry in data.items():
            out.setdefault(trace, {})[name] = entry
    for r in run_cached_query(session, *LAUNCH_DELAY_QUERY).to_pylist():
        out.setdefault(r["trace"], {}).setdefault("launch_delay", []).append([r["bucket"], r["launches"]])
    return out
