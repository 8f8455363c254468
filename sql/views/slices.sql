-- Slices: every event with a duration (Chrome `X`, and `B`/`E` pairs that ingest
-- merged into one `B` row), with its end time precomputed.

-- One row per slice. `end_ns` = ts_ns + dur_ns (NULL for a B that never closed).
CREATE OR REPLACE VIEW slices AS
SELECT *, ts_ns + dur_ns AS end_ns
FROM events
WHERE ph IN ('X', 'B');
