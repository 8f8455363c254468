-- metric: ttft
-- version: 2
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
-- description: Time to first token: the serving benchmark's median TTFT from the workload's result files when it has one, else (version 1) the duration of the first engine iteration that prefills, per rank, in seconds.
-- needs: vLLM bench serve / SGLang bench_serving results, or inference engine-iteration annotations; not a training workload
-- applies_if: card phase inference serving none | the workload card says phase {phase} (ttft is for inference)
-- applies_if: table events results | no serving benchmark results and no inference engine iterations (vLLM execute_context_*/execute_model, SGLang run_batch/forward_batch_generation)
-- params: none
-- columns:
--   source        'benchmark results (<format>)' or 'trace: <basis>': where the value comes
--                   from
--   trace_ttft_s  the trace-derived TTFT (version 1's value), s
--   iteration     the engine iteration taken
--   iterations    engine iterations of the rank
-- value = `benchmark_latencies.median_ttft_s` (sql/views/inference.sql: the
-- results table's median_ttft_ms of the last run, in seconds) for every rank of a
-- trace whose result files have it: the time a client waited, queueing and
-- detokenisation included, which a profiler trace cannot see. Else version 1's
-- value: the model time of the first prefill iteration (ttft_per_rank). `source`
-- says which. Differs from CCL-Bench: its website takes `ttft_group_6` from
-- SGLang's bench_results.jsonl (median) and `ttft` from the trace; here one metric
-- prefers the benchmark and falls back to the trace.
WITH card_phase AS (
  SELECT trace, lower(phase) AS card_phase FROM cards
)
SELECT
  m.trace,
  m.rank,
  CASE WHEN coalesce(c.card_phase, 'inference') IN ('inference', 'serving')
    THEN coalesce(b.median_ttft_s, t.ttft_ns / 1e9) END AS value,
  CASE
    WHEN coalesce(c.card_phase, 'inference') NOT IN ('inference', 'serving')
      THEN 'the workload card says phase ' || c.card_phase || ' (ttft is for inference)'
    WHEN b.median_ttft_s IS NOT NULL THEN NULL
    WHEN t.iterations IS NULL
      THEN 'no serving benchmark results and no inference engine iterations (vLLM execute_context_*/execute_model, '
           || 'SGLang run_batch/forward_batch_generation)'
    WHEN t.iteration IS NULL THEN 'no prefill iteration in the profiled window'
  END AS reason,
  CASE WHEN b.median_ttft_s IS NOT NULL THEN 'benchmark results (' || b.source_format || ')'
       WHEN t.ttft_ns IS NOT NULL THEN 'trace: ' || t.basis END AS source,
  t.ttft_ns / 1e9 AS trace_ttft_s,
  t.iteration,
  t.iterations
FROM metric_scope AS m
LEFT JOIN ttft_per_rank AS t USING (trace, rank)
LEFT JOIN benchmark_latencies AS b ON b.trace = m.trace
LEFT JOIN card_phase AS c ON c.trace = m.trace
