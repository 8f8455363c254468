-- The rows of the metric avg_step_time (sql/metrics/avg_step_time/v*.sql, whose
-- headers document them), ONE body for all its versions: its versions differ only in
-- the step_marker_rules version (`rules_version`, sql/views/steps.sql) and the 'no
-- steps' reason (`no_steps_reason`); `prefill_steps` / `decode_steps` count engine-
-- iteration phases, which version 1's steps never have (0), and version 1 leaves them
-- out. `scope` is the (trace, rank) relation to measure (the metric passes
-- `metric_scope`). A released version's rows never change: this body is frozen with
-- the metric files (sql/metrics/CHECKSUMS).
-- requires: steps
CREATE OR REPLACE MACRO avg_step_time_rows(rules_version, scope) AS TABLE
WITH numbered AS (
  SELECT
    trace, rank, step, dur_ns, source, phase,
    row_number() OVER (PARTITION BY trace, rank ORDER BY step) AS i,
    count(*) OVER (PARTITION BY trace, rank) AS n
  FROM steps_with(rules_version)
),
inner_steps AS (
  SELECT
    trace, rank, avg(dur_ns) AS mean_ns, count(*) AS steps_used, max(n) AS steps_seen,
    any_value(source) AS source,
    count(*) FILTER (WHERE phase = 'prefill') AS prefill_steps,
    count(*) FILTER (WHERE phase = 'decode') AS decode_steps
  FROM numbered
  WHERE is_inner_step(i, n)
  GROUP BY ALL
)
SELECT
  s.trace,
  s.rank,
  p.mean_ns / 1e9 AS value,
  CASE
    WHEN p.steps_used IS NULL
      THEN no_steps_reason(rules_version)
  END AS reason,
  p.steps_used,
  p.steps_seen,
  p.source,
  p.prefill_steps,
  p.decode_steps
FROM query_table(scope) AS s
LEFT JOIN inner_steps AS p USING (trace, rank);
