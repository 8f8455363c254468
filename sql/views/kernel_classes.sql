-- Communication and activity classification: ONE versioned table of name patterns
-- (`kernel_class_rules`) decides what every GPU activity is (comm / compute /
-- memcpy / memset / sync) and, for communication, which collective it runs; the
-- same table says which CPU ops are collective calls (c10d::*, record_param_comms,
-- nccl:*, gloo:*: the only sign of communication on ranks without GPU activity).
-- Metrics read it through the `*_with(<version>)` macros with the rules version
-- they were defined on, so adding version-2 rows never moves a v1 metric; the
-- plain views (`gpu_ops_classified`, `cpu_collectives`) are the current version (2,
-- the rules every current metric version reads), for ad-hoc queries: a sum over
-- them gives the metric's number (tests/query/test_plain_views_agree.py).
-- requires: gpu, slices, catalog
-- matcher: kernel_class_matches(text, version, applies_to) FROM kernel_class_rules

-- The rules. Columns:
--   version       the rules version a row belongs to (a metric pins one)
--   priority      first match wins: the lowest matching priority of the version
--   applies_to    what `pattern` is matched against:
--                   'gpu_activity'  the name of a GPU activity (gpu_ops: kernels,
--                                   memcpys, memsets, syncs) or an xprof GPU stream op
--                   'cpu_op'        the name of a CPU-side slice (cat cpu_op or
--                                   user_annotation)
--   pattern       a DuckDB (RE2) regular expression, partial match unless anchored
--   kernel_class  comm | sync | memcpy | memset | compute (no match: compute on the
--                 GPU side, not a collective on the CPU side)
--   coll_type     the collective a comm rule implies (NULL: from the activity's
--                 `Collective name` argument, or for CPU ops from the op's name)
--   role          'cpu_op' rules only: 'call' = the record of a collective CALL
--                 (c10d::* dispatcher ops, record_param_comms); 'backend' = the
--                 backend running it (nccl:*, gloo:*), nested in the call on the
--                 same thread (NCCL) or on a worker thread after the call
--                 returned (Gloo), so never a call of its own where calls are
--                 recorded. NULL for 'gpu_activity' rules.
--   family        what the activity does for the model when the class alone does not
--                 say it (version 2 on; NULL otherwise): 'moe_exchange' = expert-
--                 parallel token exchange (a comm kernel that is also MoE time),
--                 'moe_route' = MoE routing compute. kernel_families.sql reads it, so
--                 a kernel carries both a class (comm) and a family (MoE).
--
-- Versions:
--   1  NCCL/RCCL, symmetric-memory and custom all-reduce, a loose expert-parallel
--      dispatch/combine pattern, sync, memcpy, memset; CPU-side collectives.
--   2  every rule of version 1, plus DeepEP's kernels by namespace (deep_ep::,
--      dpsk::ep::, also under primus_turbo::): dispatch, combine, their notify and
--      cached-notify kernels and barrier are comm (all_to_all-like; barrier a
--      barrier) and MoE exchange; get_dispatch_layout is compute and MoE routing.
--      In version 1 the loose pattern called get_dispatch_layout comm (its name
--      has `dispatch`), missed internode::cached_notify and dpsk::ep::cuda::
--      names, and no kernel of it counted as MoE. The namespace must start a
--      name part: `cdpsk::ep::` (CUB scan kernels) is not DeepEP. Version 2 also
--      takes coll_type and family from the first matching rule even when that
--      rule leaves them NULL (version 1's arg_min skipped NULLs and could take a
--      later rule's type).
CREATE OR REPLACE VIEW kernel_class_rules AS
WITH version_1 AS (
SELECT * FROM (VALUES
  -- NCCL >= 2.19 (ncclDevKernel_*) and older (ncclKernel_*) device kernels
  (1, 10, 'gpu_activity', '^nccl(Dev)?Kernel_AllReduce', 'comm', 'all_reduce', NULL),
  (1, 11, 'gpu_activity', '^nccl(Dev)?Kernel_AllGather', 'comm', 'all_gather', NULL),
  (1, 12, 'gpu_activity', '^nccl(Dev)?Kernel_ReduceScatter', 'comm', 'reduce_scatter', NULL),
  (1, 13, 'gpu_activity', '^nccl(Dev)?Kernel_Broadcast', 'comm', 'broadcast', NULL),
  (1, 14, 'gpu_activity', '^nccl(Dev)?Kernel_Reduce', 'comm', 'reduce', NULL),
  (1, 15, 'gpu_activity', '^nccl(Dev)?Kernel_SendRecv', 'comm', 'send_recv', NULL),
  (1, 16, 'gpu_activity', '^nccl(Dev)?Kernel_Send', 'comm', 'send', NULL),
  (1, 17, 'gpu_activity', '^nccl(Dev)?Kernel_Recv', 'comm', 'recv', NULL),
  -- RCCL's generic kernel: the type comes from the `Collective name` argument
  (1, 18, 'gpu_activity', '^nccl(Dev)?Kernel_Generic', 'comm', NULL, NULL),
  (1, 19, 'gpu_activity', '^(nccl|rccl)', 'comm', NULL, NULL),
  -- symmetric-memory and custom all-reduce kernels (PyTorch SymmMem, vLLM)
  (1, 20, 'gpu_activity', '(multimem|one_shot|two_shot)_all_reduce', 'comm', 'all_reduce', NULL),
  (1, 21, 'gpu_activity', 'cross_device_reduce', 'comm', 'all_reduce', NULL),
  -- expert-parallel token exchange (DeepEP and similar dispatch/combine kernels)
  (1, 30, 'gpu_activity', '(deep_ep|internode|intranode).*(dispatch|combine)', 'comm', 'all_to_all', NULL),
  (1, 31, 'gpu_activity', '(^|[^A-Za-z])(dispatch|combine)Kernel', 'comm', 'all_to_all', NULL),
  -- synchronisation on GPU timelines: Kineto's `cuda_sync` activities (gpu_ops
  -- kind 'sync'), and the same names on sources without a category
  (1, 40, 'gpu_activity', '^(Event Sync|Stream Sync|Context Sync|Stream Wait Event)', 'sync', NULL, NULL),
  -- copies and fills launched as activities
  (1, 50, 'gpu_activity', '^Memcpy', 'memcpy', NULL, NULL),
  (1, 51, 'gpu_activity', '^Memset', 'memset', NULL, NULL),
  -- CPU-side collectives. One call is often a nest of several of these on one
  -- thread (c10d::allreduce_ > record_param_comms > nccl:all_reduce); users that
  -- count calls take the outermost 'call' (cpu_collective_calls_with). The
  -- collective type comes from the `Collective name` argument, else the op name
  -- (coll_type_of); a record_param_comms without a type (a `wait`) is no call.
  (1, 100, 'cpu_op', '^c10d::', 'comm', NULL, 'call'),
  (1, 101, 'cpu_op', '^record_param_comms$', 'comm', NULL, 'call'),
  (1, 102, 'cpu_op', '^nccl:', 'comm', NULL, 'backend'),
  (1, 103, 'cpu_op', '^gloo:', 'comm', NULL, 'backend')
) AS rules(version, priority, applies_to, pattern, kernel_class, coll_type, role)
),
version_2_deep_ep AS (
  SELECT * FROM (VALUES
    -- the namespace must begin a name part (start, space, `::` of primus_turbo::):
    -- `cdpsk::ep::` is CUB's scan kernels
    (2, 26, 'gpu_activity', '(^|[^A-Za-z0-9_])(deep_ep|dpsk::ep)::(\w+::)*get_dispatch_layout\b',
       'compute', NULL, NULL, 'moe_route'),
    (2, 27, 'gpu_activity', '(^|[^A-Za-z0-9_])(deep_ep|dpsk::ep)::(intranode|internode|internode_ll)::barrier\b',
       'comm', 'barrier', NULL, 'moe_exchange'),
    (2, 28, 'gpu_activity',
       '(^|[^A-Za-z0-9_])(deep_ep|dpsk::ep)::(intranode|internode|internode_ll)::'
       || '(notify_dispatch|cached_notify_dispatch|notify_combine|cached_notify_combine|cached_notify'
       || '|dispatch_ll|combine_ll|dispatch|combine)\b',
       'comm', 'all_to_all', NULL, 'moe_exchange')
  ) AS rules(version, priority, applies_to, pattern, kernel_class, coll_type, role, family)
)
SELECT *, NULL::VARCHAR AS family FROM version_1
UNION ALL
-- version 2 keeps every version-1 rule; the loose expert-parallel exchange rules
-- (30, 31: pplx and other dispatchKernel/combineKernel libraries) are MoE exchange
SELECT 2, priority, applies_to, pattern, kernel_class, coll_type, role,
  CASE WHEN priority IN (30, 31) THEN 'moe_exchange' END
