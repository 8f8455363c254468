-- Kernel classification, version 1: ONE table of name patterns decides what every
-- GPU activity is (comm / compute / memcpy / memset / sync) and, for
-- communication, which collective it runs. Every metric reads it through
-- `gpu_ops_classified`; changing a pattern here is a metric-visible change and
-- needs new metric versions.
-- requires: gpu

-- The rules, first match (lowest priority) wins. Patterns are DuckDB regular
-- expressions (RE2, partial match unless anchored).
CREATE OR REPLACE VIEW kernel_class_rules AS
SELECT * FROM (VALUES
  -- NCCL >= 2.19 (ncclDevKernel_*) and older (ncclKernel_*) device kernels
  (10, '^nccl(Dev)?Kernel_AllReduce', 'comm', 'all_reduce'),
  (11, '^nccl(Dev)?Kernel_AllGather', 'comm', 'all_gather'),
  (12, '^nccl(Dev)?Kernel_ReduceScatter', 'comm', 'reduce_scatter'),
  (13, '^nccl(Dev)?Kernel_Broadcast', 'comm', 'broadcast'),
  (14, '^nccl(Dev)?Kernel_Reduce', 'comm', 'reduce'),
  (15, '^nccl(Dev)?Kernel_SendRecv', 'comm', 'send_recv'),
  (16, '^nccl(Dev)?Kernel_Send', 'comm', 'send'),
  (17, '^nccl(Dev)?Kernel_Recv', 'comm', 'recv'),
  -- RCCL's generic kernel: the type comes from the `Collective name` argument
  (18, '^nccl(Dev)?Kernel_Generic', 'comm', NULL),
  (19, '^(nccl|rccl)', 'comm', NULL),
  -- symmetric-memory and custom all-reduce kernels (PyTorch SymmMem, vLLM)
  (20, '(multimem|one_shot|two_shot)_all_reduce', 'comm', 'all_reduce'),
  (21, 'cross_device_reduce', 'comm', 'all_reduce'),
  -- expert-parallel token exchange (DeepEP and similar dispatch/combine kernels)
  (30, '(deep_ep|internode|intranode).*(dispatch|combine)', 'comm', 'all_to_all'),
  (31, '(^|[^A-Za-z])(dispatch|combine)Kernel', 'comm', 'all_to_all'),
  -- synchronisation shown on GPU timelines
  (40, '^(Event Sync|Stream Sync|Context Sync|Stream Wait Event)', 'sync', NULL),
  -- copies and fills launched as activities
  (50, '^Memcpy', 'memcpy', NULL),
  (51, '^Memset', 'memset', NULL)
) AS rules(priority, pattern, kernel_class, coll_type);

-- The collective type for a c10d `Collective name` (kernel arg) or CPU op name.
CREATE OR REPLACE MACRO coll_type_of(collective) AS
CASE
  WHEN collective IS NULL THEN NULL
  WHEN regexp_matches(lower(collective), 'all_?to_?all|alltoall') THEN 'all_to_all'
  WHEN regexp_matches(lower(collective), 'reduce_?scatter') THEN 'reduce_scatter'
  WHEN regexp_matches(lower(collective), 'all_?gather') THEN 'all_gather'
  WHEN regexp_matches(lower(collective), 'all_?reduce') THEN 'all_reduce'
  WHEN regexp_matches(lower(collective), 'broadcast') THEN 'broadcast'
  WHEN regexp_matches(lower(collective), 'barrier') THEN 'barrier'
  WHEN regexp_matches(lower(collective), '(^|[^a-z])send') THEN 'send'
  WHEN regexp_matches(lower(collective), '(^|[^a-z])recv') THEN 'recv'
  WHEN regexp_matches(lower(collective), 'gather') THEN 'gather'
  WHEN regexp_matches(lower(collective), 'scatter') THEN 'scatter'
  WHEN regexp_matches(lower(collective), 'reduce') THEN 'reduce'
  ELSE NULL
END;

-- One row per GPU activity with its class. `kernel_class`: comm | compute |
-- memcpy | memset | sync. `coll_type` (comm only): all_reduce, all_gather,
-- reduce_scatter, all_to_all, broadcast, reduce, send, recv, send_recv, ...;
-- the kernel's `Collective name` argument wins over its name (RCCL's generic
-- kernel, NCCL SendRecv kernels that implement all_to_all).
--
-- The rules are a correlated (LATERAL) subquery on purpose: DuckDB runs it once
-- per DISTINCT name (a delim join: names repeat millions of times, the regexes
-- run per name, not per event) within the same read of the events. A join to a
-- separate SELECT DISTINCT name view read the events twice, which doubled the
-- cost on warehouses of many small files and gained nothing on big ones.
CREATE OR REPLACE VIEW gpu_ops_classified AS
SELECT
  o.*,
  CASE
    WHEN o.kind = 'memcpy' THEN 'memcpy'
    WHEN o.kind = 'memset' THEN 'memset'
    ELSE coalesce(c.kernel_class, 'compute')
  END AS kernel_class,
  CASE
    WHEN coalesce(c.kernel_class, '') = 'comm' THEN coalesce(coll_type_of(o.collective_name), c.coll_type)
  END AS coll_type
FROM gpu_ops AS o,
LATERAL (
  -- the first rule (lowest priority number) that matches; NULLs when none does
  SELECT
    arg_min(r.kernel_class, r.priority) AS kernel_class,
    arg_min(r.coll_type, r.priority) AS coll_type
  FROM kernel_class_rules AS r
  WHERE regexp_matches(o.name, r.pattern)
) AS c;

-- CPU-side collectives (c10d ops, record_param_comms, nccl:* and gloo
-- annotations): the only sign of communication in CPU-only traces.
CREATE OR REPLACE VIEW cpu_collectives AS
SELECT
  trace, rank, name, cat, ts_ns, dur_ns, end_ns, pid, tid,
  coll_type_of(coalesce(collective_name, regexp_replace(name, '^(c10d::|nccl:|gloo:)', ''))) AS coll_type,
  collective_name, in_msg_nelems, out_msg_nelems, group_size, dtype, pg_name, seq, external_id
FROM slices
WHERE cat IN ('cpu_op', 'user_annotation')
  AND (
    name LIKE 'c10d::%' OR name = 'record_param_comms' OR name LIKE 'nccl:%' OR name LIKE 'gloo:%'
  );
