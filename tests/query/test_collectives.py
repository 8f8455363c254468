"""The `collectives` view and the cross-rank metrics built on it (collective_busbw,
collective_skew, straggler_rank): hand-worked small traces, and real traces (8-rank DLRM
on old PyTorch, RCCL on MI300, SymmMem all-reduce on B200) checked against plain Python
over the raw JSON."""

from __future__ import annotations

import gzip
import json
import math
import statistics
from collections import Counter, defaultdict
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from helpers.paths import require_shared
from helpers.warehouse import run_ingest

from cclq.query.metrics import run_metric
from cclq.query.registry import resolve
from cclq.query.session import connect
from cclq.synth.kineto import KinetoTraceBuilder

SENDRECV_OLD = "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)"
ALLREDUCE_OLD = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"
ALLGATHER_OLD = "ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)"
REDUCESCATTER_OLD = "ncclKernel_ReduceScatter_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"
GENERIC = "ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)"
MULTIMEM = (
    "void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>"
    "(c10::BFloat16*, unsigned long, unsigned int**, unsigned long, unsigned long)"
)


def _coll_args(
    coll: str,
    in_n: int,
    out_n: int,
    dtype: str,
    group: int,
    seq: int | None,
    in_split: str = "[]",
    out_split: str = "[]",
) -> dict[str, Any]:
    """The collective args PyTorch copies onto a kernel (Seq left out when None)."""
    args: dict[str, Any] = {
        "Collective name": coll,
        "In msg nelems": in_n,
        "Out msg nelems": out_n,
        "Group size": group,
        "dtype": dtype,
        "In split size": in_split,
        "Out split size": out_split,
        "Process Group Name": "0",
        "Process Group Description": "default_pg",
        "Process Group Ranks": str(list(range(group))),
    }
    if seq is not None:
        args["Seq"] = seq
    return args


