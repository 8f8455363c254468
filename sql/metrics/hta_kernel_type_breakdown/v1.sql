-- metric: hta_kernel_type_breakdown
-- version: 1
-- unit: us
-- grain: trace
-- category: hta
-- family: hta
-- see_also: break_down_steps, total_kernel_time
-- polarity: neutral
-- summary: sum
-- description: HTA 0.5.0-compatible kernel-type breakdown (get_gpu_kernel_breakdown's kernel_type_df, memory kernels included): one row per label such as "COMPUTATION overlapping COMMUNICATION", value = µs of GPU time where exactly that set of kernel types runs, summed over ranks.
-- needs: HTA GPU rows (events with a `stream` arg) of class COMPUTATION, COMMUNICATION or MEMORY
-- columns:
--   kernel_type  HTA's kernel type (COMMUNICATION, COMPUTATION, MEMORY, ...; one row each)
--   percentage   HTA's rounded percentage of the type
-- Reproduces HTA 0.5.0 (rows, window, timestamps and classes from
-- sql/views/hta.sql). Per rank, the GPU rows (stream arg present, all streams)
-- of each class COMPUTATION (bit 1), COMMUNICATION (2), MEMORY (4) are merged
-- per class (OTHER is left out); a sweep over their boundaries gives the set of
-- classes running on each stretch of time, labelled by the classes in that
-- order joined by " overlapping ". So "COMMUNICATION" is communication time with
-- nothing else running, not total communication time. Stretches are summed per
-- label over the selected ranks; `percentage` = round(100 * value / total, 1),
-- numpy rounding. HTA quirk: labels of zero-length stretches between tied
-- boundaries appear with 0 (e.g. "COMPUTATION overlapping MEMORY,0"); HTA's
-- order of tied boundaries comes from its repeated sort of the concatenated
-- boundary lists, reproduced here as a stable sort: time, then class
-- (COMPUTATION, COMMUNICATION, MEMORY), then starts before ends. Each label's
-- stretch lengths are truncated to integers, as HTA's astype(int) does.
WITH classes AS (
  SELECT
    g.trace,
    g.rank,
    g.seq,
    g.ts_us,
    g.end_us,
    CASE g.key WHEN 'COMPUTATION' THEN 0 WHEN 'COMMUNICATION' THEN 1 ELSE 2 END AS class_pos
  FROM hta_gpu_merged AS g
  JOIN metric_scope AS m USING (trace, rank)
  WHERE g.key IN ('COMPUTATION', 'COMMUNICATION', 'MEMORY')
),
boundaries AS (
  SELECT
    trace,
    rank,
    time_us,
    (1 << class_pos) * sign AS delta,
    -- stable-sort emulation: class, then HTA's melt order (all starts, then all
    -- ends), then the interval's position
    ((class_pos * 2 + CASE WHEN sign = 1 THEN 0 ELSE 1 END)::BIGINT << 40) + seq AS sort_key
  FROM classes,
  LATERAL (VALUES (ts_us, 1), (end_us, -1)) AS b(time_us, sign)
),
stretches AS (
  SELECT
    trace,
    concat_ws(
      ' overlapping ',
      CASE WHEN running & 1 <> 0 THEN 'COMPUTATION' END,
      CASE WHEN running & 2 <> 0 THEN 'COMMUNICATION' END,
      CASE WHEN running & 4 <> 0 THEN 'MEMORY' END
    ) AS kernel_type,
    trunc(next_time_us - time_us) AS dur_us
  FROM hta_sweep(boundaries)
  WHERE running > 0
),
per_label AS (
  SELECT trace, kernel_type, sum(dur_us) AS sum_us
  FROM stretches
  GROUP BY ALL
),
with_share AS (
  SELECT
    trace,
    kernel_type,
    sum_us,
    -- HTA: round((sum / sum.sum()) * 100, 1)
    hta_round((sum_us / sum(sum_us) OVER (PARTITION BY trace)) * 100, 1) AS percentage
  FROM per_label
)
SELECT
  t.trace,
  w.sum_us AS value,
  CASE WHEN w.trace IS NULL THEN 'no COMPUTATION, COMMUNICATION or MEMORY rows in the HTA window' END AS reason,
  w.kernel_type,
  w.percentage
FROM (SELECT DISTINCT trace FROM metric_scope) AS t
LEFT JOIN with_share AS w USING (trace)
