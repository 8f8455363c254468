-- The rows of the metric communication_overlap_ratio
-- (sql/metrics/communication_overlap_ratio/v*.sql, whose headers document them), ONE
-- body for all its versions: its versions differ only in the kernel_class_rules
-- version (`rules_version`, sql/views/kernel_classes.sql) that calls a kernel comm.
-- `scope` is the (trace, rank) relation to measure (the metric passes `metric_scope`).
-- A released version's rows never change: this body is frozen with the metric files
-- (sql/metrics/CHECKSUMS).
-- requires: kernel_classes, intervals
CREATE OR REPLACE MACRO communication_overlap_ratio_rows(rules_version, scope) AS TABLE
WITH kernels_used AS MATERIALIZED (
  SELECT trace, rank, 0 AS key, ts_ns, end_ns, kernel_class = 'comm' AS is_comm
  FROM gpu_ops_classified_with(rules_version)
  WHERE kind = 'kernel'
),
comm AS (SELECT * FROM kernels_used WHERE is_comm),
compute AS (SELECT * FROM kernels_used WHERE NOT is_comm),
-- one sweep gives both |U(comm)| (pieces in comm) and the overlap (pieces in both)
per_rank AS (
  SELECT trace, rank, a_ns AS comm_ns, overlap_ns FROM intervals_overlap_totals(comm, compute)
),
kernels_seen AS (
  SELECT trace, rank, count(*) FILTER (WHERE is_comm) AS comm_kernels
  FROM kernels_used
  GROUP BY ALL
)
SELECT
  s.trace,
  s.rank,
  p.overlap_ns / p.comm_ns AS value,
  CASE
    WHEN k.rank IS NULL THEN 'no GPU kernels'
    WHEN k.comm_kernels = 0 THEN 'no communication kernels'
    WHEN p.comm_ns IS NULL THEN 'communication kernels have zero duration'
  END AS reason,
  k.comm_kernels,
  p.comm_ns / 1e9 AS comm_s,
  p.overlap_ns / 1e9 AS overlapped_s
FROM query_table(scope) AS s
LEFT JOIN per_rank AS p USING (trace, rank)
LEFT JOIN kernels_seen AS k USING (trace, rank);
