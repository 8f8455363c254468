-- metric: flops_per_token_used
-- version: 1
-- unit: FLOP/token
-- grain: trace
-- category: step_time
-- family: time
-- see_also: throughput, estimated_throughput_tokens_per_s, estimated_total_tokens
-- polarity: neutral
-- summary: value
-- description: The FLOPs-per-token assumption the token estimates use: 6 * model_params for training, 2 * model_params for inference.
-- needs: model_params
-- params: model_params = card.num_params
-- columns:
--   model_params     the model's parameter count from the card
--   flops_per_param  FLOPs per parameter and token for the phase (6 training, 2 inference)
--   phase            the card's phase
-- Definition: 6 * model_params (forward + backward), or 2 * model_params when the
-- card's phase is inference or serving; a trace without a card counts as
-- training. model_params: --param model_params=N, else the card's num_params.
-- Differs from CCL-Bench group 21: no default of 7e9 parameters (not applicable
-- instead), and the phase is honoured (group 21 hard-codes training).
WITH basis AS (
  SELECT
    p.trace,
    p.model_params,
    c.phase,
    CASE WHEN lower(c.phase) IN ('inference', 'serving') THEN 2 ELSE 6 END AS flops_per_param
  FROM metric_params AS p
  LEFT JOIN cards AS c USING (trace)
)
SELECT
  b.trace,
  CASE WHEN b.model_params > 0 THEN b.flops_per_param * b.model_params END AS value,
  CASE
    WHEN b.model_params IS NULL THEN 'no model_params (--param model_params=N, or the card''s num_params)'
    WHEN b.model_params <= 0 THEN 'model_params <= 0'
  END AS reason,
  b.model_params,
  b.flops_per_param,
  b.phase
FROM basis AS b
SEMI JOIN metric_scope AS s USING (trace)
