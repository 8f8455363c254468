-- Process and thread names from Chrome `M` (metadata) events, so that pids and
-- tids can be shown and filtered by name ("python", "stream 7", "/device:TPU:0").

-- One row per (trace, rank, pid): the last process_name written for the pid.
CREATE OR REPLACE VIEW process_names AS
SELECT trace, rank, pid, arg_max(args ->> 'name', event_idx) AS process_name
FROM events
WHERE ph = 'M' AND name = 'process_name'
GROUP BY ALL;

-- One row per (trace, rank, pid, tid): the last thread_name written for the tid.
CREATE OR REPLACE VIEW thread_names AS
SELECT trace, rank, pid, tid, arg_max(args ->> 'name', event_idx) AS thread_name
FROM events
WHERE ph = 'M' AND name = 'thread_name'
GROUP BY ALL;