def _build(root: Path) -> None:
    # -- pair: 2 ranks, Seq on every kernel --------------------------------------------------
    # (seq, coll, rank0 ts, rank0 dur, rank1 ts, rank1 dur)
    pair = [
        (0, "allreduce", 1_000_000, 1_000_000, 1_250_000, 750_000),
        (1, "allreduce", 3_000_000, 500_000, 2_900_000, 600_000),
        (2, "allgather", 5_000_000, 100_000, 5_040_000, 60_000),
    ]
    for rank in (0, 1):
        b = KinetoTraceBuilder(rank=rank, world_size=2)
        for seq, coll, ts0, d0, ts1, d1 in pair:
            ts, dur = (ts0, d0) if rank == 0 else (ts1, d1)
            nelems, dtype = (1_048_576, "Float") if coll == "allreduce" else (1_000, "BFloat16")
            b.nccl_kernel(
                coll, ts=ts, dur=dur, nelems=nelems, dtype=dtype, group_size=2, seq=seq, launch_ts=ts - 10_000
            )
        b.write(root / "pair" / f"rank{rank}.json")

    # -- a2a: all_to_allv with uneven splits ------------------------------------------------
    # rank 0 sends [100, 300] and receives [100, 50]; rank 1 sends [50, 200], receives [300, 200]
    a2a = {0: (400, 150, "[100, 300]", "[100, 50]", 1_000, 1_000), 1: (250, 500, "[50, 200]", "[300, 200]", 1_200, 500)}
    for rank, (in_n, out_n, in_s, out_s, ts, dur) in a2a.items():
        b = KinetoTraceBuilder(rank=rank, world_size=2)
        b.kernel(
            "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)",
            ts=ts,
            dur=dur,
            stream=20,
            args=_coll_args("all_to_allv", in_n, out_n, "Float", 2, 0, in_s, out_s),
            launch_ts=ts - 500,
        )
        b.write(root / "a2a" / f"rank{rank}.json")

    # -- gap: rank 1 never runs seq 1 -----------------------------------------------------
    # -- gap_noseq: the same kernels without Seq (ordinal matching) ---------------------------
    starts = {0: [(0, 0), (1, 10_000), (2, 20_000)], 1: [(0, 500), (2, 20_300)]}
    for trace, with_seq in (("gap", True), ("gap_noseq", False)):
        for rank, kernels in starts.items():
            b = KinetoTraceBuilder(rank=rank, world_size=2)
            for seq, ts in kernels:
                b.kernel(
                    "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
                    ts=ts,
                    dur=1_000,
                    stream=20,
                    args=_coll_args("allreduce", 256, 256, "Float", 2, seq if with_seq else None),
                )
            b.write(root / trace / f"rank{rank}.json")

    # -- gap_mixed: no Seq; rank 1 lacks an all-reduce of ANOTHER size --------------------------
    # (ts, nelems): rank 0 runs 256, 1024, 256 Float; rank 1 only the two 256-element ones
    mixed = {0: [(0, 256), (10_000, 1_024), (20_000, 256)], 1: [(500, 256), (20_300, 256)]}
    for rank, kernels in mixed.items():
        b = KinetoTraceBuilder(rank=rank, world_size=2)
        for ts, nelems in kernels:
            b.kernel(
                "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
                ts=ts,
                dur=1_000,
                stream=20,
                args=_coll_args("allreduce", nelems, nelems, "Float", 2, None),
            )
        b.write(root / "gap_mixed" / f"rank{rank}.json")

    # -- subgroup: ranks 0 and 1 of a 4-rank world, in a 2-rank group; old kernels without
    # collective args, each launched inside a c10d op only (no nccl: annotation, no
    # record_param_comms). c10d ops list (output, input, process group, ...).
    for rank, (ag_dur, rs_dur, ar_dur) in {0: (2_000, 4_000, 1_000), 1: (1_600, 5_000, 1_000)}.items():
        b = KinetoTraceBuilder(rank=rank, world_size=4)
        shift = 100 * rank  # rank 1 starts every collective 100 ns later
        b.cpu_op(
            "c10d::_allgather_base_",
            ts=1_000 + shift,
            dur=900,
            args={"Input Dims": [[2, 1024], [1, 1024], []], "Input type": ["c10::BFloat16", "c10::BFloat16", ""]},
        )
        b.kernel(ALLGATHER_OLD, ts=2_000 + shift, dur=ag_dur, stream=20, launch_ts=1_100 + shift)
        b.cpu_op(
            "c10d::_reduce_scatter_base_",
            ts=10_000 + shift,
            dur=900,
            args={"Input Dims": [[1000], [2000], [], [], []], "Input type": ["float", "float", "", "", "Scalar"]},
        )
        b.kernel(REDUCESCATTER_OLD, ts=11_000 + shift, dur=rs_dur, stream=20, launch_ts=10_100 + shift)
        # an all-reduce whose op names its process group but not its size: the group's
        # untruncated `Process Group Ranks` list says 2
        b.cpu_op(
            "record_param_comms",
            ts=20_000 + shift,
            dur=900,
            args={
                "Collective name": "allreduce",
                "In msg nelems": 500,
                "Out msg nelems": 500,
                "dtype": "Float",
                "Process Group Name": "1",
                "Process Group Ranks": "[0, 1]",
            },
        )
        b.kernel(ALLREDUCE_OLD, ts=21_000 + shift, dur=ar_dur, stream=20, launch_ts=20_100 + shift)
        b.write(root / "subgroup" / f"rank{rank}.json")

    # -- legacy: kernels without collective args, typed and sized from CPU ops -----------------
    b = KinetoTraceBuilder(rank=0, world_size=8)
    # (a) all_to_all as old PyTorch records it: the c10d op lists the OUTPUT first, the
    # nccl: annotation holds the input; the runtime's External id names no op (it is the
    # correlation id in old traces), so only containment links the launch.
    b.cpu_op(
        "c10d::alltoall_base_",
        ts=1_000,
        dur=900,
        args={"Input Dims": [[768], [3392], [], []], "Input type": ["int", "int", "", "Scalar"]},
    )
    b.cpu_op(
        "record_param_comms",
        ts=1_100,
        dur=700,
        args={"Input Dims": [[3392], [], []], "Input type": ["int", "Scalar", "Scalar"]},
    )
    b.user_annotation("nccl:all_to_all", ts=1_200, dur=500, args={"Input Dims": [[3392]], "Input type": ["int"]})
    b.kernel(SENDRECV_OLD, ts=2_000, dur=1_000, stream=84, launch_ts=1_300, external_id=90_001)
    # (b) all_reduce of a TensorList: only the nccl: annotation has a shape
    b.cpu_op(
        "c10d::allreduce_",
        ts=5_000,
        dur=900,
        args={"Input Dims": [[], [], [], []], "Input type": ["TensorList", "", "", "Scalar"]},
    )
    b.cpu_op(
        "record_param_comms",
        ts=5_100,
        dur=700,
        args={"Input Dims": [[], [], []], "Input type": ["TensorList", "Scalar", "Scalar"]},
    )
    b.user_annotation("nccl:all_reduce", ts=5_200, dur=500, args={"Input Dims": [[394241]], "Input type": ["float"]})
    b.kernel(ALLREDUCE_OLD, ts=6_000, dur=2_000, stream=84, launch_ts=5_300, external_id=90_002)
    # (c) an 8-byte dtype
    b.user_annotation("nccl:all_to_all", ts=9_000, dur=500, args={"Input Dims": [[24]], "Input type": ["long int"]})
    b.kernel(SENDRECV_OLD, ts=9_600, dur=100, stream=84, launch_ts=9_100, external_id=90_003)
    # (d) all_gather with only the nccl: annotation (its input) around the launch: nothing
    # gives the group, so Out = In x the trace's world size (8), the last resort
    b.user_annotation(
        "nccl:_all_gather_base", ts=11_100, dur=700, args={"Input Dims": [[1, 25136]], "Input type": ["c10::BFloat16"]}
    )
    b.kernel(ALLGATHER_OLD, ts=12_000, dur=1_000, stream=84, launch_ts=11_200, external_id=90_004)
    # (e) SymmMem all-reduce: once through its launch, once (launch not in the trace)
    # through the External id the kernel carries
    sm = b.cpu_op(
        "symm_mem::multimem_all_reduce_",
        ts=14_000,
        dur=500,
        args={"Input Dims": [[2557440], [], []], "Input type": ["c10::BFloat16", "", ""]},
    )
    b.kernel(MULTIMEM, ts=14_600, dur=10_000, stream=7, launch_ts=14_100)
    b.kernel(MULTIMEM, ts=30_000, dur=20_000, stream=7, external_id=sm)
    # (f) RCCL's generic kernel, typed by its Collective name
    b.kernel(GENERIC, ts=40_000, dur=100, stream=4, args=_coll_args("allreduce", 100, 100, "Half", 8, None))
    # (g) a generic kernel with nothing to go on; (h) a SendRecv kernel outside any op
    b.kernel(GENERIC, ts=41_000, dur=100, stream=4)
    b.kernel(SENDRECV_OLD, ts=42_000, dur=100, stream=84, launch_ts=41_900, external_id=90_005)
    # (i) only a c10d op around the launch: it lists (output, input), so it sizes the
    # all_gather by its output and its group by output / input = 4, a sub-group of the 8
    b.cpu_op(
        "c10d::_allgather_base_",
        ts=50_000,
        dur=900,
        args={"Input Dims": [[4, 25136], [1, 25136], []], "Input type": ["c10::BFloat16", "c10::BFloat16", ""]},
    )
    b.kernel(ALLGATHER_OLD, ts=51_000, dur=1_000, stream=84, launch_ts=50_100, external_id=90_006)
    b.write(root / "legacy" / "rank0.json")


