-- Horovod's tensor operations as collectives (collectives.sql's `_collectives_extra`):
-- coll_type from the operation, `collective_name` the tensor, ts/dur the operation's
-- span, bytes from its output dtype and shape, group size the workers that negotiated
-- it; matched across ranks by tensor and operation number, though a timeline is one
-- file for the whole job.
-- requires: collectives, horovod
-- extends: collectives
CREATE OR REPLACE VIEW _collectives_extra AS
SELECT
  trace, rank, coll_type, ts_ns, dur_ns, end_ns, bytes,
  workers AS group_size,
  bytes / nullif(dur_ns, 0) AS algbw_gbps,
  bytes / nullif(dur_ns, 0) * coll_busbw_factor(coll_type, workers) AS busbw_gbps,
  'horovod/' || tensor || ' #' || op_seq AS match_id,
  'horovod ' || op || ' span' AS type_source,
  CASE WHEN bytes IS NOT NULL THEN 'horovod output dtype x shape' END AS size_source,
  CASE WHEN workers IS NOT NULL THEN 'horovod negotiation ticks' END AS group_size_source,
  nullif(concat_ws('; ',
    CASE WHEN coll_type IS NULL THEN 'type unknown: horovod ' || op END,
    CASE WHEN bytes IS NULL THEN 'size unknown: no output dtype and shape' END
  ), '') AS reason,
  dtype,
  tensor AS collective_name,
  file_id,
  event_idx,
  'horovod' AS source
FROM horovod_ops;
