-- Slices: every event with a duration (Chrome `X`, and `B`/`E` pairs that ingest
-- merged into one `B` row), with its end time precomputed.

-- One row per slice. `end_ns` = ts_ns + dur_ns (NULL for a B that never closed).
-- columns:
--   end_ns  end time in ns: ts_ns + dur_ns (NULL for a B that never closed)
--   (as in events: trace, rank, file_id, event_idx, ph, cat, cat_raw, name, pid, tid,
--   ts_ns, dur_ns, flow_id, bp, scope, args, device, stream, correlation, external_id,
--   bytes, memory_bw_gbps, grid, block, blocks_per_sm, warps_per_sm, occupancy_pct,
--   registers_per_thread, shared_memory_bytes, ev_idx, record_function_id, python_id,
--   python_parent_id, sequence_number, collective_name, in_msg_nelems, out_msg_nelems,
--   group_size, dtype, pg_name, pg_desc, pg_ranks, seq, in_split_size, out_split_size,
--   hlo_op, hlo_module, hlo_category, long_name, flops, model_flops, bytes_accessed,
--   raw_bytes_accessed, shape_with_layout, device_duration_ps, group_id, step_num,
--   run_id, program_id)
CREATE OR REPLACE VIEW slices AS
SELECT *, ts_ns + dur_ns AS end_ns
FROM events
WHERE ph IN ('X', 'B');
