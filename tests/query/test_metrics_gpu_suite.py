"""The CCL-Bench GPU metric suite: break_down_steps, communication_ratio,
total_communication_time, moe_fraction, dominant_kernel_concentration,
aggregate_gpu_utilization, mean_sm_coverage, memory_transfer_overhead,
average_memory_bandwidth, compute_bound_fraction, memory_bound_fraction and
load_imbalance_ratio.

Every expected number is worked out by hand on small traces built with
``KinetoTraceBuilder`` (the arithmetic is in the comments), or computed here from the
raw Kineto JSON of ``dlrm_param_8xV100`` with the ``json`` module.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import pytest
from helpers.paths import require_shared
from helpers.warehouse import query, run_ingest

from cclq.query.metrics import run_metric
from cclq.query.registry import resolve
from cclq.query.session import connect
from cclq.store.warehouse import Warehouse
from cclq.synth.kineto import KinetoTraceBuilder, Micros

# --------------------------------------------------------------------------------------
# Kernel names (real CUDA/PyTorch spellings) and the families they must land in
# --------------------------------------------------------------------------------------

GEMM = (
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_"
    "execute_segment_k_off_kernel__5x_cublas"
)
ATTN = (
    "void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 64, 64, 4, false, false, "
    "cutlass::bfloat16_t>, false, true>(Flash_fwd_params)"
)
ELEM = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
    "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, "
    "at::detail::Array<char*, 1>)"
)
MOE_EXPERT = "fused_moe_kernel"
TOPK = (
    "void at::native::sbtopk::gatherTopK<float, unsigned int, 2, false>("
    "at::cuda::detail::TensorInfo<float, unsigned int>, unsigned int, unsigned int, bool)"
)
SOFTMAX = (
    "void (anonymous namespace)::softmax_warp_forward<float, float, float, 10, false, "
    "false>(float*, float const*, int, int, int, bool const*, int, bool)"
)
NORM = (
    "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>("
    "int, float, float const*, float const*, float const*, float*, float*, float*)"
)
REDUCE = (
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, "
    "at::native::MeanOps<float, float, float, float>, unsigned int, float, 4> >("
    "at::native::ReduceOp<float, at::native::MeanOps<float, float, float, float>, "
    "unsigned int, float, 4>)"
)
COPY = (
    "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda("
    "at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda(float)#1}, "
    "at::detail::Array<char*, 2> >(int, at::detail::Array<char*, 2>)"
)
FBGEMM = (
    "void fbgemm_gpu::permute_2D_lengths_kernel<int>(int, int, int const*, int const*, int*, fbgemm_gpu::FixedDivisor)"
)

# name -> (break_down_steps category, memory_bound_fraction family, is MoE)
EXPECTED_FAMILIES = {
    GEMM: ("DENSE_GEMM", "gemm", False),
    ATTN: ("ATTN", "other", False),
    ELEM: ("OTHER", "elementwise", False),
    MOE_EXPERT: ("MOE_EXPERT", "other", True),
    TOPK: ("MOE_ROUTE", "other", True),
    SOFTMAX: ("OTHER", "softmax", False),
    NORM: ("OTHER", "normalization", False),  # normalization wins over `vectorized`
    REDUCE: ("OTHER", "reduction", False),
    COPY: ("OTHER", "memory_transfer", False),  # memory_transfer wins over `elementwise`
    FBGEMM: ("OTHER", "other", False),  # fbgemm_gpu:: is a library, not a GEMM
}

US = 1_000  # ns per microsecond: all times below are in ns
TOL = 1e-12


# --------------------------------------------------------------------------------------
# The traces
# --------------------------------------------------------------------------------------


def _steps(b: KinetoTraceBuilder) -> None:
    """Four ProfilerSteps of 100 us: S1 [0,100) S2 [100,200) S3 [200,300) S4 [300,400) us."""
    for i in range(4):
        b.profiler_step(i + 1, i * 100 * US, 100 * US)


def _bps(value: float) -> dict[str, Any]:
    return {"blocks per SM": value}


def build_two_ranks(folder: Path) -> None:
    """`suite_two_ranks`: steps on both ranks; comm and memcpys on rank 0 only.

    Rank 0 (us; stream; launched in; blocks per SM):
      k1  GEMM       [10, 50)   s7   S1  2.0
      k2  allreduce  [30, 70)   s20  S1  16/132 -> 0.121212 (the builder's NCCL grid)
      k3  ATTN       [110,140)  s7   S2  0.71
      k4  ELEM       [115,125)  s8   S2  4.0     (nested in k3, other stream)
      k5  allreduce  [190,220)  s20  S2  0.121212 (runs past the step's CPU end)
      k6  allreduce  [280,320)  s21  S3  0.121212 (crosses the inner-window end 300)
      k7  MOE_EXPERT [210,230)  s7   S3  0.25
      k8  TOPK       [232,236)  s7   S3  0.1
      k9  SOFTMAX    [240,250)  s7   S3  1.0
      k10 NORM       [305,315)  s7   S4  0.8
      k11 REDUCE     [320,330)  s7   S4  0.75
      k12 COPY       [330,335)  s7   S4  3.0
      memcpy m1 [40,80) 2,000,000 B; m2 [140,150) 700,000 B; m3 [335,345) 0 B (stream 9)
    Rank 1: k1' GEMM [10,60) s7 S1 1.5; k2' ELEM [20,30) s8 S1 0.7; k3' GEMM [150,175) s7 S2 0.6.
    """
    b = KinetoTraceBuilder(rank=0, world_size=2)
    _steps(b)
    b.kernel(GEMM, 10 * US, 40 * US, stream=7, launch_ts=5 * US, args=_bps(2.0))
    b.nccl_kernel("allreduce", 30 * US, 40 * US, stream=20, launch_ts=6 * US)
    b.kernel(ATTN, 110 * US, 30 * US, stream=7, launch_ts=105 * US, args=_bps(0.71))
    b.kernel(ELEM, 115 * US, 10 * US, stream=8, launch_ts=106 * US, args=_bps(4.0))
    b.nccl_kernel("allreduce", 190 * US, 30 * US, stream=20, launch_ts=150 * US)
    b.nccl_kernel("allreduce", 280 * US, 40 * US, stream=21, launch_ts=250 * US)
    b.kernel(MOE_EXPERT, 210 * US, 20 * US, stream=7, launch_ts=205 * US, args=_bps(0.25))
    b.kernel(TOPK, 232 * US, 4 * US, stream=7, launch_ts=206 * US, args=_bps(0.1))
    b.kernel(SOFTMAX, 240 * US, 10 * US, stream=7, launch_ts=207 * US, args=_bps(1.0))
    b.kernel(NORM, 305 * US, 10 * US, stream=7, launch_ts=301 * US, args=_bps(0.8))
    b.kernel(REDUCE, 320 * US, 10 * US, stream=7, launch_ts=302 * US, args=_bps(0.75))
    b.kernel(COPY, 330 * US, 5 * US, stream=7, launch_ts=303 * US, args=_bps(3.0))
    b.memcpy(40 * US, 40 * US, 2_000_000, kind="HtoD", stream=9)
    b.memcpy(140 * US, 10 * US, 700_000, kind="DtoH", stream=9)
    b.memcpy(335 * US, 10 * US, 0, kind="DtoD", stream=9)
    b.write(folder / "rank0.pt.trace.json")

    b = KinetoTraceBuilder(rank=1, world_size=2)
    _steps(b)
    b.kernel(GEMM, 10 * US, 50 * US, stream=7, launch_ts=5 * US, args=_bps(1.5))
    b.kernel(ELEM, 20 * US, 10 * US, stream=8, launch_ts=6 * US, args=_bps(0.7))
    b.kernel(GEMM, 150 * US, 25 * US, stream=7, launch_ts=140 * US, args=_bps(0.6))
    b.write(folder / "rank1.pt.trace.json")


def build_no_steps(folder: Path) -> None:
    """`suite_no_steps`: one rank, no ProfilerStep. Comm on two streams overlapping:
    allgather [0,20) s20, allgather [10,30) s21; GEMM [5,45) s7 (us)."""
    b = KinetoTraceBuilder(rank=0, world_size=1)
    b.nccl_kernel("allgather", 0, 20 * US, stream=20)
    b.nccl_kernel("allgather", 10 * US, 20 * US, stream=21)
    b.kernel(GEMM, 5 * US, 40 * US, stream=7)
    b.write(folder / "rank0.pt.trace.json")


def _raw_kernel(b: KinetoTraceBuilder, name: str, ts: int, dur: int, corr: int, grid: list[int] | None) -> None:
    """A kernel as older PyTorch / ROCm write it: no `blocks per SM` (and maybe no grid)."""
    args: dict[str, Any] = {"device": b.device, "stream": 7, "correlation": corr}
    if grid is not None:
        args.update({"grid": grid, "block": [128, 1, 1]})
    b.raw(
        {
            "ph": "X",
            "cat": "kernel",
            "name": name,
            "pid": b.device,
            "tid": 7,
            "ts": Micros(ts),
            "dur": Micros(dur),
            "args": args,
        }
    )


def build_grid_only(folder: Path) -> None:
    """`suite_grid_only`: kernels without `blocks per SM`; the synthetic device 0 has
    numSms = 132. kA grid [66,1,1] 10 us; kB [4,11,3] 30 us; kC [300,1,1] 20 us; kD a
    normal kernel with blocks per SM 0.25, 40 us. Back to back from 0 us."""
    b = KinetoTraceBuilder(rank=0, world_size=1)
    _raw_kernel(b, "kA", 0, 10 * US, 1, [66, 1, 1])
    _raw_kernel(b, "kB", 10 * US, 30 * US, 2, [4, 11, 3])
    _raw_kernel(b, "kC", 40 * US, 20 * US, 3, [300, 1, 1])
    b.kernel("kD", 60 * US, 40 * US, stream=7, args=_bps(0.25))
    b.write(folder / "rank0.pt.trace.json")


def build_no_coverage(folder: Path) -> None:
    """`suite_no_coverage`: rank 0 has one kernel with neither blocks per SM nor grid;
    rank 1 has CPU work only (no GPU kernels at all)."""
    b = KinetoTraceBuilder(rank=0, world_size=2)
    _raw_kernel(b, "kX", 0, 10 * US, 1, None)
    b.write(folder / "rank0.pt.trace.json")
    b = KinetoTraceBuilder(rank=1, world_size=2)
    b.cpu_op("aten::add", 0, 10 * US)
    b.write(folder / "rank1.pt.trace.json")


def build_names(folder: Path) -> None:
    """`suite_names`: one kernel whose name only looks like a GEMM (FBGEMM)."""
    b = KinetoTraceBuilder(rank=0, world_size=1)
    b.kernel(FBGEMM, 0, 1 * US)
    b.write(folder / "rank0.pt.trace.json")


@pytest.fixture(scope="module")
def suite_wh(tmp_path_factory: pytest.TempPathFactory) -> Warehouse:
    root = tmp_path_factory.mktemp("gpu_suite")
    traces = root / "traces"
    build_two_ranks(traces / "suite_two_ranks")
    build_no_steps(traces / "suite_no_steps")
    build_grid_only(traces / "suite_grid_only")
    build_no_coverage(traces / "suite_no_coverage")
    build_names(traces / "suite_names")
    wh = Warehouse(root / "wh")
    report = run_ingest([traces], wh)
    assert not report.failed
    return wh


_RESULTS: dict[tuple[str, str], list[dict[str, Any]]] = {}
_CONNECTIONS: dict[str, duckdb.DuckDBPyConnection] = {}


@pytest.fixture(scope="module", autouse=True)
def _close_connections() -> Iterator[None]:
    yield
    for con in _CONNECTIONS.values():
        con.close()
    _CONNECTIONS.clear()
    _RESULTS.clear()


def rows(wh: Warehouse, metric: str, trace: str) -> list[dict[str, Any]]:
    """The metric's rows for one trace (one connection per warehouse, each metric run once)."""
    root = str(wh.root)
    if (root, metric) not in _RESULTS:
        if root not in _CONNECTIONS:
            _CONNECTIONS[root] = connect(wh)
        _RESULTS[(root, metric)] = run_metric(_CONNECTIONS[root], resolve(metric)).to_pylist()
    return [r for r in _RESULTS[(root, metric)] if r["trace"] == trace]


def by_rank(wh: Warehouse, metric: str, trace: str) -> dict[int, dict[str, Any]]:
    found = rows(wh, metric, trace)
    out = {r["rank"]: r for r in found}
    assert len(out) == len(found), "one row per rank expected"
    return out


def one(wh: Warehouse, metric: str, trace: str) -> dict[str, Any]:
    (row,) = rows(wh, metric, trace)
    return row


def assert_not_applicable(row: dict[str, Any], reason: str) -> None:
    assert row["value"] is None
    assert row["reason"] == reason


# --------------------------------------------------------------------------------------
# The family table
# --------------------------------------------------------------------------------------


def test_kernel_family_rules_classify_names(suite_wh: Warehouse) -> None:
    got = {
        name: (bd, fam, moe)
        for name, bd, fam, moe in query(
            suite_wh, "SELECT name, breakdown, boundness, is_moe FROM kernel_name_families(1)"
        )
    }
    for name, expected in EXPECTED_FAMILIES.items():
        assert got[name] == expected, name
    comm = [v for n, v in got.items() if n.startswith("ncclDevKernel")]
    assert comm and all(v == ("COMM", "communication", False) for v in comm)
    # a rules version that does not exist leaves every non-comm kernel OTHER
    assert query(suite_wh, "SELECT DISTINCT breakdown FROM kernel_name_families(99) WHERE breakdown <> 'COMM'") == [
        ("OTHER",)
    ]


# --------------------------------------------------------------------------------------
# Step grain
# --------------------------------------------------------------------------------------


def test_break_down_steps(suite_wh: Warehouse) -> None:
    got = {(r["rank"], r["step"]): r for r in rows(suite_wh, "break_down_steps", "suite_two_ranks")}
    assert set(got) == {(r, s) for r in (0, 1) for s in (1, 2, 3, 4)}
    # Attribution by launch time (CPU step span), durations summed (ns -> s):
    #   rank 0 S1: k1 GEMM 40 + k2 comm 40                               = 80 us
    #          S2: k3 ATTN 30 + k4 ELEM 10 (OTHER) + k5 comm 30          = 70 us
    #              (k5 runs until 220 us, after S2 ends; it still counts for S2)
    #          S3: k6 comm 40 + k7 MOE_EXPERT 20 + k8 MOE_ROUTE 4 + k9 softmax 10 (OTHER) = 74 us
    #          S4: k10 norm 10 + k11 reduce 10 + k12 copy 5, all OTHER   = 25 us
    #   rank 1 S1: k1' GEMM 50 + k2' ELEM 10 = 60 us; S2: k3' GEMM 25; S3, S4: nothing.
    expected = {
        (0, 1): dict(comm=40, attn=0, moe_route=0, moe_expert=0, dense_gemm=40, other=0),
        (0, 2): dict(comm=30, attn=30, moe_route=0, moe_expert=0, dense_gemm=0, other=10),
        (0, 3): dict(comm=40, attn=0, moe_route=4, moe_expert=20, dense_gemm=0, other=10),
        (0, 4): dict(comm=0, attn=0, moe_route=0, moe_expert=0, dense_gemm=0, other=25),
        (1, 1): dict(comm=0, attn=0, moe_route=0, moe_expert=0, dense_gemm=50, other=10),
        (1, 2): dict(comm=0, attn=0, moe_route=0, moe_expert=0, dense_gemm=25, other=0),
        (1, 3): dict(comm=0, attn=0, moe_route=0, moe_expert=0, dense_gemm=0, other=0),
        (1, 4): dict(comm=0, attn=0, moe_route=0, moe_expert=0, dense_gemm=0, other=0),
    }
    for key, parts in expected.items():
        row = got[key]
        total_us = sum(parts.values())
        assert row["value"] == pytest.approx(total_us * 1e-6, abs=TOL), key
        assert row["reason"] is None
        for cat, us in parts.items():
            assert row[f"{cat}_s"] == pytest.approx(us * 1e-6, abs=TOL), (key, cat)
            if total_us:
                assert row[f"{cat}_frac"] == pytest.approx(us / total_us, abs=TOL), (key, cat)
            else:
                assert row[f"{cat}_frac"] is None
    # S3 of rank 0: 40/74 comm, 20/74 expert, 4/74 route, 10/74 other
    assert got[(0, 3)]["comm_frac"] == pytest.approx(40 / 74)


def test_break_down_steps_not_applicable(suite_wh: Warehouse) -> None:
    (row,) = rows(suite_wh, "break_down_steps", "suite_no_steps")
    assert_not_applicable(row, "no steps (no ProfilerStep#N annotations, no inference engine iterations, no XLA steps)")
    assert row["step"] is None
    ranks = by_rank(suite_wh, "break_down_steps", "suite_no_coverage")
    assert_not_applicable(ranks[1], "no GPU kernels")


# --------------------------------------------------------------------------------------
# Trace grain
# --------------------------------------------------------------------------------------


def test_communication_ratio(suite_wh: Warehouse) -> None:
    # rank 0 kernels: 40+40+30+10+30+40+20+4+10+10+10+5 = 249 us, comm 40+30+40 = 110 us
    # rank 1 kernels: 50+10+25 = 85 us, comm 0 (a rank without comm)
    # ratio = 110 / (249 + 85) = 110 / 334
    row = one(suite_wh, "communication_ratio", "suite_two_ranks")
    assert row["value"] == pytest.approx(110 / 334, abs=TOL)
    assert row["comm_s"] == pytest.approx(110e-6, abs=TOL)
    assert row["kernel_s"] == pytest.approx(334e-6, abs=TOL)
    # no steps needed: comm 20 + 20, all kernels 20 + 20 + 40 -> 40 / 80
    assert one(suite_wh, "communication_ratio", "suite_no_steps")["value"] == pytest.approx(0.5)
    # a trace whose kernels are all compute scores 0, not "not applicable"
    assert one(suite_wh, "communication_ratio", "suite_grid_only")["value"] == 0.0


def test_moe_fraction(suite_wh: Warehouse) -> None:
    # MoE kernels: fused_moe_kernel 20 us + gatherTopK 4 us = 24 us of 334 us
    row = one(suite_wh, "moe_fraction", "suite_two_ranks")
    assert row["value"] == pytest.approx(24 / 334, abs=TOL)
    assert row["moe_kernel_names"] == 2
    assert one(suite_wh, "moe_fraction", "suite_no_steps")["value"] == 0.0


def test_dominant_kernel_concentration(suite_wh: Warehouse) -> None:
    # per name over both ranks: GEMM 40 (r0) + 50 + 25 (r1) = 115 us; the allreduce
    # kernel name 110 us; ELEM 10 + 10 = 20 us; ... -> 115 / 334
    row = one(suite_wh, "dominant_kernel_concentration", "suite_two_ranks")
    assert row["value"] == pytest.approx(115 / 334, abs=TOL)
    assert row["dominant_kernel"] == GEMM
    assert row["dominant_s"] == pytest.approx(115e-6, abs=TOL)
    # one rank: the two allgathers share a name, 20 + 20 = 40 of 80 us
    row = one(suite_wh, "dominant_kernel_concentration", "suite_no_steps")
    assert row["value"] == pytest.approx(0.5)
    assert row["dominant_kernel"].startswith("ncclDevKernel_AllGather")


def test_load_imbalance_ratio(suite_wh: Warehouse) -> None:
    # busy = |union of kernels| per rank (touching intervals merge):
    #   rank 0: [10,70) 60 + [110,140) 30 + [190,230) 40 + [232,236) 4 + [240,250) 10
    #           + [280,335) 55 = 199 us
    #   rank 1: [10,60) 50 + [150,175) 25 = 75 us
    # ratio = 199 / 75
    row = one(suite_wh, "load_imbalance_ratio", "suite_two_ranks")
    assert row["value"] == pytest.approx(199 / 75, abs=TOL)
    assert (row["busiest_rank"], row["idlest_rank"]) == (0, 1)
    assert_not_applicable(one(suite_wh, "load_imbalance_ratio", "suite_no_steps"), "single rank")
    assert_not_applicable(one(suite_wh, "load_imbalance_ratio", "suite_no_coverage"), "no GPU kernel time on rank 1")


def test_load_imbalance_ratio_names_the_lowest_of_tied_ranks(tmp_path: Path) -> None:
    """Ranks 1 and 2 are tied busiest (30 us each), ranks 0 and 3 tied idlest (10 us):
    version 2 names the lowest rank of each tie, whatever the order of the rows."""
    us = 1000
    for rank, busy in enumerate((10, 30, 30, 10)):
        b = KinetoTraceBuilder(rank=rank, world_size=4)
        b.kernel("gemm", ts=100 * us, dur=busy * us, launch_ts=90 * us)
        b.write(tmp_path / "in" / "ties" / f"rank{rank}.json")
    wh = Warehouse(tmp_path / "wh")
    run_ingest([tmp_path / "in"], wh)
    con = connect(wh)
    (row,) = run_metric(con, resolve("load_imbalance_ratio", 2)).to_pylist()
    con.close()
    assert row["value"] == pytest.approx(30 / 10)
    assert (row["busiest_rank"], row["idlest_rank"]) == (1, 0)


# --------------------------------------------------------------------------------------
# Rank grain
# --------------------------------------------------------------------------------------


def test_total_communication_time(suite_wh: Warehouse) -> None:
    # One definition: |union of comm kernels| per rank over the whole trace, in s
    # (steps play no part; before, 4 steps gave 25 us "per inner step" here).
    # rank 0 comm: k2 [30,70) 40 + k5 [190,220) 30 + k6 [280,320) 40 = 110 us
    got = by_rank(suite_wh, "total_communication_time", "suite_two_ranks")
    assert got[0]["value"] == pytest.approx(110e-6, abs=TOL)
    assert got[0]["comm_kernels"] == 3
    # rank 1 has kernels but no comm: 0, not "not applicable"
    assert got[1]["value"] == 0.0 and got[1]["reason"] is None and got[1]["comm_kernels"] == 0
    # allgathers [0,20) and [10,30) on two streams merge to 30 us
    (row,) = rows(suite_wh, "total_communication_time", "suite_no_steps")
    assert row["value"] == pytest.approx(30e-6, abs=TOL)
    ranks = by_rank(suite_wh, "total_communication_time", "suite_no_coverage")
    # version 3 reads a CPU-only rank's Gloo collectives: this one has none
    assert_not_applicable(ranks[1], "no GPU kernels and no CPU collectives (Gloo records)")


def test_aggregate_gpu_utilization(suite_wh: Warehouse) -> None:
    # rank 0: busy 199 us (see load_imbalance) over span [10, 335) = 325 us
    # rank 1: busy 75 us over [10, 175) = 165 us
    got = by_rank(suite_wh, "aggregate_gpu_utilization", "suite_two_ranks")
    assert got[0]["value"] == pytest.approx(199 / 325, abs=TOL)
    assert got[1]["value"] == pytest.approx(75 / 165, abs=TOL)
    # one rank, no steps: kernels [0,20) [10,30) [5,45) -> busy [0,45) = span -> 1.0
    assert one(suite_wh, "aggregate_gpu_utilization", "suite_no_steps")["value"] == pytest.approx(1.0)
    ranks = by_rank(suite_wh, "aggregate_gpu_utilization", "suite_no_coverage")
    assert_not_applicable(ranks[1], "no GPU kernels")


def test_mean_sm_coverage_blocks_per_sm(suite_wh: Warehouse) -> None:
    # rank 0, coverage = min(blocks per SM, 1) weighted by duration (us):
    #   k1 1*40, comm 0.121212*(40+30+40), k3 0.71*30, k4 1*10, k7 0.25*20, k8 0.1*4,
    #   k9 1*10, k10 0.8*10, k11 0.75*10, k12 1*5
    #   = 40 + 13.33332 + 21.3 + 10 + 5 + 0.4 + 10 + 8 + 7.5 + 5 = 120.53332 over 249 us
    # rank 1: (1*50 + 0.7*10 + 0.6*25) / 85 = 72 / 85
    got = by_rank(suite_wh, "mean_sm_coverage", "suite_two_ranks")
    assert got[0]["value"] == pytest.approx(120.53332 / 249, abs=1e-12)
    assert got[1]["value"] == pytest.approx(72 / 85, abs=TOL)
    assert got[0]["coverage_source"] == "blocks_per_sm"


def test_mean_sm_coverage_grid_fallback(suite_wh: Warehouse) -> None:
    # numSms = 132: kA 66/132 = 0.5 (10 us), kB 4*11*3 = 132 -> 1.0 (30 us),
    # kC 300/132 -> capped at 1.0 (20 us), kD blocks per SM 0.25 (40 us)
    # (0.5*10 + 1*30 + 1*20 + 0.25*40) / 100 = 65 / 100
    row = one(suite_wh, "mean_sm_coverage", "suite_grid_only")
    assert row["value"] == pytest.approx(0.65, abs=TOL)
    assert row["coverage_source"] == "mixed"
    assert row["kernels_with_coverage"] == 4
    ranks = by_rank(suite_wh, "mean_sm_coverage", "suite_no_coverage")
    # version 3 says what is missing (version 2: "no blocks per SM, and no grid with a known SM count")
    assert_not_applicable(ranks[0], "kernels carry neither blocks per SM nor a grid")
    assert_not_applicable(ranks[1], "no GPU kernels")


def test_compute_bound_fraction(suite_wh: Warehouse) -> None:
    # coverage > 0.7 and dur > 10 us (both strict):
    #   rank 0: k1 (1.0, 40 us) yes; k3 (0.71, 30 us) yes; k4 and k9 (1.0 but exactly
    #           10 us) no; k10 0.8 and k11 0.75 (10 us) no; the rest below 0.7 -> 70 / 249
    #   rank 1: k1' (1.0, 50 us) yes; k2' (0.7: not > 0.7) no; k3' (0.6) no -> 50 / 85
    got = by_rank(suite_wh, "compute_bound_fraction", "suite_two_ranks")
    assert got[0]["value"] == pytest.approx(70 / 249, abs=TOL)
    assert got[1]["value"] == pytest.approx(50 / 85, abs=TOL)
    # grid fallback: kB (1.0, 30 us) and kC (1.0, 20 us) of 100 us
    assert one(suite_wh, "compute_bound_fraction", "suite_grid_only")["value"] == pytest.approx(0.5)
    ranks = by_rank(suite_wh, "compute_bound_fraction", "suite_no_coverage")
    assert_not_applicable(ranks[0], "no blocks per SM, and no grid with a known SM count")


def test_memory_bound_fraction(suite_wh: Warehouse) -> None:
    # rank 0 memory-bound: ELEM 10 + SOFTMAX 10 + NORM 10 + REDUCE 10 + COPY 5 = 45 of 249 us
    # (GEMM, comm, flash attention, fused MoE and top-k are not memory-bound)
    # rank 1: ELEM 10 of 85 us
    got = by_rank(suite_wh, "memory_bound_fraction", "suite_two_ranks")
    assert got[0]["value"] == pytest.approx(45 / 249, abs=TOL)
    assert got[0]["memory_transfer_s"] == pytest.approx(5e-6, abs=TOL)
    assert got[0]["normalization_s"] == pytest.approx(10e-6, abs=TOL)
    assert got[0]["elementwise_s"] == pytest.approx(10e-6, abs=TOL)
    assert got[1]["value"] == pytest.approx(10 / 85, abs=TOL)


def test_memory_transfer_overhead(suite_wh: Warehouse) -> None:
    # rank 0 non-comm kernels: [10,50) [110,140) [210,230) [232,236) [240,250) [305,315) [320,335)
    #   m1 [40,80): [40,50) hidden under k1; [50,80) exposed = 30 us (comm k2 hides nothing)
    #   m2 [140,150): k3 ends at 140 -> 10 us exposed
    #   m3 [335,345): 10 us exposed (0 bytes still counts as time)
    #   exposed 50 us; span over memcpys and kernels [10, 345) = 335 us
    got = by_rank(suite_wh, "memory_transfer_overhead", "suite_two_ranks")
    assert got[0]["value"] == pytest.approx(50 / 335, abs=TOL)
    assert got[0]["exposed_memcpy_s"] == pytest.approx(50e-6, abs=TOL)
    # rank 1 has kernels but no memcpy: 0
    assert got[1]["value"] == 0.0 and got[1]["reason"] is None
    ranks = by_rank(suite_wh, "memory_transfer_overhead", "suite_no_coverage")
    assert_not_applicable(ranks[1], "no GPU kernels or memcpy activities")


def test_average_memory_bandwidth(suite_wh: Warehouse) -> None:
    # (2,000,000 + 700,000) B / (40,000 + 10,000) ns = 54 B/ns = 54 GB/s; m3 (0 B) left out
    got = by_rank(suite_wh, "average_memory_bandwidth", "suite_two_ranks")
    assert got[0]["value"] == pytest.approx(54.0, abs=1e-9)
    assert got[0]["memcpys"] == 2
    assert_not_applicable(got[1], "no memcpy with bytes and duration")


# --------------------------------------------------------------------------------------
# The real 8-rank DLRM trace, recomputed from its JSON
# --------------------------------------------------------------------------------------


def _union_ns(intervals: list[tuple[int, int]]) -> int:
    total, cur_start, cur_end = 0, None, None
    for start, end in sorted(intervals):
        if end <= start:
            continue
        if cur_end is None or start > cur_end:
            if cur_end is not None:
                total += cur_end - cur_start
            cur_start, cur_end = start, end
        else:
            cur_end = max(cur_end, end)
    if cur_end is not None:
        total += cur_end - cur_start
    return total


def _dlrm_kernels(folder: Path) -> dict[int, list[tuple[str, int, int]]]:
    """rank -> [(name, start_ns, end_ns)] for events with cat 'kernel'; times exact."""
    out: dict[int, list[tuple[str, int, int]]] = {}
    for path in sorted(folder.glob("*.pt.trace.json")):
        doc = json.loads(path.read_text(), parse_float=Decimal)
        rank = int(doc["distributedInfo"]["rank"])
        kernels = []
        for ev in doc["traceEvents"]:
            if ev.get("cat") == "kernel":
                start = int(Decimal(ev["ts"]) * 1000)
                kernels.append((ev["name"], start, start + int(Decimal(ev["dur"]) * 1000)))
        out[rank] = kernels
    return out


@pytest.mark.slow
def test_dlrm_param_8xV100_from_raw_json(wh: Warehouse) -> None:
    folder = require_shared() / "dlrm_param_8xV100"
    run_ingest([folder], wh)
    kernels = _dlrm_kernels(folder)
    assert sorted(kernels) == list(range(8))

    busy = {r: _union_ns([(s, e) for _, s, e in ks]) for r, ks in kernels.items()}
    span = {r: max(e for _, _, e in ks) - min(s for _, s, _ in ks) for r, ks in kernels.items()}
    is_comm = lambda name: name.startswith(("ncclKernel", "ncclDevKernel"))  # noqa: E731
    comm_ns = sum(e - s for ks in kernels.values() for n, s, e in ks if is_comm(n))
    all_ns = sum(e - s for ks in kernels.values() for _, s, e in ks)

    trace = "dlrm_param_8xV100"
    util = by_rank(wh, "aggregate_gpu_utilization", trace)
    assert sorted(util) == list(range(8))
    for r in range(8):
        assert util[r]["value"] == pytest.approx(busy[r] / span[r], abs=1e-9), r

    row = one(wh, "load_imbalance_ratio", trace)
    assert row["value"] == pytest.approx(max(busy.values()) / min(busy.values()), abs=1e-9)
    assert row["ranks"] == 8

    row = one(wh, "communication_ratio", trace)
    assert comm_ns > 0
    assert row["value"] == pytest.approx(comm_ns / all_ns, abs=1e-9)

    # total_communication_time: |union of comm kernels| per rank, whole trace
    comm_time = by_rank(wh, "total_communication_time", trace)
    for r, ks in kernels.items():
        expected = _union_ns([(s, e) for n, s, e in ks if is_comm(n)]) / 1e9
        assert comm_time[r]["value"] == pytest.approx(expected, abs=1e-12), r


# --------------------------------------------------------------------------------------
# Versions: where a trace has no DeepEP kernels and no inference engine iterations, a
# metric's version 2 gives version 1's numbers (the new rules only add those)
# --------------------------------------------------------------------------------------

VERSIONED = [
    "avg_step_time",
    "break_down_steps",
    "coll_call_num",
    "communication_overlap_ratio",
    "communication_fraction",
    "communication_ratio",
    "total_communication_time",
    "moe_fraction",
    "mean_sm_coverage",
    "memory_bound_fraction",
    "average_memory_bandwidth",
]


@pytest.mark.parametrize("metric", VERSIONED)
def test_version_2_keeps_version_1_numbers_on_these_traces(suite_wh: Warehouse, metric: str) -> None:
    assert resolve(metric, 1).version == 1 and resolve(metric, 2).version == 2
    con = connect(suite_wh)
    try:
        got = {}
        for version in (1, 2):
            got[version] = {
                (r["trace"], r["rank"], r["step"]): (r["value"], r["reason"] is None)
                for r in run_metric(con, resolve(metric, version)).to_pylist()
            }
    finally:
        con.close()
    assert got[1].keys() == got[2].keys()
    for key, (value, applies) in got[1].items():
        assert got[2][key][1] == applies, (metric, key)
        assert got[2][key][0] == pytest.approx(value, abs=1e-15), (metric, key)
