-- metric: throughput
-- version: 1
-- unit: tokens/s
-- grain: trace
-- category: step_time
-- family: time
-- see_also: estimated_throughput_tokens_per_s, estimated_total_tokens, flops_per_token_used, throughput_group_6
-- polarity: higher
-- summary: value
-- description: Estimated tokens per second from XLA model FLOPs (CCL-Bench group 21's `throughput`, the same number as estimated_throughput_tokens_per_s).
-- needs: XLA ops carrying model_flops; model_params
-- applies_if: format xprof chrome | no XLA ops (not an XLA/xprof profile)
-- params: model_params = card.num_params
-- columns:
--   tokens       estimated tokens processed (estimated_total_tokens)
--   wall_time_s  the profile's wall time, s
-- Definition: identical to estimated_throughput_tokens_per_s (group 21 registers
-- both names for one function): sum(model_flops) / flops_per_token / wall_time_s,
-- computed by the shared macro xla_token_estimate.
SELECT
  e.trace,
  CASE WHEN e.reason IS NULL THEN e.tokens_per_s END AS value,
  e.reason,
  e.tokens,
  e.wall_time_s
FROM xla_token_estimate(metric_scope, metric_params) AS e
