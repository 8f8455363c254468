-- metric: total_communication_time
-- version: 1
-- unit: s
-- grain: rank
-- summary: mean
-- description: Wall time with at least one communication kernel running, |U(comm kernels)| per rank: seconds per inner step with >= 3 ProfilerSteps, whole-trace seconds otherwise (see `window`).
-- needs: GPU kernels
-- params: none
-- Definition: U = the union of the rank's comm kernel intervals over all streams
-- (comm = the shared classification, kernel_class = 'comm'), so concurrent comm
-- kernels count once.
--   * With >= 3 ProfilerStep#N on the rank: the union is clipped to the inner-step
--     window [start of the 2nd step, end of the next-to-last step] (steps sorted by
--     N, CPU-side times) and divided by the number of inner steps (steps - 2):
--     seconds of communication per step; `window` = 'inner steps'.
--   * Otherwise (no steps, or only 1-2): the whole trace, total seconds;
--     `window` = 'whole trace'. The two are different quantities; compare
--     traces with the same `window`.
-- A rank with kernels but no comm kernels scores 0; a rank with no kernels is not
-- applicable.
-- Differs from CCL-Bench: with 1-2 steps CCL-Bench averages over all steps
-- (`steps[1:-1] if len(steps) > 2 else steps`) while here the whole trace is
-- used; its nsys variant sums durations without merging across all devices; its
-- comm regex is its own. Mean over ranks in both.
WITH numbered AS (
  SELECT
    trace, rank, step, ts_ns, end_ns,
    row_number() OVER (PARTITION BY trace, rank ORDER BY step) AS i,
    count(*) OVER (PARTITION BY trace, rank) AS n
  FROM steps
),
inner_windows AS (
  SELECT
    trace,
    rank,
    min(ts_ns) FILTER (WHERE i = 2) AS win_start_ns,
    max(end_ns) FILTER (WHERE i = n - 1) AS win_end_ns,
    max(n) - 2 AS inner_steps
  FROM numbered
  WHERE n >= 3
  GROUP BY ALL
),
comm_clipped AS (
  SELECT
    o.trace,
    o.rank,
    0 AS key,
    CASE WHEN w.rank IS NULL THEN o.ts_ns ELSE greatest(o.ts_ns, w.win_start_ns) END AS ts_ns,
    CASE WHEN w.rank IS NULL THEN o.end_ns ELSE least(o.end_ns, w.win_end_ns) END AS end_ns
  FROM gpu_ops_classified AS o
  LEFT JOIN inner_windows AS w USING (trace, rank)
  WHERE o.kind = 'kernel' AND o.kernel_class = 'comm'
),
comm_busy AS (
  SELECT trace, rank, sum(end_ns - ts_ns) AS comm_ns
  FROM intervals_union(comm_clipped)
  GROUP BY ALL
),
kernels_seen AS (
  SELECT trace, rank, count(*) AS kernels FROM gpu_ops WHERE kind = 'kernel' GROUP BY ALL
)
SELECT
  m.trace,
  m.rank,
  CASE WHEN k.kernels IS NOT NULL THEN coalesce(c.comm_ns, 0) / 1e9 / coalesce(w.inner_steps, 1) END AS value,
  CASE WHEN k.kernels IS NULL THEN 'no GPU kernels' END AS reason,
  CASE
    WHEN k.kernels IS NULL THEN NULL
    WHEN w.rank IS NULL THEN 'whole trace'
    ELSE 'inner steps'
  END AS window,
  w.inner_steps,
  CASE WHEN k.kernels IS NOT NULL THEN coalesce(c.comm_ns, 0) / 1e9 END AS comm_in_window_s
FROM metric_scope AS m
LEFT JOIN kernels_seen AS k USING (trace, rank)
LEFT JOIN inner_windows AS w USING (trace, rank)
LEFT JOIN comm_busy AS c USING (trace, rank)
