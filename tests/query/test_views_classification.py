"""kernel_class_rules: ONE versioned table for GPU activities and CPU-side collective
ops; metrics pin its version through the `*_with(<version>)` macros."""

from __future__ import annotations

import pytest
from helpers.warehouse import run_ingest

from cclq.query.session import connect
from cclq.store.warehouse import Warehouse
from cclq.synth.kineto import KinetoTraceBuilder

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
    rows = con.execute(
        "SELECT version, applies_to, kernel_class, count(*) FROM kernel_class_rules GROUP BY ALL ORDER BY ALL"
    ).fetchall()
    assert {(v, side) for v, side, _, _ in rows} == {(v, side) for v in (1, 2) for side in ("gpu_activity", "cpu_op")}
    assert {cls for _, side, cls, _ in rows if side == "cpu_op"} == {"comm"}
    # CPU rules say whether a match records a call or the backend running it
    for version in (1, 2):
        assert con.execute(
            "SELECT pattern, role FROM kernel_class_rules WHERE applies_to = 'cpu_op' "
            "AND version = ? ORDER BY priority",
            [version],
        ).fetchall() == [
            ("^c10d::", "call"),
            ("^record_param_comms$", "call"),
            ("^nccl:", "backend"),
            ("^gloo:", "backend"),
        ]
    assert con.execute(
        "SELECT count(*) FROM kernel_class_rules WHERE applies_to = 'gpu_activity' AND role IS NOT NULL"
    ).fetchall() == [(0,)]
    # every GPU class the views document is reachable through a rule or a kind
    assert {cls for v, side, cls, _ in rows if side == "gpu_activity" and v == 1} == {
        "comm",
        "sync",
        "memcpy",
        "memset",
    }
    # version 2 also names a compute kernel (DeepEP's get_dispatch_layout, for its family)
    assert {cls for v, side, cls, _ in rows if side == "gpu_activity" and v == 2} == {
        "comm",
        "sync",
        "memcpy",
        "memset",
        "compute",
    }
    # version 2 is version 1 plus rules: every version-1 rule is in it unchanged
    assert (
        con.execute(
            "SELECT priority, applies_to, pattern, kernel_class, coll_type, role FROM kernel_class_rules "
            "WHERE version = 1 EXCEPT SELECT priority, applies_to, pattern, kernel_class, coll_type, role "
            "FROM kernel_class_rules WHERE version = 2"
        ).fetchall()
        == []
    )
    assert con.execute(
        "SELECT count(*) FROM kernel_class_rules WHERE version = 1 AND family IS NOT NULL"
    ).fetchall() == [(0,)]
    # priorities are unique within a version: first match is well defined
    assert con.execute(
        "SELECT count(*) FROM (SELECT version, priority FROM kernel_class_rules GROUP BY ALL HAVING count(*) > 1)"
    ).fetchall() == [(0,)]


def test_cpu_collectives_come_from_the_cpu_op_rules(con):
    got = con.execute("SELECT name, coll_type FROM cpu_collectives ORDER BY ts_ns").fetchall()
    assert got == [("c10d::send", "send"), ("gloo:broadcast", "broadcast"), ("record_param_comms", "reduce_scatter")]
    assert con.execute("SELECT name, coll_type FROM cpu_collectives_with(2, files) ORDER BY ts_ns").fetchall() == got
    # a rules version without rows classifies nothing as a collective ...
    assert con.execute("SELECT count(*) FROM cpu_collectives_with(99, files)").fetchall() == [(0,)]
    # ... and leaves every kernel compute (memcpys stay memcpy: that is their kind)
    assert con.execute(
        "SELECT kind, kernel_class, count(*) FROM gpu_ops_classified_with(99) GROUP BY ALL ORDER BY ALL"
    ).fetchall() == [("kernel", "compute", 3), ("memcpy", "memcpy", 1)]


def test_one_table_drives_both_sides(con):
    """Adding a row to the table (here in a scratch connection) is all it takes to
    make a new CPU op name a collective: no second list of patterns exists. The matcher
    is made from the table (when the views are compiled; here again, from the session's
    table, as sql/README.md says)."""
    from cclq.query.sqlfiles import module_matchers, view_modules
    from cclq.query.view_catalog import matcher_macro

    con.execute("CREATE TEMP TABLE shipped_rules AS SELECT * FROM kernel_class_rules")
    con.execute("""CREATE TEMP VIEW kernel_class_rules AS
                   SELECT * FROM shipped_rules
                   UNION ALL SELECT 3, 104, 'cpu_op', '^mpi:', 'comm', NULL, 'call', NULL""")
    (matcher,) = [m for module in view_modules() for m in module_matchers(module) if m.rules == "kernel_class_rules"]
    assert con.execute("SELECT count(*) FROM cpu_collectives_with(3, files)").fetchall() == [(0,)]  # not yet
    con.execute(matcher_macro(con, matcher, temporary=True))
    try:
        got = con.execute("SELECT name, coll_type FROM cpu_collectives_with(3, files)").fetchall()
        assert got == [("mpi:allreduce", "all_reduce")]
        assert con.execute("SELECT count(*) FROM cpu_collectives_with(1, files)").fetchall() == [(3,)]
    finally:
        con.execute(f"DROP MACRO temp.{matcher.macro}")
        con.execute("DROP VIEW temp.kernel_class_rules")
        con.execute("DROP TABLE temp.shipped_rules")


def test_gpu_ops_classified_is_version_1(con):
    assert (
        con.execute("SELECT * FROM gpu_ops_classified EXCEPT ALL SELECT * FROM gpu_ops_classified_with(1)").fetchall()
        == []
    )
    got = con.execute("SELECT name[:12], kernel_class, coll_type FROM gpu_ops_classified ORDER BY ts_ns").fetchall()
    assert got == [
        ("ampere_sgemm", "compute", None),
        ("ncclDevKerne", "comm", "all_reduce"),
        ("ncclKernel_A", "comm", "all_gather"),
        ("Memcpy HtoD ", "memcpy", None),
    ]


