-- Catalog views: one row per trace, built from the `files` table (one row per
-- ingested file) and the flattened workload cards in `cards`.

-- One row per trace (workload). Grain: trace.
-- `world_size` is the profiler's distributedInfo.world_size when any file has
-- it, else the card's hardware.xpu_spec.total_count, else the ranks seen.
CREATE OR REPLACE VIEW traces AS
WITH per_trace AS (
  SELECT
    trace,
    string_agg(DISTINCT format, ',' ORDER BY format) AS format,
    count(*) AS files,
    count(DISTINCT rank) AS ranks_seen,
    list(DISTINCT rank ORDER BY rank) AS ranks,
    max(world_size) AS profiler_world_size,
    min(ts_min_ns) AS start_ns,
    max(ts_max_ns) AS end_ns,
    sum(events_written) AS events,
    sum(events_dropped) AS events_dropped,
    sum(size_bytes) AS size_bytes
  FROM files
  GROUP BY trace
)
SELECT
  p.trace,
  p.format,
  coalesce(p.profiler_world_size, c.total_count, p.ranks_seen) AS world_size,
  p.ranks_seen,
  p.ranks,
  p.files,
  p.events,
  p.events_dropped,
  p.size_bytes,
  p.start_ns,
  p.end_ns,
  (p.end_ns - p.start_ns) / 1e9 AS span_s,
  c.* EXCLUDE (trace)
FROM per_trace AS p
LEFT JOIN cards AS c USING (trace);