@pytest.fixture(scope="module")
def con(tmp_path_factory):
    from cclq.store.warehouse import Warehouse

    root = tmp_path_factory.mktemp("coll")
    _build(root / "in")
    wh = Warehouse(root / "wh")
    run_ingest([root / "in"], wh)
    return connect(wh)


def _coll(con, trace: str) -> list[dict[str, Any]]:
    cur = con.execute("SELECT * FROM collectives WHERE trace = ? ORDER BY rank, ts_ns", [trace])
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row)) for row in cur.fetchall()]


def _metric(con, name: str, trace: str) -> list[dict[str, Any]]:
    return [r for r in run_metric(con, resolve(name)).to_pylist() if r["trace"] == trace]


# -- hand-worked ------------------------------------------------------------------------------


def test_bytes_and_bandwidth_by_hand(con):
    rows = _coll(con, "pair")
    assert [(r["rank"], r["coll_type"], r["match_id"]) for r in rows] == [
        (0, "all_reduce", "0/seq 0"),
        (0, "all_reduce", "0/seq 1"),
        (0, "all_gather", "0/seq 2"),
        (1, "all_reduce", "0/seq 0"),
        (1, "all_reduce", "0/seq 1"),
        (1, "all_gather", "0/seq 2"),
    ]
    r0 = rows[0]
    # 1,048,576 Float = 4,194,304 B in 1 ms: algbw 4,194,304 / 1,000,000 ns = 4.194304 GB/s;
    # busbw x 2(2-1)/2 = x1 = 4.194304
    assert r0["bytes"] == 4_194_304 and r0["group_size"] == 2 and r0["reason"] is None
    assert r0["algbw_gbps"] == pytest.approx(4.194304, rel=1e-12)
    assert r0["busbw_gbps"] == pytest.approx(4.194304, rel=1e-12)
    assert r0["size_source"] == "kernel In msg nelems x dtype"
    # rank 1, seq 0: 4,194,304 B / 750,000 ns = 5.592405333 GB/s
    assert rows[3]["busbw_gbps"] == pytest.approx(4_194_304 / 750_000, rel=1e-12)
    # all_gather: Out = 1000 x 2 ranks = 2000 BFloat16 = 4000 B; rank 0 in 100 us:
    # algbw 4000 / 100,000 = 0.04 GB/s, busbw x (2-1)/2 = 0.02
    ag = rows[2]
    assert ag["bytes"] == 4_000 and ag["size_source"] == "kernel Out msg nelems x dtype"
    assert ag["algbw_gbps"] == pytest.approx(0.04) and ag["busbw_gbps"] == pytest.approx(0.02)


def test_collective_busbw_by_hand(con):
    rows = {(r["coll_type"], r["size_bucket"]): r for r in _metric(con, "collective_busbw", "pair")}
    assert set(rows) == {("all_reduce", 4_194_304), ("all_gather", 2_048)}  # 4,194,304 = 2^22; 2^11 <= 4000 < 2^12
    ar = rows[("all_reduce", 4_194_304)]
    # busbw of the four instances (x1): 4194304/1e6, /750e3, /500e3, /600e3 =
    # 4.194304, 5.592405, 8.388608, 6.990507 -> median = (5.592405 + 6.990507) / 2
    # = 4194304 x (1/750000 + 1/600000) / 2 = 4194304 x 1.5e-6 = 6.291456
    assert ar["value"] == pytest.approx(6.291456, rel=1e-12)
    assert ar["collectives"] == 4 and ar["ranks"] == 2
    assert ar["min_bytes"] == ar["max_bytes"] == 4_194_304
    assert ar["mean_busbw_gbps"] == pytest.approx((4.194304 + 5.592405333333 + 8.388608 + 6.990506666667) / 4)
    ag = rows[("all_gather", 2_048)]
    # 4000 B x 1/2 over 100,000 ns and 60,000 ns: 0.02 and 0.0333.. -> median 0.02666..
    assert ag["value"] == pytest.approx((0.02 + 4_000 / 60_000 / 2) / 2, rel=1e-12)
    assert ag["unit"] == "GB/s"


