"""xla_ops on hand-placed xprof events: every collective family and async form, the
message-size fallbacks, s8 shapes, and FLOPs of async pairs (NULL when neither half
has any). Expected values are worked out from the events below."""

from __future__ import annotations

import json
from typing import Any

import pytest
from helpers.warehouse import metric_rows, run_ingest

from cclq.query.session import connect
from cclq.store.warehouse import Warehouse
from cclq.synth.xla import TpuTraceSpec, generate_tpu_trace

PID, STEPS_TID, OPS_TID = 1, 1, 3


def _x(name: str, tid: int, ts_ns: int, dur_ns: int, **args: Any) -> dict:
    return {
        "ph": "X",
        "pid": PID,
        "tid": tid,
        "ts": ts_ns / 1000,
        "dur": dur_ns / 1000,
        "name": name,
        "args": {k: str(v) for k, v in args.items()},
    }


def _op(name: str, ts_ns: int, dur_ns: int, category: str, **args: Any) -> dict:
    return _x(name, OPS_TID, ts_ns, dur_ns, hlo_op=name, hlo_module="jit_step", hlo_category=category, **args)


# (name, ts, dur, category, args) on /device:TPU:0's XLA Ops line, times in ns
OPS = [
    # a plain reduce-scatter: shape f32[256] = 1024 B, device time from device_duration_ps
    _op(
        "reduce-scatter.5",
        1_000,
        2_000,
        "reduce-scatter",
        shape_with_layout="f32[256]{0}",
        device_duration_ps=1_500_000,
    ),
    # all-to-all without a shape: raw_bytes_accessed (4096) before bytes_accessed (8192);
    # no device_duration_ps: dur 1000 ns = 1e6 ps
    _op("all-to-all.6", 4_000, 1_000, "all-to-all", raw_bytes_accessed=4096, bytes_accessed=8192),
    # async collective-permute: the done's result shape s8[1000] = 1000 B (the start's
    # tuple would be 2000 B); the pair spans 6000 -> 8500 ns = 2.5e6 ps
    _op(
        "collective-permute-start.7",
        6_000,
        500,
        "collective-permute",
        shape_with_layout="(s8[1000]{0}, s8[1000]{0})",
        device_duration_ps=500_000,
    ),
    _op(
        "collective-permute-done.7",
        8_000,
        500,
        "collective-permute",
        shape_with_layout="s8[1000]{0}",
        device_duration_ps=500_000,
    ),
    # a fusion that only its category makes an all-reduce: bf16[512] = 1024 B
    _op("fusion.8", 9_000, 3_000, "all-reduce fusion", shape_with_layout="bf16[512]{0}", device_duration_ps=3_000_000),
    # async all-reduce without shapes: the start's raw_bytes_accessed (4096) wins over the
    # done's bytes_accessed (512); span 13000 -> 15300 ns = 2.3e6 ps; neither half has FLOPs
    _op("all-reduce-start.9", 13_000, 200, "all-reduce", raw_bytes_accessed=4096, bytes_accessed=8192),
    _op("all-reduce-done.9", 15_000, 300, "all-reduce", bytes_accessed=512),
    # only bytes_accessed: 777 B
    _op("all-gather.10", 16_000, 1_000, "all-gather", bytes_accessed=777),
    # compute with FLOPs but no model_flops
    _op("convolution.11", 18_000, 2_000, "convolution", flops=100),
]
# (name, coll_type, async_part, message_bytes, device_ps) in time order
EXPECTED = [
    ("reduce-scatter.5", "reduce_scatter", None, 1024, 1_500_000),
    ("all-to-all.6", "all_to_all", None, 4096, 1_000_000),
    ("collective-permute-start.7", "collective_permute", "pair", 1000, 2_500_000),
    ("fusion.8", "all_reduce", None, 1024, 3_000_000),
    ("all-reduce-start.9", "all_reduce", "pair", 4096, 2_300_000),
    ("all-gather.10", "all_gather", None, 777, 1_000_000),
]
COMM_PS = sum(e[4] for e in EXPECTED)  # 11.3e6 ps


