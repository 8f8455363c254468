-- metric: hockney_alpha_s
-- version: 1
-- unit: s
-- grain: trace
-- category: collectives
-- family: collectives
-- see_also: avg_comm_bandwidth_GBps, hockney_beta_s_per_byte, hockney_inverse_beta_Bps
-- polarity: lower
-- summary: value
-- description: Hockney latency alpha of the ring all-reduce model T = 2(n-1)*alpha + 2(n-1)/n*S*beta, fitted by least squares over the all-reduce XLA ops, in seconds.
-- needs: >= 5 sized and timed all-reduce XLA ops in >= 2 distinct message sizes; n_chips
-- applies_if: format xprof chrome | no XLA ops (not an XLA/xprof profile)
-- params: n_chips = card.total_count
-- columns:
--   n_chips         chips of the trace (the card's total_count)
--   samples         collective ops fitted (message size, time)
--   distinct_sizes  distinct message sizes among them
--   r2              the fit's coefficient of determination
-- Definition (macro xla_hockney_fit): samples = every all-reduce op (every
-- device) with message_bytes S > 0 and device time T > 0; with n = n_chips,
-- x = S/n and y = T/(2(n-1)); ordinary least squares with an intercept (DuckDB
-- regr_intercept / regr_slope); alpha = intercept. Same model, samples rule and
-- thresholds as CCL-Bench group 21 (sklearn LinearRegression); the samples
-- differ only through the op set (device ops; async pairs start to done). r2 is
-- the fit's coefficient of determination.
SELECT
  f.trace,
  f.alpha_s AS value,
  f.reason,
  f.n_chips,
  f.samples,
  f.distinct_sizes,
  f.r2
FROM xla_hockney_fit(metric_scope, metric_params) AS f
