-- metric: mfu
-- version: 1
-- unit: ratio
-- ccl_bench_unit: %
-- grain: trace
-- category: compute
-- family: efficiency
-- see_also: achieved_flops_from_trace_json, total_model_flops_from_args
-- polarity: higher
-- leaderboard: model_execution
-- summary: value
-- ccl_bench_trace_types: json_tpu, json
-- description: Model FLOPs utilisation: the model FLOPs per second the measured steps imply (from the card's model_arch, batch and sequence length) over the peak FLOP/s of the card's devices at its precision, 0..1.
-- needs: card: phase, model_arch (num_params or num_params_active, num_layers, num_heads, head_dim), seq_len, hardware model and precision with a known peak, total_count; training: batch_size and steps; inference: vLLM engine iterations with token counts
-- params: num_params = card.num_params, num_params_active = card.num_params_active, num_params_embedding = card.num_params_embedding default 0, num_layers = card.num_layers, num_heads = card.num_heads, head_dim = card.head_dim, batch_size = card.batch_size, seq_len = card.seq_len, total_count = card.total_count
-- columns:
--   mode               training | inference, from the card's phase
--   flops_per_token    model FLOPs per token from the card's model architecture
--   tokens_per_s       tokens per second (training: batch x seq_len / step time; inference:
--                        engine iterations)
--   step_s             training: the mean inner step time, s
--   step_source        training: the record the steps come from
--   engine_iterations  inference: engine iterations with token counts
--   peak_flops         the device's dense peak FLOP/s at the card's precision
--   total_count        devices of the workload (the card's total_count)
--   hardware_model     the card's hardware model
--   precision          the card's precision
-- Definition (PaLM's model FLOPs, the formula CCL-Bench uses): with N =
-- num_params_active (MoE: the parameters a token runs through), else
-- num_params; N_emb = num_params_embedding (0 when the card omits it); L, Q, H =
-- layers, heads, head dim; S = seq_len:
--   training  FLOP/token = 6 (N - N_emb) + 12 L Q H S (forward and backward,
--             attention included); tokens per step = batch_size x seq_len (the
--             card's global batch); step time = the mean over ranks of each
--             rank's inner-step mean (avg_step_time v2: `steps_with(2)`, first
--             and last dropped when there are more than two; ProfilerStep#N or
--             XLA steps);
--             achieved = FLOP/token x batch_size x seq_len / step time.
--   inference FLOP/token = 2 (N - N_emb) + 4 L Q H S (forward only); tokens =
--             what vLLM's execute_context_<n>(<tokens>)_generation_<m>(<tokens>)
--             annotations say each engine iteration processed (prompt tokens of
--             prefills plus one per decoding sequence), idle iterations left
--             out; achieved = FLOP/token x Σ tokens / Σ iteration time per rank,
--             averaged over ranks.
-- value = achieved / (peak FLOP/s per device x total_count); peak from
-- `device_peak_flops` (sql/views/hardware.sql: dense vendor figures per device
-- model and precision, with their sources). `phase` is the card's; the
-- details give every input used.
-- Not applicable, with the first missing input named: no card phase; no
-- model_arch; no seq_len (or batch_size for training); no hardware model,
-- precision, or no peak for that pair; no total_count; no steps (training) or
-- no engine iterations with token counts (inference).
-- Differs from CCL-Bench (tools/mfu): CCL-Bench reports percent; silently takes
-- batch_size, seq_len and total_count as 1 when the card omits them (a wrong
-- number instead of none); knows three devices (a100 312 T, h100 989 T, tpu_v6e
-- 918 T, BF16 whatever the card's precision); for inference multiplies
-- batch_size x seq_len tokens by the step time of a decode iteration, which
-- processes one token per sequence, overstating decode MFU by the sequence
-- length; and on XLA divides Σ model_flops arguments by the time ops with
-- model_flops ran, not by the step time. Here one formula over the `steps` of
-- any format (XLA included), the card's precision, and tokens as the engine
-- recorded them.
WITH card AS (
  SELECT
    p.*,
    coalesce(p.num_params_active, p.num_params) AS n_params,
    lower(c.phase) AS phase,
    hardware_model_key(c.hardware_model) AS hardware_model,
    precision_key(c.precision) AS precision,
    CASE
      WHEN lower(c.phase) = 'training' THEN 'training'
      WHEN lower(c.phase) IN ('inference', 'serving') THEN 'inference'
    END AS mode
  FROM metric_params AS p
  LEFT JOIN cards AS c USING (trace)
  SEMI JOIN (SELECT DISTINCT trace FROM metric_scope) AS s USING (trace)
),
numbered AS (
  SELECT
    trace, rank, dur_ns, source,
    row_number() OVER (PARTITION BY trace, rank ORDER BY step) AS i,
    count(*) OVER (PARTITION BY trace, rank) AS n
  FROM steps_with(2)
  SEMI JOIN metric_scope USING (trace, rank)
),
step_time AS (
  SELECT trace, avg(mean_ns) AS step_ns, count(*) AS ranks, string_agg(DISTINCT source, ',') AS step_source
  FROM (
    SELECT trace, rank, avg(dur_ns) AS mean_ns, any_value(source) AS source
    FROM numbered
    WHERE is_inner_step(i, n)
    GROUP BY ALL
  )
  GROUP BY trace
),
engine_tokens AS (
  SELECT trace, avg(tokens / ns) AS tokens_per_ns, count(*) AS ranks, sum(iterations) AS iterations
  FROM (
    SELECT
      trace, rank,
      sum(coalesce(context_tokens, 0) + coalesce(generation_tokens, 0)) AS tokens,
      sum(dur_ns) AS ns,
      count(*) AS iterations
    FROM engine_iterations_with(2)
    SEMI JOIN metric_scope USING (trace, rank)
    WHERE phase IN ('prefill', 'decode', 'mixed') AND context_tokens IS NOT NULL
    GROUP BY ALL
  )
  WHERE ns > 0
  GROUP BY trace
),
flops AS (
  SELECT
    c.*,
    f.peak_flops,
    CASE c.mode
      WHEN 'training' THEN 6 * (c.n_params - c.num_params_embedding)
                           + 12 * c.num_layers * c.num_heads * c.head_dim * c.seq_len
      WHEN 'inference' THEN 2 * (c.n_params - c.num_params_embedding)
                            + 4 * c.num_layers * c.num_heads * c.head_dim * c.seq_len
    END AS flops_per_token,
    CASE c.mode
      WHEN 'training' THEN c.batch_size * c.seq_len / (t.step_ns / 1e9)
      WHEN 'inference' THEN e.tokens_per_ns * 1e9
    END AS tokens_per_s,
    t.step_ns,
    t.step_source,
    e.iterations
  FROM card AS c
  LEFT JOIN device_peak_flops AS f USING (hardware_model, precision)
  LEFT JOIN step_time AS t USING (trace)
  LEFT JOIN engine_tokens AS e USING (trace)
)
SELECT
  trace,
  CASE WHEN total_count > 0 THEN flops_per_token * tokens_per_s / (peak_flops * total_count) END AS value,
  CASE
    WHEN phase IS NULL THEN 'the card gives no phase (training or inference)'
    WHEN mode IS NULL THEN 'the card''s phase ' || phase || ' is neither training nor inference'
    WHEN n_params IS NULL OR num_layers IS NULL OR num_heads IS NULL OR head_dim IS NULL
      THEN 'the card''s model_arch lacks num_params, num_layers, num_heads or head_dim'
    WHEN seq_len IS NULL THEN 'the card gives no seq_len'
    WHEN mode = 'training' AND batch_size IS NULL THEN 'the card gives no batch_size'
    WHEN hardware_model IS NULL OR precision IS NULL THEN 'the card gives no hardware model or precision'
    WHEN peak_flops IS NULL THEN 'no peak FLOP/s known for ' || hardware_model || ' at ' || precision
    WHEN total_count IS NULL THEN 'the card gives no total_count'
    WHEN total_count <= 0 THEN 'the card''s total_count is not above 0: no devices to divide by'
    WHEN mode = 'training' AND step_ns IS NULL THEN 'no steps (no ProfilerStep#N annotations, no XLA steps)'
    WHEN mode = 'training' AND step_ns = 0 THEN 'steps have zero duration'
    WHEN mode = 'inference' AND tokens_per_s IS NULL
      THEN 'no engine iterations with token counts (vLLM execute_context_<n>(<tokens>) annotations)'
  END AS reason,
  mode,
  flops_per_token,
  tokens_per_s,
  step_ns / 1e9 AS step_s,
  step_source,
  iterations AS engine_iterations,
  peak_flops,
  total_count,
  hardware_model,
  precision
FROM flops
