-- metric: hockney_beta_s_per_byte
-- version: 1
-- unit: s/byte
-- grain: trace
-- category: collectives
-- family: collectives
-- see_also: avg_comm_bandwidth_GBps, hockney_alpha_s, hockney_inverse_beta_Bps
-- polarity: lower
-- summary: value
-- description: Hockney inverse bandwidth beta of the ring all-reduce model T = 2(n-1)*alpha + 2(n-1)/n*S*beta, fitted by least squares over the all-reduce XLA ops, in seconds per byte.
-- needs: >= 5 sized and timed all-reduce XLA ops in >= 2 distinct message sizes; n_chips
-- applies_if: format xprof chrome | no XLA ops (not an XLA/xprof profile)
-- params: n_chips = card.total_count
-- columns:
--   n_chips         chips of the trace (the card's total_count)
--   samples         collective ops fitted (message size, time)
--   distinct_sizes  distinct message sizes among them
--   r2              the fit's coefficient of determination
-- Definition: the slope of the fit described in hockney_alpha_s (macro
-- xla_hockney_fit): x = S/n, y = T/(2(n-1)), beta = slope. Same as CCL-Bench
-- group 21 apart from the op set (device ops; async pairs start to done).
SELECT
  f.trace,
  f.beta_s_per_byte AS value,
  f.reason,
  f.n_chips,
  f.samples,
  f.distinct_sizes,
  f.r2
FROM xla_hockney_fit(metric_scope, metric_params) AS f
