"""Ad-hoc SQL over the plain views gives the numbers the current metric versions give.

The plain views that classify or aggregate (`gpu_ops_classified`, `gpu_ops_steps`,
`cpu_collectives`, `collectives`, `collective_matches(scope)`) read the current rules
(kernel_class_rules version 2), the rules every current metric version reads. For each
metric whose definition one of them exposes, the view's aggregate is compared with the
metric on every shared trace and on a two-rank trace with DeepEP kernels whose numbers
are worked out by hand below (issue 41: on DeepSeek-V3's trace `gpu_ops_classified`
gave 89 ms of communication, communication_fraction 113 ms).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers.paths import require_shared
from helpers.warehouse import query, run_ingest

from cclq.query.metrics import run_metric
from cclq.query.registry import registry, resolve
from cclq.query.session import connect
from cclq.query.sqlfiles import modules_for, strip_comments
from cclq.store.warehouse import Warehouse
from cclq.synth.kineto import KinetoTraceBuilder

pytestmark = pytest.mark.slow  # (CONTRIBUTING.md: over ~2 s each)

US = 1_000
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_cublas"
LAYOUT = "void deep_ep::layout::get_dispatch_layout<256, 32, 8>(long const*, int*, int*)"
DISPATCH = "void deep_ep::internode::dispatch<false, 8, true, 8>(int4*, float*, int*)"
NOTIFY = "void deep_ep::internode::cached_notify<4>(int, int, int)"
AR_NELEMS = 1_000_000  # Float: 4 bytes each


def build_deep_ep(folder: Path) -> Path:
    """Two ranks, times in us, each rank: GEMM [0, 500), an NCCL all-reduce at 600 + 2r
    for 100, DeepEP's dispatch at 800 + 5r for 40 and cached_notify at 900 + 10r for 20
    (stream 30), get_dispatch_layout at 1000 for 10, a 1 MB copy at 1000 for 20. Rank 1
    starts every collective later than rank 0."""
    for rank in range(2):
        b = KinetoTraceBuilder(rank=rank, world_size=2)
        b.kernel(GEMM, 0, 500 * US)
        b.nccl_kernel("allreduce", (600 + 2 * rank) * US, 100 * US, nelems=AR_NELEMS, dtype="Float")
        b.kernel(DISPATCH, (800 + 5 * rank) * US, 40 * US, stream=30)
        b.kernel(NOTIFY, (900 + 10 * rank) * US, 20 * US, stream=30)
        b.kernel(LAYOUT, 1000 * US, 10 * US)
        b.memcpy(1000 * US, 20 * US, 1_000_000)
        b.write(folder / f"rank{rank}.json")
    return folder


@pytest.fixture(scope="module")
def deep_ep_wh(tmp_path_factory) -> Warehouse:
    root = tmp_path_factory.mktemp("deep_ep")
    wh = Warehouse(root / "wh")
    report = run_ingest([build_deep_ep(root / "deep_ep")], wh)
    assert not report.failed, [o.message for o in report.failed]
    return wh


@pytest.fixture(scope="module")
def shared_wh(tmp_path_factory) -> Warehouse:
    traces = require_shared()
    wh = Warehouse(tmp_path_factory.mktemp("shared") / "wh")
    report = run_ingest([traces], wh, jobs=2)
    assert not report.failed, [o.message for o in report.failed]
    return wh


def _metric(wh: Warehouse, name: str) -> list[dict]:
    con = connect(wh)
    try:
        return run_metric(con, resolve(name)).to_pylist()
    finally:
        con.close()


# --- the DeepSeek case, by hand ----------------------------------------------------


def test_deep_ep_by_hand(deep_ep_wh):
    """Per rank, rules v2: comm = all-reduce 100 + dispatch 40 + cached_notify 20 = 160 us
    of 670 us of kernels (GEMM 500, layout 10 are compute); rules v1 called the layout
    comm (`deep_ep.*dispatch`) and missed cached_notify: 150 us."""
    rows = query(
        deep_ep_wh,
        "SELECT rank, sum(dur_ns) FILTER (WHERE kernel_class = 'comm'), sum(dur_ns) "
        "FROM gpu_ops_classified WHERE kind = 'kernel' GROUP BY rank ORDER BY rank",
    )
    assert rows == [(0, 160 * US, 670 * US), (1, 160 * US, 670 * US)]
    v1 = query(
        deep_ep_wh,
        "SELECT sum(dur_ns) FROM gpu_ops_classified_with(1) "
        "WHERE kind = 'kernel' AND kernel_class = 'comm' AND rank = 0",
    )
    assert v1 == [(150 * US,)]
    frac = {r["rank"]: r for r in _metric(deep_ep_wh, "communication_fraction")}
    for rank in (0, 1):
        assert frac[rank]["value"] == pytest.approx(160 / 670, rel=1e-12)
        assert frac[rank]["comm_s"] == pytest.approx(160e-6, rel=1e-12)
    total = {r["rank"]: r["value"] for r in _metric(deep_ep_wh, "total_communication_time")}
    assert total == pytest.approx({0: 160e-6, 1: 160e-6}, rel=1e-12)


def test_deep_ep_collectives_by_hand(deep_ep_wh):
    """Three collectives matched across the two ranks: the all-reduce (start skew 2 us),
    dispatch (5 us) and cached_notify (10 us); rank 1 starts all three last. The
    all-reduce of 4e6 B in 100 us: algbw 40 GB/s, busbw x 2(n-1)/n = 1 for n = 2."""
    skew = sorted(r["value"] for r in _metric(deep_ep_wh, "collective_skew"))
    assert skew == pytest.approx([2e-6, 5e-6, 10e-6], rel=1e-9)
    straggler = _metric(deep_ep_wh, "straggler_rank")
    assert [(r["value"], r["late_count"], r["matched_collectives"]) for r in straggler] == [(1, 3, 3)]
    assert straggler[0]["late_skew_s"] == pytest.approx(17e-6, rel=1e-9)
    busbw = [r for r in _metric(deep_ep_wh, "collective_busbw") if r["value"] is not None]
    assert [(r["coll_type"], r["collectives"]) for r in busbw] == [("all_reduce", 2)]
    assert busbw[0]["value"] == pytest.approx(40.0, rel=1e-9)
    # ad hoc: the plain view and macro count the DeepEP kernels too
    assert query(deep_ep_wh, "SELECT coll_type, count(*) FROM collectives GROUP BY ALL ORDER BY 1") == [
        ("all_reduce", 2),
        ("all_to_all", 4),
    ]
    assert query(
        deep_ep_wh, "SELECT count(*), sum(start_skew_ns) FROM collective_matches(trace_ranks) WHERE ranks_seen >= 2"
    ) == [(3, 17 * US)]


def test_released_versions_keep_their_numbers_on_deep_ep(deep_ep_wh):
    """Version 1 of the metrics that read the plain views before they were version 2
    still reads rules version 1: the layout kernel is a collective (all_to_all on stream
    7, matched across the ranks with skew 0), cached_notify is not. The copy [1000, 1020)
    is exposed where no compute kernel runs: v2 10 us (the layout kernel [1000, 1010) is
    compute), v1 20 us (it was comm); of the GPU span [0, 1020) us."""
    con = connect(deep_ep_wh)
    try:
        skew = sorted(r["value"] for r in run_metric(con, resolve("collective_skew", 1)).to_pylist())
        mto = {r["rank"]: r for r in run_metric(con, resolve("memory_transfer_overhead", 1)).to_pylist()}
    finally:
        con.close()
    assert skew == pytest.approx([0.0, 2e-6, 5e-6], abs=1e-15)
    assert mto[0]["exposed_memcpy_s"] == pytest.approx(20e-6, rel=1e-12)
    assert mto[0]["value"] == pytest.approx(20 / 1020, rel=1e-12)
    mto2 = {r["rank"]: r for r in _metric(deep_ep_wh, "memory_transfer_overhead")}
    assert mto2[0]["exposed_memcpy_s"] == pytest.approx(10e-6, rel=1e-12)
    assert mto2[0]["value"] == pytest.approx(10 / 1020, rel=1e-12)


# --- every current metric reads the plain views' rules ------------------------------

_RULES_CALL = re.compile(r"\b(\w+_(?:with|of|rows))\((\d+)\b")


def test_current_metric_versions_read_the_current_rules():
    """The plain views are rules version 2; every current metric version that calls a
    versioned macro calls it with 2 (the step rules of `steps` are 2 as well), so the
    plain views expose the current definitions."""
    older = []
    for name, versions in registry().items():
        spec = versions[max(versions)]
        code = strip_comments(spec.sql) + "".join(
            strip_comments(m.sql) for m in modules_for(spec.sql) if m.name == f"metric_bodies.{name}"
        )
        calls = {(f, int(v)) for f, v in _RULES_CALL.findall(code)}
        older += [f"{name}/v{spec.version}: {f}({v})" for f, v in sorted(calls) if v != 2]
    assert not older, older


# --- the view's aggregate against the metric, trace by trace ------------------------

# (metric, column of the metric's rows, SQL over the plain views giving (trace, rank, value));
# a metric with a `source` column is compared on the rows of the source the view gives
PER_RANK = [
    (
        "communication_fraction",
        "comm_s",
        "SELECT trace, rank, sum(dur_ns) FILTER (WHERE kernel_class = 'comm') / 1e9 "
        "FROM gpu_ops_classified WHERE kind = 'kernel' GROUP BY ALL",
    ),
    (
        "communication_fraction",
        "op_time_s",
        "SELECT trace, rank, sum(dur_ns) / 1e9 FROM gpu_ops_classified WHERE kind = 'kernel' GROUP BY ALL",
    ),
    # a profile without GPU kernels: XLA's device ops
    (
        "communication_fraction",
        "comm_s",
        "SELECT trace, rank, sum(comm_ps) / 1e12 FROM xla_device_totals WHERE all_ps > 0 "
        "AND (trace, rank) NOT IN (SELECT DISTINCT trace, rank FROM gpu_ops WHERE kind = 'kernel') GROUP BY ALL",
    ),
    (
        "total_communication_time",
        "value",
        "WITH comm AS (SELECT trace, rank, 0 AS key, ts_ns, end_ns FROM gpu_ops_classified "
        "WHERE kind = 'kernel' AND kernel_class = 'comm') "
        "SELECT trace, rank, sum(end_ns - ts_ns) / 1e9 FROM intervals_union(comm) GROUP BY ALL",
    ),
    (
        "memory_transfer_overhead",
        "exposed_memcpy_s",
        "WITH copies AS (SELECT trace, rank, 0 AS key, ts_ns, end_ns FROM gpu_ops_classified "
        "WHERE kind = 'memcpy'), compute AS (SELECT trace, rank, 0 AS key, ts_ns, end_ns "
        "FROM gpu_ops_classified WHERE kind = 'kernel' AND kernel_class <> 'comm') "
        "SELECT trace, rank, sum(end_ns - ts_ns) / 1e9 FROM intervals_subtract(copies, compute) GROUP BY ALL",
    ),
]
PER_TRACE = [
    (
        "collective_busbw",
        "collectives",
        "SELECT trace, count(*) FROM collectives WHERE busbw_gbps IS NOT NULL GROUP BY ALL",
    ),
    (
        "collective_skew",
        "value",
        "SELECT trace, count(*) FROM collective_matches(trace_ranks) WHERE ranks_seen >= 2 GROUP BY ALL "
        "HAVING (SELECT count(DISTINCT rank) FROM trace_ranks AS t WHERE t.trace = trace) >= 2",
    ),
    (
        "straggler_rank",
        "matched_collectives",
        "SELECT trace, count(*) FROM collective_matches(trace_ranks) WHERE ranks_seen >= 2 GROUP BY ALL "
        "HAVING (SELECT count(DISTINCT rank) FROM trace_ranks AS t WHERE t.trace = trace) >= 2",
    ),
]


def _per_rank(rows: list[dict], column: str, source: str | None) -> dict:
    return {
        (r["trace"], r["rank"]): r[column]
        for r in rows
        if r.get(column) not in (None, 0) and r.get("source", source) == source
    }


def _per_trace(rows: list[dict], name: str, column: str) -> dict:
    out: dict = {}
    for r in rows:
        if r.get(column) is None:
            continue
        # collective_skew: one row per matched collective (count them); the others sum
        out[r["trace"]] = out.get(r["trace"], 0) + (1 if name == "collective_skew" else r[column])
    return out


def _check(wh: Warehouse, cases_rank: list, cases_trace: list) -> int:
    compared = 0
    for name, column, sql in cases_rank:
        from_view = {(t, r): v for t, r, v in query(wh, sql) if v}
        source = None  # a metric with a `source` column: the rows of the source the view gives
        if name == "communication_fraction":
            source = "xla_ops" if "xla_device_totals" in sql else "gpu_kernels"
        elif name == "total_communication_time":
            source = "gpu_kernels"
        metric = _per_rank(_metric(wh, name), column, source)
        assert from_view.keys() == metric.keys(), (name, column)
        for key, v in metric.items():
            assert from_view[key] == pytest.approx(v, rel=1e-12), (name, column, key)
        compared += len(metric)
    for name, column, sql in cases_trace:
        from_view = dict(query(wh, sql))
        rows = _metric(wh, name)
        metric = _per_trace(rows, name, column)
        if name == "straggler_rank":  # one row per trace: the count, not a sum
            metric = {r["trace"]: r[column] for r in rows if r[column] is not None}
        assert from_view == metric, (name, column)
        compared += len(metric)
    return compared


def test_plain_views_agree_with_the_metrics_on_deep_ep(deep_ep_wh):
    assert _check(deep_ep_wh, PER_RANK, PER_TRACE) >= 8


def test_plain_views_agree_with_the_metrics_on_every_shared_trace(shared_wh):
    assert _check(shared_wh, PER_RANK, PER_TRACE) >= 20


def _steps_agree(wh: Warehouse) -> int:
    """coll_call_num (GPU ranks): comm kernels per step = the plain gpu_ops_steps' count."""
    from_view = {
        (t, r, s): n
        for t, r, s, n in query(
            wh,
            "SELECT trace, rank, step, count(*) FROM gpu_ops_steps WHERE kind = 'kernel' "
            "AND kernel_class = 'comm' AND step IS NOT NULL GROUP BY ALL",
        )
    }
    metric = {
        (r["trace"], r["rank"], r["step"]): r["value"]
        for r in _metric(wh, "coll_call_num")
        if r["source"] == "gpu_kernels" and r["value"]
    }
    assert from_view == metric
    return len(metric)


def test_gpu_ops_steps_agrees_with_coll_call_num_on_every_shared_trace(shared_wh):
    assert _steps_agree(shared_wh) >= 5
