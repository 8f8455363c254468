-- metric: hta_memory_bw_summary
-- version: 1
-- unit: GB/s
-- grain: rank
-- category: hta
-- family: hta
-- see_also: average_memory_bandwidth, estimated_bandwidth
-- polarity: neutral
-- summary: mean
-- description: HTA 0.5.0-compatible memory bandwidth summary (get_memory_bw_summary) for every rank: one row per (rank, memory operation kind: Memcpy HtoD / DtoH / DtoD / Unknown, Memset), value = the mean of HTA's bandwidth series over its points above 0, with HTA's describe() columns.
-- needs: HTA MEMORY rows (Memcpy / Memset with Kineto's `memory bandwidth (GB/s)` arg)
-- columns:
--   name            the memory operation kind as HTA names it (Memcpy HtoD, Memcpy DtoH, Memcpy DtoD, Memcpy Unknown, Memset)
--   count           points of the series above 0 GB/s
--   mean            mean bandwidth over those points (unweighted by time, as HTA)
--   std             sample standard deviation of the same
--   min             smallest bandwidth above 0
--   p25             25th percentile (linear interpolation, pandas' describe)
--   p50             median
--   p75             75th percentile
--   max             largest bandwidth
--   order_sensitive  true when an operation ends where another of its kind starts, so HTA's unstable sort may count and average slightly different points
-- Reproduces HTA 0.5.0 over the series of hta_memory_bw (every rank; HTA's
-- default is rank 0): each MEMORY row adds its bandwidth at its start and
-- removes it at its end (HTA quirk: a 0 µs operation lasts 1 µs), a running
-- sum per kind in ts order; the summary is pandas' describe() of the points
-- whose running sum is > 0 (HTA quirk: a floating-point residue such as 1e-16
-- where the exact sum is 0 counts as a point). A kind with no such point has
-- no row (as in HTA). Where it differs: at a tied timestamp HTA's unstable
-- sort may put an end before a start; we put starts first (a stable sort of
-- HTA's concatenation). Only rows with order_sensitive can differ; there
-- HTA's count lies between this count and that of
-- hta_memory_bw.memory_bw_gbps_low (ends first).
WITH stats AS (
  SELECT
    b.trace,
    b.rank,
    b.name,
    count(*) AS count,
    avg(b.memory_bw_gbps) AS mean,
    stddev_samp(b.memory_bw_gbps) AS std,
    min(b.memory_bw_gbps) AS min,
    quantile_cont(b.memory_bw_gbps, 0.25) AS p25,
    quantile_cont(b.memory_bw_gbps, 0.5) AS p50,
    quantile_cont(b.memory_bw_gbps, 0.75) AS p75,
    max(b.memory_bw_gbps) AS max
  FROM hta_memory_bw AS b
  JOIN metric_scope AS m USING (trace, rank)
  WHERE b.memory_bw_gbps > 0
  GROUP BY ALL
),
sensitive AS (
  SELECT trace, rank, name, bool_or(memory_bw_gbps <> memory_bw_gbps_low) AS order_sensitive
  FROM hta_memory_bw
  SEMI JOIN metric_scope USING (trace, rank)
  GROUP BY ALL
)
SELECT
  m.trace,
  m.rank,
  s.mean AS value,
  CASE WHEN s.name IS NULL THEN 'no memory operation with a bandwidth above 0 in the HTA window' END AS reason,
  s.name,
  s.count,
  s.mean,
  s.std,
  s.min,
  s.p25,
  s.p50,
  s.p75,
  s.max,
  o.order_sensitive
FROM metric_scope AS m
LEFT JOIN stats AS s USING (trace, rank)
LEFT JOIN sensitive AS o USING (trace, rank, name)
