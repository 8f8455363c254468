-- metric: hta_cuda_kernel_launch_stats
-- version: 1
-- unit: us
-- grain: rank
-- category: hta
-- family: hta
-- see_also: hta_queue_length_summary, hta_time_blocked_on_full_queue
-- polarity: lower
-- summary: mean
-- description: HTA 0.5.0-compatible CUDA kernel launch statistics (get_cuda_kernel_launch_stats) per rank: value = the mean launch delay (µs from the end of the runtime call to the start of its GPU operation, 0 when negative), with describe() of the runtime call, GPU and delay durations and HTA's three outlier counts.
-- needs: HTA launch calls (cudaLaunchKernel, cudaLaunchKernelExC, MTIA runFunction; cudaMemcpyAsync / cudaMemsetAsync) with their GPU rows
-- params: runtime_cutoff default 50, launch_delay_cutoff default 100, include_memory_events default 1
-- columns:
--   launches                     runtime call / GPU operation pairs (HTA's rows)
--   cpu_duration_mean            mean runtime call duration, µs
--   cpu_duration_std             its sample standard deviation
--   cpu_duration_min             shortest runtime call
--   cpu_duration_p25             25th percentile (linear interpolation, pandas' describe)
--   cpu_duration_p50             median runtime call
--   cpu_duration_p75             75th percentile
--   cpu_duration_max             longest runtime call
--   gpu_duration_mean            mean GPU operation duration, µs
--   gpu_duration_std             its sample standard deviation
--   gpu_duration_min             shortest GPU operation
--   gpu_duration_p25             25th percentile
--   gpu_duration_p50             median GPU operation
--   gpu_duration_p75             75th percentile
--   gpu_duration_max             longest GPU operation
--   launch_delay_mean            mean launch delay, µs (the value)
--   launch_delay_std             its sample standard deviation
--   launch_delay_min             smallest launch delay
--   launch_delay_p25             25th percentile
--   launch_delay_p50             median launch delay
--   launch_delay_p75             75th percentile
--   launch_delay_max             largest launch delay
--   short_gpu_kernels            pairs whose runtime call takes <= runtime_cutoff µs and whose GPU operation is shorter than the call
--   runtime_outliers             pairs whose runtime call takes > runtime_cutoff µs
--   launch_delay_outliers        pairs whose launch delay is > launch_delay_cutoff µs
-- Reproduces HTA 0.5.0 (pairs from the view hta_kernel_launches: HTA's inner
-- merge of CPU and GPU rows on the correlation of a launch call) for every
-- rank (HTA's default is rank 0). HTA returns the pairs and plots three
-- histograms; the outlier counts are the sizes of those histograms'
-- selections (CudaKernelAnalysis.visualize_cuda_launch_kernel_info) with
-- runtime_cutoff and launch_delay_cutoff. include_memory_events = 0 leaves out
-- the pairs of cudaMemcpyAsync / cudaMemsetAsync. HTA 0.5.0 counts neither
-- cuLaunchKernel nor cudaGraphLaunch nor any hip* call: a ROCm trace has no
-- pairs (value NULL with a reason; HTA returns an empty frame).
WITH pairs AS (
  SELECT l.*, p.runtime_cutoff, p.launch_delay_cutoff
  FROM hta_kernel_launches AS l
  JOIN metric_scope AS m USING (trace, rank)
  JOIN metric_params AS p USING (trace)
  WHERE NOT l.memory_launch OR p.include_memory_events <> 0
),
stats AS (
  SELECT
    trace,
    rank,
    count(*) AS launches,
    avg(cpu_duration_us) AS cpu_duration_mean,
    stddev_samp(cpu_duration_us) AS cpu_duration_std,
    min(cpu_duration_us) AS cpu_duration_min,
    quantile_cont(cpu_duration_us, 0.25) AS cpu_duration_p25,
    quantile_cont(cpu_duration_us, 0.5) AS cpu_duration_p50,
    quantile_cont(cpu_duration_us, 0.75) AS cpu_duration_p75,
    max(cpu_duration_us) AS cpu_duration_max,
    avg(gpu_duration_us) AS gpu_duration_mean,
    stddev_samp(gpu_duration_us) AS gpu_duration_std,
    min(gpu_duration_us) AS gpu_duration_min,
    quantile_cont(gpu_duration_us, 0.25) AS gpu_duration_p25,
    quantile_cont(gpu_duration_us, 0.5) AS gpu_duration_p50,
    quantile_cont(gpu_duration_us, 0.75) AS gpu_duration_p75,
    max(gpu_duration_us) AS gpu_duration_max,
    avg(launch_delay_us) AS launch_delay_mean,
    stddev_samp(launch_delay_us) AS launch_delay_std,
    min(launch_delay_us) AS launch_delay_min,
    quantile_cont(launch_delay_us, 0.25) AS launch_delay_p25,
    quantile_cont(launch_delay_us, 0.5) AS launch_delay_p50,
    quantile_cont(launch_delay_us, 0.75) AS launch_delay_p75,
    max(launch_delay_us) AS launch_delay_max,
    count(*) FILTER (WHERE cpu_duration_us <= runtime_cutoff AND gpu_duration_us < cpu_duration_us) AS short_gpu_kernels,
    count(*) FILTER (WHERE cpu_duration_us > runtime_cutoff) AS runtime_outliers,
    count(*) FILTER (WHERE launch_delay_us > launch_delay_cutoff) AS launch_delay_outliers
  FROM pairs
  GROUP BY trace, rank
)
SELECT
  m.trace,
  m.rank,
  s.launch_delay_mean AS value,
  CASE WHEN s.launches IS NULL THEN 'no launch call HTA 0.5.0 counts (cudaLaunchKernel, cudaLaunchKernelExC, runFunction, cudaMemcpyAsync, cudaMemsetAsync) with a GPU row in the HTA window' END AS reason,
  s.* EXCLUDE (trace, rank)
FROM metric_scope AS m
LEFT JOIN stats AS s USING (trace, rank)
