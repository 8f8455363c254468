-- Interval algebra over any relation with columns (trace, rank, key, ts_ns, end_ns).
-- `key` is whatever further splits the timeline (a kernel class, a step, a
-- stream; use a constant when nothing does). Intervals are half-open [ts, end).
-- These are the building blocks for busy time, overlap and exposed time, so that
-- metrics never re-implement a sweep.

-- Merges overlapping or touching intervals (gaps and islands). One row per
-- merged interval. Example: [0,10) [5,15) [20,30) -> [0,15) [20,30).
CREATE OR REPLACE MACRO intervals_union(tbl) AS TABLE
WITH ordered AS (
  SELECT
    trace, rank, key, ts_ns, end_ns,
    -- the furthest end seen before this interval starts a new island when passed
    max(end_ns) OVER w_before AS prev_end,
    -- the same order as a unique number: the island count below must walk the rows in
    -- exactly this order, and (ts_ns, end_ns) ties (duplicate intervals) may be sorted
    -- either way by a second sort, which put a row in the previous island
    row_number() OVER w AS pos
  FROM query_table(tbl)
  WHERE end_ns > ts_ns
  WINDOW
    w AS (PARTITION BY trace, rank, key ORDER BY ts_ns, end_ns),
    w_before AS (w ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
),
islands AS (
  SELECT
    *,
    sum(CASE WHEN prev_end IS NULL OR ts_ns > prev_end THEN 1 ELSE 0 END) OVER (
      PARTITION BY trace, rank, key ORDER BY pos ROWS UNBOUNDED PRECEDING
    ) AS island
  FROM ordered
)
SELECT trace, rank, key, min(ts_ns) AS ts_ns, max(end_ns) AS end_ns
FROM islands
GROUP BY trace, rank, key, island;

-- Lays two interval sets over each other with one sweep: the timeline of each
-- (trace, rank, key) is cut at every boundary of either set, and each piece that
-- either set covers is returned with `in_a` / `in_b` flags. Inputs may overlap
-- themselves (coverage is counted, not assumed 0/1), so raw kernels work as is.
-- O(n log n): a sort and running sums, no interval-pair join.
CREATE OR REPLACE MACRO intervals_overlay(a, b) AS TABLE
WITH boundaries AS (
  SELECT trace, rank, key, ts_ns AS t, 1 AS da, 0 AS db FROM query_table(a) WHERE end_ns > ts_ns
  UNION ALL
  SELECT trace, rank, key, end_ns, -1, 0 FROM query_table(a) WHERE end_ns > ts_ns
  UNION ALL
  SELECT trace, rank, key, ts_ns, 0, 1 FROM query_table(b) WHERE end_ns > ts_ns
  UNION ALL
  SELECT trace, rank, key, end_ns, 0, -1 FROM query_table(b) WHERE end_ns > ts_ns
),
points AS (
  SELECT trace, rank, key, t, sum(da) AS da, sum(db) AS db
  FROM boundaries
  GROUP BY trace, rank, key, t
),
coverage AS (
  -- One running sum over ALL timelines in (trace, rank, key, t) order, not one per
  -- partition: every interval adds its +1 and -1 inside its own timeline, so the sums
  -- are back to 0 at the end of each timeline and the global sum equals the per-timeline
  -- one. DuckDB pays per window partition, which costs 5x the sort on many-trace scans.
  -- The lead() that crosses into the next timeline only lands on depth-0 rows, dropped below.
  SELECT
    trace, rank, key, t,
    sum(da) OVER w AS a_depth,
    sum(db) OVER w AS b_depth,
    lead(t) OVER w AS next_t
  FROM points
  WINDOW w AS (ORDER BY trace, rank, key, t ROWS UNBOUNDED PRECEDING)
)
SELECT trace, rank, key, t AS ts_ns, next_t AS end_ns, a_depth > 0 AS in_a, b_depth > 0 AS in_b
FROM coverage
WHERE next_t > t AND (a_depth > 0 OR b_depth > 0);

-- Pieces of the timeline covered by both `a` and `b`.
CREATE OR REPLACE MACRO intervals_intersect(a, b) AS TABLE
SELECT trace, rank, key, ts_ns, end_ns FROM intervals_overlay(a, b) WHERE in_a AND in_b;

-- Pieces covered by `a` but not by `b` (e.g. communication not hidden by compute).
CREATE OR REPLACE MACRO intervals_subtract(a, b) AS TABLE
SELECT trace, rank, key, ts_ns, end_ns FROM intervals_overlay(a, b) WHERE in_a AND NOT in_b;

-- Per (trace, rank), summed over the keys: `a_ns` = |U(a)|, `overlap_ns` = the part
-- of it `b` covers (|U(a) ∩ U(b)|), `exposed_ns` = the part `b` does not (|U(a) -
-- U(b)|); 0 rather than NULL for a rank with `a` but no overlap. The ONE
-- computation of communication/compute overlap and of exposed communication
-- (communication_overlap_ratio, compute_comm_overlap, scale_up_bw_utility).
CREATE OR REPLACE MACRO intervals_overlap_totals(a, b) AS TABLE
SELECT
  trace,
  rank,
  sum(end_ns - ts_ns) FILTER (WHERE in_a) AS a_ns,
  coalesce(sum(end_ns - ts_ns) FILTER (WHERE in_a AND in_b), 0) AS overlap_ns,
  coalesce(sum(end_ns - ts_ns) FILTER (WHERE in_a AND NOT in_b), 0) AS exposed_ns
FROM intervals_overlay(a, b)
GROUP BY ALL;
