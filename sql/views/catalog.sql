-- Catalog views: one row per trace, built from the `files` table (one row per
-- ingested file) and the flattened workload cards in `cards`.

-- Whether the session's files include any of `format` (files.format: kineto, xprof,
-- horovod, ...). A session sets the DuckDB variable snapshot_formats to its files'
-- formats (cclq.query.settings); a view of one format's records tests this first, so
-- that where no file has that format DuckDB plans the view as an empty result instead
-- of reading every event for none (a board over ../shared/traces read the events twice
-- for Horovod timelines it does not hold). Unset (DuckDB's own shell): true.
CREATE OR REPLACE MACRO snapshot_holds(format) AS
coalesce(list_contains(getvariable('snapshot_formats'), format), true);

-- One row per (trace, rank) the warehouse holds data of. A file holds one rank; an
-- Nsight Systems export of a whole node holds one per GPU (or MPI rank): `parts`
-- (one row per data file written for an input file) says which. Grain: rank.
CREATE OR REPLACE VIEW trace_ranks AS
SELECT DISTINCT trace, rank FROM parts;

-- Every rank an input file holds, with the file's facts (base time, device
-- properties, ...), for views that attach per-file facts to a rank's rows.
CREATE OR REPLACE VIEW file_ranks AS
SELECT f.*, p.rank AS data_rank
FROM files AS f
JOIN (SELECT DISTINCT file_id, rank FROM parts) AS p USING (file_id);

-- One row per trace (workload). Grain: trace.
-- `rank_source` lists how the files' ranks were found (a rank guessed by default is
-- `default`); `flag` says why the trace may not be one whole run, NULL when nothing
-- is known against it: `partial: N of M ranks` (fewer ranks than the world size: an
-- interrupted ingest, or files missing), `guessed ranks` (two or more files of which
-- some state no rank), `files start D days apart` (file clocks more than a day
-- apart: two runs in one folder, not one run).
-- `world_size` is the profiler's distributedInfo.world_size when any file has
-- it, else the card's hardware.xpu_spec.total_count, else the ranks seen. The
-- ranks a whole run has (for `partial`) are the profiler's world size, else the
-- card's devices, except in an xprof profile: one file per host holding all of its
-- devices, so there the card gives hosts only with count_per_node (total_count /
-- count_per_node, rounded up; cclq/query/partial.py, expected_ranks, says the same).
CREATE OR REPLACE VIEW traces AS
WITH per_trace AS (
  SELECT
    trace,
    string_agg(DISTINCT format, ',' ORDER BY format) AS format,
    count(*) AS files,
    max(world_size) AS profiler_world_size,
    min(ts_min_ns) AS start_ns,
    max(ts_max_ns) AS end_ns,
    sum(events_written) AS events,
    sum(events_dropped) AS events_dropped,
    sum(size_bytes) AS size_bytes,
    string_agg(DISTINCT rank_source, ',' ORDER BY rank_source) AS rank_source,
    count(*) FILTER (WHERE rank_source = 'default') AS guessed_files,
    max(ts_min_ns) - min(ts_min_ns) AS start_spread_ns
  FROM files
  GROUP BY trace
),
per_trace_ranks AS (
  SELECT trace, count(*) AS ranks_seen, list(rank ORDER BY rank) AS ranks
  FROM trace_ranks
  GROUP BY trace
)
SELECT
  p.trace,
  p.format,
  coalesce(p.profiler_world_size, c.total_count, r.ranks_seen) AS world_size,
  r.ranks_seen,
  r.ranks,
  p.files,
  p.events,
  p.events_dropped,
  p.size_bytes,
  p.start_ns,
  p.end_ns,
  (p.end_ns - p.start_ns) / 1e9 AS span_s,
  p.rank_source,
  nullif(concat_ws('; ',
    CASE WHEN r.ranks_seen < p.expected_ranks
      THEN format('partial: {} of {} ranks', r.ranks_seen, p.expected_ranks) END,
    CASE WHEN p.guessed_files > 0 AND p.files > 1 THEN 'guessed ranks' END,
    CASE WHEN p.start_spread_ns > 86400e9
      THEN format('files start {} days apart', round(p.start_spread_ns / 86400e9, 1)) END
  ), '') AS flag,
  c.* EXCLUDE (trace)
FROM (
  SELECT
    p.*,
    coalesce(p.profiler_world_size, CASE
      WHEN c.total_count > 0 AND NOT list_contains(string_split(p.format, ','), 'xprof') THEN c.total_count
      WHEN c.total_count > 0 AND c.count_per_node > 0 THEN ceil(c.total_count / c.count_per_node)::BIGINT
    END) AS expected_ranks
  FROM per_trace AS p
  LEFT JOIN cards AS c USING (trace)
) AS p
LEFT JOIN per_trace_ranks AS r USING (trace)
LEFT JOIN cards AS c USING (trace);
