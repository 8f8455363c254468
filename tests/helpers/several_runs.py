"""A folder of several runs: two Nsight Systems exports recorded 99 days apart."""

from __future__ import annotations

from pathlib import Path

from cclq.synth.nsys import NsysExportBuilder

DAY_NS = 86_400 * 10**9
START = 1_700_000_000 * 10**9
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32"
CARD = "workload:\n  model:\n    phase: training\nmetric_source:\n  traces: [nsys]\n"


def two_runs(folder: Path) -> Path:
    """a_hpc.sqlite: recorded 99 days after b_bench.sqlite (first by name, not by time);
    kernels of 10 + 30 us (a) and one of 7 us (b)."""
    folder.mkdir(parents=True)
    a = NsysExportBuilder(session_start_ns=START + 99 * DAY_NS)
    p = a.process(pid=100, name="cloverleaf")
    a.kernel(p, 0, 7, 2_000, 12_000, GEMM, grid=(264, 1, 1))
    a.kernel(p, 0, 7, 20_000, 50_000, "advec_cell_kernel", grid=(66, 1, 1))
    a.write(folder / "a_hpc.sqlite")
    b = NsysExportBuilder(session_start_ns=START)
    p = b.process(pid=200, name="saxpy")
    b.kernel(p, 0, 7, 1_000, 8_000, "saxpy_kernel", grid=(132, 1, 1))
    b.write(folder / "b_bench.sqlite")
    (folder / "workload_card.yaml").write_text(CARD)
    return folder
