"""Nsight Systems SQLite exports: the same events, views and metrics as Kineto traces.

Numbers are computed in the tests from the raw SQLite with plain ``sqlite3`` queries, or
placed by hand with ``cclq.synth.nsys`` / ``cclq.synth.kineto``.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest
from helpers.cli import invoke
from helpers.paths import SHARED_TRACES, require_shared
from helpers.warehouse import metric_rows, query, run_ingest

from cclq.synth.kineto import KinetoTraceBuilder
from cclq.synth.nsys import NsysExportBuilder

BASE = 1_700_000_000_000_000_000


def _raw(path: Path, sql: str) -> tuple:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return con.execute(sql).fetchone()
    finally:
        con.close()


@pytest.mark.slow
@pytest.mark.parametrize("name", ["perlmutter-cloverleaf-cuda.sqlite", "saxpy-mpi-cuda_nsys_perlmutter0.sqlite"])
def test_real_exports_keep_every_kernel_and_copy(tmp_path, wh, name):
    require_shared()
    path = SHARED_TRACES / "nsys_pipit_hpc" / name
    (tmp_path / "w").mkdir()
    shutil.copy(path, tmp_path / "w" / name)
    report = run_ingest([tmp_path / "w"], wh)
    assert [o.status for o in report.outcomes] == ["ingested"]
    kernels, kernel_ns, first = _raw(
        path, "SELECT count(*), sum(end - start), min(start) FROM CUPTI_ACTIVITY_KIND_KERNEL"
    )
    copies, copy_bytes = _raw(path, "SELECT count(*), sum(bytes) FROM CUPTI_ACTIVITY_KIND_MEMCPY")
    (session,) = _raw(path, "SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME")
    assert query(wh, "SELECT count(*), sum(dur_ns), min(ts_ns) FROM kernels") == [(kernels, kernel_ns, session + first)]
    assert query(wh, "SELECT count(*), sum(bytes) FROM gpu_ops WHERE kind = 'memcpy'") == [(copies, copy_bytes)]
    (value,) = [r["value"] for r in metric_rows(wh, "total_kernel_time")]
    assert value == pytest.approx(kernel_ns / 1e9, rel=1e-12)
    # the launching runtime call joins on the correlation id, as on Kineto traces
    (runtime,) = _raw(
        path,
        "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME AS r JOIN CUPTI_ACTIVITY_KIND_KERNEL "
        "AS k USING (correlationId)",
    )
    assert query(
        wh,
        "SELECT count(*) FROM kernels AS k JOIN slices AS r USING (trace, rank, correlation) "
        "WHERE r.cat = 'cuda_runtime'",
    ) == [(runtime,)]
    assert query(wh, "SELECT DISTINCT format FROM files") == [("nsys",)]


@pytest.mark.slow
def test_the_shared_folder_of_two_unrelated_exports_takes_both(tmp_path, wh):
    """Two exports whose sessions started 99 days apart (saxpy 2023-06-26, cloverleaf
    2023-10-04) are two runs: each is a trace of its own (issue 21), rank 0 in each;
    saxpy's name gives its rank, cloverleaf's says nothing (rank 0 by default)."""
    require_shared()
    report = run_ingest([SHARED_TRACES / "nsys_pipit_hpc"], wh)
    assert sorted(o.status for o in report.outcomes) == ["ingested", "ingested"]
    assert any("99.3 days apart" in w for w in report.warnings), report.warnings
    assert query(wh, "SELECT trace, relpath, rank, rank_source FROM files ORDER BY trace") == [
        ("nsys_pipit_hpc+perlmutter-cloverleaf-cuda", "perlmutter-cloverleaf-cuda.sqlite", 0, "default"),
        ("nsys_pipit_hpc+saxpy-mpi-cuda_nsys_perlmutter0", "saxpy-mpi-cuda_nsys_perlmutter0.sqlite", 0, "file name"),
    ]


def _workload_as_nsys(path: Path) -> Path:
    """One rank: a GEMM, an all-reduce overlapping its second half, a copy; two steps."""
    b = NsysExportBuilder(session_start_ns=BASE, sm_count=132)
    p = b.process(pid=4242)
    b.nvtx_range(p, 0, 20_000, "ProfilerStep#1")
    b.kernel(p, 0, 7, 2_000, 12_000, "sm90_xmma_gemm_bf16bf16_bf16f32", grid=(264, 1, 1))
    b.kernel(
        p,
        0,
        20,
        7_000,
        17_000,
        "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
        grid=(16, 1, 1),
    )
    b.memcpy(p, 0, 7, 18_000, 19_000, 4_000_000)
    return b.write(path)


def _workload_as_kineto(path: Path) -> Path:
    b = KinetoTraceBuilder(rank=0, world_size=1, base_time_ns=BASE)
    b.user_annotation("ProfilerStep#1", 0, 20_000)
    b.kernel("sm90_xmma_gemm_bf16bf16_bf16f32", 2_000, 10_000, stream=7, args={"grid": [264, 1, 1]})
    b.kernel(
        "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
        7_000,
        10_000,
        stream=20,
        args={"grid": [16, 1, 1]},
    )
    b.memcpy(18_000, 1_000, 4_000_000)
    return b.write(path)


def test_a_gpu_metric_means_the_same_on_nsys_and_on_kineto(tmp_path, wh):
    _workload_as_nsys(tmp_path / "in" / "as_nsys" / "profile.sqlite")
    _workload_as_kineto(tmp_path / "in" / "as_kineto" / "rank0.json")
    report = run_ingest([tmp_path / "in"], wh)
    assert not report.failed
    expected = {  # worked out on paper from the placements above
        "total_kernel_time": 20e-6,  # 10 us + 10 us
        "communication_overlap_ratio": 0.5,  # 5 of the all-reduce's 10 us run under the GEMM
        "communication_fraction": 0.5,  # 10 of 20 us of kernel time
        "average_memory_bandwidth": 4000.0,  # 4 MB in 1 us = 4e12 B/s = 4000 GB/s
        "mean_sm_coverage": (10 * 1.0 + 10 * 16 / 132) / 20,  # duration-weighted min(grid/132, 1)
        "avg_step_time": 20e-6,
    }
    for metric, value in expected.items():
        got = {r["trace"]: r["value"] for r in metric_rows(wh, metric)}
        assert got == {"as_kineto": pytest.approx(value), "as_nsys": pytest.approx(value)}, metric


def test_an_export_of_a_node_holds_a_rank_per_mpi_process(tmp_path, wh):
    b = NsysExportBuilder(session_start_ns=BASE, gpus=2)
    procs = [b.process(pid=100 + r, mpi_rank=r) for r in (0, 1)]
    for r, p in enumerate(procs):
        b.kernel(p, device=1 - r, stream=7, start=1_000, end=1_000 + 1_000 * (r + 1), name="gemm")
    b.write(tmp_path / "node" / "node.sqlite")
    report = run_ingest([tmp_path / "node"], wh)
    assert [o.status for o in report.outcomes] == ["ingested"]
    assert query(wh, "SELECT rank, device, dur_ns FROM kernels ORDER BY rank") == [(0, 1, 1000), (1, 0, 2000)]
    # each rank's launches are on its own rank
    assert query(wh, "SELECT rank, count(*) FROM slices WHERE cat = 'cuda_runtime' GROUP BY rank ORDER BY rank") == [
        (0, 1),
        (1, 1),
    ]
    assert query(wh, "SELECT ranks_seen, ranks FROM traces") == [(2, [0, 1])]
    assert query(wh, "SELECT rank_source FROM files") == [("MPI rank per process",)]


def test_without_mpi_ranks_each_gpu_is_a_rank_and_a_warning_says_so(tmp_path, wh):
    b = NsysExportBuilder(session_start_ns=BASE, gpus=2, mpi_ranks_table=False)
    p = b.process(pid=100)
    for d in (0, 1):
        b.kernel(p, device=d, stream=7, start=1_000, end=3_000, name="gemm")
    b.write(tmp_path / "node" / "one_process_two_gpus.sqlite")
    report = run_ingest([tmp_path / "node"], wh)
    assert [o.status for o in report.outcomes] == ["ingested"]
    assert query(wh, "SELECT rank, device FROM kernels ORDER BY rank") == [(0, 0), (1, 1)]
    assert any("2 GPUs and no MPI rank" in w for w in report.warnings)


def test_an_nvtx_mpi_rank_names_the_rank_when_the_file_name_does_not(tmp_path, wh):
    b = NsysExportBuilder(session_start_ns=BASE, mpi_ranks_table=False)
    p = b.process(pid=100)
    b.nvtx_thread_name(p, "MPI Rank 3")
    b.nvtx_range(p, 500, 9_000, "forward")
    b.kernel(p, device=0, stream=7, start=1_000, end=3_000, name="gemm")
    b.write(tmp_path / "w" / "profile.sqlite")
    run_ingest([tmp_path / "w"], wh)
    assert query(wh, "SELECT rank, rank_source FROM files") == [(3, "MPI rank")]
    assert query(wh, "SELECT name, cat, cat_raw, dur_ns FROM slices WHERE cat = 'user_annotation'") == [
        ("forward", "user_annotation", "nvtx", 8500)
    ]
    assert ("MPI Rank 3",) in query(wh, "SELECT thread_name FROM thread_names")


def test_a_missing_column_is_one_clear_line(tmp_path):
    b = NsysExportBuilder(session_start_ns=BASE)
    b.kernel(b.process(pid=1), 0, 7, 1_000, 2_000, "gemm")
    path = b.write(tmp_path / "w" / "old.sqlite")
    con = sqlite3.connect(path)
    con.execute("ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN correlationId")
    con.commit()
    con.close()
    result = invoke("ingest", str(tmp_path / "w"), "-w", str(tmp_path / "wh"), "-q")
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"cclq: error: {path}: Nsight Systems export (schema 3.13.2): table CUPTI_ACTIVITY_KIND_KERNEL has no column "
        "correlationId; cclq reads the columns of nsys 2022.2 and later"
    ]


def test_kernels_that_end_before_they_start_are_dropped_and_counted(tmp_path, wh):
    b = NsysExportBuilder(session_start_ns=BASE)
    p = b.process(pid=1)
    b.kernel(p, 0, 7, 1_000, 2_000, "good")
    b.kernel(p, 0, 7, 5_000, 4_000, "bad")
    b.write(tmp_path / "w" / "x.sqlite")
    run_ingest([tmp_path / "w"], wh)
    assert query(wh, "SELECT name FROM kernels") == [("good",)]
    assert query(wh, "SELECT stat, ph, count FROM ingest_stats WHERE dropped") == [("negative dur", "X", 1)]
