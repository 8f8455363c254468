-- What cclq.TraceAnalysis (HTA 0.5.0's API, cclq/api/hta.py) reads beyond the
-- hta_* metrics: HTA's trace frame of a rank (Trace.get_trace), the facts that
-- give its columns HTA's dtypes, and the rows of the analyses whose result is a
-- table per event (kernels with their user annotation, ATen op launch delays,
-- the communication kernels of the straggler analysis). Every view keeps HTA's
-- rows (hta_events) and says how it orders them.
-- requires: hta, hta_analyses

-- Per rank, the facts that decide the dtypes of HTA's trace frame: pandas'
-- to_numeric(downcast="integer") over the rows HTA loaded from the file
-- (before its ProfilerStep filter) picks the smallest int type holding each
-- integer column (cclq/api/hta_frames.py int_dtype), and the trace's time
-- origin (HTA aligns ts to the smallest ts of every rank's loaded rows).
-- columns:
--   index_min  smallest event index of a loaded row (HTA's `index` column), and so on for
--     index_max, stream_min, stream_max, correlation_min, correlation_max
--   index_correlation_min  smallest value of HTA's index_correlation: -1 for a row without
--     correlation, min(correlation, 0) for one without a partner, else the partner's index
--   index_correlation_max  largest such value
--   iteration_max  the largest ProfilerStep number among the loaded rows (iteration's
--     smallest value is taken as -1: some row is outside every step)
--   iteration_nan  whether a row is on stream 0 (HTA leaves its iteration NaN: float64)
--   origin_us  the trace's time origin (µs, the file's clock): HTA's Trace.min_ts
--   rounds_to_us  whether HTA rounds this file's times to whole µs (its ts column was float)
CREATE OR REPLACE VIEW hta_rank_dtypes AS
WITH loaded AS MATERIALIZED (
  SELECT trace, rank, file_id, event_idx, name, stream, correlation, is_gpu_side, ts_us
  FROM hta_loaded
),
paired AS (
  SELECT trace, rank, correlation
  FROM loaded
  WHERE correlation <> -1
  GROUP BY ALL
  HAVING bool_or(is_gpu_side) AND bool_or(NOT is_gpu_side)
),
per_row AS (
  SELECT
    l.*,
    CASE
      WHEN l.correlation = -1 THEN -1
      WHEN p.correlation IS NULL OR l.is_gpu_side IS NULL THEN least(l.correlation, 0)
    END AS unpaired_value,
    p.correlation IS NOT NULL AND l.is_gpu_side IS NOT NULL AS is_paired
  FROM loaded AS l
  LEFT JOIN paired AS p USING (trace, rank, correlation)
),
origin AS (
  SELECT trace, min(ts_us) AS origin_us FROM loaded GROUP BY trace
)
SELECT
  r.trace,
  r.rank,
  min(r.event_idx) AS index_min,
  max(r.event_idx) AS index_max,
  min(r.stream) AS stream_min,
  max(r.stream) AS stream_max,
  min(r.correlation) AS correlation_min,
  max(r.correlation) AS correlation_max,
  least(min(r.unpaired_value), min(r.event_idx) FILTER (WHERE r.is_paired)) AS index_correlation_min,
  greatest(max(r.unpaired_value), max(r.event_idx) FILTER (WHERE r.is_paired)) AS index_correlation_max,
  coalesce(max(TRY_CAST(regexp_extract(r.name, '^ProfilerStep\s*#\s*(\d+)', 1) AS BIGINT))
           FILTER (WHERE regexp_matches(r.name, '^ProfilerStep\s*#\s*\d+')), -1) AS iteration_max,
  bool_or(r.stream = 0) AS iteration_nan,
  any_value(o.origin_us) AS origin_us,
  any_value(c.rounds_to_us) AS rounds_to_us
FROM per_row AS r
JOIN origin AS o USING (trace)
JOIN hta_file_clock AS c ON c.file_id = r.file_id
GROUP BY r.trace, r.rank;

-- HTA's trace frame of each rank (Trace.get_trace(rank)): one row per row HTA
-- holds after loading (hta_events; a GPU row HTA holds twice, `copies`, is two
-- rows), with HTA's columns from the event and its args.
-- columns:
--   frame_pos  the row's position in HTA's frame (HTA's own row order: after its
--     ProfilerStep filter the kept GPU rows, then the CPU rows, each in file order)
--   frame_label  the frame's index label: the event index, except for the GPU rows
--     of a filtered rank, which HTA's merge numbers 0, 1, ... in frame order
--   index  the event's position in the file's traceEvents (HTA's `index`)
--   ts  HTA's ts aligned to the trace's origin (µs); end  ts + dur before the
--     alignment (HTA computes it when it parses, then aligns only ts)
--   bytes, external_id, wait_on_stream, wait_on_cuda_event_record_corr_id  the args, -1 when
--     absent; memory_bw_gbps  0.0 when absent
--   input_dims, input_type, input_strides  the args as JSON text, NULL when absent (HTA: "-1")
--   index_correlation  HTA's link to the partner row (hta_events.partner_idx)
--   iteration  HTA's ProfilerStep number of the row (hta_iterations)
--   (as in hta_events: trace, rank, cat, name, pid, tid, dur_us, stream, correlation, copies)
CREATE OR REPLACE VIEW hta_trace_frame AS
WITH copied AS (
  SELECT e.*, c.copy_no
  FROM hta_events AS e, range(e.copies) AS c(copy_no)
),
positioned AS (
  SELECT
    *,
    row_number() OVER (PARTITION BY trace, rank ORDER BY row_order, copy_no) - 1 AS frame_pos,
    -- the GPU rows of a filtered rank come out of a merge (row_order below 2^40)
    bool_or(row_order >= (1::BIGINT << 40)) OVER (PARTITION BY trace, rank) AS filtered
  FROM copied
)
SELECT
  p.trace,
  p.rank,
  p.frame_pos,
  CASE WHEN p.filtered AND p.row_order < (1::BIGINT << 40) THEN p.frame_pos ELSE p.event_idx END AS frame_label,
  p.event_idx AS "index",
  p.cat,
  p.name,
  p.pid,
  p.tid,
  p.ts_us - d.origin_us AS ts,
  p.dur_us AS dur,
  p.stream,
  p.correlation,
  coalesce(ev.bytes, -1) AS bytes,
  p.memory_bw_gbps,
  coalesce(TRY_CAST(json_extract(ev.args, '$.wait_on_stream') AS BIGINT), -1) AS wait_on_stream,
  coalesce(TRY_CAST(json_extract(ev.args, '$.wait_on_cuda_event_record_corr_id') AS BIGINT), -1)
    AS wait_on_cuda_event_record_corr_id,
  json_extract(ev.args, '$."Input Dims"') AS input_dims,
  json_extract(ev.args, '$."Input type"') AS input_type,
  json_extract(ev.args, '$."Input Strides"') AS input_strides,
  coalesce(ev.external_id, -1) AS external_id,
  p.partner_idx AS index_correlation,
  i.iteration,
  p.ts_us + p.dur_us AS "end",
  p.copies
FROM positioned AS p
JOIN hta_rank_dtypes AS d USING (trace, rank)
JOIN events AS ev ON ev.trace = p.trace AND ev.rank = p.rank AND ev.file_id = p.file_id AND ev.event_idx = p.event_idx
LEFT JOIN hta_iterations AS i ON i.trace = p.trace AND i.rank = p.rank AND i.event_idx = p.event_idx;
