-- metric: tpot_group_6
-- version: 1
-- unit: ms
-- grain: trace
-- category: inference
-- family: inference
-- see_also: tpot
-- polarity: lower
-- summary: value
-- description: Median time per output token reported by the serving benchmark (SGLang bench_serving / vLLM bench serve results), in milliseconds, as CCL-Bench's group-6 tool reports it.
-- needs: serving benchmark results with median_tpot_ms (SGLang bench_results.jsonl, vLLM bench serve JSON)
-- params: none
-- columns:
--   source_format  which result file format gave the number (sglang_bench_jsonl, vllm_bench_json)
--   runs           how many benchmark runs (JSONL lines or files) the trace's results hold
-- Definition: value = the `median_tpot_ms` of the trace's last benchmark run (the
-- last line of the last result file), from the `results` table: the median over
-- requests of (latency - TTFT) / (output tokens - 1), as the benchmark computed it.
-- Unit: milliseconds, as CCL-Bench's tools/tpot_group_6 returns it (cclq's own
-- `tpot` is in seconds and falls back to the trace when there are no results).
-- Differs from CCL-Bench (tools/tpot_group_6): CCL-Bench reads only
-- <folder>/bench_results.jsonl, exits 1 when it holds more than one record, and
-- draws tpot.png into the trace folder as a side effect (its per-request TPOTs
-- from `itls` only feed that plot); here any serving result file of the
-- workload counts, the last run wins, and nothing is written.
WITH runs AS (
  SELECT
    trace,
    arg_max(value, (file_id, run)) AS median_tpot_ms,
    arg_max(source_format, (file_id, run)) AS source_format,
    count(DISTINCT (file_id, run)) AS runs
  FROM results
  WHERE item IS NULL AND metric = 'median_tpot_ms'
  GROUP BY trace
)
SELECT
  t.trace,
  r.median_tpot_ms AS value,
  CASE WHEN r.trace IS NULL
    THEN 'no serving benchmark results with median_tpot_ms (SGLang bench_results.jsonl, vLLM bench serve JSON)'
  END AS reason,
  r.source_format,
  r.runs
FROM (SELECT DISTINCT trace FROM metric_scope) AS t
LEFT JOIN runs AS r USING (trace)
