-- Interval algebra over any relation with columns (trace, rank, key, ts_ns, end_ns).
-- `key` is whatever further splits the timeline (a kernel class, a step, a
-- stream; use a constant when nothing does). Intervals are half-open [ts, end).
-- These are the building blocks for busy time, overlap and exposed time, so that
-- metrics never re-implement a sweep.

-- A window over many timelines partitions by a number per timeline, not by the
-- timeline's (trace, rank, key): partitioned by those (two of them strings), the
-- windows over the GPU rows of ../shared/traces took twice as long. Two macros:
--  * timeline_numbers(tbl): one row per (trace, rank, key) of `tbl`, with `timeline`.
--    The numbers follow a hash of the timeline: numbered in (trace, rank, key) order,
--    the order rows mostly arrive in, the windows took as long again (DuckDB 2.0.1 and
--    1.5.6 alike).
--  * timeline_rows(tbl, numbers): the rows of `tbl` with their `timeline` from
--    `numbers`. A NULL in the three is a timeline of its own, as in a partition.
-- A query holds `tbl` (MATERIALIZED: read by both), and `numbers` where it joins them
-- back after an aggregate by timeline (intervals_union).
CREATE OR REPLACE MACRO timeline_numbers(tbl) AS TABLE
SELECT trace, rank, key, row_number() OVER (ORDER BY hash(trace, rank, key), trace, rank, key) AS timeline
FROM (SELECT DISTINCT trace, rank, key FROM query_table(tbl));

CREATE OR REPLACE MACRO timeline_rows(tbl, numbers) AS TABLE
SELECT i.*, n.timeline
FROM query_table(tbl) AS i
JOIN query_table(numbers) AS n
  ON n.trace IS NOT DISTINCT FROM i.trace AND n.rank IS NOT DISTINCT FROM i.rank AND n.key IS NOT DISTINCT FROM i.key;

-- Merges overlapping or touching intervals (gaps and islands). One row per
-- merged interval. Example: [0,10) [5,15) [20,30) -> [0,15) [20,30).
CREATE OR REPLACE MACRO intervals_union(tbl) AS TABLE
WITH input AS MATERIALIZED (
  SELECT trace, rank, key, ts_ns, end_ns FROM query_table(tbl) WHERE end_ns > ts_ns
),
numbers AS MATERIALIZED (
  SELECT * FROM timeline_numbers(input)
),
ordered AS (
  SELECT
    timeline, ts_ns, end_ns,
    -- the furthest end seen before this interval starts a new island when passed
    max(end_ns) OVER w_before AS prev_end,
    -- the same order as a unique number: the island count below must walk the rows in
    -- exactly this order, and (ts_ns, end_ns) ties (duplicate intervals) may be sorted
    -- either way by a second sort, which put a row in the previous island
    row_number() OVER w AS pos
  FROM timeline_rows(input, numbers)
  WINDOW
    w AS (PARTITION BY timeline ORDER BY ts_ns, end_ns),
    w_before AS (w ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
),
islands AS (
  SELECT
    *,
    sum(CASE WHEN prev_end IS NULL OR ts_ns > prev_end THEN 1 ELSE 0 END) OVER (
      PARTITION BY timeline ORDER BY pos ROWS UNBOUNDED PRECEDING
    ) AS island
  FROM ordered
),
merged AS (
  SELECT timeline, min(ts_ns) AS ts_ns, max(end_ns) AS end_ns
  FROM islands
  GROUP BY timeline, island
)
SELECT n.trace, n.rank, n.key, m.ts_ns, m.end_ns
FROM merged AS m
JOIN numbers AS n USING (timeline);

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

-- Pairs each interval of `items` (columns trace, rank, ts_ns, end_ns, any others)
-- with each window of `windows` (trace, rank, step, window_start, window_end) that it
-- overlaps: ts_ns < window_end AND end_ns > window_start. One row per pair: the
-- item's columns, then step, window_start, window_end.
-- Written as a join on (trace, rank) with the two times as residuals, DuckDB compares
-- every item of a rank with every window of it: 480 k kernels x 20 k steps on a 1 GB
-- rank (issue 42). Here, where a rank's windows end in the order they start (sorted by
-- start, then end, the ends never go down: sequential or staggered steps), the windows
-- an item overlaps are one run of that order: those starting before it ends, less those
-- ending by the time it starts. Two ASOF joins count each, and the item meets only the
-- windows between. A rank whose windows nest takes the plain join: the same rows.
CREATE OR REPLACE MACRO intervals_in_windows(items, windows) AS TABLE
WITH w AS MATERIALIZED (
  SELECT
    trace, rank, step, window_start, window_end,
    row_number() OVER (PARTITION BY trace, rank ORDER BY window_start, window_end) AS _w_idx
  FROM query_table(windows)
  WHERE window_start IS NOT NULL AND window_end IS NOT NULL  -- the plain join never matches these
),
ordered AS MATERIALIZED (  -- ranks whose windows' ends never go down in start order
  SELECT trace, rank
  FROM (
    SELECT
      trace, rank,
      window_end < max(window_end) OVER (
        PARTITION BY trace, rank ORDER BY _w_idx ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
      ) AS goes_down
    FROM w
  )
  GROUP BY trace, rank
  HAVING NOT bool_or(coalesce(goes_down, false))
),
starts AS (  -- windows starting at or before t: max(_w_idx) of those starting at t
  SELECT trace, rank, window_start AS t, max(_w_idx) AS n FROM w SEMI JOIN ordered USING (trace, rank) GROUP BY ALL
),
ends AS (  -- windows ending at or before t (a prefix of the order in an ordered rank)
  SELECT trace, rank, window_end AS t, max(_w_idx) AS n FROM w SEMI JOIN ordered USING (trace, rank) GROUP BY ALL
),
i AS MATERIALIZED (
  SELECT * FROM query_table(items) WHERE ts_ns IS NOT NULL AND end_ns IS NOT NULL
),
counted AS (
  SELECT i.*, coalesce(e.n, 0) AS _w_lo, s.n AS _w_hi
  FROM i
  ASOF JOIN starts AS s ON s.trace = i.trace AND s.rank = i.rank AND i.end_ns > s.t
  ASOF LEFT JOIN ends AS e ON e.trace = i.trace AND e.rank = i.rank AND i.ts_ns >= e.t
),
runs AS (
  SELECT * EXCLUDE (_w_lo, _w_hi), unnest(range(_w_lo + 1, _w_hi + 1)) AS _w_idx
  FROM counted
  WHERE _w_hi > _w_lo
)
SELECT r.* EXCLUDE (_w_idx), w.step, w.window_start, w.window_end
FROM runs AS r
JOIN w ON (w.trace, w.rank, w._w_idx) = (r.trace, r.rank, r._w_idx)
UNION ALL BY NAME
SELECT i.*, w.step, w.window_start, w.window_end
FROM (SELECT * FROM i ANTI JOIN ordered USING (trace, rank)) AS i
JOIN w ON w.trace = i.trace AND w.rank = i.rank AND i.ts_ns < w.window_end AND i.end_ns > w.window_start;
