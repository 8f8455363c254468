-- metric: ttft
-- version: 1
-- unit: s
-- grain: rank
-- category: inference
-- family: inference
-- see_also: ttft_group_6
-- polarity: lower
-- leaderboard: model_execution
-- leaderboard_headline: yes
-- summary: mean
-- ccl_bench_trace_types: json_tpu, json
-- description: Time to first token per rank from the trace: the duration of the first engine iteration that runs a prefill, in seconds.
-- needs: inference engine-iteration annotations (vLLM execute_context_* / execute_model, SGLang run_batch / forward_batch_generation, vLLM-TPU core step); not a training workload
-- applies_if: card phase inference serving none | the workload card says phase {phase} (ttft is for inference)
-- params: none
-- columns:
--   basis           how the iteration was chosen (first prefill by recorded phase, or the
--                     first)
--   iteration       the engine iteration taken
--   source          the engine-iteration source of the rank
--   phase           the phase of that iteration
--   context_tokens  the prompt tokens it prefilled (vLLM)
--   iterations      engine iterations of the rank
-- Definition (view ttft_per_rank, sql/views/inference.sql): the rank's engine
-- iterations (`engine_iterations_with(2)`, sql/views/steps.sql) in start order. Where the trace records each iteration's
-- phase (vLLM's execute_context_<prefill requests>(..)_generation_<decode
-- requests>(..) annotation; SGLang's forward_extend / forward_decode frames inside
-- the iteration), value = the duration of the first iteration that prefills
-- (phase prefill or mixed): the model time from a request's prompt to its first
-- token. Where no iteration records a phase, value = the first iteration's
-- duration, CCL-Bench's rule. `basis` says which, `iteration` which one,
-- `context_tokens` the prompt tokens it prefilled (vLLM).
-- Not applicable: no engine iterations; phases recorded but no prefill in the
-- profiled window (it began mid-decode); the card's phase is neither inference
-- nor serving.
-- The time a request queues before its prefill and the client-side
-- detokenisation are not in a profiler trace; a benchmark's own TTFT (vLLM
-- `vllm bench` / SGLang bench_serving results) includes them. When the `results`
-- table (issue 10: trace, source_format, benchmark, implementation,
-- config_json, metric, value, unit) holds such a number for the trace, a later
-- version takes it first (its median TTFT, converted to seconds) and keeps this
-- trace-derived value as the fallback.
-- Summary: the mean over ranks, as CCL-Bench's tool averages its rank files.
-- Differs from CCL-Bench (tools/inference_latency): CCL-Bench takes the first
-- execute_context_ / run_batch / `$core.py:331 step` event whatever it ran, so a
-- trace that starts with idle (execute_context_0(0)_generation_0(0)) or decode
-- iterations reports one of those as TTFT; here the first prefill iteration
-- where the phase is recorded. It also samples at most 16 rank files.
WITH card_phase AS (
  SELECT trace, lower(phase) AS card_phase FROM cards
)
SELECT
  m.trace,
  m.rank,
  CASE WHEN coalesce(c.card_phase, 'inference') IN ('inference', 'serving') THEN t.ttft_ns / 1e9 END AS value,
  CASE
    WHEN coalesce(c.card_phase, 'inference') NOT IN ('inference', 'serving')
      THEN 'the workload card says phase ' || c.card_phase || ' (ttft is for inference)'
    WHEN t.iterations IS NULL
      THEN 'no inference engine iterations (vLLM execute_context_*/execute_model, SGLang run_batch/forward_batch_generation)'
    WHEN t.iteration IS NULL THEN 'no prefill iteration in the profiled window'
  END AS reason,
  t.basis,
  t.iteration,
  t.source,
  t.phase,
  t.context_tokens,
  t.iterations
FROM metric_scope AS m
LEFT JOIN ttft_per_rank AS t USING (trace, rank)
LEFT JOIN card_phase AS c ON c.trace = m.trace
