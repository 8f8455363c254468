"""kernel_class_rules: ONE versioned table for GPU activities and CPU-side collective
ops; metrics pin its version through the `*_with(<version>)` macros."""

from __future__ import annotations


import pytest

from cclq.engine import connect
from cclq.synth import KinetoTraceBuilder
from cclq.warehouse import Warehouse
from conftest import run_ingest

US = 1_000


@pytest.fixture(scope="module")
def con(tmp_path_factory):
    root = tmp_path_factory.mktemp("classes")
    b = KinetoTraceBuilder(rank=0, world_size=2)
    b.kernel("ampere_sgemm_128x64_tn", 0, 10 * US, stream=7)
    b.nccl_kernel("allreduce", 20 * US, 5 * US)
    b.nccl_kernel("allgather", 30 * US, 5 * US, kernel_name="ncclKernel_AllGather_RING_LL_Sum_float(ncclWorkElem)")
    b.memcpy(40 * US, 5 * US, 1024)
    b.cpu_op("c10d::send", 0, 5 * US)
    b.user_annotation("gloo:broadcast", 10 * US, 5 * US)
    b.cpu_op("record_param_comms", 20 * US, 1 * US, args={"Collective name": "reduce_scatter"})
    b.cpu_op("mpi:allreduce", 30 * US, 5 * US)  # no rule names it
    b.cpu_op("aten::mm", 40 * US, 5 * US)
    b.write(root / "in" / "t" / "rank0.json")
    wh = Warehouse(root / "wh")
    run_ingest([root / "in"], wh)
    c = connect(wh)
    yield c
    c.close()


def test_every_rule_has_a_version_and_a_side(con):
    rows = con.execute("SELECT version, applies_to, kernel_class, count(*) FROM kernel_class_rules "
                       "GROUP BY ALL ORDER BY ALL").fetchall()
    assert {(v, side) for v, side, _, _ in rows} == {(1, "gpu_activity"), (1, "cpu_op")}
    assert {cls for _, side, cls, _ in rows if side == "cpu_op"} == {"comm"}
    # CPU rules say whether a match records a call or the backend running it
    assert con.execute("SELECT pattern, role FROM kernel_class_rules WHERE applies_to = 'cpu_op' ORDER BY priority"
                       ).fetchall() == [("^c10d::", "call"), ("^record_param_comms$", "call"),
                                        ("^nccl:", "backend"), ("^gloo:", "backend")]
    assert con.execute("SELECT count(*) FROM kernel_class_rules WHERE applies_to = 'gpu_activity' "
                       "AND role IS NOT NULL").fetchall() == [(0,)]
    # every GPU class the views document is reachable through a rule or a kind
    assert {cls for _, side, cls, _ in rows if side == "gpu_activity"} == {"comm", "sync", "memcpy", "memset"}
    # priorities are unique within a version: first match is well defined
    assert con.execute("SELECT count(*) FROM (SELECT version, priority FROM kernel_class_rules "
                       "GROUP BY ALL HAVING count(*) > 1)").fetchall() == [(0,)]


def test_cpu_collectives_come_from_the_cpu_op_rules(con):
    got = con.execute("SELECT name, coll_type FROM cpu_collectives ORDER BY ts_ns").fetchall()
    assert got == [("c10d::send", "send"), ("gloo:broadcast", "broadcast"), ("record_param_comms", "reduce_scatter")]
    # a rules version without rows classifies nothing as a collective ...
    assert con.execute("SELECT count(*) FROM cpu_collectives_with(2, files)").fetchall() == [(0,)]
    # ... and leaves every kernel compute (memcpys stay memcpy: that is their kind)
    assert con.execute("SELECT kind, kernel_class, count(*) FROM gpu_ops_classified_with(2) "
                       "GROUP BY ALL ORDER BY ALL").fetchall() == [("kernel", "compute", 3), ("memcpy", "memcpy", 1)]


def test_one_table_drives_both_sides(con):
    """Adding a row to the table (here in a scratch connection) is all it takes to
    make a new CPU op name a collective: no second list of patterns exists."""
    con.execute("CREATE TEMP TABLE shipped_rules AS SELECT * FROM kernel_class_rules")
    con.execute("""CREATE TEMP VIEW kernel_class_rules AS
                   SELECT * FROM shipped_rules
                   UNION ALL SELECT 2, 104, 'cpu_op', '^mpi:', 'comm', NULL, 'call'""")
    try:
        got = con.execute("SELECT name, coll_type FROM cpu_collectives_with(2, files)").fetchall()
        assert got == [("mpi:allreduce", "all_reduce")]
        assert con.execute("SELECT count(*) FROM cpu_collectives_with(1, files)").fetchall() == [(3,)]
    finally:
        con.execute("DROP VIEW temp.kernel_class_rules")
        con.execute("DROP TABLE temp.shipped_rules")


def test_gpu_ops_classified_is_version_1(con):
    assert con.execute("SELECT * FROM gpu_ops_classified EXCEPT ALL SELECT * FROM gpu_ops_classified_with(1)"
                       ).fetchall() == []
    got = con.execute("SELECT name[:12], kernel_class, coll_type FROM gpu_ops_classified ORDER BY ts_ns").fetchall()
    assert got == [("ampere_sgemm", "compute", None), ("ncclDevKerne", "comm", "all_reduce"),
                   ("ncclKernel_A", "comm", "all_gather"), ("Memcpy HtoD ", "memcpy", None)]


def test_steps_load_after_the_xla_module_they_read():
    from cclq.sqlfiles import view_modules

    names = [m.name for m in view_modules()]
    assert names.index("xla") < names.index("steps")
    assert names.index("kernel_classes") < names.index("xla")
