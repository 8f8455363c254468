-- The rows of the metric straggler_rank (sql/metrics/straggler_rank/v*.sql, whose headers document
-- them), ONE body for its versions: they differ only in the kernel_class_rules version
-- (`rules_version`) of the collectives they read (version 1: what the plain views were
-- when v1 was released; version 2: DeepEP's kernels are collectives too). `scope` is
-- the (trace, rank) relation to measure (the metric passes `metric_scope`). A released
-- version's rows never change: this body is frozen with the metric files
-- (sql/metrics/CHECKSUMS).
-- requires: collectives
CREATE OR REPLACE MACRO straggler_rank_rows(rules_version, scope) AS TABLE
WITH scope_ranks AS (
  SELECT trace, count(DISTINCT rank) AS n_ranks
  FROM query_table(scope)
  GROUP BY trace
),
-- Every collective of the scope, matched across ranks, computed once: it gives the
-- matches of two or more ranks and says whether the trace has any collective at all.
all_matches AS MATERIALIZED (
  SELECT trace, straggler_rank, start_skew_ns, ranks_seen
  FROM collective_matches_with(rules_version, scope)
),
matched AS (
  SELECT trace, straggler_rank, start_skew_ns
  FROM all_matches
  WHERE ranks_seen >= 2
),
per_rank AS (
  SELECT trace, straggler_rank AS rank, count(*) AS late_count, sum(start_skew_ns) AS late_skew_ns
  FROM matched
  GROUP BY ALL
),
ranked AS (
  SELECT
    *,
    row_number() OVER (PARTITION BY trace ORDER BY late_count DESC, rank) AS place,
    count(*) OVER (PARTITION BY trace, late_count) AS same_count
  FROM per_rank
),
totals AS (
  SELECT trace, count(*) AS matched_collectives FROM matched GROUP BY trace
),
comm_seen AS (  -- a collective in the scope is a match of at least its own rank
  SELECT trace, count(*) AS comm_matches
  FROM all_matches
  GROUP BY trace
)
SELECT
  s.trace,
  CASE WHEN s.n_ranks >= 2 THEN r.rank END AS value,
  CASE
    WHEN s.n_ranks < 2 THEN 'single rank'
    WHEN k.comm_matches IS NULL THEN 'no communication kernels'
    WHEN r.trace IS NULL THEN 'no collective matched across two or more ranks'
  END AS reason,
  r.late_count,
  t.matched_collectives,
  r.late_count / t.matched_collectives AS share,
  r.same_count AS tied_ranks,
  r.late_skew_ns / 1e9 AS late_skew_s
FROM scope_ranks AS s
LEFT JOIN ranked AS r ON r.trace = s.trace AND r.place = 1 AND s.n_ranks >= 2
LEFT JOIN totals AS t ON t.trace = s.trace
LEFT JOIN comm_seen AS k ON k.trace = s.trace;
