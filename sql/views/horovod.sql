-- Horovod timelines (HOROVOD_TIMELINE): what each tensor's operation spent its time on.
-- A timeline is one file, written by rank 0 for the whole job (files.format =
-- 'horovod'). Each tensor is a "process" (pid, named by its process_name); per tensor
-- operation there is a NEGOTIATE_<OP> span with one zero-length tick per worker as it
-- reported ready (named by the worker's rank), then the <OP> span with nested activity
-- spans (QUEUE, MEMCPY_IN_FUSION_BUFFER, NCCL_ALLREDUCE, ...), whose end carries the
-- output tensor's dtype and shape. Ingest pairs each E with its B on the pid, so every
-- span is one row of `slices`.
-- requires: slices, names, dtypes, catalog

-- The slices of Horovod timelines, with the tensor each belongs to.
CREATE OR REPLACE VIEW _horovod_slices AS
SELECT s.*, t.process_name AS tensor
FROM slices AS s
JOIN files AS f USING (file_id)
LEFT JOIN process_names AS t ON t.trace = s.trace AND t.rank = s.rank AND t.pid = s.pid
WHERE snapshot_holds('horovod') AND f.format = 'horovod';

-- The operations Horovod names its response types after, and the collective each is.
CREATE OR REPLACE VIEW horovod_op_types AS
SELECT * FROM (VALUES
  ('ALLREDUCE', 'all_reduce'), ('ADASUM', 'all_reduce'), ('ALLGATHER', 'all_gather'),
  ('BROADCAST', 'broadcast'), ('REDUCESCATTER', 'reduce_scatter'), ('ALLTOALL', 'all_to_all'),
  ('BARRIER', 'barrier'), ('JOIN', NULL), ('ERROR', NULL)
) AS t(op, coll_type);

-- One row per (negotiation, worker tick): when each worker reported the tensor ready.
-- `late_ns` = its tick - the first tick of the negotiation; `last` marks the worker that
-- reported last (the one the others waited for; ties: the lowest rank). `op_seq` is the
-- tensor operation the negotiation precedes.
CREATE OR REPLACE VIEW horovod_negotiations AS
WITH negotiations AS (
  SELECT
    trace, rank, pid, tensor, replace(name, 'NEGOTIATE_', '') AS op, ts_ns, end_ns, dur_ns, file_id,
    row_number() OVER (PARTITION BY trace, rank, pid ORDER BY ts_ns, event_idx) AS op_seq
  FROM _horovod_slices
  WHERE starts_with(name, 'NEGOTIATE_')
),
ticks AS (
  SELECT trace, rank, pid, ts_ns, TRY_CAST(name AS INTEGER) AS worker, file_id
  FROM _horovod_slices
  WHERE dur_ns = 0 AND regexp_full_match(name, '\d+')
)
SELECT
  n.trace, n.rank, n.pid, n.tensor, n.op, n.op_seq, n.ts_ns AS negotiation_start_ns, n.end_ns AS negotiation_end_ns,
  t.worker, t.ts_ns AS ready_ns,
  t.ts_ns - min(t.ts_ns) OVER w AS late_ns,
  row_number() OVER (PARTITION BY n.trace, n.rank, n.pid, n.op_seq ORDER BY t.ts_ns DESC, t.worker) = 1 AS last
FROM negotiations AS n
JOIN ticks AS t
  ON t.trace = n.trace AND t.rank = n.rank AND t.pid = n.pid AND t.file_id = n.file_id
  AND t.ts_ns >= n.ts_ns AND t.ts_ns <= n.end_ns
WINDOW w AS (PARTITION BY n.trace, n.rank, n.pid, n.op_seq);

-- One row per tensor operation (the <OP> span). `op_seq` numbers a tensor's operations
-- in time order; `bytes` = product of the output shape x the dtype's size (all_gather:
-- the gathered output, as nccl-tests counts it); `workers` = the workers whose ticks
-- the operation's negotiation holds.
CREATE OR REPLACE VIEW horovod_ops AS
WITH ops AS (
  SELECT
    s.trace, s.rank, s.pid, s.tensor, s.name AS op, t.coll_type, s.ts_ns, s.dur_ns, s.end_ns,
    coalesce(s.dtype, s.args ->> 'dtype') AS dtype,  -- "dtype" is a promoted column (c10d's arg)
    TRY_CAST(s.args ->> 'shape' AS BIGINT[]) AS shape,
    s.file_id, s.event_idx,
    row_number() OVER (PARTITION BY s.trace, s.rank, s.pid ORDER BY s.ts_ns, s.event_idx) AS op_seq
  FROM _horovod_slices AS s
  JOIN horovod_op_types AS t ON t.op = s.name
)
SELECT
  o.*,
  list_reduce(o.shape, lambda a, b: a * b, 1::BIGINT) * d.dtype_bytes AS bytes,
  n.workers
FROM ops AS o
LEFT JOIN dtype_sizes AS d ON d.dtype_key = dtype_key(o.dtype)
LEFT JOIN (
  SELECT trace, rank, pid, op_seq, count(DISTINCT worker) AS workers
  FROM horovod_negotiations
  GROUP BY ALL
) AS n USING (trace, rank, pid, op_seq);

-- One row per (tensor operation, phase): the negotiation and every activity inside the
-- operation, with its category:
--   negotiation   NEGOTIATE_<OP>, from the first worker's tick to the last's
--   wait          WAIT_FOR_DATA, WAIT_FOR_OTHER_TENSOR_DATA (a data stall)
--   queue         QUEUE (waiting for the previous operation on the stream)
--   fusion_copy   MEMCPY_{IN,OUT}_{FUSION,HOST,SHARED}_BUFFER, COPY_ALLGATHER_OUTPUT
--   communication NCCL_*, MPI_*, GLOO_*, CCL_* (the collective itself)
--   other         INIT_FUSION_BUFFER, ALLOCATE_OUTPUT, INIT_NCCL, ...
-- Tensors fused into one collective each carry the same activity spans.
CREATE OR REPLACE VIEW horovod_phases AS
WITH activities AS (
  SELECT a.trace, a.rank, a.pid, a.tensor, o.op, o.op_seq, a.name AS phase, a.ts_ns, a.dur_ns, a.end_ns
  FROM _horovod_slices AS a
  JOIN horovod_ops AS o
    ON o.trace = a.trace AND o.rank = a.rank AND o.pid = a.pid AND o.file_id = a.file_id
    AND a.ts_ns >= o.ts_ns AND a.end_ns <= o.end_ns AND a.event_idx > o.event_idx
  WHERE a.name NOT IN (SELECT op FROM horovod_op_types) AND NOT starts_with(a.name, 'NEGOTIATE_')
    AND a.dur_ns IS NOT NULL
),
phases AS (
  SELECT * FROM activities
  UNION ALL
  SELECT n.trace, n.rank, n.pid, n.tensor, n.op, n.op_seq, 'NEGOTIATE_' || n.op, n.negotiation_start_ns,
         n.negotiation_end_ns - n.negotiation_start_ns, n.negotiation_end_ns
  FROM (SELECT DISTINCT trace, rank, pid, tensor, op, op_seq, negotiation_start_ns, negotiation_end_ns
        FROM horovod_negotiations) AS n
)
SELECT
  *,
  CASE
    WHEN starts_with(phase, 'NEGOTIATE_') THEN 'negotiation'
    WHEN phase IN ('WAIT_FOR_DATA', 'WAIT_FOR_OTHER_TENSOR_DATA') THEN 'wait'
    WHEN phase = 'QUEUE' THEN 'queue'
    WHEN regexp_matches(phase, '^MEMCPY_(IN|OUT)_(FUSION|HOST|SHARED)_BUFFER$') OR phase = 'COPY_ALLGATHER_OUTPUT'
      THEN 'fusion_copy'
    WHEN regexp_matches(phase, '^(NCCL|MPI|GLOO|CCL)_') THEN 'communication'
    ELSE 'other'
  END AS category
FROM phases;

-- The cycles Horovod marks (HOROVOD_TIMELINE_MARK_CYCLES=1): one row per CYCLE_START,
-- spanning to the next one (the last cycle: to the end of the timeline's last operation).
CREATE OR REPLACE VIEW horovod_cycles AS
WITH marks AS (
  SELECT e.trace, e.rank, e.ts_ns
  FROM events AS e
  JOIN files AS f USING (file_id)
  WHERE snapshot_holds('horovod') AND f.format = 'horovod' AND e.name = 'CYCLE_START' AND e.ph IN ('i', 'I')
),
last_end AS (
  SELECT trace, rank, max(end_ns) AS end_ns FROM horovod_ops GROUP BY ALL
)
SELECT
  m.trace, m.rank,
  row_number() OVER (PARTITION BY m.trace, m.rank ORDER BY m.ts_ns) AS cycle,
  m.ts_ns,
  coalesce(lead(m.ts_ns) OVER (PARTITION BY m.trace, m.rank ORDER BY m.ts_ns), l.end_ns) AS end_ns
FROM marks AS m
LEFT JOIN last_end AS l USING (trace, rank);