FROM version_1
UNION ALL
SELECT * FROM version_2_deep_ep;

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

-- One row per GPU activity with its class, by the 'gpu_activity' rules of
-- `rules_version`. `kernel_class`: comm | compute | memcpy | memset | sync; the
-- activity kind decides for memcpy and memset activities, the first matching
-- rule for kernels and sync activities (rule 40 names Kineto's four sync kinds),
-- else compute for a kernel and sync for a sync activity. `coll_type` (comm
-- only): all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, reduce,
-- send, recv, send_recv, ...; the kernel's `Collective name` argument wins over
-- its name (RCCL's generic kernel, NCCL SendRecv kernels that implement
-- all_to_all). `family` (kernels only): the matching rule's family (moe_exchange,
-- moe_route; version 2 on), NULL otherwise.
--
-- The rules run once per distinct name (names repeat millions of times): the
-- `classes` of each name, then one hash join of the activities to them. It was a
-- correlated (LATERAL) subquery over gpu_ops itself, which DuckDB runs as a delim
-- join that first holds every activity row with all its columns: on the 1 GB
-- generated rank (510,350 activities, 10 names) collectives_with(2) 5.60 -> 3.87 s,
-- this macro 1.64 -> 1.09 s; on 40 copies of dlrm_param_8xV100 (320 small files,
-- where reading gpu_ops twice once doubled the cost) 5.24 -> 5.04 s and
-- 0.59 -> 0.44 s; the same rows (EXCEPT ALL both ways, both rules versions).
-- batch: shared
CREATE OR REPLACE MACRO gpu_ops_classified_with(rules_version) AS TABLE
WITH classes AS (
  -- the first rule (lowest priority number) that matches each name; no row when none
  -- does (the join below gives NULLs). Version 1 keeps arg_min, which skips a NULL
  -- coll_type and can take a later matching rule's; from version 2 the first match
  -- decides (arg_min_null). The rules that match a name come from the matcher line
  -- above, each pattern compiled once: a join on the pattern column compiled each again
  -- for every name (0.12 s of a board over ../shared/traces).
  SELECT
    n.name,
    arg_min(r.kernel_class, r.priority) AS kernel_class,
    arg_min(r.coll_type, r.priority) AS coll_type_v1,
    arg_min_null(r.coll_type, r.priority) AS coll_type,
    arg_min_null(r.family, r.priority) AS family
  FROM (
    SELECT name, unnest(kernel_class_matches(name, rules_version, 'gpu_activity')) AS priority
    FROM (SELECT DISTINCT name FROM gpu_ops)
  ) AS n
  JOIN kernel_class_rules AS r
    ON r.version = rules_version AND r.applies_to = 'gpu_activity' AND r.priority = n.priority
  GROUP BY n.name
)
SELECT
  o.*,
  CASE
    WHEN o.kind IN ('memcpy', 'memset') THEN o.kind
    ELSE coalesce(c.kernel_class, CASE WHEN o.kind = 'sync' THEN 'sync' ELSE 'compute' END)
  END AS kernel_class,
  CASE
    WHEN o.kind = 'kernel' AND coalesce(c.kernel_class, '') = 'comm'
      THEN coalesce(
        coll_type_of(o.collective_name),
        CASE WHEN rules_version = 1 THEN c.coll_type_v1 ELSE c.coll_type END
      )
  END AS coll_type,
  CASE WHEN o.kind = 'kernel' THEN c.family END AS family
