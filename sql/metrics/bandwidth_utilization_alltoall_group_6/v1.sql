-- metric: bandwidth_utilization_alltoall_group_6
-- version: 1
-- unit: ratio
-- grain: trace
-- category: communication
-- polarity: higher
-- leaderboard: communication
-- summary: value
-- description: Median bus-bandwidth utilisation of AllToAll collectives, busbw / the card's link bandwidth (scale-up within a node, scale-out across nodes), over every rank's instances, 0..1.
-- needs: all_to_all kernels with a known message and group size; the card's network_topo.bandwidth_gbps and count_per_node (or Process Group Ranks)
-- params: none
-- Definition: per collective instance (`collective_links_with(2)`,
-- sql/views/hardware.sql, over the `collectives` view with kernel_class_rules
-- v2): busbw = bytes / kernel duration x (n-1)/n (nccl-tests; bytes = the
-- all_to_all's send volume on the rank; n = the group size), link = scale-up when every rank of the group is
-- on one node (node = rank // count_per_node, from the kernel's Process Group
-- Ranks, else group size > count_per_node means scale-out, else total_count <=
-- count_per_node means scale-up), utilisation = busbw / the card's bandwidth
-- for that link (bandwidth_gbps[1] scale-up, [0] scale-out, Gbit/s / 8).
-- value = the median utilisation over the instances of every rank in scope
-- (the two links pooled: each instance is already relative to its own link);
-- details: the median busbw in GB/s, instance counts per link, and how many
-- instances were left out for lack of a size (`unsized`) or a placement
-- (`unplaced`). The kernel time includes waiting for late peers, so a skewed
-- collective reads as a poorly used link (see collective_skew); above 1 means
-- the card's bandwidth is lower than what the hardware delivered.
-- Summary: the single trace value.
-- DeepEP's dispatch/combine kernels (all_to_all-like by kernel_class_rules v2)
-- carry no message size and are left out; `unsized` counts them.
-- Differs from CCL-Bench (bandwidth_utilization_*_group_6): CCL-Bench prints the
-- median "effective bandwidth" in GiB/s (2^30, labelled GB/s) of the first
-- rank file that has such kernels, sized by `In msg nelems` for every type (an
-- all_gather's per-rank input: n times too small) and skipping kernels without
-- collective arguments; some versions divide by the card's link bandwidth
-- (defaults 600 GB/s GPU / 800 TPU when the card is silent). Here: a ratio of the
-- card's link bandwidth (NULL with a reason when the card lacks it, never a
-- default), GB = 1e9 B, nccl-tests' sizes, every rank pooled; XLA profiles are
-- not covered (their collectives carry no group placement; see
-- avg_comm_bandwidth_GBps).
WITH instances AS (
  SELECT *
  FROM collective_links_with(2)
  SEMI JOIN metric_scope USING (trace, rank)
  WHERE coll_type IN ('all_to_all')
),
usable AS (
  SELECT *, busbw_gbps / link_gbs AS utilisation
  FROM instances
  WHERE busbw_gbps IS NOT NULL AND link_gbs > 0
),
per_trace AS (
  SELECT
    i.trace,
    count(*) AS collectives,
    count(*) FILTER (WHERE i.busbw_gbps IS NULL) AS unsized,
    count(*) FILTER (WHERE i.busbw_gbps IS NOT NULL AND i.link IS NULL) AS unplaced,
    count(*) FILTER (WHERE i.busbw_gbps IS NOT NULL AND i.link IS NOT NULL AND i.link_gbs IS NULL) AS no_link_bandwidth,
    any_value(i.link) FILTER (WHERE i.busbw_gbps IS NOT NULL AND i.link IS NOT NULL AND i.link_gbs IS NULL)
      AS link_without_bandwidth,
    min(i.placement_reason) FILTER (WHERE i.busbw_gbps IS NOT NULL AND i.link IS NULL) AS placement_reason
  FROM instances AS i
  GROUP BY i.trace
),
measured AS (
  SELECT
    trace,
    median(utilisation) AS utilisation,
    median(busbw_gbps) AS median_busbw_gbps,
    count(*) FILTER (WHERE link = 'scale_up') AS scale_up_collectives,
    count(*) FILTER (WHERE link = 'scale_out') AS scale_out_collectives,
    count(DISTINCT rank) AS ranks
  FROM usable
  GROUP BY trace
)
SELECT
  t.trace,
  u.utilisation AS value,
  CASE
    WHEN u.trace IS NOT NULL THEN NULL
    WHEN p.trace IS NULL THEN 'no all_to_all collectives'
    WHEN p.unsized = p.collectives THEN 'no all_to_all collective has a known message size and group size'
    WHEN p.no_link_bandwidth > 0
      THEN 'the card gives no ' || replace(p.link_without_bandwidth, '_', '-') || ' bandwidth (network_topo.bandwidth_gbps['
           || CASE p.link_without_bandwidth WHEN 'scale_up' THEN '1' ELSE '0' END || '])'
    ELSE 'group placement unknown: ' || p.placement_reason
  END AS reason,
  u.median_busbw_gbps,
  u.scale_up_collectives,
  u.scale_out_collectives,
  u.ranks,
  p.unsized,
  p.unplaced
FROM (SELECT DISTINCT trace FROM metric_scope) AS t
LEFT JOIN measured AS u USING (trace)
LEFT JOIN per_trace AS p USING (trace)
