-- HTA 0.5.0's CUPTI counter analysis (hta/analyzers/cupti_counter_analysis.py,
-- CuptiCounterAnalyzer.get_counter_data_with_operators): a trace taken in
-- Kineto's CUPTI profiler mode records each kernel as an event of category
-- "cuda_profiler_range" whose args are the performance counters measured on it
-- (for example "sm__throughput.avg.pct_of_peak_sustained_elapsed"). HTA pairs
-- these with the kernel launches by ORDER, since profiler-range events carry no
-- correlation id: per rank, the n-th profiler-range event in ts order with the
-- n-th runtime call whose category starts with "cuda_runtime" and whose name
-- starts with "cudaLaunchKernel" (HTA's `str.match`), and only when both counts
-- are equal (otherwise HTA logs an error and gives no frame for the rank: here
-- the rank has no rows). Each kernel gets the CPU operators on its launch's call
-- stack: the `cpu_op` slices of the launch's thread that enclose it, outermost
-- first (HTA's call graph stack of the launch, filtered to cpu_op, sorted by ts;
-- for properly nested rows the enclosing slices are exactly that stack).
-- Differences: the counters stay in `counters` as the args were written (the
-- Python API's TraceAnalysis.get_cupti_counter_data_with_operators spreads them
-- into one column each, as HTA's frame has them); times are µs from the rank's
-- first slice, exact to the ns (HTA's frame keeps the trace's own µs).
-- requires: slices

-- One row per profiler-range kernel of a rank whose kernels and launches pair up.
-- columns:
--   kernel_no        position of the kernel among the rank's profiler-range events (1 = first)
--   name             kernel name
--   cat              the event category (cuda_profiler_range)
--   ts_us            kernel start, µs from the rank's first slice
--   dur_us           kernel duration, µs
--   launch_name      the runtime call paired with it (cudaLaunchKernel...)
--   op_stack         names of the cpu_op slices enclosing the launch, outermost first
--   top_level_op     the outermost of them ('' when none)
--   bottom_level_op  the innermost of them ('' when none)
--   counters         the event's args as written: the counters measured on the kernel
CREATE OR REPLACE VIEW hta_cupti_counters AS
WITH origin AS (
  SELECT trace, rank, min(ts_ns) AS t0_ns
  FROM slices
  GROUP BY ALL
),
kernels AS (
  SELECT
    trace, rank, name, cat, ts_ns, dur_ns, args,
    row_number() OVER (PARTITION BY trace, rank ORDER BY ts_ns, event_idx) AS kernel_no
  FROM slices
  WHERE cat = 'cuda_profiler_range'
),
launches AS (
  SELECT
    trace, rank, event_idx, name, pid, tid, ts_ns, end_ns,
    row_number() OVER (PARTITION BY trace, rank ORDER BY ts_ns, event_idx) AS kernel_no
  FROM slices
  WHERE starts_with(cat, 'cuda_runtime')
    AND starts_with(name, 'cudaLaunchKernel')
    AND (trace, rank) IN (SELECT (trace, rank) FROM kernels)
),
paired_ranks AS (
  SELECT trace, rank
  FROM (SELECT trace, rank, count(*) AS n FROM kernels GROUP BY ALL) AS k
  JOIN (SELECT trace, rank, count(*) AS n FROM launches GROUP BY ALL) AS l USING (trace, rank, n)
),
paired_launches AS (
  SELECT l.*
  FROM launches AS l
  SEMI JOIN paired_ranks AS p USING (trace, rank)
),
stacks AS (
  SELECT
    l.trace, l.rank, l.kernel_no,
    list(o.name ORDER BY o.ts_ns, o.dur_ns DESC, o.event_idx) FILTER (WHERE o.name IS NOT NULL) AS op_stack
  FROM paired_launches AS l
  LEFT JOIN slices AS o
    ON o.trace = l.trace AND o.rank = l.rank AND o.pid = l.pid AND o.tid = l.tid
    AND o.cat = 'cpu_op' AND o.ts_ns <= l.ts_ns AND o.end_ns >= l.end_ns
  GROUP BY ALL
)
SELECT
  k.trace,
  k.rank,
  k.kernel_no,
  k.name,
  k.cat,
  (k.ts_ns - o.t0_ns) / 1e3 AS ts_us,
  k.dur_ns / 1e3 AS dur_us,
  l.name AS launch_name,
  coalesce(s.op_stack, []) AS op_stack,
  coalesce(s.op_stack[1], '') AS top_level_op,
  coalesce(s.op_stack[-1], '') AS bottom_level_op,
  k.args AS counters
FROM kernels AS k
JOIN launches AS l USING (trace, rank, kernel_no)
JOIN stacks AS s USING (trace, rank, kernel_no)
JOIN origin AS o USING (trace, rank);