def _doc() -> dict:
    meta = [
        {"ph": "M", "pid": PID, "name": "process_name", "args": {"name": "/device:TPU:0"}},
        {"ph": "M", "pid": PID, "tid": STEPS_TID, "name": "thread_name", "args": {"name": "Steps"}},
        {"ph": "M", "pid": PID, "tid": OPS_TID, "name": "thread_name", "args": {"name": "XLA Ops"}},
    ]
    steps = [
        _x("0", STEPS_TID, 0, 10_000, step_num=0, group_id=0),
        _x("1", STEPS_TID, 10_000, 11_000, step_num=1, group_id=1),
    ]
    return {"displayTimeUnit": "ns", "metadata": {"highres-ticks": True}, "traceEvents": meta + steps + OPS + [{}]}


@pytest.fixture(scope="module")
def wh(tmp_path_factory) -> Warehouse:
    root = tmp_path_factory.mktemp("xla_ops")
    (root / "in" / "ops").mkdir(parents=True)
    (root / "in" / "ops" / "h.trace.json").write_text(json.dumps(_doc()))
    # the generated TPU trace with every model_flops argument removed
    doc = generate_tpu_trace(TpuTraceSpec())
    for e in doc["traceEvents"]:
        e.get("args", {}).pop("model_flops", None)
    (root / "in" / "no_model_flops").mkdir()
    (root / "in" / "no_model_flops" / "h.trace.json").write_text(json.dumps(doc))
    w = Warehouse(root / "wh")
    assert not run_ingest([root / "in"], w).failed
    return w


def test_collective_families_async_forms_and_sizes(wh):
    con = connect(wh)
    try:
        got = con.execute("""SELECT name, coll_type, async_part, message_bytes, device_ps FROM xla_ops
                             WHERE trace = 'ops' AND op_kind = 'comm' ORDER BY ts_ns""").fetchall()
        assert got == EXPECTED
        assert con.execute(
            "SELECT name, op_kind, message_bytes FROM xla_ops WHERE trace = 'ops' AND op_kind <> 'comm'"
        ).fetchall() == [("convolution.11", "compute", None)]
        # the pairs carry no FLOPs: NULL, not 0
        assert con.execute(
            "SELECT flops, model_flops FROM xla_ops WHERE trace = 'ops' AND async_part = 'pair'"
        ).fetchall() == [(None, None), (None, None)]
        assert con.execute("SELECT xla_shape_bytes('s8[3,5]{1,0}'), xla_shape_bytes('u8[7]')").fetchall() == [(15, 7)]
    finally:
        con.close()


def test_metrics_on_the_hand_placed_ops(wh):
    (row,) = metric_rows(wh, "num_comm_kernels", "ops")
    assert row["value"] == 6
    (row,) = metric_rows(wh, "total_comm_time_s", "ops")
    assert row["value"] == pytest.approx(COMM_PS / 1e12, rel=1e-12)
    # steps [0,10000) and [10000,21000): 4 collectives start in step 0, 2 in step 1
    got = {r["step"]: r["value"] for r in metric_rows(wh, "coll_call_num", "ops")}
    assert got == {0: 4, 1: 2}
    (row,) = metric_rows(wh, "avg_step_time", "ops")
    assert row["value"] == pytest.approx(10_500e-9, abs=1e-18)  # two steps: both, (10000 + 11000) / 2


def test_no_model_flops_anywhere_is_not_applicable(wh):
    for trace in ("ops", "no_model_flops"):
        (row,) = metric_rows(wh, "total_model_flops_from_args", trace)
        assert row["value"] is None, trace
        assert row["reason"] == "no XLA op carries model_flops"
        assert row["ops_with_model_flops"] in (None, 0)
