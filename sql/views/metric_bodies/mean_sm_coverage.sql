-- The rows of the metric mean_sm_coverage (sql/metrics/mean_sm_coverage/v*.sql, whose
-- headers document them), ONE body for all its versions: version 1 is these rows
-- without `coverage_weighted_s` / `covered_s`, version 2 all of them (the versions
-- differ in the summary, a header line). `scope` is the (trace, rank) relation to
-- measure (the metric passes `metric_scope`). A released version's rows never change:
-- this body is frozen with the metric files (sql/metrics/CHECKSUMS).
-- requires: sm_coverage
CREATE OR REPLACE MACRO mean_sm_coverage_rows(scope) AS TABLE
WITH per_rank AS (
  SELECT
    trace,
    rank,
    count(*) AS kernels,
    count(sm_coverage) AS kernels_with_coverage,
    sum(sm_coverage * dur_ns) FILTER (WHERE sm_coverage IS NOT NULL) AS weighted_ns,
    sum(dur_ns) FILTER (WHERE sm_coverage IS NOT NULL) AS covered_ns,
    CASE
      WHEN count(DISTINCT coverage_source) > 1 THEN 'mixed'
      ELSE any_value(coverage_source)
    END AS coverage_source
  FROM kernel_sm_coverage
  GROUP BY ALL
)
SELECT
  m.trace,
  m.rank,
  p.weighted_ns / nullif(p.covered_ns, 0) AS value,
  CASE
    WHEN p.kernels IS NULL THEN 'no GPU kernels'
    WHEN p.kernels_with_coverage = 0 THEN 'no blocks per SM, and no grid with a known SM count'
    WHEN p.covered_ns = 0 THEN 'GPU kernels have no duration'
  END AS reason,
  p.kernels,
  p.kernels_with_coverage,
  p.coverage_source,
  p.weighted_ns / 1e9 AS coverage_weighted_s,
  p.covered_ns / 1e9 AS covered_s
FROM query_table(scope) AS m
LEFT JOIN per_rank AS p USING (trace, rank);
