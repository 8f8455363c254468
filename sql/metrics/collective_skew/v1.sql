-- metric: collective_skew
-- version: 1
-- unit: s
-- grain: trace
-- category: collectives
-- polarity: lower
-- summary: mean
-- description: Start skew of each collective across ranks: latest start - earliest start of its kernels on the ranks that ran it, in seconds.
-- needs: two or more ranks, communication kernels
-- applies_if: ranks >= 2 | single rank
-- columns:
--   match_id        the cross-rank key of the collective (collectives.match_id)
--   coll_type       the collective type
--   ranks_seen      ranks that ran it
--   group_size      ranks in its group
--   end_skew_s      latest end - earliest end across the ranks, s
--   straggler_rank  the rank that started last (ties: the lowest)
--   min_dur_s       the shortest instance: the collective's own latency once every rank
--                     arrived, s
--   bytes           its message bytes
--   first_start_ns  the earliest start across the ranks, ns
-- One row per collective (trace, match_id, coll_type); `match_id` pairs the
-- instances of one collective on different ranks: process group + Seq when the
-- kernels carry Seq, else the rank-local ordinal within (process group or
-- stream, collective type, and bytes for the types whose message is the same on
-- every rank: all_reduce, all_gather, reduce_scatter, broadcast, reduce). A
-- collective missing on one rank then shifts only the later matches of its own
-- key; see the `collectives` view for that limitation. Details: end_skew_s
-- (latest end - earliest end), ranks_seen, group_size, straggler_rank (the
-- latest starter, ties to the lowest rank), min_dur_s (the shortest instance:
-- the collective's latency once all ranks arrived, TraceLens' comm_latency).
-- A collective seen on one rank only has no skew (value NULL, with a reason);
-- a single-rank trace gets one not-applicable row. Times are each rank's own
-- clock (epoch ns); no cross-host clock alignment is attempted.
-- The summary for `python -m cclq.main` is the mean over collectives.
WITH scope_ranks AS (
  SELECT trace, count(DISTINCT rank) AS n_ranks
  FROM metric_scope
  GROUP BY trace
),
matches AS (
  SELECT * FROM collective_matches(metric_scope)
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
LEFT JOIN matches AS m ON m.trace = s.trace AND s.n_ranks >= 2