def test_collective_skew_and_straggler_by_hand(con):
    rows = {r["match_id"]: r for r in _metric(con, "collective_skew", "pair")}
    # seq 0: rank 1 starts 1,250,000 - 1,000,000 = 250 us later; both end at 2,000,000
    assert rows["0/seq 0"]["value"] == pytest.approx(250e-6, abs=1e-15)
    assert rows["0/seq 0"]["end_skew_s"] == 0
    assert rows["0/seq 0"]["straggler_rank"] == 1 and rows["0/seq 0"]["ranks_seen"] == 2
    # the all-reduce's latency once both arrived = the shorter kernel, 750 us
    assert rows["0/seq 0"]["min_dur_s"] == pytest.approx(750e-6, abs=1e-15)
    # seq 1: rank 0 is 100 us late (3,000,000 vs 2,900,000); seq 2: rank 1 is 40 us late
    assert rows["0/seq 1"]["value"] == pytest.approx(100e-6, abs=1e-15) and rows["0/seq 1"]["straggler_rank"] == 0
    assert rows["0/seq 2"]["value"] == pytest.approx(40e-6, abs=1e-15) and rows["0/seq 2"]["straggler_rank"] == 1
    (s,) = _metric(con, "straggler_rank", "pair")
    # rank 1 is last in 2 of the 3 collectives; it kept the others waiting 250 + 40 us
    assert s["value"] == 1 and s["late_count"] == 2 and s["matched_collectives"] == 3
    assert s["share"] == pytest.approx(2 / 3) and s["tied_ranks"] == 1
    assert s["late_skew_s"] == pytest.approx(290e-6, abs=1e-15)


def test_all_to_allv_uneven_splits(con):
    r0, r1 = _coll(con, "a2a")
    assert r0["coll_type"] == r1["coll_type"] == "all_to_all"
    assert r0["type_source"] == "kernel arg Collective name=all_to_allv"
    # bytes = the rank's own In msg nelems (sum of its input splits) x 4:
    # rank 0 sends 100 + 300 = 400 Float = 1600 B, rank 1 sends 50 + 200 = 250 Float = 1000 B
    assert (r0["bytes"], r1["bytes"]) == (1_600, 1_000)
    assert (r0["in_nelems"], r0["out_nelems"], r1["in_nelems"], r1["out_nelems"]) == (400, 150, 250, 500)
    assert (r0["in_split_size"], r1["out_split_size"]) == ("[100, 300]", "[300, 200]")
    # busbw = bytes / dur x (2-1)/2: 1600/1000 x 0.5 = 0.8; 1000/500 x 0.5 = 1.0
    assert r0["busbw_gbps"] == pytest.approx(0.8) and r1["busbw_gbps"] == pytest.approx(1.0)
    assert r0["match_id"] == r1["match_id"] == "0/seq 0"
    (skew,) = _metric(con, "collective_skew", "a2a")
    assert skew["value"] == pytest.approx(200e-9, abs=1e-18) and skew["straggler_rank"] == 1  # 1200 - 1000 ns


def test_missing_collective_keeps_seq_matching(con):
    rows = {r["match_id"]: r for r in _metric(con, "collective_skew", "gap")}
    assert set(rows) == {"0/seq 0", "0/seq 1", "0/seq 2"}
    # seq 1 ran on rank 0 only: reported, without a skew
    assert rows["0/seq 1"]["ranks_seen"] == 1 and rows["0/seq 1"]["value"] is None
    assert rows["0/seq 1"]["reason"] == "seen on 1 rank only"
    # and seq 2 still pairs rank 0's third kernel (20,000) with rank 1's second (20,300)
    assert rows["0/seq 2"]["ranks_seen"] == 2
    assert rows["0/seq 2"]["value"] == pytest.approx(300e-9, abs=1e-18)
    assert rows["0/seq 0"]["value"] == pytest.approx(500e-9, abs=1e-18)
    # Without Seq the fallback is the ordinal per (process group, type, bytes); all three
    # all-reduces are 256 Float = 1024 B, one key, so the missing one still shifts the rest
    # (the limitation the view's header documents): rank 1's second kernel (20,300) pairs
    # with rank 0's second (10,000), skew 10,300 ns
    rows = {r["match_id"]: r for r in _metric(con, "collective_skew", "gap_noseq")}
    assert set(rows) == {"0/all_reduce 1024 B #1", "0/all_reduce 1024 B #2", "0/all_reduce 1024 B #3"}
    assert rows["0/all_reduce 1024 B #2"]["value"] == pytest.approx(10_300e-9, abs=1e-18)
    assert rows["0/all_reduce 1024 B #3"]["ranks_seen"] == 1


def test_missing_collective_of_another_size_does_not_shift_matching(con):
    """No Seq; rank 1 lacks rank 0's 1024-Float (4096 B) all-reduce. Keyed by size, the
    256-Float (1024 B) ones still pair in order: (0, 500) and (20,000, 20,300). Matching by
    type alone paired rank 1's 20,300 with rank 0's 10,000."""
    rows = {r["match_id"]: r for r in _metric(con, "collective_skew", "gap_mixed")}
    assert set(rows) == {"0/all_reduce 1024 B #1", "0/all_reduce 1024 B #2", "0/all_reduce 4096 B #1"}
    assert rows["0/all_reduce 1024 B #1"]["value"] == pytest.approx(500e-9, abs=1e-18)
    assert rows["0/all_reduce 1024 B #2"]["value"] == pytest.approx(300e-9, abs=1e-18)
    assert rows["0/all_reduce 1024 B #2"]["straggler_rank"] == 1
    assert rows["0/all_reduce 4096 B #1"]["ranks_seen"] == 1 and rows["0/all_reduce 4096 B #1"]["value"] is None
    (s,) = _metric(con, "straggler_rank", "gap_mixed")
    assert s["value"] == 1 and s["late_count"] == 2 and s["matched_collectives"] == 2


