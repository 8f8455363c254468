-- The steps of XLA profiles as steps (steps.sql's `_steps_extra`): `xla_steps`, whose
-- own precedence picks one record per rank (device Steps line, host annotation, step
-- markers, module runs), one row per step number from its first start to its end on
-- the slowest device, `source` = 'xla_' || that record, after every step marker rule
-- (preference 1000).
-- requires: steps, xla
-- extends: steps
CREATE OR REPLACE VIEW _steps_extra AS
SELECT
  trace, rank, 'xla_' || any_value(source) AS source, step, min(ts_ns) AS ts_ns, max(end_ns) AS end_ns,
  count(*) AS records, 1000 AS preference, NULL::VARCHAR AS phase
FROM xla_steps
WHERE step IS NOT NULL
GROUP BY trace, rank, step;
