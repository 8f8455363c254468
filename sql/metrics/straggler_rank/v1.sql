-- metric: straggler_rank
-- version: 1
-- unit: rank
-- grain: trace
-- category: collectives
-- polarity: neutral
-- summary: value
-- description: The rank that starts matched collectives last most often (the latest starter of the most collectives seen on two or more ranks).
-- needs: two or more ranks, communication kernels matched across ranks
-- applies_if: ranks >= 2 | single rank
-- columns:
--   late_count           matched collectives the rank started last
--   matched_collectives  collectives matched across two or more ranks
--   share                late_count / matched_collectives
--   tied_ranks           ranks sharing the top late_count
--   late_skew_s          summed start skew of the collectives it was last in, s
-- A collective counts when it is seen on at least two ranks (see the
-- `collective_matches` macro and collective_skew); its latest starter is the rank
-- whose kernel started last (ties to the lowest rank). value = the rank that is
-- latest starter most often; ties between ranks go to the lowest rank and
-- `tied_ranks` says how many ranks share the top count. Details: late_count,
-- matched_collectives, share = late_count / matched_collectives, and
-- late_skew_s = the total start skew of the collectives it was last in (the
-- time the others waited for it, at most). Without Seq the matching is by
-- order within (group, type, size), so a rank that lacks collectives of one key
-- (a sampled or cut trace) can pair instances of different iterations.
-- Differs from HTA's get_potential_stragglers, which matches nothing: per
-- profiler step it takes the last long ncclKernel on the (stream, kernel name)
-- whose duration varies most across ranks and flags the ranks that start it
-- latest; both name the same rank on HTA's trace_filter test data.
WITH scope_ranks AS (
  SELECT trace, count(DISTINCT rank) AS n_ranks
  FROM metric_scope
  GROUP BY trace
),
-- Every collective of the scope, matched across ranks, computed once: it gives the
-- matches of two or more ranks and says whether the trace has any collective at all.
all_matches AS MATERIALIZED (
  SELECT trace, straggler_rank, start_skew_ns, ranks_seen
  FROM collective_matches(metric_scope)
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
LEFT JOIN comm_seen AS k ON k.trace = s.trace