@pytest.mark.slow
def test_sub_group_sized_from_c10d_input_dims_by_hand(con):
    """Ranks 0 and 1 of a 4-rank world in a 2-rank group, kernels without collective args,
    each inside a c10d op only. c10d ops list (output, input):
      all_gather     out [2, 1024] BFloat16 = 2048 x 2 B = 4096 B (nccl-tests: the output);
                     group = 2048 / 1024 = 2, not the world's 4.
      reduce_scatter out [1000], in [2000] float: bytes = the input, 2000 x 4 = 8000 B;
                     group = 2000 / 1000 = 2.
    busbw factor (n-1)/n = 1/2 for both."""
    rows = _coll(con, "subgroup")
    assert [(r["rank"], r["coll_type"]) for r in rows] == [
        (0, "all_gather"),
        (0, "reduce_scatter"),
        (0, "all_reduce"),
        (1, "all_gather"),
        (1, "reduce_scatter"),
        (1, "all_reduce"),
    ]
    ag0, rs0, ar0, ag1, rs1, ar1 = rows
    for ag in (ag0, ag1):
        assert (ag["bytes"], ag["group_size"]) == (4_096, 2) and ag["reason"] is None
        assert ag["size_source"] == "cpu c10d::_allgather_base_ Input Dims output x Input type"
        assert ag["group_size_source"] == "cpu c10d::_allgather_base_ Input Dims output/input"
    # rank 0: 4096 B in 2,000 ns = 2.048 GB/s, busbw 1.024; rank 1 in 1,600 ns = 2.56, 1.28
    assert (ag0["algbw_gbps"], ag0["busbw_gbps"]) == (pytest.approx(2.048), pytest.approx(1.024))
    assert (ag1["algbw_gbps"], ag1["busbw_gbps"]) == (pytest.approx(2.56), pytest.approx(1.28))
    for rs in (rs0, rs1):
        assert (rs["bytes"], rs["group_size"]) == (8_000, 2) and rs["reason"] is None
        assert rs["size_source"] == "cpu c10d::_reduce_scatter_base_ Input Dims input x Input type"
        assert rs["group_size_source"] == "cpu c10d::_reduce_scatter_base_ Input Dims input/output"
    # rank 0: 8000 B in 4,000 ns = 2.0 GB/s, busbw 1.0; rank 1 in 5,000 ns = 1.6, 0.8
    assert (rs0["algbw_gbps"], rs0["busbw_gbps"]) == (pytest.approx(2.0), pytest.approx(1.0))
    assert (rs1["algbw_gbps"], rs1["busbw_gbps"]) == (pytest.approx(1.6), pytest.approx(0.8))
    # the all-reduce: 500 Float = 2000 B from record_param_comms; its group "1" has no Group
    # size anywhere, but its Process Group Ranks "[0, 1]" lists 2 ranks: busbw factor
    # 2(2-1)/2 = 1, so busbw = algbw = 2000 / 1,000 ns = 2.0 (the world's 4 would give 3.0)
    for ar in (ar0, ar1):
        assert (ar["bytes"], ar["group_size"], ar["group_size_source"]) == (2_000, 2, "process group 1 size")
        assert ar["busbw_gbps"] == pytest.approx(2.0)
    # matched by (group, type, bytes) order; rank 1 is 100 ns late in each
    assert [r["match_id"] for r in rows[:3]] == [
        "stream 20/all_gather 4096 B #1",
        "stream 20/reduce_scatter 8000 B #1",
        "1/all_reduce 2000 B #1",
    ]
    assert [r["match_id"] for r in rows[:3]] == [r["match_id"] for r in rows[3:]]
    bw = {(r["coll_type"], r["size_bucket"]): r["value"] for r in _metric(con, "collective_busbw", "subgroup")}
    # 2^12 = 4096 <= 4096 and 8000 < 2^13; 2^10 <= 2000 < 2^11; medians of the two ranks
    assert bw == {
        ("all_gather", 4_096): pytest.approx((1.024 + 1.28) / 2),
        ("reduce_scatter", 4_096): pytest.approx((1.0 + 0.8) / 2),
        ("all_reduce", 1_024): pytest.approx(2.0),
    }


