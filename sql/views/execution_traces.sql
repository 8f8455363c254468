-- PyTorch execution traces (`et_nodes`, `et_tensors`) linked to the Kineto trace of the
-- same rank, so that an op's exact tensors (shapes, element types, bytes) and process
-- group can be read next to its times.
-- requires: slices

-- ET op nodes: the graph's root and thread nodes ("[pytorch|profiler|execution_trace|
-- process]", "...|thread]") are not ops and are left out. `name_ordinal` numbers a rank's
-- nodes of one name in record-function order (the order the ops ran).
CREATE OR REPLACE VIEW et_ops AS
SELECT
  *,
  row_number() OVER (PARTITION BY trace, rank, name ORDER BY rf_id, node_id) AS name_ordinal
FROM et_nodes
WHERE NOT starts_with(name, '[pytorch|profiler|execution_');

-- The Kineto CPU ops an ET node can link to (cpu_op and user_annotation slices: record
-- functions such as "## forward ##" are ET nodes too), on the ranks that have ET nodes
-- (the others have nothing to link; without any, the events are not read at all).
-- `name_ordinal` as above, in time order; `rank_has_rf_ids` whether the rank's ops
-- carry `Record function id`.
CREATE OR REPLACE VIEW _et_kineto_ops AS
SELECT
  trace, rank, file_id, event_idx, name, ts_ns, record_function_id,
  row_number() OVER (PARTITION BY trace, rank, name ORDER BY ts_ns, event_idx) AS name_ordinal,
  bool_or(record_function_id IS NOT NULL) OVER (PARTITION BY trace, rank) AS rank_has_rf_ids
FROM slices
SEMI JOIN (SELECT DISTINCT trace, rank FROM et_nodes) AS n USING (trace, rank)
WHERE cat IN ('cpu_op', 'user_annotation');

-- One row per ET node linked to a Kineto op of the same (trace, rank):
--   via 'rf_id'     Kineto's `Record function id` = the node's rf_id, and the same name
--                   (PyTorch writes both ids from one counter when both profilers run);
--   via 'op order'  on ranks whose Kineto ops carry no record-function id (PyTorch before
--                   2.1): the n-th node of a name is the n-th Kineto op of that name. The
--                   two traces may record different iterations of the same loop; the
--                   ordinals then pair corresponding ops of those iterations.
-- `et_file_id` is the ET's file, `file_id`/`event_idx` the Kineto op's.
CREATE OR REPLACE VIEW et_links AS
SELECT
  n.trace, n.rank, n.file_id AS et_file_id, n.node_id, n.name, k.file_id, k.event_idx, 'rf_id' AS via
FROM et_ops AS n
JOIN _et_kineto_ops AS k
  ON k.trace = n.trace AND k.rank = n.rank AND k.record_function_id = n.rf_id AND k.name = n.name
UNION ALL
SELECT
  n.trace, n.rank, n.file_id, n.node_id, n.name, k.file_id, k.event_idx, 'op order'
FROM et_ops AS n
JOIN _et_kineto_ops AS k
  ON k.trace = n.trace AND k.rank = n.rank AND k.name = n.name AND k.name_ordinal = n.name_ordinal
WHERE NOT k.rank_has_rf_ids;

-- Per (trace, rank) with an execution trace: how many of its op nodes link to a Kineto
-- op, and how many of the Kineto CPU ops link to a node (both 0..1; NULL without a
-- Kineto trace for the rank).
CREATE OR REPLACE VIEW et_link_coverage AS
WITH nodes AS (
  SELECT trace, rank, count(*) AS et_ops FROM et_ops GROUP BY ALL
),
kineto AS (
  SELECT trace, rank, count(*) AS kineto_ops FROM _et_kineto_ops GROUP BY ALL
),
linked AS (
  SELECT trace, rank, count(DISTINCT (et_file_id, node_id)) AS linked_nodes,
         count(DISTINCT (file_id, event_idx)) AS linked_ops, string_agg(DISTINCT via, ',') AS via
  FROM et_links GROUP BY ALL
)
SELECT
  n.trace, n.rank, n.et_ops, k.kineto_ops,
  coalesce(l.linked_nodes, 0) AS linked_nodes,
  coalesce(l.linked_nodes, 0) / n.et_ops AS et_linked_fraction,
  coalesce(l.linked_ops, 0) / k.kineto_ops AS kineto_linked_fraction,
  l.via
FROM nodes AS n
LEFT JOIN kineto AS k USING (trace, rank)
LEFT JOIN linked AS l USING (trace, rank);
