-- Process and thread names from Chrome `M` (metadata) events, so that pids and
-- tids can be shown and filtered by name ("python", "stream 7", "/device:TPU:0").

-- The process_name and thread_name metadata events with the name each gives:
-- what both views below read (one read of the events for the two, when a batch
-- shares it).
-- batch: shared
CREATE OR REPLACE VIEW _name_events AS
SELECT trace, rank, pid, tid, name, event_idx, args ->> 'name' AS value
FROM events
WHERE ph = 'M' AND name IN ('process_name', 'thread_name');

-- One row per (trace, rank, pid): the last process_name written for the pid.
-- batch: shared
CREATE OR REPLACE VIEW process_names AS
SELECT trace, rank, pid, arg_max(value, event_idx) AS process_name
FROM _name_events
WHERE name = 'process_name'
GROUP BY ALL;

-- One row per (trace, rank, pid, tid): the last thread_name written for the tid.
-- batch: shared
CREATE OR REPLACE VIEW thread_names AS
SELECT trace, rank, pid, tid, arg_max(value, event_idx) AS thread_name
FROM _name_events
WHERE name = 'thread_name'
GROUP BY ALL;