FROM gpu_ops AS o
LEFT JOIN classes AS c ON o.name IS NOT DISTINCT FROM c.name;

-- The current rules (version 2, as communication_fraction v2, total_communication_time
-- v2 and every other current metric), for ad-hoc queries. Version 1 is
-- gpu_ops_classified_with(1) (until this view was version 2 it read version 1).
-- batch: shared
CREATE OR REPLACE VIEW gpu_ops_classified AS
SELECT * FROM gpu_ops_classified_with(2);

-- One row per CPU-side slice (cat cpu_op or user_annotation) that a 'cpu_op' comm
-- rule of `rules_version` matches: c10d ops, record_param_comms, nccl:* and gloo:*
-- annotations, with the rule's `role` (call | backend), for the (trace, rank)
-- pairs of the relation `scope` (`trace_ranks` for all; a metric passes the ranks it
-- needs, and an empty scope costs nothing). `coll_type` from the `Collective
-- name` argument, else the name; NULL for a record_param_comms that only waits
-- (`Collective name` wait, or none).
CREATE OR REPLACE MACRO cpu_collectives_with(rules_version, scope) AS TABLE
SELECT
  s.trace, s.rank, s.name, s.cat, s.ts_ns, s.dur_ns, s.end_ns, s.pid, s.tid,
  c.coll_type,
  c.role,
  s.collective_name, s.in_msg_nelems, s.out_msg_nelems, s.group_size, s.dtype, s.pg_name, s.seq,
  s.external_id, s.file_id, s.event_idx
