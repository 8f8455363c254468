-- metric: moe_fraction
-- version: 2
-- unit: ratio
-- grain: trace
-- category: compute
-- polarity: neutral
-- leaderboard: gpu_efficiency
-- summary: value
-- description: Share of GPU kernel time in mixture-of-experts kernels, Σdur(MoE kernels) / Σdur(all kernels) over all ranks, 0..1.
-- needs: GPU kernels
-- params: none
-- Definition: a kernel is MoE when its name matches the one 'moe' rule of
-- kernel_family_rules v2 (sql/views/kernel_families.sql), case-insensitive:
--   moe|expert|router|routing|gating|topk|grouped_gemm|dispatchkernel|combinekernel
-- or kernel_class_rules v2 gives it a MoE family: DeepEP's dispatch, combine,
-- notify, cached-notify and barrier kernels (MoE exchange, also comm) and
-- get_dispatch_layout (MoE routing). Expert-parallel exchanges count although
-- the shared classification also calls them comm: a kernel carries a class and
-- a family. Durations are summed, not merged, over
-- every rank and the whole trace. A trace without MoE kernels scores 0. `topk`
-- also catches dense models' top-k sampling kernels (small, but not MoE).
-- Differs from CCL-Bench: CCL-Bench reports percent, its JSON regex also has bare
-- `dispatch`, `combine` and `gate_` (which match unrelated kernels, e.g.
-- `aggregate_`), and its nsys variant uses a different pattern again; here there
-- is one pattern for every trace format.
-- Differs from version 1: version 1's header said it counts expert-parallel
-- dispatch/combine, but its pattern misses DeepEP's kernels (deep_ep::intranode::
-- dispatch<...>, dpsk::ep::internode::combine<...>, their notify kernels and
-- get_dispatch_layout have none of its words); version 2 counts them through
-- the class rules' family.
WITH families AS (
  SELECT name, is_moe FROM kernel_name_families(2)
),
per_trace AS (
  SELECT
    o.trace,
    count(*) AS kernels,
    sum(o.dur_ns) AS kernel_ns,
    coalesce(sum(o.dur_ns) FILTER (WHERE f.is_moe), 0) AS moe_ns,
    count(DISTINCT o.name) FILTER (WHERE f.is_moe) AS moe_kernel_names
  FROM gpu_ops AS o
  JOIN metric_scope AS m USING (trace, rank)
  JOIN families AS f USING (name)
  WHERE o.kind = 'kernel'
  GROUP BY o.trace
)
SELECT
  t.trace,
  p.moe_ns / nullif(p.kernel_ns, 0) AS value,
  CASE
    WHEN p.kernels IS NULL THEN 'no GPU kernels'
    WHEN p.kernel_ns = 0 THEN 'GPU kernels have no duration'
  END AS reason,
  p.moe_ns / 1e9 AS moe_s,
  p.kernel_ns / 1e9 AS kernel_s,
  p.moe_kernel_names
FROM (SELECT DISTINCT trace FROM metric_scope) AS t
LEFT JOIN per_trace AS p USING (trace)