def test_legacy_kernels_typed_and_sized_from_cpu_ops(con):
    rows = _coll(con, "legacy")
    a2a, ar, a2a_long, ag, sm_launch, sm_ext, generic, unknown, loose, c10d_only = rows
    # (a) typed by the innermost collective op around the launch; sized by the c10d op's
    # second argument, its input (3392 int = 13,568 B; the first, 768, is the output),
    # which the nccl: annotation's input agrees with
    assert a2a["coll_type"] == "all_to_all"
    assert a2a["type_source"] == "cpu op nccl:all_to_all (launch)"
    assert a2a["size_source"] == "cpu c10d::alltoall_base_ Input Dims input x Input type"
    assert a2a["bytes"] == 13_568
    assert a2a["group_size"] == 8 and a2a["group_size_source"] == "trace world size"
    assert a2a["busbw_gbps"] == pytest.approx(13_568 / 1_000 * 7 / 8)  # = 11.872
    assert a2a["match_id"] == "stream 84/all_to_all #1"
    # (b) 394,241 float = 1,576,964 B in 2 us: 788.482 GB/s x 2(8-1)/8 = 1379.8435
    assert (ar["coll_type"], ar["bytes"]) == ("all_reduce", 1_576_964)
    assert ar["busbw_gbps"] == pytest.approx(1_379.8435)
    # (c) 24 x long int (8 B) = 192 B; second all_to_all of the stream
    assert (a2a_long["bytes"], a2a_long["match_id"]) == (192, "stream 84/all_to_all #2")
    # (d) 1 x 25136 BFloat16 in, x 8 ranks (world size: nothing else tells) out = 402,176 B
    assert ag["coll_type"] == "all_gather" and ag["bytes"] == 402_176
    assert ag["size_source"] == "cpu nccl:_all_gather_base Input Dims x Input type x group_size"
    assert (ag["group_size"], ag["group_size_source"]) == (8, "trace world size")
    # (e) 2,557,440 BFloat16 = 5,114,880 B, linked by launch and by External id
    assert sm_launch["type_source"] == "cpu op symm_mem::multimem_all_reduce_ (launch)"
    assert sm_ext["type_source"] == "cpu op symm_mem::multimem_all_reduce_ (External id)"
    assert sm_launch["bytes"] == sm_ext["bytes"] == 5_114_880
    # (f) RCCL generic kernel: 100 Half = 200 B
    assert (generic["coll_type"], generic["bytes"]) == ("all_reduce", 200)
    # (g) nothing known: NULL type and size, with the reason
    assert unknown["coll_type"] is None and unknown["bytes"] is None
    assert "launch not in trace" in unknown["reason"] and "size unknown" in unknown["reason"]
    # (h) typed by the kernel name only, not sized
    assert loose["coll_type"] == "send_recv" and loose["type_source"] == "kernel name"
    assert loose["bytes"] is None and loose["reason"].startswith("size unknown")
    # (i) typed and sized by the c10d op: output 4 x 25136 BFloat16 = 201,088 B, group
    # 100,544 / 25,136 = 4 (not the world's 8); 201,088 B in 1 us x (4-1)/4 = 150.816 GB/s
    assert c10d_only["coll_type"] == "all_gather" and c10d_only["bytes"] == 201_088
    assert c10d_only["type_source"] == "cpu op c10d::_allgather_base_ (launch)"
    assert c10d_only["group_size"] == 4 and c10d_only["reason"] is None
    assert c10d_only["busbw_gbps"] == pytest.approx(150.816)
    # single rank: skew and straggler are not applicable
    (skew,) = _metric(con, "collective_skew", "legacy")
    (strag,) = _metric(con, "straggler_rank", "legacy")
    assert skew["value"] is None and skew["reason"] == "single rank"
    assert strag["value"] is None and strag["reason"] == "single rank"


# -- real traces ------------------------------------------------------------------------------

DTYPE_BYTES = {"float": 4, "int": 4, "long int": 8, "BFloat16": 2, "Long": 8, "c10::BFloat16": 2, "signed char": 1}
NCCL_TESTS_FACTOR = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
}


def _ns(us: Any) -> int:
    return int(Decimal(str(us)) * 1000)


def _load(path: Path) -> dict:
    with gzip.open(path, "rt") if path.suffix == ".gz" else open(path) as f:
        return json.load(f)


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    from cclq.store.warehouse import Warehouse

    traces = require_shared()
    wh = Warehouse(tmp_path_factory.mktemp("coll_real") / "wh")
    run_ingest(
        [
            traces / "dlrm_param_8xV100",
            traces / "tracelens_mi300_resnet_ddp",
            traces / "tracelens_b200_vllm_tp8",
            traces / "hta_trace_filter_2rank",
            traces / "hta_negative_queue_length",
        ],
        wh,
    )
    return traces, connect(wh)


def _dlrm_from_json(traces: Path) -> dict[int, list[dict[str, Any]]]:
    """Per rank, every NCCL kernel in start order with the type and input size of the
    `nccl:*` annotation that contains its cudaLaunchKernel on the same thread."""
    out: dict[int, list[dict[str, Any]]] = {}
    for path in sorted((traces / "dlrm_param_8xV100").glob("worker*.pt.trace.json")):
        doc = _load(path)
        events = doc["traceEvents"]
        launches = {e["args"]["correlation"]: e for e in events if e.get("cat") == "cuda_runtime"}
        annotations = [e for e in events if e.get("ph") == "X" and e.get("name", "").startswith("nccl:")]
        kernels = sorted(
            (e for e in events if e.get("cat") == "kernel" and e["name"].startswith("nccl")), key=lambda e: e["ts"]
        )
        rows = []
        for k in kernels:
            launch = launches[k["args"]["correlation"]]
            (ann,) = [
                a
                for a in annotations
                if a["tid"] == launch["tid"] and _ns(a["ts"]) <= _ns(launch["ts"]) < _ns(a["ts"]) + _ns(a["dur"])
            ]
            coll = ann["name"][len("nccl:") :]
            nelems = math.prod(ann["args"]["Input Dims"][0])
            rows.append(
                {
                    "coll_type": coll,
                    "ts_ns": _ns(k["ts"]),
                    "dur_ns": _ns(k["dur"]),
                    "bytes": nelems * DTYPE_BYTES[ann["args"]["Input type"][0]],
                }
            )
        out[doc["distributedInfo"]["rank"]] = rows
    return out


