-- metric: horovod_phase_share
-- version: 1
-- unit: ratio
-- grain: trace
-- category: communication
-- family: communication
-- see_also: horovod_tensor_comm_time, horovod_fused_tensors_per_cycle, communication_fraction
-- polarity: neutral
-- summary: value
-- description: Where Horovod's tensor operations spend their time, 0..1: value = the communication share (NCCL/MPI/Gloo/oneCCL collective phases) of all phase time; negotiation, wait, queue, fusion_copy and other shares as detail columns (the six sum to 1).
-- needs: a Horovod timeline (HOROVOD_TIMELINE)
-- applies_if: format horovod | no Horovod timeline
-- columns:
--   negotiation_share  share of tensor time in negotiation (first to last worker ready)
--   wait_share         share in WAIT_FOR_DATA / WAIT_FOR_OTHER_TENSOR_DATA (data stalls)
--   queue_share        share in QUEUE (waiting for the previous operation on the stream)
--   fusion_copy_share  share in MEMCPY_*_BUFFER / COPY_ALLGATHER_OUTPUT copies
--   other_share        share in other activities (INIT_FUSION_BUFFER, ALLOCATE_OUTPUT, ...)
--   phase_time_s       all phase time (the shares' denominator), s
-- Phase time is summed over tensors: the negotiation span of each tensor operation
-- (first worker ready .. last worker ready) and every activity inside the operation
-- (horovod_phases, which says how activity names map to the categories). Tensors
-- fused into one collective each carry its activity spans, so a fused collective
-- counts once per tensor: the shares say where a tensor's time goes, not where the
-- wall clock goes. Time of an operation not covered by any activity is not counted.
WITH per_trace AS (
  SELECT
    trace,
    sum(dur_ns) AS total_ns,
    sum(dur_ns) FILTER (WHERE category = 'communication') AS communication_ns,
    sum(dur_ns) FILTER (WHERE category = 'negotiation') AS negotiation_ns,
    sum(dur_ns) FILTER (WHERE category = 'wait') AS wait_ns,
    sum(dur_ns) FILTER (WHERE category = 'queue') AS queue_ns,
    sum(dur_ns) FILTER (WHERE category = 'fusion_copy') AS fusion_copy_ns,
    sum(dur_ns) FILTER (WHERE category = 'other') AS other_ns
  FROM horovod_phases
  WHERE trace IN (SELECT trace FROM metric_scope)
  GROUP BY trace
)
SELECT
  s.trace,
  coalesce(p.communication_ns, 0) / nullif(p.total_ns, 0) AS value,
  CASE WHEN p.trace IS NULL THEN 'no Horovod timeline' WHEN p.total_ns = 0 THEN 'phases of no duration' END AS reason,
  coalesce(p.negotiation_ns, 0) / nullif(p.total_ns, 0) AS negotiation_share,
  coalesce(p.wait_ns, 0) / nullif(p.total_ns, 0) AS wait_share,
  coalesce(p.queue_ns, 0) / nullif(p.total_ns, 0) AS queue_share,
  coalesce(p.fusion_copy_ns, 0) / nullif(p.total_ns, 0) AS fusion_copy_share,
  coalesce(p.other_ns, 0) / nullif(p.total_ns, 0) AS other_share,
  p.total_ns / 1e9 AS phase_time_s
FROM (SELECT DISTINCT trace FROM metric_scope) AS s
LEFT JOIN per_trace AS p USING (trace)
