-- metric: tpot
-- version: 2
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
-- description: Time per output token: the serving benchmark's median TPOT from the workload's result files when it has one, else (version 1) the mean duration of the decode engine iterations, per rank, in seconds.
-- needs: vLLM bench serve / SGLang bench_serving results, or inference engine-iteration annotations with decode iterations; not a training workload; card output_len > 1 when given
-- applies_if: card phase inference serving none | the workload card says phase {phase} (tpot is for inference)
-- applies_if: table events results | no serving benchmark results and no inference engine iterations (vLLM execute_context_*/execute_model, SGLang run_batch/forward_batch_generation)
-- params: output_len = card.output_len
-- columns:
--   source             'benchmark results (<format>)' or 'trace: <basis>': where the value
--                        comes from
--   trace_tpot_s       the trace-derived TPOT (version 1's value), s
--   decode_iterations  decode iterations averaged
--   iterations         engine iterations of the rank
-- value = `benchmark_latencies.median_tpot_s` (the results table's median_tpot_ms
-- of the last run, in seconds: (latency - TTFT) / (output tokens - 1) per request,
-- scheduling gaps between iterations included) for every rank of a trace whose
-- result files have it; else version 1's value, the decode iterations' mean
-- duration (tpot_per_rank). `source` says which.
WITH card_phase AS (
  SELECT trace, lower(phase) AS card_phase FROM cards
),
valued AS (
  SELECT
    m.trace, m.rank, d.decode_ns, d.basis, d.iterations, d.decode_iterations, b.median_tpot_s, b.source_format,
    coalesce(c.card_phase, 'inference') IN ('inference', 'serving') AS is_inference,
    c.card_phase,
    p.output_len
  FROM metric_scope AS m
  LEFT JOIN tpot_per_rank AS d USING (trace, rank)
  LEFT JOIN benchmark_latencies AS b ON b.trace = m.trace
  LEFT JOIN card_phase AS c ON c.trace = m.trace
  LEFT JOIN metric_params AS p ON p.trace = m.trace
)
SELECT
  trace,
  rank,
  CASE WHEN is_inference AND coalesce(output_len, 2) > 1 THEN coalesce(median_tpot_s, decode_ns / 1e9) END AS value,
  CASE
    WHEN NOT is_inference THEN 'the workload card says phase ' || card_phase || ' (tpot is for inference)'
    WHEN output_len <= 1 THEN 'the card''s output_len is ' || output_len || ': no output token after the first'
    WHEN median_tpot_s IS NOT NULL THEN NULL
    WHEN iterations IS NULL
      THEN 'no serving benchmark results and no inference engine iterations (vLLM execute_context_*/execute_model, '
           || 'SGLang run_batch/forward_batch_generation)'
    WHEN decode_ns IS NULL AND basis = 'decode iterations' THEN 'no decode-only iteration in the profiled window'
    WHEN decode_ns IS NULL THEN 'a single engine iteration and no phase recorded: no decode iteration to time'
  END AS reason,
  CASE WHEN median_tpot_s IS NOT NULL THEN 'benchmark results (' || source_format || ')'
       WHEN decode_ns IS NOT NULL THEN 'trace: ' || basis END AS source,
  decode_ns / 1e9 AS trace_tpot_s,
  decode_iterations,
  iterations
FROM valued
