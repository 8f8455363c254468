"""`python -m cclq.main` prints each of CCL-Bench's 61 names in the unit CCL-Bench's own
tool prints: percent where it prints percent, GB/s where it prints GB/s.

The tables below are taken from CCL-Bench at HEAD 1d257f0, not from cclq: ``METRIC_INFO_UNITS``
is the ``unit`` of every ``metric_info`` entry of its ``website/benchmark_config.json``;
``TOOL_UNITS`` is what each tool ``tools/main.py`` dispatches returns, read from its code
(the file and the expression are named for each).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.ccl_bench import CCL_BENCH_NAMES

from cclq.compat.main import run_here
from cclq.query.registry import registry, resolve

ROOT = Path(__file__).resolve().parents[2]
KINETO_FOLDER = ROOT / "trace_collection" / "synthetic_mlp_dp4"

# website/benchmark_config.json, metric_info[name]["unit"]
METRIC_INFO_UNITS = {
    "avg_step_time": "s",
    "ttft": "s",
    "tpot": "s",
    "mfu": "%",
    "mean_sm_coverage": "%",
    "dominant_kernel_concentration": "%",
    "moe_fraction": "%",
    "average_memory_bandwidth": "GB/s",
    "memory_transfer_overhead": "%",
    "communication_fraction": "%",
    "total_communication_time": "s",
    "bandwidth_utilization_allgather_group_6": "GB/s",
    "bandwidth_utilization_allreduce_group_6": "GB/s",
    "bandwidth_utilization_alltoall_group_6": "GB/s",
    "bandwidth_utilization_reducescatter_group_6": "GB/s",
    "bandwidth_utilization_peertopeer_group_6": "%",
    "compute_comm_overlap": "%",
    "load_imbalance_ratio": "ratio",
    "straggler": "ratio",
    "scale_up_bw_utility": "%",
    "collective_vol_allreduce_gb": "GB",
    "collective_vol_allgather_gb": "GB",
    "collective_vol_reducescatter_gb": "GB",
    "collective_vol_alltoall_gb": "GB",
    "collective_vol_total_gb": "GB",
}

# What each tool returns (CCL-Bench's tools/<folder>/<file>.py), in cclq's unit words.
# "dict" tools print a dictionary, which the website cannot read as a number: cclq prints
# the number its table in docs/ccl-bench.md names (in the unit given here).
TOOL_UNITS = {
    # group 21 (wall_time, compute_time, comm_time, utilization, bandwidth, hockney, flops, throughput)
    "wall_time_s": "s",
    "total_compute_time_s": "s",
    "total_comm_time_s": "s",
    "avg_comm_kernel_time_s": "s",
    "allreduce_comm_time_s": "s",
    "compute_utilization_proxy": "ratio",  # utilization.py: dev_comp_time / dev_wall, mean over devices
    "num_comm_kernels": "count",
    "avg_comm_bandwidth_GBps": "GB/s",
    "hockney_alpha_s": "s",
    "hockney_beta_s_per_byte": "s/byte",
    "hockney_inverse_beta_Bps": "B/s",
    "achieved_flops_from_trace_json": "FLOP/s",
    "total_model_flops_from_args": "FLOP",
    "throughput": "tokens/s",
    "estimated_throughput_tokens_per_s": "tokens/s",
    "flops_per_token_used": "FLOP/token",
    "estimated_total_tokens": "tokens",
    "coll_call_num": "count",
    "mfu": "%",  # mfu.py: round((observed_flops / peak_flops_total) * 100.0, 4)
    "avg_step_time": "s",  # statistics.mean(...) / 1e6  # µs → s
    "ttft": "s",
    "tpot": "s",  # inference_latency.py: statistics.mean(vals) / 1e6
    "communication_ratio": "%",  # communication_ratio.py: (comm_sum / total_sum) * 100.0
    "total_trace_time": "s",
    "total_kernel_time": "s",
    "total_communication_time": "s",
    "break_down_steps": "s",  # dict: per .nsys-rep file, total_ms / comm_pct ...
    "communication_fraction": "%",  # communication_fraction.py: (comm_dur / total_dur) * 100.0
    "moe_fraction": "%",  # moe_fraction.py: (moe_dur / total_dur) * 100.0
    "dominant_kernel_concentration": "%",  # (top_dur / total_dur) * 100.0
    "aggregate_gpu_utilization": "%",  # (merged_time / trace_duration) * 100.0
    "mean_sm_coverage": "%",  # (weighted_sum / total_dur) * 100.0
    "memory_transfer_overhead": "%",  # round((total_pure_memcpy / total_span) * 100.0, 4)
    "average_memory_bandwidth": "GB/s",  # (total_bytes / total_dur_us) / 1000.0
    "memory_bound_fraction": "%",  # round((memory_bound_dur / total_kernel_dur) * 100.0, 4)
    "load_imbalance_ratio": "ratio",  # max_t / min_t
    "communication_overlap_ratio": "ratio",  # total_overlap_time / total_comm_time
    "compute_comm_overlap": "%",  # "Unit: percent (0–100)"
    "ttft_group_6": "ms",
    "tpot_group_6": "ms",  # record["median_ttft_ms"], record["median_tpot_ms"]
    # bandwidth_utilization_group_6_common.py: median of df["effective bandwidth(GB/s)"]
    "bandwidth_utilization_allgather_group_6": "GB/s",
    "bandwidth_utilization_allreduce_group_6": "GB/s",
    "bandwidth_utilization_alltoall_group_6": "GB/s",
    "bandwidth_utilization_reducescatter_group_6": "GB/s",
    # "NVLink TX Responses User Data [Throughput %]" averaged
    "bandwidth_utilization_peertopeer_group_6": "%",
    "kernel_compute_time_group_6": "s",
    "throughput_group_6": "tokens/s",
    "straggler": "ratio",  # (max_total - min_total) / max_total
    "straggler_metrics": "ratio",  # its last line: max_total / min_total
    "comm_kernel_breakdown_tpu": "s",  # dict of device times per collective type
    "estimated_bandwidth": "GB/s",  # bandwidth_wall_gbs = (total_bytes / 1e9) / wall_s
    "traffic_window": "s",  # dict of comm time per window
    "communication_overhead": "ratio",  # comm_time_us / total_gpu_time_us
    "bandwidth_utilization": "ratio",  # mean of T_exp / T_obs
    "gpu_step_score": "score",  # "Unit: dimensionless"
    "scale_up_bw_utility": "%",  # 100.0 * (base_step - variant_step) / base_step
    "collective_vol_allreduce_gb": "GB",
    "collective_vol_allgather_gb": "GB",
    "collective_vol_reducescatter_gb": "GB",
    "collective_vol_alltoall_gb": "GB",
    "collective_vol_total_gb": "GB",  # collective_data_volume.py: b / 1e9
}


def test_the_tables_cover_the_61_names_and_agree():
    assert set(TOOL_UNITS) == set(CCL_BENCH_NAMES)
    assert set(METRIC_INFO_UNITS) <= set(TOOL_UNITS)
    assert {n: TOOL_UNITS[n] for n in METRIC_INFO_UNITS} == METRIC_INFO_UNITS


@pytest.mark.parametrize("name", CCL_BENCH_NAMES)
def test_each_name_prints_in_ccl_benchs_unit(name):
    """The unit of what `python -m cclq.main` prints for the name (the latest version's
    unit, or its ccl_bench_unit where CCL-Bench prints percent of a cclq ratio)."""
    spec = resolve(name)
    assert spec.shown_unit == TOOL_UNITS[name], (name, spec.unit, spec.ccl_bench_unit)
    assert spec.ccl_bench_scale == (100.0 if spec.unit == "ratio" and TOOL_UNITS[name] == "%" else 1.0)


def test_every_version_of_a_percent_name_says_so():
    """A version pinned by a library caller shows the same unit as the latest."""
    for name in CCL_BENCH_NAMES:
        for spec in registry()[name].values():
            if spec.unit == "ratio":
                assert spec.shown_unit == ("%" if TOOL_UNITS[name] == "%" else "ratio"), spec.label


# CCL-Bench's tools/main.py (HEAD 1d257f0, pandas 3.1, numpy 2.4) on synthetic_mlp_dp4
# decompressed: numbers it printed, in its units (docs/ccl-bench.md: "equal up to the unit").
CCL_BENCH_PRINTED = {
    "communication_ratio": 12.451567502513033,
    "mean_sm_coverage": 89.05771189760151,
    "dominant_kernel_concentration": 28.25372298920262,
    "aggregate_gpu_utilization": 98.71177459697292,
    "memory_bound_fraction": 6.6307,  # rounded to 4 decimals by the tool
    "compute_comm_overlap": 49.64125412358628,
}


@pytest.mark.parametrize("name", sorted(CCL_BENCH_PRINTED))
def test_the_printed_number_is_ccl_benchs(tmp_path, capsys, name):
    rc = run_here(["--trace", str(KINETO_FOLDER), "--metric", name, "--warehouse", str(tmp_path / "wh")])
    out = capsys.readouterr().out
    assert rc == 0
    assert float(out.splitlines()[-1]) == pytest.approx(CCL_BENCH_PRINTED[name], rel=2e-6, abs=1e-4)
