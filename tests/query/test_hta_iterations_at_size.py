"""HTA's iteration of each row (`hta_iterations`, read by `cclq.TraceAnalysis`): the step
of a CPU row is an ASOF lookup where a rank's ProfilerStep rows do not overlap, and the
plain join (every CPU row of the rank against every step row) only where they do
(issue 42: 2 M rows x 20 k steps on a 1 GB rank)."""

from __future__ import annotations

import json

from helpers.plans import profiled
from helpers.warehouse import run_ingest

from cclq.query.session import connect
from cclq.store.warehouse import Warehouse
from cclq.synth.kineto import generate_workload

# (trace, rank, event_idx, name, stream, ts_us, end_us): rank 0's steps follow each
# other, rank 1's overlap with two numbers (#3 holds #4: the plain join), rank 2's
# nest with one number, so each path of the view meets rows
_LOADED = [
    ("t", 0, 1, "ProfilerStep#1", -1, 0.0, 10.0),
    ("t", 0, 2, "ProfilerStep#2", -1, 10.0, 20.0),
    ("t", 0, 3, "ProfilerStep#9", -1, 20.0, 20.0),  # empty: holds no row
    ("t", 0, 4, "op_a", -1, 5.0, 6.0),
    ("t", 0, 5, "op_b", -1, 10.0, 12.0),  # on the boundary: the later step
    ("t", 0, 6, "op_c", -1, 20.0, 21.0),  # after the last step: -1
    ("t", 0, 7, "kernel_a", 7, 11.0, 13.0),  # launched by op_b
    ("t", 0, 8, "kernel_b", 7, 30.0, 31.0),  # no launch: -1
    ("t", 0, 9, "rocm_row", 0, 5.0, 6.0),  # stream 0: NULL
    ("t", 1, 1, "ProfilerStep#3", -1, 0.0, 30.0),
    ("t", 1, 2, "ProfilerStep#4", -1, 10.0, 20.0),
    ("t", 1, 3, "op_d", -1, 5.0, 6.0),  # in #3 only
    ("t", 1, 4, "op_e", -1, 15.0, 16.0),  # in both: the later in file order, #4
    ("t", 1, 5, "op_f", -1, 25.0, 26.0),  # in #3 only
    ("t", 1, 6, "op_g", -1, 35.0, 36.0),  # in none
    # rank 2: Kineto's two nested rows of one step, then the next step
    ("t", 2, 1, "ProfilerStep#5", -1, 0.0, 10.0),
    ("t", 2, 2, "ProfilerStep#5", -1, 1.0, 9.0),
    ("t", 2, 3, "ProfilerStep#6", -1, 10.0, 20.0),
    ("t", 2, 4, "op_h", -1, 0.5, 0.7),
    ("t", 2, 5, "op_i", -1, 5.0, 6.0),
    ("t", 2, 6, "op_j", -1, 15.0, 16.0),
]
_PARTNER = {("t", 0, 7): 5, ("t", 0, 8): 0}
# worked out by hand from HTA's rules (the view's comment)
_EXPECTED = {
    (0, 1): 1,
    (0, 2): 2,
    (0, 3): -1,
    (0, 4): 1,
    (0, 5): 2,
    (0, 6): -1,
    (0, 7): 2,
    (0, 8): -1,
    (0, 9): None,
    (1, 1): 3,
    (1, 2): 4,
    (1, 3): 3,
    (1, 4): 4,
    (1, 5): 3,
    (1, 6): -1,
    (2, 1): 5,
    (2, 2): 5,
    (2, 3): 6,
    (2, 4): 5,
    (2, 5): 5,
    (2, 6): 6,
}


def test_iterations_by_hand_with_sequential_and_overlapping_steps(tmp_path):
    generate_workload(tmp_path / "in" / "one", ranks=1, steps=1, layers=1)
    wh = Warehouse(tmp_path / "wh")
    run_ingest([tmp_path / "in"], wh)
    session = connect(wh)
    values = ", ".join(f"('{t}', {r}, {i}, '{n}', {s}, {a}, {b})" for t, r, i, n, s, a, b in _LOADED)
    session.execute(
        f"CREATE TEMP VIEW hta_loaded AS SELECT * FROM (VALUES {values}) "
        "AS v(trace, rank, event_idx, name, stream, ts_us, end_us)"
    )
    events = ", ".join(
        f"('{t}', {r}, {i}, {s}, {_PARTNER.get((t, r, i), -1 if s < 0 else 0)})" for t, r, i, _, s, _, _ in _LOADED
    )
    session.execute(
        f"CREATE TEMP VIEW hta_events AS SELECT * FROM (VALUES {events}) "
        "AS v(trace, rank, event_idx, stream, partner_idx)"
    )
    got = {
        (r, i): it for r, i, it in session.execute("SELECT rank, event_idx, iteration FROM hta_iterations").fetchall()
    }
    session.close()
    assert got == _EXPECTED


def test_the_step_of_a_row_is_not_found_by_joining_every_row_with_every_step(tmp_path):
    """One rank of 40 steps (two nested ProfilerStep#N rows each, as Kineto writes them):
    the rows meet their step through the ASOF join; the plain join (for overlapping
    steps of several numbers) is in the plan and meets no row."""
    generate_workload(tmp_path / "in" / "ddp", ranks=1, steps=40, layers=4)
    wh = Warehouse(tmp_path / "wh")
    run_ingest([tmp_path / "in"], wh)
    session = connect(wh)
    steps = session.execute("SELECT count(*) FROM hta_loaded WHERE starts_with(name, 'ProfilerStep')").fetchone()[0]
    assert steps >= 40
    ((rows, stepped),), ops = profiled(
        session,
        "SELECT count(*), count(*) FILTER (WHERE iteration >= 0) FROM hta_iterations",
        tmp_path / "profile.json",
    )
    session.close()
    assert stepped > 10 * steps  # most rows lie in a step
    assert any(op["name"] == "ASOF_JOIN" and op["intermediate_rows"] > 0 for op in ops)
    residual = [
        op
        for op in ops
        if "JOIN" in op["name"] and op["name"] != "ASOF_JOIN" and "step_end_us" in json.dumps(op.get("extra_info", {}))
    ]
    assert residual  # the plain join is in the plan (for overlapping steps) ...
    assert sum(op["intermediate_rows"] for op in residual) == 0  # ... and meets none of these
    assert rows > 0
