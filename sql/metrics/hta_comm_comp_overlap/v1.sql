-- metric: hta_comm_comp_overlap
-- version: 1
-- unit: percent
-- grain: rank
-- category: hta
-- family: hta
-- see_also: communication_overlap_ratio, compute_comm_overlap
-- polarity: higher
-- summary: mean
-- description: HTA 0.5.0-compatible communication/computation overlap per rank (get_comm_comp_overlap): 100 * |U(COMMUNICATION) ∩ U(COMPUTATION)| / |U(COMMUNICATION)| over HTA's analysed window, 0..100, unrounded.
-- needs: HTA COMMUNICATION rows (names matching ^nccl.*Kernel) on the rank
-- columns:
--   comm_us     |U(COMMUNICATION)| in HTA's window, us
--   overlap_us  the part of it COMPUTATION overlaps, us
-- Reproduces HTA 0.5.0 (rows, window, timestamps and classes from
-- sql/views/hta.sql): U(X) = HTA's merge of the GPU rows (stream arg present)
-- of class X, all streams together; COMMUNICATION = names matching
-- ^nccl.*Kernel, COMPUTATION = HTA 0.5.0's negative regex (so `Stream Wait
-- Event` is compute, memcpy/memset/syncs are neither). The overlap is HTA's
-- sweep (+1/-1 per comm interval, +2/-2 per comp interval, overlapped where the
-- running sum is 3). HTA prints round(value, 2) as comp_comm_overlap_pctg; the
-- value here is not rounded. A rank without communication rows gets NULL with a
-- reason (HTA: NaN, 0/0); a rank with communication and no compute scores 0.
-- Differs from communication_overlap_ratio: percent, HTA's window and classes
-- (there, memcpy/memset are excluded and every non-comm kernel is compute).
WITH classes AS MATERIALIZED (
  -- (feeds both the sweep and the comm total: materialized, so that the merge
  -- behind hta_gpu_merged runs once)
  SELECT trace, rank, key, ts_us, end_us
  FROM hta_gpu_merged
  WHERE key IN ('COMMUNICATION', 'COMPUTATION')
),
boundaries AS (
  SELECT
    trace,
    rank,
    time_us,
    -- HTA's status codes: comm +1/-1, comp +2/-2
    CASE WHEN key = 'COMMUNICATION' THEN 1 ELSE 2 END * sign AS delta,
    0 AS sort_key
  FROM classes,
  LATERAL (VALUES (ts_us, 1), (end_us, -1)) AS b(time_us, sign)
),
overlap AS (
  SELECT trace, rank, sum(next_time_us - time_us) FILTER (WHERE running = 3) AS overlap_us
  FROM hta_sweep(boundaries)
  GROUP BY ALL
),
comm AS (
  SELECT trace, rank, sum(end_us - ts_us) AS comm_us
  FROM classes
  WHERE key = 'COMMUNICATION'
  GROUP BY ALL
)
SELECT
  m.trace,
  m.rank,
  CASE WHEN c.comm_us <> 0 THEN 100 * coalesce(o.overlap_us, 0) / c.comm_us END AS value,
  CASE
    WHEN c.comm_us IS NULL THEN 'no communication kernels in the HTA window (HTA: NaN)'
    WHEN c.comm_us = 0 THEN 'communication kernels have zero merged duration (HTA: NaN)'
  END AS reason,
  c.comm_us,
  CASE WHEN c.comm_us IS NOT NULL THEN coalesce(o.overlap_us, 0) END AS overlap_us
FROM metric_scope AS m
LEFT JOIN comm AS c USING (trace, rank)
LEFT JOIN overlap AS o USING (trace, rank)
