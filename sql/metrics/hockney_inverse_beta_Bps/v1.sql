-- metric: hockney_inverse_beta_Bps
-- version: 1
-- unit: B/s
-- grain: trace
-- category: collectives
-- family: collectives
-- see_also: avg_comm_bandwidth_GBps, hockney_alpha_s, hockney_beta_s_per_byte
-- polarity: higher
-- summary: value
-- description: 1/beta of the Hockney ring all-reduce fit (the link bandwidth the model implies), in bytes per second.
-- needs: >= 5 sized and timed all-reduce XLA ops in >= 2 distinct message sizes; n_chips; a positive fitted beta
-- applies_if: format xprof chrome | no XLA ops (not an XLA/xprof profile)
-- params: n_chips = card.total_count
-- columns:
--   n_chips          chips of the trace (the card's total_count)
--   samples          collective ops fitted (message size, time)
--   distinct_sizes   distinct message sizes among them
--   beta_s_per_byte  the fitted time per byte, s/B
-- Definition: 1 / beta of the fit described in hockney_alpha_s (macro
-- xla_hockney_fit); not applicable when the fitted beta is <= 0 (time does not
-- grow with size), as in CCL-Bench group 21.
SELECT
  f.trace,
  CASE WHEN f.beta_s_per_byte > 0 THEN 1 / f.beta_s_per_byte END AS value,
  coalesce(f.reason, CASE WHEN f.beta_s_per_byte <= 0 THEN 'fitted beta <= 0: time does not grow with message size' END) AS reason,
  f.n_chips,
  f.samples,
  f.distinct_sizes,
  f.beta_s_per_byte
FROM xla_hockney_fit(metric_scope, metric_params) AS f