@pytest.mark.slow
def test_dlrm_every_comm_kernel_typed_sized_and_matched(real):
    traces, con = real
    expected = _dlrm_from_json(traces)
    world = 8
    assert sorted(expected) == list(range(world))
    rows = _coll(con, "dlrm_param_8xV100")
    by_rank: dict[int, list] = defaultdict(list)
    for r in rows:
        by_rank[r["rank"]].append(r)
    for rank, exp in expected.items():
        got = by_rank[rank]
        assert len(got) == len(exp)
        for g, e in zip(got, exp):
            assert g["coll_type"] == e["coll_type"] and g["coll_type"] in ("all_to_all", "all_reduce")
            assert (g["ts_ns"], g["dur_ns"], g["bytes"]) == (e["ts_ns"], e["dur_ns"], e["bytes"])
            assert g["group_size"] == world
            busbw = e["bytes"] / e["dur_ns"] * NCCL_TESTS_FACTOR[e["coll_type"]](world)
            assert g["busbw_gbps"] == pytest.approx(busbw, rel=1e-12)
            assert g["reason"] is None
    # every collective is matched on all 8 ranks, once per rank
    per_match = Counter((r["match_id"], r["rank"]) for r in rows)
    assert set(per_match.values()) == {1}
    ranks_per_match = Counter(m for m, _ in per_match)
    assert set(ranks_per_match.values()) == {world}
    assert len(ranks_per_match) == len(expected[0])


@pytest.mark.slow
def test_dlrm_skew_straggler_and_busbw_from_raw_json(real):
    traces, con = real
    expected = _dlrm_from_json(traces)
    # the n-th collective of a type on each rank is one collective (no Seq in this trace)
    instances: dict[tuple[str, int], dict[int, dict]] = defaultdict(dict)
    for rank, rows in expected.items():
        seen: Counter = Counter()
        for r in rows:
            seen[r["coll_type"]] += 1
            instances[(r["coll_type"], seen[r["coll_type"]])][rank] = r
    want = {}
    late = Counter()
    for (coll, _), per_rank in instances.items():
        starts = {rank: r["ts_ns"] for rank, r in per_rank.items()}
        ends = [r["ts_ns"] + r["dur_ns"] for r in per_rank.values()]
        straggler = min(rank for rank, ts in starts.items() if ts == max(starts.values()))
        late[straggler] += 1
        want[(coll, min(starts.values()))] = (
            (max(starts.values()) - min(starts.values())) / 1e9,
            (max(ends) - min(ends)) / 1e9,
            straggler,
        )
    got = {
        (r["coll_type"], r["first_start_ns"]): (r["value"], r["end_skew_s"], r["straggler_rank"])
        for r in _metric(con, "collective_skew", "dlrm_param_8xV100")
    }
    assert set(got) == set(want)
    for key, (skew, end_skew, straggler) in want.items():
        assert got[key][0] == pytest.approx(skew, abs=1e-12)
        assert got[key][1] == pytest.approx(end_skew, abs=1e-12)
        assert got[key][2] == straggler

    (s,) = _metric(con, "straggler_rank", "dlrm_param_8xV100")
    top = max(late.values())
    assert s["value"] == min(rank for rank, n in late.items() if n == top)
    assert s["late_count"] == top and s["matched_collectives"] == len(instances)
    assert s["share"] == pytest.approx(top / len(instances))

    # busbw: median per (type, power-of-two bucket) over all 8 ranks' instances
    buckets: dict[tuple[str, int], list[float]] = defaultdict(list)
    for rows in expected.values():
        for r in rows:
            bucket = 1 << (r["bytes"].bit_length() - 1)
            buckets[(r["coll_type"], bucket)].append(r["bytes"] / r["dur_ns"] * NCCL_TESTS_FACTOR[r["coll_type"]](8))
    got_bw = {(r["coll_type"], r["size_bucket"]): r for r in _metric(con, "collective_busbw", "dlrm_param_8xV100")}
    assert set(got_bw) == set(buckets)
    for key, values in buckets.items():
        assert got_bw[key]["value"] == pytest.approx(statistics.median(values), rel=1e-12)
        assert got_bw[key]["collectives"] == len(values)


@pytest.mark.slow
def test_rccl_generic_kernels_typed_by_collective_name(real):
    traces, con = real
    doc = _load(traces / "tracelens_mi300_resnet_ddp" / "resnet_act_checkpoint.json.gz")
    kernels = [
        e for e in doc["traceEvents"] if e.get("cat") == "kernel" and e["name"].startswith("ncclDevKernel_Generic")
    ]
    rows = {r["correlation"]: r for r in _coll(con, "tracelens_mi300_resnet_ddp")}
    assert len(rows) == len(kernels)
    types = {"allreduce": "all_reduce", "broadcast": "broadcast"}
    for k in kernels:
        got, args = rows[k["args"]["correlation"]], k["args"]
        if "Collective name" in args:
            assert got["coll_type"] == types[args["Collective name"]]
            assert got["bytes"] == args["In msg nelems"] * DTYPE_BYTES[args["dtype"]]
            assert got["group_size"] == args["Group size"]
        else:  # launched before the profiling window: no args, no launch
            assert got["coll_type"] is None and "launch not in trace" in got["reason"]


@pytest.mark.slow
def test_symm_mem_all_reduce_sized_from_its_cpu_op(real):
    traces, con = real
    doc = _load(traces / "tracelens_b200_vllm_tp8" / "eager_trace.json.gz")
    events = doc["traceEvents"]
    ops = {
        e["args"]["External id"]: e
        for e in events
        if e.get("cat") == "cpu_op" and e["name"] == "symm_mem::multimem_all_reduce_"
    }
    kernels = [e for e in events if e.get("cat") == "kernel" and "multimem_all_reduce_kernel" in e["name"]]
    assert kernels
    rows = {r["correlation"]: r for r in _coll(con, "tracelens_b200_vllm_tp8")}
    for k in kernels:
        op = ops[k["args"]["External id"]]  # the kernel's External id names the op
        nbytes = math.prod(op["args"]["Input Dims"][0]) * DTYPE_BYTES[op["args"]["Input type"][0]]
        got = rows[k["args"]["correlation"]]
        assert got["coll_type"] == "all_reduce" and got["bytes"] == nbytes
        assert got["type_source"].startswith("cpu op symm_mem::multimem_all_reduce_")
        world = doc["distributedInfo"]["world_size"]
        assert got["busbw_gbps"] == pytest.approx(nbytes / _ns(k["dur"]) * 2 * (world - 1) / world, rel=1e-12)


