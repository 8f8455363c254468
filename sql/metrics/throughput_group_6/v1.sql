-- metric: throughput_group_6
-- version: 1
-- unit: tokens/s
-- grain: trace
-- category: step_time
-- family: inference
-- see_also: throughput, tpot
-- polarity: higher
-- summary: value
-- description: Output tokens per second of the serving benchmark run: total_output_tokens / duration from its results (SGLang bench_serving / vLLM bench serve).
-- needs: serving benchmark results with duration and total_output_tokens (SGLang bench_results.jsonl, vLLM bench serve JSON)
-- params: none
-- columns:
--   total_output_tokens  output tokens the run generated, over all requests
--   duration_s           the benchmark run's wall time, seconds
--   source_format        which result file format gave the numbers
-- Definition: for the trace's last benchmark run (the last line of the last
-- result file) that has both keys, value = total_output_tokens / duration. This
-- is what CCL-Bench's tools/throughput_group_6 computes (its docstring says
-- "total tokens processed per second" but it counts output tokens only, and so
-- does this metric: the benchmark's own `output_throughput`).
-- Differs from CCL-Bench: CCL-Bench's tools/main.py imports the function for
-- `throughput_group_6` but never assigns it, so the call crashes (TypeError:
-- 'NoneType' object is not callable) and the website gets no number; this is
-- the number the tool means to return. CCL-Bench also reads only
-- <folder>/bench_results.jsonl and refuses more than one record; here any
-- serving result file of the workload counts and the last run wins. A run with
-- duration <= 0 gives no value (CCL-Bench raises).
WITH run_values AS (
  SELECT
    trace, file_id, run,
    any_value(value) FILTER (WHERE metric = 'duration') AS duration_s,
    any_value(value) FILTER (WHERE metric = 'total_output_tokens') AS total_output_tokens,
    any_value(source_format) AS source_format
  FROM results
  WHERE item IS NULL AND metric IN ('duration', 'total_output_tokens')
  GROUP BY trace, file_id, run
  HAVING duration_s IS NOT NULL AND total_output_tokens IS NOT NULL
),
last_run AS (
  SELECT trace, arg_max(r, (file_id, run)) AS r
  FROM (SELECT trace, file_id, run, run_values AS r FROM run_values) AS x
  GROUP BY trace
)
SELECT
  t.trace,
  CASE WHEN l.r.duration_s > 0 THEN l.r.total_output_tokens / l.r.duration_s END AS value,
  CASE
    WHEN l.trace IS NULL
      THEN 'no serving benchmark results with duration and total_output_tokens (SGLang bench_results.jsonl, vLLM bench serve JSON)'
    WHEN l.r.duration_s <= 0 THEN 'the benchmark run''s duration is ' || l.r.duration_s || ' s'
  END AS reason,
  l.r.total_output_tokens,
  l.r.duration_s,
  l.r.source_format
FROM (SELECT DISTINCT trace FROM metric_scope) AS t
LEFT JOIN last_run AS l USING (trace)
