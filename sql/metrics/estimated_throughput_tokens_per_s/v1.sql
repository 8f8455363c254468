-- metric: estimated_throughput_tokens_per_s
-- version: 1
-- unit: tokens/s
-- grain: trace
-- category: step_time
-- family: time
-- see_also: throughput, estimated_total_tokens, flops_per_token_used
-- polarity: higher
-- summary: value
-- description: Estimated tokens per second: estimated_total_tokens / wall_time_s.
-- needs: XLA ops carrying model_flops; model_params
-- applies_if: format xprof chrome | no XLA ops (not an XLA/xprof profile)
-- params: model_params = card.num_params
-- columns:
--   tokens       estimated tokens processed (estimated_total_tokens)
--   wall_time_s  the profile's wall time, s
-- Definition (macro xla_token_estimate): sum(model_flops) / flops_per_token /
-- wall_time_s, where wall_time_s is the device-activity span (see wall_time_s).
-- Differs from CCL-Bench group 21 through its parts: no host events in the wall
-- time, phase-aware FLOPs per token, no default model size. `throughput` is the
-- same number under group 21's other name.
SELECT
  e.trace,
  CASE WHEN e.reason IS NULL THEN e.tokens_per_s END AS value,
  e.reason,
  e.tokens,
  e.wall_time_s
FROM xla_token_estimate(metric_scope, metric_params) AS e
