-- The rows of the metric break_down_steps (sql/metrics/break_down_steps/v*.sql, whose
-- headers document them), ONE body for all its versions: its versions differ only in
-- the rules version (`rules_version`) of the steps (step_marker_rules), the kernel
-- classes (kernel_class_rules) and the families (kernel_family_rules), all the same
-- number, and the 'no steps' reason (`no_steps_reason`); `step_phase` is NULL with
-- version 1's steps, and version 1 leaves the column out. `scope` is the (trace, rank)
-- relation to measure (the metric passes `metric_scope`). A released version's rows
-- never change: this body is frozen with the metric files (sql/metrics/CHECKSUMS).
-- requires: steps, kernel_families
CREATE OR REPLACE MACRO break_down_steps_rows(rules_version, scope) AS TABLE
WITH families AS (
  SELECT name, breakdown FROM kernel_name_families(rules_version)
),
step_kernels AS (
  SELECT o.trace, o.rank, o.step, f.breakdown, o.dur_ns
  FROM gpu_ops_steps_of(rules_version, rules_version) AS o
  JOIN families AS f USING (name)
  -- no `step IS NOT NULL` here: DuckDB pushes that filter into the `steps` view
  -- ahead of its regex filter and its CAST then fails on non-step names; the join
  -- on step below drops unattributed kernels anyway
  WHERE o.kind = 'kernel'
),
per_step AS (
  SELECT
    s.trace,
    s.rank,
    s.step,
    s.source AS step_source,
    s.phase AS step_phase,
    count(k.dur_ns) AS kernels,
    coalesce(sum(k.dur_ns), 0) AS total_ns,
    coalesce(sum(k.dur_ns) FILTER (WHERE k.breakdown = 'COMM'), 0) AS comm_ns,
    coalesce(sum(k.dur_ns) FILTER (WHERE k.breakdown = 'ATTN'), 0) AS attn_ns,
    coalesce(sum(k.dur_ns) FILTER (WHERE k.breakdown = 'MOE_ROUTE'), 0) AS moe_route_ns,
    coalesce(sum(k.dur_ns) FILTER (WHERE k.breakdown = 'MOE_EXPERT'), 0) AS moe_expert_ns,
    coalesce(sum(k.dur_ns) FILTER (WHERE k.breakdown = 'DENSE_GEMM'), 0) AS dense_gemm_ns,
    coalesce(sum(k.dur_ns) FILTER (WHERE k.breakdown = 'OTHER'), 0) AS other_ns
  FROM steps_with(rules_version) AS s
  LEFT JOIN step_kernels AS k
    ON k.trace = s.trace AND k.rank = s.rank AND k.step = s.step
  GROUP BY ALL
),
ranks_with_kernels AS (
  SELECT DISTINCT trace, rank FROM gpu_ops WHERE kind = 'kernel'
)
SELECT
  m.trace,
  m.rank,
  CASE WHEN r.rank IS NOT NULL THEN p.step END AS step,
  CASE WHEN r.rank IS NOT NULL THEN p.total_ns / 1e9 END AS value,
  CASE
    WHEN r.rank IS NULL THEN 'no GPU kernels'
    WHEN p.step IS NULL THEN no_steps_reason(rules_version)
  END AS reason,
  p.step_source,
  p.step_phase,
  p.kernels,
  p.comm_ns / 1e9 AS comm_s,
  p.attn_ns / 1e9 AS attn_s,
  p.moe_route_ns / 1e9 AS moe_route_s,
  p.moe_expert_ns / 1e9 AS moe_expert_s,
  p.dense_gemm_ns / 1e9 AS dense_gemm_s,
  p.other_ns / 1e9 AS other_s,
  p.comm_ns / nullif(p.total_ns, 0) AS comm_frac,
  p.attn_ns / nullif(p.total_ns, 0) AS attn_frac,
  p.moe_route_ns / nullif(p.total_ns, 0) AS moe_route_frac,
  p.moe_expert_ns / nullif(p.total_ns, 0) AS moe_expert_frac,
  p.dense_gemm_ns / nullif(p.total_ns, 0) AS dense_gemm_frac,
  p.other_ns / nullif(p.total_ns, 0) AS other_frac
FROM query_table(scope) AS m
LEFT JOIN ranks_with_kernels AS r USING (trace, rank)
LEFT JOIN per_step AS p
  ON p.trace = m.trace AND p.rank = m.rank AND r.rank IS NOT NULL;
