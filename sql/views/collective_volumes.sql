-- Bytes moved by collectives, per rank and collective type, from GPU traces (the
-- `collectives` chain) and XLA profiles (`xla_ops`), for the collective_vol_*
-- metrics.
-- requires: collectives, xla, gpu

-- One row per (trace, rank, coll_type) of the ranks in `scope` (a relation of
-- trace, rank) that ran collectives of that type:
--   collectives   how many (GPU: comm kernels of kernel_class_rules
--                 `rules_version`, collectives_with; XLA: collective ops, an async
--                 start/done pair once)
--   sized         how many of them have a known message size
--   bytes         Σ message bytes of the sized ones. GPU: nccl-tests' size
--                 (collectives_with: all_gather its gathered output,
--                 reduce_scatter its input, others their input). XLA: the op's
--                 result shape (xla_ops.message_bytes).
--   devices       1 for a GPU rank; the number of device planes of an XLA rank
--                 (one profile file covers every device of its host), so
--                 bytes / devices is what one device moved
--   source        gpu collectives | xla collective ops | gloo cpu records (a rank
--                 without GPU collectives: collectives_with's Gloo CPU records)
CREATE OR REPLACE MACRO collective_volumes_with(rules_version, scope) AS TABLE
WITH gpu AS (
  SELECT
    c.trace, c.rank, c.coll_type,
    count(*) AS collectives, count(c.bytes) AS sized, coalesce(sum(c.bytes), 0) AS bytes,
    1 AS devices,
    CASE WHEN c.source = 'cpu_backend' THEN 'gloo cpu records' ELSE 'gpu collectives' END AS source
  FROM collectives_with(rules_version) AS c
  SEMI JOIN query_table(scope) AS s USING (trace, rank)
  WHERE c.coll_type IS NOT NULL
  GROUP BY ALL
),
xla_devices AS (
  SELECT trace, rank, count(DISTINCT (pid, device)) AS devices
  FROM xla_ops
  SEMI JOIN query_table(scope) AS s USING (trace, rank)
  GROUP BY ALL
),
xla AS (
  SELECT
    o.trace, o.rank, o.coll_type,
    count(*) AS collectives, count(o.message_bytes) AS sized,
    coalesce(sum(o.message_bytes), 0) AS bytes,
    any_value(d.devices) AS devices, 'xla collective ops' AS source
  FROM xla_ops AS o
  JOIN xla_devices AS d USING (trace, rank)
  WHERE o.op_kind = 'comm' AND o.coll_type IS NOT NULL
  GROUP BY o.trace, o.rank, o.coll_type
)
SELECT * FROM gpu
UNION ALL
SELECT * FROM xla;

-- The (trace, rank) pairs with device work a collective could run beside: GPU
-- kernels or XLA ops, and ranks with neither that ran collectives on Gloo's CPU
-- worker threads ('gloo cpu records', the CPU being their device: until these
-- records counted as collectives such a rank had no volume, so this only gives
-- numbers where there were none). A rank outside it (CPU-only, no Gloo records)
-- has no collective volume to report (NULL), a rank inside it without
-- collectives of a type moved 0 bytes.
-- batch: shared
CREATE OR REPLACE VIEW device_ranks AS
WITH devices AS (
  SELECT DISTINCT trace, rank, 'gpu' AS device_source FROM gpu_ops WHERE kind = 'kernel'
  UNION
  SELECT DISTINCT trace, rank, 'xla' AS device_source FROM xla_ops
),
without_devices AS (  -- none on a GPU or TPU trace: then no CPU record is read
  SELECT trace, rank FROM trace_ranks
  EXCEPT
  SELECT trace, rank FROM devices
)
SELECT * FROM devices
UNION ALL
-- the ranks of _cpu_collective_records_like('gloo:%', ...)'s backend records, read from
-- the classified CPU ops it starts from (one row each): their sizes are not needed here
SELECT DISTINCT r.trace, r.rank, 'gloo cpu records' AS device_source
FROM cpu_collectives_with(1, without_devices) AS r
WHERE r.role = 'backend' AND r.coll_type IS NOT NULL AND r.name LIKE 'gloo:%';

-- One collective type's volume per rank of `scope` (pass `metric_scope` in a
-- metric), in GB (1e9 B) per device: 0 when the rank ran none, NULL with a
-- reason when none of them is sized or the rank has neither GPU kernels nor XLA
-- ops. The four collective_vol_<type>_gb metrics are this over their type.
CREATE OR REPLACE MACRO collective_volume_gb(scope, type) AS TABLE
WITH volume AS (
  SELECT * FROM collective_volumes_with(2, scope) WHERE coll_type = type
)
SELECT
  m.trace,
  m.rank,
  CASE
    WHEN d.rank IS NULL THEN NULL
    WHEN v.collectives IS NULL THEN 0.0
    WHEN v.sized > 0 THEN v.bytes / v.devices / 1e9
  END AS value,
  CASE
    WHEN d.rank IS NULL THEN 'no GPU kernels and no XLA ops'
    WHEN v.sized = 0 THEN 'none of the ' || v.collectives || ' ' || type || ' collectives has a known message size'
  END AS reason,
  coalesce(v.collectives, 0) AS collectives,
  coalesce(v.collectives - v.sized, 0) AS unsized,
  v.devices,
  coalesce(v.source, d.device_source) AS source
FROM query_table(scope) AS m
LEFT JOIN (SELECT trace, rank, min(device_source) AS device_source FROM device_ranks GROUP BY ALL) AS d
  USING (trace, rank)
LEFT JOIN volume AS v USING (trace, rank);
