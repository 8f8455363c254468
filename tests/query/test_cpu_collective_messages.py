"""cpu_collective_messages: the message bytes and step of CPU-side collective records,
on a hand-built trace shaped like what PyTorch's Gloo backend writes (c10d::* calls on
the main thread, gloo:* records on worker threads, no GPU kernels), plus an NCCL-style
record_param_comms. Every expected number is worked out below from the arguments."""

from __future__ import annotations

from helpers.warehouse import query, run_ingest

from cclq.synth.kineto import KinetoTraceBuilder

MS = 1_000_000  # ns


def gloo_rank(rank: int) -> KinetoTraceBuilder:
    b = KinetoTraceBuilder(rank=rank, world_size=2, tid=100)
    b.profiler_step(7, 0, 10 * MS)
    # all_gather_into_tensor of a [64, 32] float shard into [128, 32]
    b.cpu_op(
        "c10d::_allgather_base_",
        1 * MS,
        MS // 10,
        args={
            "Input Dims": [[128, 32], [64, 32], [], [], []],
            "Input type": ["float", "float", "", "Scalar", "Scalar"],
        },
    )
    b.user_annotation(
        "gloo:all_gather", 1 * MS + 50_000, 2 * MS, tid=201, args={"Input Dims": [[64, 32]], "Input type": ["float"]}
    )
    # all_reduce of 1024 bfloat16: the call lists a TensorList (no element type)
    b.cpu_op(
        "c10d::allreduce_",
        4 * MS,
        MS // 10,
        args={
            "Input Dims": [[[1024]], [], [], [], [], []],
            "Input type": ["TensorList", "", "", "", "Scalar", "Scalar"],
        },
    )
    b.user_annotation(
        "gloo:all_reduce", 4 * MS + 50_000, MS, tid=202, args={"Input Dims": [[1024]], "Input type": ["c10::BFloat16"]}
    )
    # reduce_scatter_tensor of a [1024] float input into [512]: Gloo runs an all_reduce
    b.cpu_op(
        "c10d::_reduce_scatter_base_",
        6 * MS,
        MS // 10,
        args={
            "Input Dims": [[512], [1024], [], [], [], []],
            "Input type": ["float", "float", "", "", "Scalar", "Scalar"],
        },
    )
    b.user_annotation(
        "gloo:all_reduce", 6 * MS + 50_000, MS, tid=201, args={"Input Dims": [[1024]], "Input type": ["float"]}
    )
    # after the step: no step
    b.cpu_op(
        "c10d::alltoall_base_",
        11 * MS,
        MS // 10,
        args={
            "Input Dims": [[256], [256], [], [], [], [], []],
            "Input type": ["long int", "long int", "", "ScalarList", "ScalarList", "Scalar", "Scalar"],
        },
    )
    return b


def test_gloo_records_get_nccl_tests_bytes_and_their_step(tmp_path, wh):
    for r in range(2):
        gloo_rank(r).write(tmp_path / "gloo_run" / f"kineto_trace_{r}.json")
    run_ingest([tmp_path / "gloo_run"], wh)
    rows = query(
        wh,
        """
        SELECT rank, step, role, name, coll_type, bytes, in_bytes, out_bytes, group_size, size_source, reason
        FROM cpu_collective_messages ORDER BY rank, ts_ns""",
    )
    assert len(rows) == 2 * 7
    by_name = {(r[0], r[3], r[1]): r for r in rows}
    expect = {
        # all_gather counts its output: 128 x 32 floats, from the call's output tensor
        "c10d::_allgather_base_": ("call", "all_gather", 128 * 32 * 4, 64 * 32 * 4, 128 * 32 * 4, 2),
        # the backend lists only its [64, 32] input: output = input x group size (2 ranks)
        "gloo:all_gather": ("backend", "all_gather", 64 * 32 * 4 * 2, 64 * 32 * 4, None, 2),
        "c10d::allreduce_": ("call", "all_reduce", None, None, None, 2),
        "c10d::_reduce_scatter_base_": ("call", "reduce_scatter", 1024 * 4, 1024 * 4, 512 * 4, 2),
    }
    for rank in range(2):
        for name, (role, coll, nbytes, in_b, out_b, group) in expect.items():
            r = by_name[(rank, name, 7)]
            assert (r[2], r[4], r[5], r[6], r[7], r[8]) == (role, coll, nbytes, in_b, out_b, group), name
        gloo_reduces = [r for r in rows if r[0] == rank and r[3] == "gloo:all_reduce"]
        assert [(r[1], r[5]) for r in gloo_reduces] == [(7, 1024 * 2), (7, 1024 * 4)]  # bfloat16, then float
        assert by_name[(rank, "c10d::alltoall_base_", None)][5] == 256 * 8  # outside the step: step NULL
    allreduce_call = by_name[(0, "c10d::allreduce_", 7)]
    assert allreduce_call[9] is None and "TensorList" in allreduce_call[10]
    assert by_name[(0, "gloo:all_gather", 7)][9] == "input tensors x group size"
    assert by_name[(0, "c10d::_allgather_base_", 7)][9] == "output and input tensors: output"


def test_record_param_comms_is_sized_from_msg_nelems(tmp_path, wh):
    b = KinetoTraceBuilder(rank=0, world_size=8)
    b.profiler_step(1, 0, 5 * MS)
    b.cpu_op(
        "record_param_comms",
        MS,
        MS,
        args={
            "Collective name": "allgather",
            "In msg nelems": 1000,
            "Out msg nelems": 4000,
            "dtype": "Half",
            "Group size": 4,
            "Process Group Name": "3",
        },
    )
    b.write(tmp_path / "nccl_side" / "kineto_trace_0.json")
    run_ingest([tmp_path / "nccl_side"], wh)
    (row,) = query(
        wh, "SELECT step, coll_type, bytes, group_size, group_size_source, size_source FROM cpu_collective_messages"
    )
    # Out msg nelems x 2 bytes; the Group size (4) wins over the world size (8)
    assert row == (1, "all_gather", 4000 * 2, 4, "Group size", "msg nelems: output")
