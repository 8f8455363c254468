-- metric: dominant_kernel_concentration
-- version: 1
-- unit: ratio
-- ccl_bench_unit: %
-- grain: trace
-- category: compute
-- family: efficiency
-- see_also: moe_fraction, hta_kernel_breakdown
-- polarity: neutral
-- leaderboard: gpu_efficiency
-- summary: value
-- ccl_bench_trace_types: nsys, json, json_tpu
-- description: Share of GPU kernel time taken by the single most expensive kernel name, max over names of Σdur(name) / Σdur(all kernels) over all ranks, 0..1.
-- needs: GPU kernels
-- applies_if: table events | no GPU kernels
-- params: none
-- columns:
--   dominant_kernel  the kernel name with the most time
--   dominant_s       its summed time, s
--   kernel_s         all kernel time, s
--   kernel_names     distinct kernel names
-- Definition: kernels are grouped by their full name (template arguments and all)
-- across every rank of the trace; durations are summed, not merged. Memcpy/memset
-- activities are not kernels. `dominant_kernel` names the winner (on a tie, the
-- first name in sort order), `dominant_s` its seconds.
-- Differs from CCL-Bench: CCL-Bench reports percent (ccl_bench_unit); its TPU
-- variant groups by `hlo_category` instead of name, and its Nsight Systems variant
-- by the kernel's `shortName` (the function's name without its template arguments,
-- falling back to demangledName), so every instantiation of one template counts as
-- one kernel: on pipit's CloverLeaf export (../shared/traces/nsys_pipit_hpc) its 3
-- short names give par_ranged2d_kernel 90.7 %, where the top one of the 102 full
-- names here is 6.59 %. Its JSON variant groups by the full name, as here. Here it
-- is 0..1 and always by the full kernel name.
WITH per_name AS (
  SELECT k.trace, k.name, sum(k.dur_ns) AS name_ns
  FROM kernels AS k
  JOIN metric_scope AS m USING (trace, rank)
  GROUP BY ALL
),
ranked AS (
  SELECT
    trace, name, name_ns,
    sum(name_ns) OVER (PARTITION BY trace) AS kernel_ns,
    count(*) OVER (PARTITION BY trace) AS kernel_names,
    row_number() OVER (PARTITION BY trace ORDER BY name_ns DESC, name) AS place
  FROM per_name
),
dominant AS (
  SELECT * FROM ranked WHERE place = 1
)
SELECT
  t.trace,
  d.name_ns / nullif(d.kernel_ns, 0) AS value,
  CASE
    WHEN d.trace IS NULL THEN 'no GPU kernels'
    WHEN d.kernel_ns = 0 THEN 'GPU kernels have no duration'
  END AS reason,
  d.name AS dominant_kernel,
  d.name_ns / 1e9 AS dominant_s,
  d.kernel_ns / 1e9 AS kernel_s,
  d.kernel_names
FROM (SELECT DISTINCT trace FROM metric_scope) AS t
LEFT JOIN dominant AS d USING (trace)
