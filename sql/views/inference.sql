-- Inference latency from the engine iterations of a trace (time to first token, time
-- per output token), per rank: the building blocks of the ttft and tpot metrics, which
-- add the card's phase check and, from version 2, the benchmark's own numbers.
-- requires: steps

-- One row per (trace, rank) with engine iterations: the iteration that gives its time
-- to first token. Where the trace records each iteration's phase (vLLM's
-- execute_context_<prefill>(..)_generation_<decode>(..), SGLang's forward_extend /
-- forward_decode frames), the first iteration that prefills (phase prefill or mixed);
-- where none does, the first iteration (CCL-Bench's rule). `basis` says which;
-- `ttft_ns` is NULL when phases are recorded but no iteration prefills.
CREATE OR REPLACE VIEW ttft_per_rank AS
WITH iterations AS (
  SELECT * FROM engine_iterations_with(2)
),
per_rank AS (
  SELECT
    trace,
    rank,
    count(*) AS iterations,
    count(phase) AS with_phase,
    min(iteration) FILTER (WHERE phase IN ('prefill', 'mixed')) AS first_prefill
  FROM iterations
  GROUP BY ALL
),
picked AS (
  SELECT
    p.trace, p.rank, p.iterations, p.with_phase,
    CASE WHEN p.with_phase > 0 THEN p.first_prefill ELSE 1 END AS iteration,
    CASE WHEN p.with_phase > 0 THEN 'first prefill iteration' ELSE 'first iteration (phase not recorded)' END AS basis
  FROM per_rank AS p
)
SELECT
  p.trace, p.rank, i.dur_ns AS ttft_ns, p.basis, i.iteration, i.source, i.phase, i.context_tokens, p.iterations
FROM picked AS p
LEFT JOIN iterations AS i ON i.trace = p.trace AND i.rank = p.rank AND i.iteration = p.iteration;

-- One row per (trace, rank) with engine iterations: the mean duration of its decode
-- iterations. A decode iteration gives every running sequence one token. Where phases
-- are recorded: the decode-only iterations (mixed ones also prefill: not one token's
-- time); where none is: the iterations after the first (taken as the prefill),
-- without the last when there are more than two (CCL-Bench's durations[1:-1], or [1:]
-- for two). `decode_ns` is NULL when there is no such iteration.
CREATE OR REPLACE VIEW tpot_per_rank AS
WITH numbered AS (
  SELECT
    *,
    count(*) OVER (PARTITION BY trace, rank) AS n,
    count(phase) OVER (PARTITION BY trace, rank) AS with_phase
  FROM engine_iterations_with(2)
),
decode AS (
  SELECT
    trace,
    rank,
    any_value(with_phase > 0) AS phased,
    avg(dur_ns) FILTER (WHERE phase = 'decode') AS phased_ns,
    count(*) FILTER (WHERE phase = 'decode') AS phased_count,
    avg(dur_ns) FILTER (WHERE iteration > 1 AND (n <= 2 OR iteration < n)) AS unphased_ns,
    count(*) FILTER (WHERE iteration > 1 AND (n <= 2 OR iteration < n)) AS unphased_count,
    max(n) AS iterations,
    any_value(source) AS source
  FROM numbered
  GROUP BY ALL
)
SELECT
  trace,
  rank,
  CASE WHEN phased THEN phased_ns ELSE unphased_ns END AS decode_ns,
  CASE WHEN phased THEN phased_count ELSE unphased_count END AS decode_iterations,
  CASE WHEN phased THEN 'decode iterations' ELSE 'iterations after the first (phase not recorded)' END AS basis,
  iterations,
  source
FROM decode;

-- The latest serving benchmark's latency numbers of each trace, from its result files
-- (vLLM bench serve / SGLang bench_serving: the `results` table), in seconds: median
-- TTFT, TPOT and ITL. The last run (JSONL line) of the last file wins.
CREATE OR REPLACE VIEW benchmark_latencies AS
SELECT
  trace,
  arg_max(value, (file_id, run)) FILTER (WHERE metric = 'median_ttft_ms') / 1e3 AS median_ttft_s,
  arg_max(value, (file_id, run)) FILTER (WHERE metric = 'median_tpot_ms') / 1e3 AS median_tpot_s,
  arg_max(value, (file_id, run)) FILTER (WHERE metric = 'median_itl_ms') / 1e3 AS median_itl_s,
  any_value(source_format) AS source_format
FROM results
WHERE item IS NULL AND metric IN ('median_ttft_ms', 'median_tpot_ms', 'median_itl_ms')
GROUP BY trace;
