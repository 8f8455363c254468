"""Each GPU activity's step (`gpu_ops_steps`) at the size of real traces: an ASOF join
over the rank's step spans, linear in activities and steps, with the rows of the
containment join where steps overlap (issue 42)."""

from __future__ import annotations

import json

from helpers.plans import profiled
from helpers.warehouse import run_ingest

from cclq.query.session import connect
from cclq.store.warehouse import Warehouse
from cclq.synth.kineto import KinetoTraceBuilder, generate_workload


def test_activities_find_their_step_by_asof_not_a_join_per_rank(tmp_path):
    """300 ProfilerSteps on one rank, 18 GPU activities each. Before, every activity was
    compared with every step of its rank (a hash join on the rank, the time a residual:
    quadratic in the steps of a long capture); now an ASOF join gives each its step."""
    generate_workload(tmp_path / "in" / "ddp", ranks=1, steps=300, layers=4)
    wh = Warehouse(tmp_path / "wh")
    run_ingest([tmp_path / "in"], wh)
    session = connect(wh)
    rows, ops = profiled(
        session, "SELECT step, count(*) FROM gpu_ops_steps_with(1) GROUP BY step", tmp_path / "profile.json"
    )
    per_step = dict(rows)
    # every step's activities are its own: the same count in each, none outside a step
    assert len(per_step) == 300 and None not in per_step and len(set(per_step.values())) == 1
    assert any(op["name"] == "ASOF_JOIN" and op["intermediate_rows"] > 0 for op in ops)
    residual = [
        op
        for op in ops
        if "JOIN" in op["name"]
        and op["name"] != "ASOF_JOIN"
        and "_step_time_ns >= ts_ns" in json.dumps(op.get("extra_info", {}))
    ]
    assert sum(op["intermediate_rows"] for op in residual) == 0


def test_overlapping_steps_give_the_containment_rows(tmp_path):
    """ProfilerStep#1 [1000, 2000) us and ProfilerStep#2 [1500, 3000) us overlap. Kernels
    launched at 1200 (step 1), 1700 (both: a row for each), 2500 (step 2) and 3500 us
    (none: one row, NULL step), as the containment join gives them."""
    b = KinetoTraceBuilder(rank=0, world_size=1)
    b.profiler_step(1, 1_000_000, 1_000_000)
    b.profiler_step(2, 1_500_000, 1_500_000)
    for launch_us in (1200, 1700, 2500, 3500):
        b.kernel("volta_sgemm_128x64_nn", launch_us * 1000 + 50_000, 10_000, launch_ts=launch_us * 1000)
    folder = tmp_path / "in" / "overlap"
    folder.mkdir(parents=True)
    b.write(folder / "rank0.json")
    wh = Warehouse(tmp_path / "wh")
    run_ingest([tmp_path / "in"], wh)
    session = connect(wh)
    rows = session.execute(
        "SELECT launch_ns - min(launch_ns) OVER (), step FROM gpu_ops_steps_with(1) WHERE kind = 'kernel' "
        "ORDER BY launch_ns, step"
    ).fetchall()
    assert rows == [(0, 1), (500_000, 1), (500_000, 2), (1_300_000, 2), (2_300_000, None)]
