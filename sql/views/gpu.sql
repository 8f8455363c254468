-- GPU activity from Kineto traces: kernels, memory copies, memsets and
-- synchronisation, each with its device, stream and the correlation id that links
-- it to the runtime call that issued it.
-- requires: slices

-- One row per GPU activity. `kind` is the activity class taken from the category:
--   kernel  cat kernel
--   memcpy  cat gpu_memcpy
--   memset  cat gpu_memset
--   sync    cat cuda_sync (Event Sync, Stream Sync, Context Sync, Stream Wait
--           Event: time the GPU or host spent waiting, not work; CUPTI records it
--           with a stream and a correlation id like a kernel)
-- Consumers that mean kernels filter `kind = 'kernel'`; every metric that reads
-- gpu_ops or gpu_ops_classified does (or names the kinds it wants).
-- columns:
--   kind    kernel | memcpy | memset | sync, from the category
--   device  the GPU: the event's `device` argument, else its pid
--   stream  the stream: the event's `stream` argument, else its tid
--   end_ns  end time in ns (ts_ns + dur_ns)
--   (as in events: trace, rank, name, ts_ns, dur_ns, correlation, external_id, bytes,
--   collective_name, args, file_id, event_idx, grid, block, blocks_per_sm)
-- batch: shared without args
--   no query of a batch reads a GPU activity's `args` (what they need of it is in
--   columns of its own): 129 MB of text on a 1 GB rank, in this table and in
--   gpu_ops_classified's (`o.*`). The launch shape (last) is there for `kernels`,
--   which a batch then reads from this table.
CREATE OR REPLACE VIEW gpu_ops AS
SELECT
  trace,
  rank,
  CASE cat WHEN 'kernel' THEN 'kernel' WHEN 'gpu_memcpy' THEN 'memcpy' WHEN 'gpu_memset' THEN 'memset' ELSE 'sync' END AS kind,
  name,
  coalesce(device, TRY_CAST(pid AS INTEGER)) AS device,
  coalesce(stream, TRY_CAST(tid AS BIGINT)) AS stream,
  ts_ns,
  dur_ns,
  end_ns,
  correlation,
  external_id,
  bytes,
  collective_name,
  args,
  file_id,
  event_idx,
  grid,
  block,
  blocks_per_sm
FROM slices
-- the range first: DuckDB pushes a range into the Parquet reader, which then decodes the
-- other columns only for the rows in it, and keeps an IN list only to skip row groups
-- (no GPU category sorts outside 'cuda_sync' .. 'kernel'; the CPU's do: cpu_op,
-- cuda_runtime, python_function, user_annotation)
WHERE cat BETWEEN 'cuda_sync' AND 'kernel'
  AND cat IN ('kernel', 'gpu_memcpy', 'gpu_memset', 'cuda_sync');

-- One row per GPU kernel, with launch shape and the collective arguments that
-- PyTorch copies onto NCCL kernels.
-- columns:
--   device  the GPU: the event's `device` argument, else its pid
--   stream  the stream: the event's `stream` argument, else its tid
--   end_ns  end time in ns (ts_ns + dur_ns)
--   (as in events: trace, rank, name, ts_ns, dur_ns, correlation, external_id, grid,
--   block, blocks_per_sm, warps_per_sm, occupancy_pct, registers_per_thread,
--   shared_memory_bytes, collective_name, in_msg_nelems, out_msg_nelems, group_size,
--   dtype, pg_name, pg_desc, pg_ranks, seq, args, file_id, event_idx)
-- batch: shared from gpu_ops via kernels_from_gpu_ops as view without correlation, external_id, warps_per_sm, occupancy_pct, registers_per_thread, shared_memory_bytes, collective_name, in_msg_nelems, out_msg_nelems, group_size, dtype, pg_name, pg_desc, pg_ranks, seq, args, file_id, event_idx
--   read straight from the events by the kernel-time metrics (aggregate_gpu_utilization
--   twice): on a 500-workload board six reads of the Parquet files, 4 s of lane time,
--   against 2.5 s to store it once. Its readers (the kernel-time metrics) read only
--   the times, names, devices and launch shapes: the table leaves the rest out (on a
--   1 GB rank 0.39 GB -> 0.19 GB, `args` alone 124 MB of text). With gpu_ops shared
--   it is no table at all: a view over gpu_ops' table (its kernels are these rows),
--   no second read of the events and no copy.
CREATE OR REPLACE VIEW kernels AS
SELECT
  trace,
  rank,
  name,
  coalesce(device, TRY_CAST(pid AS INTEGER)) AS device,
  coalesce(stream, TRY_CAST(tid AS BIGINT)) AS stream,
  ts_ns,
  dur_ns,
  end_ns,
  correlation,
  external_id,
  grid,
  block,
  blocks_per_sm,
  warps_per_sm,
  occupancy_pct,
  registers_per_thread,
  shared_memory_bytes,
  collective_name,
  in_msg_nelems,
  out_msg_nelems,
  group_size,
  dtype,
  pg_name,
  pg_desc,
  pg_ranks,
  seq,
  args,
  file_id,
  event_idx
FROM slices
WHERE cat = 'kernel';

-- kernels as a filter of gpu_ops: the same rows, with the columns a batch keeps of
-- kernels (its `-- batch:` line). A batch that shares gpu_ops reads kernels from this,
-- over gpu_ops' table (tests/query/test_run_metrics.py compares the rows).
CREATE OR REPLACE VIEW kernels_from_gpu_ops AS
SELECT trace, rank, name, device, stream, ts_ns, dur_ns, end_ns, grid, block, blocks_per_sm
FROM gpu_ops
WHERE kind = 'kernel';
