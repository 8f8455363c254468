-- Training/inference steps: `ProfilerStep#N` annotations (what `prof.step()`
-- records), and the step each GPU activity belongs to.
-- requires: kernel_classes

-- One row per (trace, rank, step): the CPU-side ProfilerStep#N annotation.
-- `step` is N. Older PyTorch records it as a cpu_op, newer as a user_annotation.
CREATE OR REPLACE VIEW steps AS
SELECT
  trace,
  rank,
  TRY_CAST(regexp_extract(name, 'ProfilerStep\s*#\s*(\d+)', 1) AS BIGINT) AS step,
  min(ts_ns) AS ts_ns,
  max(end_ns) AS end_ns,
  max(end_ns) - min(ts_ns) AS dur_ns
FROM slices
WHERE cat IN ('user_annotation', 'cpu_op')
  AND regexp_matches(name, '^ProfilerStep\s*#\s*\d+')
  AND dur_ns IS NOT NULL
GROUP BY ALL;

-- The runtime call (cudaLaunchKernel, cudaMemcpyAsync, ...) that launched each
-- GPU activity, matched on the CUPTI correlation id within one rank.
CREATE OR REPLACE VIEW gpu_launches AS
SELECT trace, rank, correlation, min(ts_ns) AS launch_ns
FROM slices
WHERE cat IN ('cuda_runtime', 'cuda_driver', 'hip_runtime', 'mtia_runtime', 'xpu_runtime', 'privateuse1_runtime')
  AND correlation IS NOT NULL
GROUP BY ALL;

-- Every classified GPU activity with the step whose CPU span contains its launch
-- (NULL when it was launched outside any step, or the launch is not in the
-- trace). Attribution by launch, as HTA does: a kernel that runs after its
-- step ended still belongs to the step that issued it.
CREATE OR REPLACE VIEW gpu_ops_steps AS
SELECT o.*, l.launch_ns, s.step
FROM gpu_ops_classified AS o
LEFT JOIN gpu_launches AS l USING (trace, rank, correlation)
LEFT JOIN steps AS s
  ON s.trace = o.trace AND s.rank = o.rank AND l.launch_ns >= s.ts_ns AND l.launch_ns < s.end_ns;