FROM (
  -- the columns read below, named: the LATERAL's join holds its input whole, and with
  -- `*` that was every column of every slice (8 x 250 MB: 7.4 M rows, 5 GB, 3.8 s)
  SELECT
    trace, rank, name, cat, ts_ns, dur_ns, end_ns, pid, tid, collective_name, in_msg_nelems,
    out_msg_nelems, group_size, dtype, pg_name, seq, external_id, file_id, event_idx
  FROM slices
  SEMI JOIN query_table(scope) USING (trace, rank)
) AS s,
LATERAL (
  -- once per distinct (name, Collective name): the type's regexes too, which a
  -- filter on coll_type would otherwise run on every CPU slice
  SELECT
    arg_min(r.kernel_class, r.priority) AS kernel_class,
    arg_min(r.role, r.priority) AS role,
    coll_type_of(coalesce(s.collective_name, s.name)) AS coll_type
  FROM kernel_class_rules AS r
  WHERE r.version = rules_version AND r.applies_to = 'cpu_op'
    AND list_contains(kernel_class_matches(s.name, rules_version, 'cpu_op'), r.priority)
) AS c
WHERE s.cat IN ('cpu_op', 'user_annotation') AND c.kernel_class = 'comm';

-- The current rules (version 2; its CPU-op rules are version 1's), every rank.
-- batch: shared
CREATE OR REPLACE VIEW cpu_collectives AS
SELECT * FROM cpu_collectives_with(2, trace_ranks);

-- One row per CPU-side collective CALL of `rules_version`: the typed (coll_type
-- not NULL: waits are no calls) 'call' ops that no other typed 'call' op of the
-- same thread contains, so that c10d::allreduce_ > record_param_comms >
-- nccl:all_reduce counts once. The backend's records (nccl:*, gloo:*, on the
-- call's thread or a Gloo worker thread) are calls only on a rank that records
-- no 'call' op at all; there the outermost typed backend ops of each thread count.
-- Containment: an earlier-or-equal start and a later-or-equal end on the same
-- (pid, tid); of two slices with the same span the first in file order counts.
-- `scope` as for cpu_collectives_with.
CREATE OR REPLACE MACRO cpu_collective_calls_with(rules_version, scope) AS TABLE
SELECT * EXCLUDE (rank_records_calls, enclosing_end_ns)
FROM (
  SELECT
    *,
    max(end_ns) OVER (
      PARTITION BY trace, rank, pid, tid, role
      ORDER BY ts_ns, end_ns DESC, file_id, event_idx
      ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
    ) AS enclosing_end_ns
  FROM (
    SELECT *, bool_or(role = 'call') OVER (PARTITION BY trace, rank) AS rank_records_calls
    FROM cpu_collectives_with(rules_version, scope)
    WHERE coll_type IS NOT NULL AND end_ns IS NOT NULL
  )
  WHERE role = 'call' OR NOT rank_records_calls
)
WHERE enclosing_end_ns IS NULL OR enclosing_end_ns < end_ns;
