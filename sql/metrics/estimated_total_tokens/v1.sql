-- metric: estimated_total_tokens
-- version: 1
-- unit: tokens
-- grain: trace
-- category: step_time
-- family: time
-- see_also: throughput, estimated_throughput_tokens_per_s, flops_per_token_used
-- polarity: neutral
-- summary: value
-- description: Tokens the profile processed, estimated as total model FLOPs / FLOPs per token.
-- needs: XLA ops carrying model_flops; model_params
-- applies_if: format xprof chrome | no XLA ops (not an XLA/xprof profile)
-- params: model_params = card.num_params
-- columns:
--   total_model_flops  the model FLOPs of the trace's XLA ops
--   flops_per_token    model FLOPs per token from the card (flops_per_token_used)
-- Definition (macro xla_token_estimate): sum(model_flops) over the device XLA ops
-- / flops_per_token_used (6 or 2 * model_params). Differs from CCL-Bench group
-- 21: no fallback to achieved_flops * wall_time when the FLOPs sum is 0 (that
-- product is 0 too), not applicable instead; no default model size.
SELECT
  e.trace,
  CASE WHEN e.reason IS NULL THEN e.tokens END AS value,
  e.reason,
  e.total_model_flops,
  e.flops_per_token
FROM xla_token_estimate(metric_scope, metric_params) AS e
