-- GPU activity from Kineto traces: kernels, memory copies and memsets, each with
-- its device, stream and the correlation id that links it to the runtime call
-- that launched it.
-- requires: slices

-- One row per GPU activity (kernel, memcpy, memset). `kind` is the activity
-- class taken from the category: kernel | memcpy | memset.
CREATE OR REPLACE VIEW gpu_ops AS
SELECT
  trace,
  rank,
  CASE cat WHEN 'kernel' THEN 'kernel' WHEN 'gpu_memcpy' THEN 'memcpy' ELSE 'memset' END AS kind,
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
  event_idx
FROM slices
WHERE cat IN ('kernel', 'gpu_memcpy', 'gpu_memset');

-- One row per GPU kernel, with launch shape and the collective arguments that
-- PyTorch copies onto NCCL kernels.
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