C10D_BASE_OPS = {"c10d::_allgather_base_": "all_gather", "c10d::_reduce_scatter_base_": "reduce_scatter"}


def _c10d_base_collectives_from_json(path: Path) -> dict[int, dict[str, Any]]:
    """Per NCCL kernel (by correlation) launched inside a c10d::_allgather_base_ or
    c10d::_reduce_scatter_base_ op on the same thread: nccl-tests' bytes and the group size
    from the op's Input Dims, which list (output, input, process group)."""
    events = _load(path)["traceEvents"]
    launches = {e["args"]["correlation"]: e for e in events if e.get("cat") == "cuda_runtime"}
    ops = [e for e in events if e.get("cat") == "cpu_op" and e.get("name") in C10D_BASE_OPS]
    out = {}
    for k in events:
        if k.get("cat") != "kernel" or not k["name"].startswith("nccl"):
            continue
        launch = launches.get(k["args"]["correlation"])
        if launch is None:
            continue
        around = [
            o
            for o in ops
            if o["tid"] == launch["tid"] and _ns(o["ts"]) <= _ns(launch["ts"]) < _ns(o["ts"]) + _ns(o["dur"])
        ]
        if not around:
            continue
        (op,) = around
        coll = C10D_BASE_OPS[op["name"]]
        dims, types = op["args"]["Input Dims"], op["args"]["Input type"]
        out_n, in_n = math.prod(dims[0]), math.prod(dims[1])
        assert types[0] == types[1]
        group = out_n // in_n if coll == "all_gather" else in_n // out_n
        nbytes = (out_n if coll == "all_gather" else in_n) * DTYPE_BYTES[types[0]]
        out[k["args"]["correlation"]] = {
            "coll_type": coll,
            "group_size": group,
            "bytes": nbytes,
            "dur_ns": _ns(k["dur"]),
        }
    return out


@pytest.mark.slow
@pytest.mark.parametrize(
    "folder, group, colls",
    [
        # 2 of 128 ranks; c10d::_allgather_base_ output [1073741824], input [16777216] int8
        ("hta_trace_filter_2rank", 64, {"all_gather"}),
        # rank 0 of 16; all-gather [65536, 64] <- [8192, 64], reduce-scatter [8192, 384] <- [65536, 384]
        ("hta_negative_queue_length", 8, {"all_gather", "reduce_scatter"}),
    ],
)
def test_sub_group_all_gather_and_reduce_scatter_from_raw_json(real, folder, group, colls):
    """Kernels without collective args in a group smaller than the world: bytes (all_gather
    its output, reduce_scatter its input) and group size come from the enclosing c10d op's
    Input Dims, worked out here from the raw JSON, not from the trace's world size."""
    traces, con = real
    expected: dict[tuple[int, int], dict] = {}
    for path in sorted((traces / folder).glob("*.json.gz")):
        rank = _load(path)["distributedInfo"]["rank"]
        for corr, e in _c10d_base_collectives_from_json(path).items():
            expected[(rank, corr)] = e
    assert {e["coll_type"] for e in expected.values()} == colls
    assert {e["group_size"] for e in expected.values()} == {group}
    got = {(r["rank"], r["correlation"]): r for r in _coll(con, folder) if r["coll_type"] in colls}
    assert set(got) == set(expected)
    for key, e in expected.items():
        g = got[key]
        assert (g["coll_type"], g["bytes"], g["group_size"]) == (e["coll_type"], e["bytes"], group)
        busbw = e["bytes"] / e["dur_ns"] * NCCL_TESTS_FACTOR[e["coll_type"]](group)
        assert g["busbw_gbps"] == pytest.approx(busbw, rel=1e-12)
        assert g["reason"] is None


def test_straggler_rank_says_why_it_has_no_value(tmp_path, wh):
    """No collective at all, and collectives that no second rank ran: two reasons."""
    for rank in (0, 1):
        b = KinetoTraceBuilder(rank=rank, world_size=2)
        b.kernel("volta_sgemm_128x64_nn", ts=1_000, dur=500, stream=7, launch_ts=900)
        b.write(tmp_path / "in" / "nocomm" / f"rank{rank}.json")
        b = KinetoTraceBuilder(rank=rank, world_size=2)
        if rank == 0:  # only rank 0 ran the all-reduce
            b.nccl_kernel(
                "allreduce", ts=2_000, dur=300, nelems=256, dtype="Float", group_size=2, seq=0, launch_ts=1_900
            )
        b.kernel("volta_sgemm_128x64_nn", ts=1_000, dur=500, stream=7, launch_ts=900)
        b.write(tmp_path / "in" / "alone" / f"rank{rank}.json")
    run_ingest([tmp_path / "in"], wh)
    con = connect(wh)
    try:
        rows = {r["trace"]: r for r in run_metric(con, resolve("straggler_rank")).to_pylist()}
    finally:
        con.close()
    assert rows["nocomm"]["value"] is None and rows["nocomm"]["reason"] == "no communication kernels"
    assert rows["alone"]["value"] is None
    assert rows["alone"]["reason"] == "no collective matched across two or more ranks"
