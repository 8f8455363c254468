-- Kernel families: ONE versioned table of kernel-name patterns that sorts GPU
-- kernels into what they compute (attention, MoE routing, GEMM, softmax,
-- elementwise, ...). Communication is not decided here: it comes from the shared
-- classification (kernel_classes.sql, `kernel_class = 'comm'`) and always wins.
-- Metrics read the table through `kernel_name_families(<version>)` with the rules
-- version they were defined on, so adding version-2 rows never moves a v1 metric.
-- Family rules version N is paired with kernel_class_rules version N: version 2
-- has the same patterns as version 1 and differs only through the class rules
-- (DeepEP kernels are comm; the class rules' `family` makes DeepEP's exchange
-- and layout kernels MoE, and get_dispatch_layout MOE_ROUTE).
-- requires: kernel_classes
-- matcher: kernel_family_matches(text, version) FROM kernel_family_rules

-- The rules. `taxonomies` says which classification a rule takes part in:
--   'breakdown'  break_down_steps' categories: ATTN, MOE_ROUTE, MOE_EXPERT, DENSE_GEMM
--   'boundness'  memory_bound_fraction's families: memory_transfer, gemm, softmax,
--                normalization, elementwise, reduction
--   'moe'        moe_fraction's single MoE pattern
-- Within a taxonomy the lowest matching `priority` wins (first match). The gemm
-- rule is shared by 'breakdown' and 'boundness' so there is one GEMM definition.
-- Patterns are RE2 (DuckDB regexp_matches: partial match unless anchored); `(?i)`
-- makes them case-insensitive. RE2 has no look-ahead, so CCL-Bench's
-- `reduce(?!scatter)` is plain `reduce`: reduce-scatter kernels are comm and are
-- taken before any family rule is consulted.
CREATE OR REPLACE VIEW kernel_family_rules AS
WITH version_1 AS (
SELECT * FROM (VALUES
  -- attention: CCL-Bench's ATTN list with `flash` narrowed to attention kernel
  -- names (bare `flash` also hit `flashinfer::QuantizationSFLayout` template
  -- arguments of quantisation kernels) and `fmha` unanchored (cutlass's
  -- fmha_cutlassF_*, Blackwell's fmhaSm100*); cuDNN SDPA and flashinfer added
  (1, 10, 'attention', ['breakdown'], '(?i)flash_?(fwd|bwd|attn|attention|fprop|bprop)|flash::'),
  (1, 11, 'attention', ['breakdown'], '(?i)fmha|sdpa'),
  (1, 12, 'attention', ['breakdown'], '(?i)paged[_-]?attention|flashinfer::.*(prefill|decode)'),
  (1, 13, 'attention', ['breakdown'], '(?i)vllm::(concat_and_cache|reshape_and_cache)'),
  (1, 14, 'attention', ['breakdown'], '(?i)triton_.*softmax'),
  (1, 15, 'attention', ['breakdown'], '(?i)cunn_SoftMaxForward'),
  -- MoE routing: top-k, gating, token alignment / sorting / packing
  (1, 20, 'moe_route', ['breakdown'], '(?i)\b(sbtopk|gathertopk|topk)\b'),
  (1, 21, 'moe_route', ['breakdown'], '(?i)\b(router|routing|gate|gating)\b'),
  (1, 22, 'moe_route', ['breakdown'], '(?i)vllm::moe::(moe_align_block_size|count_and_sort_expert_tokens)'),
  (1, 23, 'moe_route', ['breakdown'],
     '(?i)\b(moe_.*align|align_block|scatter|gather|pack|reorder|sort|bucket|hist|histogram|prefix|prefixsum|scan|radix)\b'),
  -- MoE experts: fused-MoE and grouped kernels, and a GEMM whose name carries a
  -- MoE hint (CCL-Bench's "GEMM + hint -> expert" rule as one pattern)
  (1, 30, 'moe_expert', ['breakdown'], '(?i)fused[_-]?moe'),
  (1, 31, 'moe_expert', ['breakdown'], '(?i)_fwd_grouped_kernel'),
  (1, 32, 'moe_expert', ['breakdown'], '(?i)\bgrouped\b'),
  (1, 33, 'moe_expert', ['breakdown'], '(?i)vllm::act_and_mul_kernel'),
  (1, 34, 'moe_expert', ['breakdown'],
     '(?i)(vllm::moe::|\bexpert\b).*(gemm|matmul|cublas|cutlass|triton_mm)|(gemm|matmul|cublas|cutlass|triton_mm).*(vllm::moe::|\bexpert\b)'),
  -- copies and fills that run as kernels (memcpy/memset activities are not kernels)
  (1, 40, 'memory_transfer', ['boundness'], '(?i)memcpy|memset|copy_kernel|copy\.|copy-start|copy-done|\bdma\b'),
  -- dense matrix multiply: `gemm` except inside `fbgemm` (FBGEMM's embedding
  -- kernels carry fbgemm_gpu:: types), every cuBLAS/cuBLASLt kernel (incl.
  -- Hopper's nvjet_*), CUTLASS kernels (`cutlass::Kernel<...>`, not every name
  -- with a cutlass:: type argument), Triton matmuls and AMD Tensile (Cijk_*)
  (1, 50, 'gemm', ['breakdown', 'boundness'],
     '(?i)(^|[^b]|[^f]b)gemm|matmul|cublas|triton_mm|cutlass::kernel|^nvjet_|^cijk_'),
  (1, 60, 'softmax', ['boundness'], '(?i)softmax'),
  -- normalisation; cuDNN's batch-norm kernels are named bn_fw_* / bn_bw_*
  (1, 70, 'normalization', ['boundness'], '(?i)layer_?norm|rms_?norm|batch_?norm|group_?norm|norm_kernel'),
  (1, 71, 'normalization', ['boundness'], '(?i)\bbn_(fw|bw)_'),
  (1, 80, 'elementwise', ['boundness'],
     '(?i)elementwise|pointwise|vectorized|unary|binary|aten::(add|mul|div|sub|relu|gelu|silu|sigmoid|tanh|exp|neg|abs|clamp)'),
  (1, 90, 'reduction', ['boundness'], '(?i)reduce|sum_kernel|mean_kernel'),
  -- mixture of experts, for moe_fraction (one pattern; see its header)
  (1, 100, 'moe', ['moe'], '(?i)moe|expert|router|routing|gating|topk|grouped_gemm|dispatchkernel|combinekernel')
) AS rules(version, priority, family, taxonomies, pattern)
)
SELECT * FROM version_1
UNION ALL
SELECT 2, priority, family, taxonomies, pattern FROM version_1;

-- One row per distinct GPU kernel name with its family in each taxonomy, for the
-- family rules and the class rules of `rules_version`. The regexes run once per
-- distinct name, not per event, and each is compiled once (`kernel_family_matches`,
-- made from the rules by the matcher line above: a join on the pattern column compiled
-- every pattern again for each name, 0.43 s of a board over ../shared/traces).
--   kernel_class    the shared class (comm | compute | memcpy | memset | sync)
--   class_family    the class rules' family (moe_exchange | moe_route | NULL)
--   breakdown       COMM | ATTN | MOE_ROUTE | MOE_EXPERT | DENSE_GEMM | OTHER; a
--                   compute kernel whose class family is moe_route is MOE_ROUTE
--   boundness       communication | memory_transfer | gemm | softmax |
--                   normalization | elementwise | reduction | other
--   memory_bound    boundness in (memory_transfer, softmax, normalization,
--                   elementwise, reduction)
--   is_moe          the name matches the 'moe' pattern, or (version 2 on) the class
--                   rules give it a MoE family (comm kernels included:
--                   expert-parallel dispatch/combine exchanges are MoE time)
-- batch: shared
CREATE OR REPLACE MACRO kernel_name_families(rules_version) AS TABLE
WITH kernel_names AS (
  SELECT DISTINCT name, kernel_class, family AS class_family
  FROM gpu_ops_classified_with(rules_version)
  WHERE kind = 'kernel'
),
-- each name with the priority of each rule that matches it (one row with NULL when none does)
name_rules AS (
  SELECT
    name, kernel_class, class_family,
    unnest(coalesce(nullif(kernel_family_matches(name, rules_version), []), [NULL])) AS priority
  FROM kernel_names
),
matched AS (
  SELECT
    n.name,
    any_value(n.kernel_class) AS kernel_class,
    any_value(n.class_family) AS class_family,
    arg_min(r.family, r.priority) FILTER (WHERE list_contains(r.taxonomies, 'breakdown')) AS breakdown_family,
    arg_min(r.family, r.priority) FILTER (WHERE list_contains(r.taxonomies, 'boundness')) AS boundness_family,
    coalesce(bool_or(list_contains(r.taxonomies, 'moe')), false) AS is_moe
  FROM name_rules AS n
  LEFT JOIN kernel_family_rules AS r
    ON r.version = rules_version AND r.priority = n.priority
  GROUP BY n.name
)
SELECT
  name,
  kernel_class,
  class_family,
  CASE
    WHEN kernel_class = 'comm' THEN 'COMM'
    WHEN class_family = 'moe_route' THEN 'MOE_ROUTE'
    WHEN breakdown_family = 'attention' THEN 'ATTN'
    WHEN breakdown_family = 'moe_route' THEN 'MOE_ROUTE'
    WHEN breakdown_family = 'moe_expert' THEN 'MOE_EXPERT'
    WHEN breakdown_family = 'gemm' THEN 'DENSE_GEMM'
    ELSE 'OTHER'
  END AS breakdown,
  CASE
    WHEN kernel_class = 'comm' THEN 'communication'
    WHEN kernel_class IN ('memcpy', 'memset') THEN 'memory_transfer'
    ELSE coalesce(boundness_family, 'other')
  END AS boundness,
  CASE
    WHEN kernel_class = 'comm' THEN false
    WHEN kernel_class IN ('memcpy', 'memset') THEN true
    ELSE coalesce(boundness_family IN ('memory_transfer', 'softmax', 'normalization', 'elementwise', 'reduction'), false)
  END AS memory_bound,
  is_moe OR coalesce(class_family IN ('moe_exchange', 'moe_route'), false) AS is_moe
FROM matched;
