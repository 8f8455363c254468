-- metric: tpot
-- version: 1
-- unit: s
-- grain: rank
-- category: inference
-- family: inference
-- see_also: tpot_group_6, throughput_group_6
-- polarity: lower
-- leaderboard: model_execution
-- leaderboard_headline: yes
-- summary: mean
-- ccl_bench_trace_types: json_tpu, json
-- description: Time per output token per rank from the trace: the mean duration of the decode engine iterations, in seconds.
-- needs: inference engine-iteration annotations with decode iterations; not a training workload; card output_len > 1 when given
-- applies_if: card phase inference serving none | the workload card says phase {phase} (tpot is for inference)
-- params: output_len = card.output_len
-- columns:
--   basis              how the decode iterations were chosen (recorded phase, or CCL-Bench's
--                        rule)
--   decode_iterations  decode iterations averaged
--   iterations         engine iterations of the rank
--   source             the engine-iteration source of the rank
-- Definition (view tpot_per_rank, sql/views/inference.sql): a decode iteration
-- gives every running sequence one token, so a
-- request's time per output token is the duration of the decode iterations it
-- runs in. Over the rank's engine iterations (`engine_iterations_with(2)`,
-- sql/views/steps.sql): where the trace records each iteration's phase (vLLM's
-- execute_context_<n>(..)_generation_<m>(..) annotation, SGLang's forward_decode
-- frames), value = the mean duration of the decode-only iterations (mixed
-- iterations that also prefill are left out: they are not one token's time).
-- Where no iteration records a phase, CCL-Bench's rule: the iterations after the
-- first (taken as the prefill), without the last when there are more than two
-- (durations[1:-1], or [1:] for two). `basis` says which, `decode_iterations`
-- how many were averaged.
-- Not applicable: no engine iterations; phases recorded but no decode-only
-- iteration; phases not recorded and a single iteration; the card's output_len
-- <= 1 (no token after the first); the card's phase is neither inference nor
-- serving.
-- A benchmark's own TPOT (vLLM/SGLang bench results: (latency - TTFT) /
-- (output tokens - 1) per request) also counts scheduling gaps between
-- iterations; when the `results` table (issue 10) holds it for the trace, a
-- later version takes its median first (in seconds) and keeps this value as the
-- fallback.
-- Summary: the mean over ranks, as CCL-Bench's tool averages its rank files.
-- Differs from CCL-Bench (tools/inference_latency): CCL-Bench always drops the
-- first and last iteration and averages the rest, idle and prefill iterations
-- included; here the phase decides where the trace records it.
WITH card_phase AS (
  SELECT trace, lower(phase) AS card_phase FROM cards
),
valued AS (
  SELECT
    m.trace,
    m.rank,
    d.decode_ns,
    d.decode_iterations,
    d.basis,
    d.iterations,
    d.source,
    coalesce(c.card_phase, 'inference') IN ('inference', 'serving') AS is_inference,
    c.card_phase,
    p.output_len
  FROM metric_scope AS m
  LEFT JOIN tpot_per_rank AS d USING (trace, rank)
  LEFT JOIN card_phase AS c ON c.trace = m.trace
  LEFT JOIN metric_params AS p ON p.trace = m.trace
)
SELECT
  trace,
  rank,
  CASE WHEN is_inference AND coalesce(output_len, 2) > 1 THEN decode_ns / 1e9 END AS value,
  CASE
    WHEN NOT is_inference THEN 'the workload card says phase ' || card_phase || ' (tpot is for inference)'
    WHEN output_len <= 1 THEN 'the card''s output_len is ' || output_len || ': no output token after the first'
    WHEN iterations IS NULL
      THEN 'no inference engine iterations (vLLM execute_context_*/execute_model, SGLang run_batch/forward_batch_generation)'
    WHEN decode_ns IS NULL AND basis = 'decode iterations' THEN 'no decode-only iteration in the profiled window'
    WHEN decode_ns IS NULL THEN 'a single engine iteration and no phase recorded: no decode iteration to time'
  END AS reason,
  CASE WHEN iterations IS NOT NULL THEN basis END AS basis,
  decode_iterations,
  iterations,
  source
FROM valued
