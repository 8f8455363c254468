-- metric: break_down_steps
-- version: 2
-- unit: s
-- grain: step
-- category: step_time
-- polarity: neutral
-- summary: mean
-- description: GPU kernel seconds per rank and step, split into COMM / ATTN / MOE_ROUTE / MOE_EXPERT / DENSE_GEMM / OTHER (seconds and 0..1 shares).
-- needs: steps (ProfilerStep#N on the CPU or GPU track, or inference engine iterations), GPU kernels
-- params: none
-- Definition: value = Σdur of the GPU kernels of the step (`gpu_ops_steps_of(2, 2)`:
-- with CPU-side steps (CPU-track ProfilerStep#N, or the engine iterations of
-- vLLM/SGLang, sql/views/steps.sql) a kernel belongs to the step whose CPU span
-- contains its launch; with GPU-track steps only, to the step whose GPU span
-- contains its start), summed over streams, not merged. Each kernel falls in the
-- first of: COMM (kernel_class_rules v2, kernel_class = 'comm': DeepEP's
-- dispatch/combine/notify kernels included), then MOE_ROUTE for the class rules'
-- MoE routing kernels (DeepEP's get_dispatch_layout), then ATTN, MOE_ROUTE,
-- MOE_EXPERT, DENSE_GEMM by the 'breakdown' rules of kernel_family_rules v2
-- (sql/views/kernel_families.sql; a GEMM whose name carries a MoE hint is
-- MOE_EXPERT), else OTHER. `<cat>_s` are seconds, `<cat>_frac` = <cat>_s / value
-- (NULL when the step ran no kernel time). Memcpy/memset/sync activities are not
-- kernels. `step_source` says where the steps came from (cpu_annotation |
-- gpu_annotation | an engine-iteration source such as vllm_execute_context);
-- `step_phase` is an engine iteration's phase (prefill | decode | mixed).
-- Differs from version 1: steps of step_marker_rules v2 (engine iterations where
-- a rank has no ProfilerStep#N) and kernel_class_rules v2 (DeepEP kernels are
-- COMM, get_dispatch_layout MOE_ROUTE; version 1 had get_dispatch_layout COMM and
-- cached_notify OTHER).
-- A step without kernels is reported with value 0. A rank without GPU kernels
-- (CPU-only, XLA) is not applicable.
-- Differs from CCL-Bench (break_down_steps_group_9): that tool sums the whole nsys
-- capture per report file in ms and percent, has its own comm regex (pplx
-- `batched_triton_kernel`, `a2a`, `cudaMemcpyAsync` counted as comm) and no
-- DENSE_GEMM bucket (dense GEMMs land in OTHER); here the grain is the step, COMM
-- is the shared classification and dense GEMMs get their own bucket.
WITH families AS (
  SELECT name, breakdown FROM kernel_name_families(2)
),
step_kernels AS (
  SELECT o.trace, o.rank, o.step, f.breakdown, o.dur_ns
  FROM gpu_ops_steps_of(2, 2) AS o
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
  FROM steps_with(2) AS s
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
    WHEN p.step IS NULL THEN 'no steps (no ProfilerStep#N annotations, no inference engine iterations, no XLA steps)'
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
FROM metric_scope AS m
LEFT JOIN ranks_with_kernels AS r USING (trace, rank)
LEFT JOIN per_step AS p
  ON p.trace = m.trace AND p.rank = m.rank AND r.rank IS NOT NULL
