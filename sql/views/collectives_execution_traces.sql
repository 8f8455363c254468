-- CPU collective ops sized by the rank's PyTorch execution trace (collectives.sql's
-- `_collective_cpu_op_sizes_extra`, size_preference 4): the `record_param_comms`
-- node linked to the op (et_links), whose input and output tensors are exact (numel x
-- itemsize); for when Kineto gives no size at all.
-- requires: collectives, execution_traces
-- extends: collectives
CREATE OR REPLACE VIEW _collective_cpu_op_sizes_extra AS
SELECT
  l.trace, l.rank, l.file_id, l.event_idx,
  4 AS size_preference,
  'execution trace tensors' AS size_kind,
  NULL::BIGINT AS in_nelems,
  NULL::BIGINT AS out_nelems,
  nullif(n.input_bytes, 0) AS in_bytes,
  nullif(n.output_bytes, 0) AS out_bytes,
  n.dtype
FROM et_links AS l
JOIN et_nodes AS n ON n.trace = l.trace AND n.rank = l.rank AND n.file_id = l.et_file_id AND n.node_id = l.node_id
WHERE n.name = 'record_param_comms' AND n.input_bytes > 0;
