"""How `python -m cclq.main` reduces a trace's rows to one number: each metric's
declared summary. Version 2 of mean_sm_coverage, memory_bound_fraction and
average_memory_bandwidth pools every rank's kernels (a ratio of sums), as CCL-Bench's
tools pool their rank files; version 1 averaged the per-rank values.

The expected numbers are worked out by hand from the kernels placed below.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.warehouse import run_ingest

from cclq.compat.main import main as cclq_main
from cclq.query.metrics import run_metric, summarize
from cclq.query.registry import parse_metric_file, resolve, summary_rule
from cclq.query.session import connect
from cclq.store.warehouse import Warehouse
from cclq.synth.kineto import KinetoTraceBuilder

US = 1_000
TOL = 1e-12
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_cublas"
ELEM = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float> >(int)"


def build_unequal_ranks(folder: Path) -> None:
    """Rank 0: 30 us of elementwise (memory-bound) kernels and 10 us of GEMM; rank 1:
    10 us of GEMM only. memory_bound_fraction per rank: 30/40 = 0.75 and 0."""
    for rank, kernels in ((0, [(ELEM, 0, 30), (GEMM, 40, 10)]), (1, [(GEMM, 0, 10)])):
        b = KinetoTraceBuilder(rank=rank, world_size=2)
        for name, ts, dur in kernels:
            b.kernel(name, ts * US, dur * US)
        b.write(folder / f"rank{rank}.json")


def test_pooled_summary_differs_from_the_mean_of_ranks(tmp_path: Path) -> None:
    """Two ranks with unequal kernel time: rank 0 runs 30 us of memory-bound elementwise
    kernels and 10 us of GEMM (0.75), rank 1 10 us of GEMM only (0). The mean over ranks is
    0.375; pooled, 30 / 50 = 0.6 is what CCL-Bench's tool prints."""
    build_unequal_ranks(tmp_path / "in" / "pooled")
    wh = Warehouse(tmp_path / "wh")
    run_ingest([tmp_path / "in"], wh)
    c = connect(wh)
    try:
        for version, expected in ((1, 0.375), (2, 0.6)):
            spec = resolve("memory_bound_fraction", version)
            value, _ = summarize(spec, run_metric(c, spec))
            assert value == pytest.approx(expected, abs=TOL), version
    finally:
        c.close()


def test_cclq_main_prints_the_pooled_number(tmp_path: Path, capsys) -> None:
    build_unequal_ranks(tmp_path / "pooled")
    code = cclq_main(
        ["--trace", str(tmp_path / "pooled"), "--metric", "memory_bound_fraction", "--warehouse", str(tmp_path / "wh")]
    )
    assert code == 0
    # in percent, as CCL-Bench's tool prints it (the metric's ccl_bench_unit)
    assert float(capsys.readouterr().out.strip().splitlines()[-1]) == pytest.approx(60.0, abs=1e-9)


def test_summary_headers_parse(tmp_path: Path) -> None:
    path = tmp_path / "x" / "v1.sql"
    path.parent.mkdir()
    text = (
        "-- metric: x\n-- version: 1\n-- unit: ratio\n-- grain: rank\n-- category: compute\n"
        "-- polarity: higher\n-- description: d\n-- summary: {}\nSELECT 1 AS trace, 1 AS value\n"
    )
    path.write_text(text.format("ratio a_s / b_s"))
    spec = parse_metric_file(path)
    assert (spec.summary, spec.summary_columns) == ("ratio", ("a_s", "b_s"))
    assert summary_rule(spec) == "Σa_s / Σb_s over ranks (pooled)"
    for bad in ("ratio", "ratio a_s", "median"):
        path.write_text(text.format(bad))
        with pytest.raises(ValueError, match="summary must be one of"):
            parse_metric_file(path)
    assert summary_rule(resolve("total_kernel_time")) == "sum over ranks"
    assert summary_rule(resolve("moe_fraction")) == "the trace's value"
