-- The rows of the metric collective_skew (sql/metrics/collective_skew/v*.sql, whose headers document
-- them), ONE body for its versions: they differ only in the kernel_class_rules version
-- (`rules_version`) of the collectives they read (version 1: what the plain views were
-- when v1 was released; version 2: DeepEP's kernels are collectives too). `scope` is
-- the (trace, rank) relation to measure (the metric passes `metric_scope`). A released
-- version's rows never change: this body is frozen with the metric files
-- (sql/metrics/CHECKSUMS).
-- requires: collectives
CREATE OR REPLACE MACRO collective_skew_rows(rules_version, scope) AS TABLE
WITH scope_ranks AS (
  SELECT trace, count(DISTINCT rank) AS n_ranks
  FROM query_table(scope)
  GROUP BY trace
),
matches AS (
  SELECT * FROM collective_matches_with(rules_version, scope)
)
SELECT
  s.trace,
  CASE WHEN m.ranks_seen >= 2 THEN m.start_skew_ns / 1e9 END AS value,
  CASE
    WHEN s.n_ranks < 2 THEN 'single rank'
    WHEN m.trace IS NULL THEN 'no communication kernels'
    WHEN m.ranks_seen < 2 THEN 'seen on 1 rank only'
  END AS reason,
  m.match_id,
  m.coll_type,
  m.ranks_seen,
  m.group_size,
  CASE WHEN m.ranks_seen >= 2 THEN m.end_skew_ns / 1e9 END AS end_skew_s,
  CASE WHEN m.ranks_seen >= 2 THEN m.straggler_rank END AS straggler_rank,
  m.min_dur_ns / 1e9 AS min_dur_s,
  m.bytes,
  m.first_start_ns
FROM scope_ranks AS s
LEFT JOIN matches AS m ON m.trace = s.trace AND s.n_ranks >= 2;
