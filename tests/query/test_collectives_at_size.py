"""The `collectives` view's link from each communication kernel's launch to the collective
CPU ops around it, at the size of real traces: linear in the ops and launches (an ASOF
join over each thread's call stack), and the same rows as the plain containment join
where a thread's ops overlap without nesting (issue 42)."""

from __future__ import annotations

import json

from helpers.plans import profiled
from helpers.warehouse import run_ingest

from cclq.query.session import connect
from cclq.store.warehouse import Warehouse
from cclq.synth.kineto import KinetoTraceBuilder, generate_workload

GENERIC = "ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)"  # typed by nothing but its ops


def test_launches_find_their_ops_through_the_stack_not_a_join_per_thread(tmp_path):
    """200 steps x 2 DDP all-reduces, each launched inside record_param_comms >
    nccl:all_reduce on one thread. Before, every launch was compared with every op of the
    thread (a hash join on the thread, the times a residual: quadratic in the rank's
    collectives). Now the ASOF join finds the two ops around each launch, and the plain
    join, kept for launches in ops that do not nest, gets none."""
    generate_workload(tmp_path / "in" / "ddp", ranks=1, steps=200, layers=4)
    wh = Warehouse(tmp_path / "wh")
    run_ingest([tmp_path / "in"], wh)
    session = connect(wh)
    kernels = 200 * 2
    rows, ops = profiled(session, "SELECT coll_type, type_source, bytes FROM collectives", tmp_path / "profile.json")
    assert len(rows) == kernels
    assert all(r[0] == "all_reduce" and r[2] > 0 for r in rows)
    asof = [op for op in ops if op["name"] == "ASOF_JOIN"]
    # one row per (launch, op around it): record_param_comms and nccl:all_reduce
    assert asof and sum(op["intermediate_rows"] for op in asof) == 2 * kernels
    by_thread = [
        op
        for op in ops
        if "JOIN" in op["name"]
        and op["name"] != "ASOF_JOIN"
        and "launch_ns" in json.dumps(op.get("extra_info", {}))
        and "ts_ns <= launch_ns" in json.dumps(op.get("extra_info", {}))
    ]
    assert sum(op["intermediate_rows"] for op in by_thread) == 0


def test_ops_that_overlap_without_nesting_give_the_containment_rows(tmp_path):
    """Two collective ops on one thread that overlap without one holding the other:
    nccl:all_gather [1000, 2000) us and record_param_comms (allreduce, 4096 Float)
    [1500, 3000) us. A launch at 1200 is inside the first only, at 1700 inside both
    (the innermost, the later start, types it: all_reduce), at 2500 inside the second
    only (the stack's depth-1 op there is the ended all_gather: the check sends it to the
    plain join, which finds record_param_comms)."""
    b = KinetoTraceBuilder(rank=0, world_size=2)
    b.cpu_op("nccl:all_gather", 1_000_000, 1_000_000, cat="user_annotation")
    b.cpu_op(
        "record_param_comms",
        1_500_000,
        1_500_000,
        {
            "Collective name": "allreduce",
            "In msg nelems": 4096,
            "Out msg nelems": 4096,
            "dtype": "Float",
            "Group size": 2,
        },
    )
    for launch_us in (1200, 1700, 2500):
        b.kernel(GENERIC, launch_us * 1000 + 50_000, 10_000, stream=20, launch_ts=launch_us * 1000)
    folder = tmp_path / "in" / "overlap"
    folder.mkdir(parents=True)
    b.write(folder / "rank0.json")
    wh = Warehouse(tmp_path / "wh")
    run_ingest([tmp_path / "in"], wh)
    session = connect(wh)
    rows = session.execute(
        "SELECT launch_ns - min(launch_ns) OVER (), coll_type, type_source, bytes FROM collectives ORDER BY launch_ns"
    ).fetchall()
    assert rows == [
        (0, "all_gather", "cpu op nccl:all_gather (launch)", None),
        (500_000, "all_reduce", "cpu op record_param_comms (launch)", 4096 * 4),
        (1_300_000, "all_reduce", "cpu op record_param_comms (launch)", 4096 * 4),
    ]


def test_one_metric_stores_the_collectives_and_steps_once(tmp_path):
    """One metric over `collectives` or the steps reads each several times over (its
    plan expanded the views' stack per reference: collective_busbw read the events 48
    times); run alone, it still computes them once into tables (`-- batch: shared always`)."""
    from cclq.query.metrics import shared_views
    from cclq.query.registry import resolve

    generate_workload(tmp_path / "in" / "ddp", ranks=2, steps=3, layers=4)
    wh = Warehouse(tmp_path / "wh")
    run_ingest([tmp_path / "in"], wh)
    session = connect(wh)
    with shared_views(session, [resolve("collective_busbw").sql]) as names:
        assert {"_collective_cpu_ops", "collectives_with", "collectives"} <= names
    with shared_views(session, [resolve("break_down_steps").sql]) as names:
        assert {"_step_markers_with", "steps_with"} <= names