def test_steps_load_after_the_xla_module_they_read():
    from cclq.query.sqlfiles import view_modules

    names = [m.name for m in view_modules()]
    assert names.index("xla") < names.index("steps")
    assert names.index("kernel_classes") < names.index("xla")


# DeepEP kernel names as profilers record them (deep_ep:: from the open-source
# library, dpsk::ep:: from DeepSeek's published profiles, primus_turbo:: on ROCm),
# with the class, collective type and family each must get in rules version 2.
DEEP_EP = {
    "void dpsk::ep::internode::dispatch<false, 8, true, 8>(int4*, float*, int*)": (
        "comm",
        "all_to_all",
        "moe_exchange",
    ),
    "void dpsk::ep::internode::combine<__nv_bfloat16, 8, 32>(int4*, float*)": ("comm", "all_to_all", "moe_exchange"),
    "void dpsk::ep::internode::notify_dispatch<false, 4>(int const*, long*, int)": (
        "comm",
        "all_to_all",
        "moe_exchange",
    ),
    "void dpsk::ep::internode::cached_notify<4>(int, int, int)": ("comm", "all_to_all", "moe_exchange"),
    "void dpsk::ep::internode::dispatch_ll<8>(void*)": ("comm", "all_to_all", "moe_exchange"),
    "void deep_ep::intranode::cached_notify_combine<8>(void**, int*, int)": ("comm", "all_to_all", "moe_exchange"),
    "void deep_ep::internode_ll::combine<true, 3, 7168>(void*)": ("comm", "all_to_all", "moe_exchange"),
    "void deep_ep::intranode::barrier<8>(int**, int)": ("comm", "barrier", "moe_exchange"),
    "void primus_turbo::deep_ep::intranode::notify_dispatch<8>(int const*, int*)": (
        "comm",
        "all_to_all",
        "moe_exchange",
    ),
    "void dpsk::ep::cuda::get_dispatch_layout<256, 32, 8>(long const*, int*)": ("compute", None, "moe_route"),
    "void deep_ep::layout::get_dispatch_layout<256, 32, 8>(long const*, int*)": ("compute", None, "moe_route"),
    # CUB's scan kernels live in a namespace that merely ends in dpsk::ep
    "void cdpsk::ep::CUB_DeviceScanKernel<int>(int)": ("compute", None, None),
    "void deep_ep::internode_ll::clean_low_latency_buffer<32>(int*, int)": ("compute", None, None),
}
# what rules version 1 made of them (kept reproducible): its loose pattern
# `(deep_ep|internode|intranode).*(dispatch|combine)` calls the layout kernel comm
# and misses cached_notify, barrier and the dpsk::ep::cuda:: namespace
DEEP_EP_V1_COMM = {
    "void dpsk::ep::internode::dispatch<false, 8, true, 8>(int4*, float*, int*)",
    "void dpsk::ep::internode::combine<__nv_bfloat16, 8, 32>(int4*, float*)",
    "void dpsk::ep::internode::notify_dispatch<false, 4>(int const*, long*, int)",
    "void dpsk::ep::internode::dispatch_ll<8>(void*)",
    "void deep_ep::intranode::cached_notify_combine<8>(void**, int*, int)",
    "void deep_ep::internode_ll::combine<true, 3, 7168>(void*)",
    "void primus_turbo::deep_ep::intranode::notify_dispatch<8>(int const*, int*)",
    "void deep_ep::layout::get_dispatch_layout<256, 32, 8>(long const*, int*)",
}


@pytest.fixture(scope="module")
def deep_ep_con(tmp_path_factory):
    root = tmp_path_factory.mktemp("deep_ep")
    b = KinetoTraceBuilder(rank=0, world_size=1)
    for i, name in enumerate(DEEP_EP):
        b.kernel(name, i * 10 * US, 5 * US, stream=7 + i % 2)
    b.write(root / "in" / "t" / "rank0.json")
    wh = Warehouse(root / "wh")
    run_ingest([root / "in"], wh)
    c = connect(wh)
    yield c
    c.close()


def test_deep_ep_kernels_are_comm_and_moe_in_rules_version_2(deep_ep_con):
    got = {
        n: (cls, ct, fam)
        for n, cls, ct, fam in deep_ep_con.execute(
            "SELECT name, kernel_class, coll_type, family FROM gpu_ops_classified_with(2)"
        ).fetchall()
    }
    assert got == DEEP_EP
    families = {
        n: (bd, moe)
        for n, bd, moe in deep_ep_con.execute("SELECT name, breakdown, is_moe FROM kernel_name_families(2)").fetchall()
    }
    for name, (cls, _, fam) in DEEP_EP.items():
        expected_breakdown = "COMM" if cls == "comm" else "MOE_ROUTE" if fam == "moe_route" else "OTHER"
        assert families[name] == (expected_breakdown, fam is not None), name


def test_deep_ep_rules_version_1_is_unchanged(deep_ep_con):
    got = deep_ep_con.execute("SELECT name, kernel_class, family FROM gpu_ops_classified_with(1)").fetchall()
    assert {n for n, cls, _ in got if cls == "comm"} == DEEP_EP_V1_COMM
    assert all(fam is None for _, _, fam in got)
    # no DeepEP kernel was MoE time in version 1 (its 'moe' name pattern misses them all)
    assert deep_ep_con.execute("SELECT count(*) FROM kernel_name_families(1) WHERE is_moe").fetchall() == [(0,)]
