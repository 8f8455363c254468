-- What the workload card's hardware can do: peak FLOP/s per device model and
-- precision (for mfu), and the link each collective runs over (for the bandwidth
-- metrics): scale-up within a node, scale-out between nodes.
-- requires: collectives, catalog

-- Dense peak FLOP/s of one device (no 2:4 sparsity), by the card's
-- `hardware.xpu_spec.model` and `workload.model.precision` (keys after
-- `hardware_model_key` / `precision_key`). Sources, vendor data sheets:
--   NVIDIA V100 SXM2 (V100 data sheet, 2020): FP16 tensor 125 T, FP32 15.7 T.
--   NVIDIA A100 SXM (A100 data sheet, 2021): BF16/FP16 312 T, TF32 156 T,
--     FP32 19.5 T, INT8 624 T.
--   NVIDIA H100 SXM (H100 data sheet, 2023; its tensor figures are with
--     sparsity, halved here): BF16/FP16 989.5 T, FP8 1979 T, TF32 494.5 T,
--     FP32 67 T. H200 SXM (H200 data sheet, 2024): the same compute.
--   NVIDIA B200 (HGX B200 data sheet, 2024, per GPU, sparse figures halved):
--     BF16/FP16 2.25 P, FP8 4.5 P, TF32 1.1 P.
--   AMD Instinct MI300X (AMD product page): BF16/FP16 1307.4 T, FP8 2614.9 T,
--     TF32 653.7 T, FP32 (matrix) 163.4 T. MI250X: BF16/FP16 383 T, FP32
--     (matrix) 95.7 T. MI250: BF16/FP16 362.1 T.
--   Google Cloud TPU (system architecture pages, per chip): v4 BF16 275 T;
--     v5e BF16 197 T, INT8 394 T; v5p BF16 459 T; v6e (Trillium) BF16 918 T,
--     INT8 1836 T.
-- fp32 means plain FP32 math (PyTorch's default without TF32); a run that
-- enables TF32 should say precision tf32 on its card.
CREATE OR REPLACE VIEW device_peak_flops AS
SELECT * FROM (VALUES
  ('nvidia_v100', 'fp16', 125e12), ('nvidia_v100', 'fp32', 15.7e12),
  ('nvidia_a100', 'bf16', 312e12), ('nvidia_a100', 'fp16', 312e12), ('nvidia_a100', 'tf32', 156e12),
  ('nvidia_a100', 'fp32', 19.5e12), ('nvidia_a100', 'int8', 624e12),
  ('nvidia_h100', 'bf16', 989.5e12), ('nvidia_h100', 'fp16', 989.5e12), ('nvidia_h100', 'fp8', 1979e12),
  ('nvidia_h100', 'tf32', 494.5e12), ('nvidia_h100', 'fp32', 67e12),
  ('nvidia_h200', 'bf16', 989.5e12), ('nvidia_h200', 'fp16', 989.5e12), ('nvidia_h200', 'fp8', 1979e12),
  ('nvidia_h200', 'tf32', 494.5e12), ('nvidia_h200', 'fp32', 67e12),
  ('nvidia_b200', 'bf16', 2.25e15), ('nvidia_b200', 'fp16', 2.25e15), ('nvidia_b200', 'fp8', 4.5e15),
  ('nvidia_b200', 'tf32', 1.1e15),
  ('amd_mi300x', 'bf16', 1307.4e12), ('amd_mi300x', 'fp16', 1307.4e12), ('amd_mi300x', 'fp8', 2614.9e12),
  ('amd_mi300x', 'tf32', 653.7e12), ('amd_mi300x', 'fp32', 163.4e12),
  ('amd_mi250x', 'bf16', 383e12), ('amd_mi250x', 'fp16', 383e12), ('amd_mi250x', 'fp32', 95.7e12),
  ('amd_mi250', 'bf16', 362.1e12), ('amd_mi250', 'fp16', 362.1e12),
  ('tpu_v4', 'bf16', 275e12),
  ('tpu_v5e', 'bf16', 197e12), ('tpu_v5e', 'int8', 394e12),
  ('tpu_v5p', 'bf16', 459e12),
  ('tpu_v6e', 'bf16', 918e12), ('tpu_v6e', 'int8', 1836e12)
) AS t(hardware_model, precision, peak_flops);

-- 'NVIDIA-H100' -> 'nvidia_h100', 'TPU v6e' -> 'tpu_v6e'.
CREATE OR REPLACE MACRO hardware_model_key(m) AS
regexp_replace(lower(trim(m)), '[^a-z0-9]+', '_', 'g');

-- 'bfloat16' -> 'bf16', 'float16' / 'half' -> 'fp16', 'float32' -> 'fp32', ...
CREATE OR REPLACE MACRO precision_key(p) AS
CASE regexp_replace(lower(trim(p)), '[^a-z0-9]', '', 'g')
  WHEN 'bfloat16' THEN 'bf16' WHEN 'bf16' THEN 'bf16'
  WHEN 'float16' THEN 'fp16' WHEN 'half' THEN 'fp16' WHEN 'fp16' THEN 'fp16'
  WHEN 'float32' THEN 'fp32' WHEN 'float' THEN 'fp32' WHEN 'fp32' THEN 'fp32'
  WHEN 'tf32' THEN 'tf32' WHEN 'tensorfloat32' THEN 'tf32'
  WHEN 'fp8' THEN 'fp8' WHEN 'float8' THEN 'fp8' WHEN 'int8' THEN 'int8'
  ELSE regexp_replace(lower(trim(p)), '[^a-z0-9]', '', 'g')
END;

-- Every collective of collectives_with(`rules_version`) with the link it runs
-- over, from the trace's workload card:
--   spans_nodes   whether the collective's group has ranks on two or more nodes
--                 (node = rank // count_per_node), decided by the first of:
--                   1. the kernel's `Process Group Ranks` list (a list PyTorch
--                      cut with '...' decides only when its listed part already
--                      spans nodes);
--                   2. a group larger than count_per_node must span nodes;
--                   3. a trace whose devices fit one node (total_count <=
--                      count_per_node) cannot span nodes;
--                 NULL when none of these says (placement_source says which did,
--                 placement_reason why none did).
--   link          scale_up (one node) | scale_out (spans nodes) | NULL
--   link_gbs      the card's bandwidth for that link in GB/s: network_topo
--                 bandwidth_gbps[1] (scale-up) or [0] (scale-out), in Gbit/s, / 8
-- The group's rank numbers are taken as global ranks laid out node by node
-- (ranks 0..count_per_node-1 on node 0, ...), the launcher's default.
-- batch: shared
CREATE OR REPLACE MACRO collective_links_with(rules_version) AS TABLE
WITH placed AS (
  SELECT
    c.*,
    k.count_per_node,
    k.total_count,
    k.bandwidth_scaleup_gbps,
    k.bandwidth_scaleout_gbps,
    -- the listed ranks; a truncated list keeps the part before '...'
    TRY_CAST(regexp_replace(regexp_replace(c.pg_ranks, ',?\s*\.\.\.\s*', '', 'g'), ',\s*\]', ']') AS BIGINT[])
      AS listed_ranks,
    contains(coalesce(c.pg_ranks, ''), '...') AS truncated
  FROM collectives_with(rules_version) AS c
  LEFT JOIN cards AS k USING (trace)
),
spanned AS (
  SELECT
    *,
    CASE
      WHEN count_per_node > 0 AND len(listed_ranks) > 0
        THEN len(list_distinct(list_transform(listed_ranks, lambda r: r // count_per_node))) > 1
    END AS listed_spans
  FROM placed
),
decided AS (
  SELECT
    *,
    CASE
      WHEN listed_spans AND truncated THEN true
      WHEN listed_spans IS NOT NULL AND NOT truncated THEN listed_spans
      WHEN count_per_node > 0 AND group_size > count_per_node THEN true
      WHEN count_per_node > 0 AND total_count <= count_per_node THEN false
    END AS spans_nodes,
    CASE
      WHEN listed_spans AND truncated THEN 'Process Group Ranks (listed part)'
      WHEN listed_spans IS NOT NULL AND NOT truncated THEN 'Process Group Ranks'
      WHEN count_per_node > 0 AND group_size > count_per_node THEN 'group size > count_per_node'
      WHEN count_per_node > 0 AND total_count <= count_per_node THEN 'total_count <= count_per_node'
    END AS placement_source
  FROM spanned
)
SELECT
  * EXCLUDE (listed_ranks, truncated, listed_spans),
  CASE
    WHEN spans_nodes IS NOT NULL THEN NULL
    WHEN coalesce(count_per_node, 0) <= 0 THEN 'the card gives no count_per_node'
    WHEN listed_ranks IS NULL
      THEN 'no Process Group Ranks, and a group of ' || coalesce(group_size::VARCHAR, 'unknown size')
           || ' ranks may or may not span nodes of ' || count_per_node
    ELSE 'Process Group Ranks cut short (...) before they leave the first node'
  END AS placement_reason,
  CASE WHEN spans_nodes THEN 'scale_out' WHEN NOT spans_nodes THEN 'scale_up' END AS link,
  CASE WHEN spans_nodes THEN bandwidth_scaleout_gbps / 8 WHEN NOT spans_nodes THEN bandwidth_scaleup_gbps / 8 END
    AS link_gbs
FROM decided;

-- Bus-bandwidth utilisation of the collectives of `coll_types` (a list) over the
-- ranks of `scope` (pass `metric_scope` in a metric), one row per trace of the
-- scope: value = the median over every instance of busbw / the card's bandwidth
-- for the instance's link (collective_links_with(2)), with the instance counts
-- per link, the median busbw, and why there is no value when there is none
-- (no such collectives, none sized, the card lacks the link's bandwidth, or the
-- group's placement is unknown). The five bandwidth_utilization_*_group_6
-- metrics are this over their collective types.
CREATE OR REPLACE MACRO link_utilisation(scope, coll_types) AS TABLE
WITH instances AS (
  SELECT *
  FROM collective_links_with(2)
  SEMI JOIN query_table(scope) USING (trace, rank)
  WHERE list_contains(coll_types, coll_type)
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
    -- a bandwidth of 0 (or less) is no bandwidth: `usable` leaves those instances out too
    count(*) FILTER (WHERE i.busbw_gbps IS NOT NULL AND i.link IS NOT NULL AND NOT coalesce(i.link_gbs > 0, false))
      AS no_link_bandwidth,
    any_value(i.link) FILTER (WHERE i.busbw_gbps IS NOT NULL AND i.link IS NOT NULL
                                    AND NOT coalesce(i.link_gbs > 0, false))
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
    WHEN p.trace IS NULL THEN 'no ' || array_to_string(coll_types, ' / ') || ' collectives'
    WHEN p.unsized = p.collectives
      THEN 'no ' || array_to_string(coll_types, ' / ') || ' collective has a known message size and group size'
    WHEN p.no_link_bandwidth > 0
      THEN 'the card gives no ' || replace(p.link_without_bandwidth, '_', '-') || ' bandwidth (network_topo.bandwidth_gbps['
           || CASE p.link_without_bandwidth WHEN 'scale_up' THEN '1' ELSE '0' END || '] is missing or not above 0)'
    WHEN p.placement_reason IS NOT NULL THEN 'group placement unknown: ' || p.placement_reason
    ELSE 'no collective has both a known bus bandwidth and a link bandwidth from the card'
  END AS reason,
  u.median_busbw_gbps,
  u.scale_up_collectives,
  u.scale_out_collectives,
  u.ranks,
  p.unsized,
  p.unplaced
FROM (SELECT DISTINCT trace FROM query_table(scope)) AS t
LEFT JOIN measured AS u USING (trace)
LEFT JOIN per_trace AS p USING (trace);

-- Bus bandwidth of the collectives of `coll_types` (a list) over the ranks of
-- `scope`, one row per trace of the scope: value = the median busbw in GB/s
-- (1e9 B/s; collectives_with(2): bytes / kernel duration x nccl-tests' factor for
-- the type and group size) over every sized instance of every rank, with the
-- instance and rank counts, and why there is no value when there is none (no such
-- collectives, or none with a known size and group size). What CCL-Bench's
-- bandwidth_utilization_*_group_6 tools print, as version 2 of those metrics;
-- link_utilisation divides each instance by the card's link bandwidth instead.
CREATE OR REPLACE MACRO median_busbw(scope, coll_types) AS TABLE
WITH instances AS (
  SELECT trace, rank, busbw_gbps
  FROM collectives_with(2)
  SEMI JOIN query_table(scope) USING (trace, rank)
  WHERE list_contains(coll_types, coll_type)
),
measured AS (
  SELECT
    trace,
    median(busbw_gbps) AS median_busbw_gbps,
    count(busbw_gbps) AS sized,
    count(*) FILTER (WHERE busbw_gbps IS NULL) AS unsized,
    count(DISTINCT rank) FILTER (WHERE busbw_gbps IS NOT NULL) AS ranks
  FROM instances
  GROUP BY trace
)
SELECT
  t.trace,
  m.median_busbw_gbps AS value,
  CASE
    WHEN m.sized > 0 THEN NULL
    WHEN m.trace IS NULL THEN 'no ' || array_to_string(coll_types, ' / ') || ' collectives'
    ELSE 'no ' || array_to_string(coll_types, ' / ') || ' collective has a known message size and group size'
  END AS reason,
  coalesce(m.sized, 0) AS collectives,
  coalesce(m.ranks, 0) AS ranks,
  coalesce(m.unsized, 0) AS unsized
FROM (SELECT DISTINCT trace FROM query_table(scope)) AS t
LEFT JOIN measured AS m USING (trace);
