"""XLA / TPU profiles: xprof JSON views (sql/views/xla.sql), the CCL-Bench TPU metrics,
communication_fraction on GPU and XLA traces, the 1M-event warning and xplane.pb ingest."""

from __future__ import annotations

import gzip
import json
import os
import textwrap
from decimal import Decimal
from pathlib import Path
from statistics import mean
from types import SimpleNamespace

import duckdb
import pytest
from helpers.paths import require_shared
from helpers.warehouse import run_ingest

from cclq.errors import UnsupportedFormat
from cclq.formats import xplane
from cclq.formats.source import content_hash
from cclq.query.metrics import run_metric
from cclq.query.registry import resolve
from cclq.query.session import connect
from cclq.store.warehouse import Warehouse
from cclq.synth.kineto import KinetoTraceBuilder
from cclq.synth.xla import (
    DTYPE_BYTES,
    TpuTraceSpec,
    allreduce_ps,
    generate_tpu_trace,
    write_tpu_trace,
)

TPU_METRICS = [
    "wall_time_s",
    "total_compute_time_s",
    "total_comm_time_s",
    "avg_comm_kernel_time_s",
    "compute_utilization_proxy",
    "communication_fraction",
    "num_comm_kernels",
    "num_comm_kernels_w_size_and_time",
    "avg_comm_bandwidth_GBps",
    "allreduce_comm_time_s",
    "hockney_alpha_s",
    "hockney_beta_s_per_byte",
    "hockney_inverse_beta_Bps",
    "achieved_flops_from_trace_json",
    "total_model_flops_from_args",
    "flops_per_token_used",
    "estimated_total_tokens",
    "estimated_throughput_tokens_per_s",
    "throughput",
]
MODEL_PARAMS = 1_000_000
CARD = textwrap.dedent(f"""\
    workload:
      model:
        phase: training
        model_arch:
          num_params: {MODEL_PARAMS}
      hardware:
        xpu_spec:
          type: TPU
          total_count: 4
    """)


_connections: dict[Path, duckdb.DuckDBPyConnection] = {}


@pytest.fixture(autouse=True, scope="module")
def _close_connections():
    yield
    while _connections:
        _connections.popitem()[1].close()
    _results.clear()


_results: dict[tuple, list[dict]] = {}


def _con(wh: Warehouse) -> duckdb.DuckDBPyConnection:
    """One connection per warehouse: use it only after the warehouse's last ingest."""
    if wh.root not in _connections:
        _connections[wh.root] = connect(wh)
    return _connections[wh.root]


def query(wh: Warehouse, sql: str, params: list | None = None) -> list[tuple]:
    return _con(wh).execute(sql, params or []).fetchall()


def metric(wh: Warehouse, name: str, **params: object) -> list[dict]:
    """A metric's rows (computed once per warehouse, metric and parameters)."""
    args = {k: str(v) for k, v in params.items()}
    key = (wh.root, name, tuple(sorted(args.items())))
    if key not in _results:
        _results[key] = run_metric(_con(wh), resolve(name), args).to_pylist()
    return _results[key]


def value(wh: Warehouse, name: str, trace: str, **params: object) -> float | None:
    rows = [r for r in metric(wh, name, **params) if r["trace"] == trace]
    assert len(rows) == 1, rows
    return rows[0]["value"]


def reason(wh: Warehouse, name: str, trace: str, **params: object) -> str | None:
    (row,) = [r for r in metric(wh, name, **params) if r["trace"] == trace]
    return row["reason"]


# --------------------------------------------------------------------- synthetic TPU trace
SPEC = TpuTraceSpec()


def _write_workload(root: Path, spec: TpuTraceSpec, card: str | None = CARD) -> Path:
    folder = root / "tpu"
    write_tpu_trace(folder / "host0.trace.json.gz", spec)
    if card is not None:
        (folder / "workload_card.yaml").write_text(card)
    return folder


@pytest.fixture(scope="module")
def tpu(tmp_path_factory) -> Warehouse:
    root = tmp_path_factory.mktemp("tpu")
    wh = Warehouse(root / "wh")
    report = run_ingest([_write_workload(root / "in", SPEC)], wh)
    assert not report.failed
    return wh


def _hand(s: TpuTraceSpec) -> SimpleNamespace:
    """Expected values for a spec, worked out from the generator's layout (see
    cclq/synth/xla.py), never from cclq's output. With the default spec: 4 devices, 3
    steps; per device d and step the XLA Ops line runs, each op followed by a 1000 ns
    gap: conv (40000 + 2000 d ns), all-gather-start (1000), loop fusion (25000),
    all-gather-done (2000), 4 all-reduces, copy (3000)."""
    h = SimpleNamespace(n=s.devices, steps=s.steps)
    h.conv = [s.conv_ns + d * s.conv_ns_per_device for d in range(h.n)]  # 40000, 42000, 44000, 46000 ns
    # fusions: device_duration_ps = dur * 1000 - 500
    h.compute_ps = [(c * 1000 - 500) + (s.loop_ns * 1000 - 500) for c in h.conv]
    # all-gather pair: start.ts -> done.end = 1000 + gap + 25000 + gap + 2000 = 30000 ns
    h.pair_ps = (s.ag_start_ns + s.gap_ns + s.loop_ns + s.gap_ns + s.ag_done_ns) * 1000
    # message sizes 65536 f32, 262144 bf16, 1048576 f32, 4194304 f32 elements
    h.ar_bytes = [e * DTYPE_BYTES[t] for t, e in s.allreduce_sizes]
    # ring model in ps with n = 4, alpha = 1e6 ps, beta = 10 ps/B: 2*3*1e6 + 2*3/4 * S * 10 = 6e6 + 15 S
    h.ar_ps = [allreduce_ps(s, b) for b in h.ar_bytes]
    h.comm_ps = h.pair_ps + sum(h.ar_ps)
    h.other_ps = s.copy_ns * 1000  # copy.9 has no device_duration_ps: its dur
    # one step's length on device d, from the step start to one gap after the copy
    h.step_len = [
        s.gap_ns
        + c
        + s.gap_ns
        + s.ag_start_ns
        + s.gap_ns
        + s.loop_ns
        + s.gap_ns
        + s.ag_done_ns
        + s.gap_ns
        + sum(p // 1000 + s.gap_ns for p in h.ar_ps)
        + s.copy_ns
        + s.gap_ns
        for c in h.conv
    ]
    # the Steps line spans every step: the device span runs from the first step start
    # to the end of the last step on the slowest device (the last one)
    h.wall_ns = (h.steps - 1) * s.step_ns + h.step_len[h.n - 1]
    # the host's PjitFunction starts 5 us earlier and ends 50 us later
    h.all_events_ns = h.wall_ns + s.host_lead_ns + s.host_tail_ns
    # ops of device d run from the first op (start + gap) to the last end (step end - gap)
    h.ops_span_ns = [(h.steps - 1) * s.step_ns + L - 2 * s.gap_ns for L in h.step_len]
    h.gathered_bytes = h.n * s.ag_shard_elements * 2  # bf16[8192]: the done's shape
    return h


Hand = _hand(SPEC)
assert Hand.pair_ps == 30_000_000
assert Hand.ar_bytes == [262_144, 524_288, 4_194_304, 16_777_216]
assert Hand.ar_ps == [6_000_000 + 15 * b for b in Hand.ar_bytes]


def test_synthetic_trace_has_the_xprof_shape(tmp_path):
    path = write_tpu_trace(tmp_path / "t.trace.json.gz", SPEC)
    doc = json.loads(gzip.open(path).read())
    assert doc["displayTimeUnit"] == "ns" and doc["metadata"] == {"highres-ticks": True}
    assert doc["traceEvents"][-1] == {}
    names = {e["args"]["name"] for e in doc["traceEvents"] if e.get("name") == "process_name"}
    assert names == {"/device:TPU:0", "/device:TPU:1", "/device:TPU:2", "/device:TPU:3", "/host:CPU"}
    xs = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    assert all(isinstance(v, str) for e in xs for v in e.get("args", {}).values())


def test_planes_lines_ops_and_steps(tpu):
    planes = query(tpu, "SELECT pid, device_kind, device, is_device FROM xla_planes ORDER BY pid::INT")
    assert planes == [
        ("1", "TPU", 0, True),
        ("2", "TPU", 1, True),
        ("3", "TPU", 2, True),
        ("4", "TPU", 3, True),
        ("701", "host", None, False),
    ]
    kinds = dict(query(tpu, "SELECT line, any_value(line_kind) FROM xla_lines GROUP BY ALL"))
    assert kinds["XLA Ops"] == "xla_ops" and kinds["Steps"] == "steps" and kinds["python"] == "host_thread"
    # per device and step: 1 pair + 4 all-reduces (comm), 2 fusions (compute), 1 copy (other)
    got = query(tpu, "SELECT op_kind, coll_type, async_part, count(*) FROM xla_ops GROUP BY ALL ORDER BY ALL")
    assert got == [
        ("comm", "all_gather", "pair", 12),
        ("comm", "all_reduce", None, 48),
        ("compute", None, None, 24),
        ("other", None, None, 12),
    ]
    # the pair's message is the done's result shape; an all-reduce's its array
    assert query(tpu, "SELECT DISTINCT message_bytes, device_ps FROM xla_ops WHERE async_part = 'pair'") == [
        (Hand.gathered_bytes, Hand.pair_ps)
    ]
    sizes = query(
        tpu, "SELECT DISTINCT message_bytes, device_ps FROM xla_ops WHERE coll_type = 'all_reduce' ORDER BY 1"
    )
    assert sizes == list(zip(Hand.ar_bytes, Hand.ar_ps))
    # host events (an `all-reduce-combiner` compiler pass) and framework lines are not ops
    assert query(tpu, "SELECT count(*) FROM xla_ops WHERE pid = '701' OR name LIKE 'jit(%'") == [(0,)]
    steps = query(tpu, "SELECT source, count(*), count(DISTINCT step) FROM xla_steps GROUP BY ALL")
    assert steps == [("device_steps", 12, 3)]


def test_step_sources_fall_back_in_order(tmp_path, wh):
    doc = generate_tpu_trace(SPEC)
    # without device Steps lines and host `train N` annotations: one step per run of the
    # busiest XLA module, per device (3 runs x 4 devices)
    doc["traceEvents"] = [
        e
        for e in doc["traceEvents"]
        if not (e.get("ph") == "X" and (e["tid"] == 1 and e["pid"] != 701 or e["name"].startswith("train ")))
    ]
    (tmp_path / "modules").mkdir()
    (tmp_path / "modules" / "h.trace.json").write_text(json.dumps(doc))
    # torch_xla StepMarkers on the host: those under 10% of the longest are not steps
    markers = [
        {"ph": "X", "pid": 701, "tid": 1, "name": "StepMarker", "ts": ts, "dur": dur}
        for ts, dur in ((0, 100.0), (200, 5.0), (300, 90.0))
    ]
    doc["traceEvents"] = markers + doc["traceEvents"]
    (tmp_path / "markers").mkdir()
    (tmp_path / "markers" / "h.trace.json").write_text(json.dumps(doc))
    run_ingest([tmp_path / "modules", tmp_path / "markers"], wh)
    got = query(wh, "SELECT trace, source, count(*), max(step) FROM xla_steps GROUP BY ALL ORDER BY 1")
    assert got == [("markers", "step_markers", 2, 1), ("modules", "module_runs", 12, 2)]
    assert query(wh, "SELECT ts_ns, dur_ns FROM xla_steps WHERE trace = 'markers' ORDER BY 1") == [
        (0, 100_000),
        (300_000, 90_000),
    ]


@pytest.mark.parametrize(
    "shape,expected",
    [
        ("bf16[8,1024,4096]{2,1,0}", 8 * 1024 * 4096 * 2),
        ("f32[]", 4),  # a scalar is one element
        ("(f32[1024]{0}, bf16[8]{0})", 4096 + 16),  # a tuple sums its arrays
        ("pred[3]", 3),
        ("u64[2,<=5]{1,0}", 80),  # a dynamic bound counts as its bound
        ("f32[8,128]{1,0:T(8,128)}", 4096),  # TPU tiling in the layout is not a dimension
        ("s4[8]", None),  # sub-byte types: unknown, so the byte arguments are used instead
        ("token[]", 0),
        ("s8[3,5]{1,0}", 15),  # one byte per element
        ("(s8[4]{0}, u8[4]{0})", 8),
    ],
)
def test_shape_bytes(tpu, shape, expected):
    assert query(tpu, "SELECT xla_shape_bytes(?)", [shape]) == [(expected,)]


def test_every_tpu_metric_against_hand_values(tpu):
    for name in TPU_METRICS:  # one row for the one trace, a unit, a value
        (row,) = metric(tpu, name)
        assert row["unit"] and row["value"] is not None and row["reason"] is None, (name, row)
    t, h, s = "tpu", Hand, SPEC
    n, steps = h.n, h.steps
    comm_ops = n * steps * 5
    assert value(tpu, "wall_time_s", t) == pytest.approx(h.wall_ns / 1e9, rel=1e-12)
    (row,) = metric(tpu, "wall_time_s")
    assert row["all_events_span_s"] == pytest.approx(h.all_events_ns / 1e9, rel=1e-12)  # group 21's span

    assert value(tpu, "total_compute_time_s", t) == pytest.approx(steps * sum(h.compute_ps) / 1e12, rel=1e-12)
    assert value(tpu, "total_comm_time_s", t) == pytest.approx(n * steps * h.comm_ps / 1e12, rel=1e-12)
    assert value(tpu, "avg_comm_kernel_time_s", t) == pytest.approx(h.comm_ps / 5 / 1e12, rel=1e-12)
    util = mean(steps * h.compute_ps[d] / 1000 / h.ops_span_ns[d] for d in range(n))
    assert value(tpu, "compute_utilization_proxy", t) == pytest.approx(util, rel=1e-12)
    frac = mean(h.comm_ps / (h.comm_ps + h.compute_ps[d] + h.other_ps) for d in range(n))
    assert value(tpu, "communication_fraction", t) == pytest.approx(frac, rel=1e-12)
    assert value(tpu, "num_comm_kernels", t) == comm_ops
    assert value(tpu, "num_comm_kernels_w_size_and_time", t) == comm_ops

    # (n - 1) * sum(bytes) / sum(time): per device and step 16384 + the four sizes
    bw = (n - 1) * (h.gathered_bytes + sum(h.ar_bytes)) / (h.comm_ps / 1e12) / 1e9
    assert value(tpu, "avg_comm_bandwidth_GBps", t) == pytest.approx(bw, rel=1e-12)
    assert value(tpu, "allreduce_comm_time_s", t) == pytest.approx(n * steps * sum(h.ar_ps) / 1e12, rel=1e-12)

    # the generator's alpha = 1 us, beta = 1e-11 s/B come back exactly
    assert value(tpu, "hockney_alpha_s", t) == pytest.approx(1e-6, rel=1e-12)
    assert value(tpu, "hockney_beta_s_per_byte", t) == pytest.approx(1e-11, rel=1e-12)
    assert value(tpu, "hockney_inverse_beta_Bps", t) == pytest.approx(1e11, rel=1e-12)
    (fit,) = metric(tpu, "hockney_alpha_s")
    assert (fit["samples"], fit["distinct_sizes"], fit["n_chips"]) == (n * steps * 4, 4, 4)

    # model_flops 6e9 on each convolution only (the loop fusion reports 0)
    conv_ps = steps * sum(c * 1000 - 500 for c in h.conv)
    assert value(tpu, "achieved_flops_from_trace_json", t) == pytest.approx(
        n * steps * s.conv_model_flops / (conv_ps / 1e12), rel=1e-12
    )
    total_flops = n * steps * s.conv_model_flops  # 7.2e10
    assert value(tpu, "total_model_flops_from_args", t) == total_flops
    assert value(tpu, "flops_per_token_used", t) == 6 * MODEL_PARAMS  # training: 6 N
    tokens = total_flops / (6 * MODEL_PARAMS)  # 12000
    assert value(tpu, "estimated_total_tokens", t) == pytest.approx(tokens, rel=1e-12)
    tps = tokens / (h.wall_ns / 1e9)
    assert value(tpu, "estimated_throughput_tokens_per_s", t) == pytest.approx(tps, rel=1e-12)
    assert value(tpu, "throughput", t) == pytest.approx(tps, rel=1e-12)


def test_params_override_the_card(tpu):
    # With n = 8 the same times read y' = T/14 on x' = S/8. Since T = 6a + 1.5 S b
    # = 6a + 12 b x', y' = (3/7) a + (6/7) b x': the fit must return 3a/7 and 6b/7.
    assert value(tpu, "hockney_alpha_s", "tpu", n_chips=8) == pytest.approx(3e-6 / 7, rel=1e-12)
    assert value(tpu, "hockney_beta_s_per_byte", "tpu", n_chips=8) == pytest.approx(6e-11 / 7, rel=1e-12)
    base = value(tpu, "avg_comm_bandwidth_GBps", "tpu")
    assert value(tpu, "avg_comm_bandwidth_GBps", "tpu", n_chips=2) == pytest.approx(base / 3, rel=1e-12)
    assert value(tpu, "flops_per_token_used", "tpu", model_params=7e9) == 4.2e10


def test_inference_cards_use_two_flops_per_parameter(tmp_path, wh):
    run_ingest([_write_workload(tmp_path, SPEC, CARD.replace("phase: training", "phase: inference"))], wh)
    assert value(wh, "flops_per_token_used", "tpu") == 2 * MODEL_PARAMS
    assert value(wh, "estimated_total_tokens", "tpu") == pytest.approx(
        Hand.n * Hand.steps * SPEC.conv_model_flops / (2 * MODEL_PARAMS), rel=1e-12
    )


def test_missing_params_and_samples_give_reasons(tmp_path, wh):
    one_size = TpuTraceSpec(allreduce_sizes=(("f32", 65_536),))
    _write_workload(tmp_path / "a", SPEC, card=None)
    _write_workload(tmp_path / "b", one_size)
    run_ingest([tmp_path / "a" / "tpu"], wh)
    (tmp_path / "b" / "tpu").rename(tmp_path / "b" / "tpu_one_size")
    run_ingest([tmp_path / "b" / "tpu_one_size"], wh)
    for name in ("hockney_alpha_s", "avg_comm_bandwidth_GBps"):
        assert "no n_chips" in reason(wh, name, "tpu")
        assert value(wh, name, "tpu") is None
    for name in ("flops_per_token_used", "estimated_total_tokens", "throughput"):
        assert "no model_params" in reason(wh, name, "tpu")
    # 12 samples of ONE size: the fit needs two sizes
    assert reason(wh, "hockney_beta_s_per_byte", "tpu_one_size") == (
        "12 all-reduce ops with size and time in 1 distinct sizes: the fit needs >= 5 in >= 2"
    )
    # metrics that need no parameter still work without a card
    assert value(wh, "num_comm_kernels", "tpu") == 60


def test_an_orphan_done_stays_one_op(tmp_path, wh):
    # device 0's first all-gather-start is outside the window: its done is an orphan,
    # counted alone with its own device time (2000 ns), not paired with a later start
    run_ingest([_write_workload(tmp_path, TpuTraceSpec(drop_first_start=True))], wh)
    got = query(wh, "SELECT async_part, count(*) FROM xla_ops WHERE coll_type = 'all_gather' GROUP BY ALL ORDER BY ALL")
    assert got == [("done", 1), ("pair", 11)]
    assert value(wh, "num_comm_kernels", "tpu") == 60
    h = Hand
    expected = (h.n * h.steps * h.comm_ps - h.pair_ps + SPEC.ag_done_ns * 1000) / 1e12
    assert value(wh, "total_comm_time_s", "tpu") == pytest.approx(expected, rel=1e-12)


def test_gpu_traces_use_the_shared_kernel_classification(tmp_path, wh):
    # rank 0: gemm 3000 ns + all-reduce 1000 ns -> 1000/4000 = 0.25 (the memcpy is no kernel)
    # rank 1: gemm 1000 ns + all-reduce 1000 ns -> 0.5
    for rank, gemm in ((0, 3_000), (1, 1_000)):
        b = KinetoTraceBuilder(rank=rank, world_size=2)
        b.kernel("ampere_sgemm_128x64_tn", ts=1_000, dur=gemm)
        b.nccl_kernel("allreduce", ts=10_000, dur=1_000, nelems=1024, group_size=2, seq=1)
        b.memcpy(ts=20_000, dur=5_000, nbytes=4096)
        b.write(tmp_path / "gpu" / f"rank{rank}.json")
    run_ingest([tmp_path / "gpu"], wh)
    rows = {r["rank"]: r for r in metric(wh, "communication_fraction")}
    assert rows[0]["value"] == pytest.approx(0.25) and rows[1]["value"] == pytest.approx(0.5)
    assert {r["source"] for r in rows.values()} == {"gpu_kernels"}
    # a Kineto trace is no XLA profile: the TPU metrics say so instead of 0
    assert reason(wh, "total_comm_time_s", "gpu") == "no XLA ops (not an XLA/xprof profile)"
    assert value(wh, "wall_time_s", "gpu") is None


# -------------------------------------------------------------------------- real traces
def _raw_events(path: Path) -> list[dict]:
    return json.loads(gzip.open(path).read())["traceEvents"]


def _ns(us: float | int) -> int:
    return int(Decimal(str(us)) * 1000)


@pytest.fixture(scope="module")
def real(tmp_path_factory) -> Warehouse:
    traces = require_shared()
    wh = Warehouse(tmp_path_factory.mktemp("real") / "wh")
    report = run_ingest([traces / "xla_jax_cpu_4dev", traces / "xprof_tf_bert_8gpu"], wh)
    assert not report.failed
    return wh


@pytest.mark.slow
def test_jax_cpu_profile_host_ops_stand_in_for_devices(real):
    raw = _raw_events(require_shared() / "xla_jax_cpu_4dev" / "host0.trace.json.gz")
    ops = [e for e in raw if e.get("ph") == "X" and "hlo_op" in e.get("args", {})]
    # from the raw JSON: psum (all-reduce) and all_gather ops, per device_ordinal
    comm = [e for e in ops if e["args"]["hlo_op"].startswith(("psum", "all_gather"))]
    assert {e["args"]["hlo_op"] for e in comm} == {"psum.7", "all_gather.3"}
    got = query(
        real,
        """SELECT name, coll_type, count(*) FROM xla_ops
                         WHERE trace = 'xla_jax_cpu_4dev' AND op_kind = 'comm' GROUP BY ALL ORDER BY 1""",
    )
    n_psum = sum(e["args"]["hlo_op"] == "psum.7" for e in comm)
    assert got == [("all_gather.3", "all_gather", len(comm) - n_psum), ("psum.7", "all_reduce", n_psum)]
    assert query(real, "SELECT DISTINCT op_source, device_kind FROM xla_ops WHERE trace = 'xla_jax_cpu_4dev'") == [
        ("host_thunk", "host")
    ]

    t = "xla_jax_cpu_4dev"
    assert value(real, "num_comm_kernels", t) == len(comm)
    assert value(real, "total_comm_time_s", t) == pytest.approx(sum(_ns(e["dur"]) for e in comm) / 1e9, rel=1e-12)
    # per device_ordinal: comm dur / all hlo ops' dur, then the mean over the 4 devices
    devices = sorted({e["args"]["device_ordinal"] for e in ops})
    assert devices == ["0", "1", "2", "3"]
    fracs = []
    for d in devices:
        mine = [e for e in ops if e["args"]["device_ordinal"] == d]
        fracs.append(sum(_ns(e["dur"]) for e in mine if e in comm) / sum(_ns(e["dur"]) for e in mine))
    assert value(real, "communication_fraction", t) == pytest.approx(mean(fracs), rel=1e-12)
    first = min(_ns(e["ts"]) for e in ops)
    last = max(_ns(e["ts"]) + _ns(e["dur"]) for e in ops)
    assert value(real, "wall_time_s", t) == pytest.approx((last - first) / 1e9, rel=1e-12) and last > first
    # no shapes or byte counts on CPU thunks: the size-based metrics are not applicable
    assert value(real, "num_comm_kernels_w_size_and_time", t) == 0
    assert value(real, "hockney_alpha_s", t) is None
    # five `train N` step annotations on the host
    assert query(real, f"SELECT source, count(*) FROM xla_steps WHERE trace = '{t}' GROUP BY ALL") == [
        ("host_annotation", 5)
    ]


@pytest.mark.slow
def test_tf_bert_profile_has_eight_gpu_planes_and_host_collectives(real):
    t = "xprof_tf_bert_8gpu"
    planes = query(real, f"SELECT device FROM xla_planes WHERE trace = '{t}' AND is_device ORDER BY 1")
    assert planes == [(d,) for d in range(8)]
    assert query(real, f"SELECT DISTINCT device_kind FROM xla_planes WHERE trace = '{t}' AND is_device") == [("GPU",)]
    coll = query(real, f"SELECT name, coll_type, thread_name FROM xla_host_collectives WHERE trace = '{t}'")
    assert ("CollectiveReduce", "all_reduce", "tf_gpu_private_6/-1693819547") in coll
    # the host's CollectiveReduce is not device communication
    assert value(real, "total_comm_time_s", t) == 0
    assert value(real, "communication_fraction", t) == 0

    raw = _raw_events(require_shared() / t / "worker.trace.json.gz")
    device_pids = {e["pid"] for e in raw if e.get("name") == "process_name" and "/device:GPU:" in e["args"]["name"]}
    assert len(device_pids) == 8
    timed = [e for e in raw if e.get("ph") == "X" and e["pid"] in device_pids]
    span = max(_ns(e["ts"]) + _ns(e["dur"]) for e in timed) - min(_ns(e["ts"]) for e in timed)
    assert value(real, "wall_time_s", t) == pytest.approx(span / 1e9, rel=1e-12) and span > 0
    # no XLA Ops line: the kernels on the Stream lines are the devices' ops
    streams = {
        (e["pid"], e["tid"]) for e in raw if e.get("name") == "thread_name" and e["args"]["name"].startswith("Stream #")
    }
    kernels = [e for e in timed if (e["pid"], e["tid"]) in streams and not e["name"].startswith("Memcpy")]
    assert value(real, "total_compute_time_s", t) == pytest.approx(sum(_ns(e["dur"]) for e in kernels) / 1e9, rel=1e-12)
    assert query(real, f"SELECT source, count(*) FROM xla_steps WHERE trace = '{t}' GROUP BY ALL") == [
        ("device_steps", 2)
    ]


# ------------------------------------------------------------------------------ ingest
def test_a_trace_viewer_json_at_the_cap_warns(tmp_path, wh, monkeypatch):
    folder = _write_workload(tmp_path, SPEC, card=None)
    n_events = len(_raw_events(folder / "host0.trace.json.gz"))
    monkeypatch.setattr(xplane, "TRACE_VIEWER_MAX_EVENTS", n_events)
    report = run_ingest([folder], wh)
    (warning,) = [w for w in report.warnings if "-event cap" in w]
    assert warning.startswith(f"{folder / 'host0.trace.json.gz'}: {n_events:,} events")
    assert "re-export it from the profile's xplane.pb" in warning
    # one event under the cap: no warning; a Kineto file over it: none either
    monkeypatch.setattr(xplane, "TRACE_VIEWER_MAX_EVENTS", n_events + 1)
    assert not [w for w in run_ingest([folder], Warehouse(tmp_path / "wh2")).warnings if "-event cap" in w]
    monkeypatch.setattr(xplane, "TRACE_VIEWER_MAX_EVENTS", 3)
    b = KinetoTraceBuilder(rank=0)
    for i in range(5):
        b.kernel("k", ts=1_000 * i, dur=500)
    b.write(tmp_path / "kineto" / "rank0.json")
    assert not [w for w in run_ingest([tmp_path / "kineto"], wh).warnings if "-event cap" in w]


def test_the_cap_warning_points_at_an_xplane_next_to_the_json(tmp_path, wh, monkeypatch):
    folder = _write_workload(tmp_path, SPEC, card=None)
    (folder / "host0.xplane.pb").write_bytes(b"\x0a\x00")
    monkeypatch.setattr(xplane, "TRACE_VIEWER_MAX_EVENTS", 10)
    report = run_ingest([folder], wh)
    (warning,) = [w for w in report.warnings if "-event cap" in w]
    assert "host0.xplane.pb next to it holds all events" in warning
    (skipped,) = [o for o in report.outcomes if o.status == "skipped"]
    assert skipped.path.endswith("host0.xplane.pb")


def test_an_xplane_next_to_a_trace_json_is_skipped(tmp_path, wh):
    folder = _write_workload(tmp_path, SPEC, card=None)
    (folder / "10.0.0.1_6009.xplane.pb").write_bytes(b"\x0a\x00")
    report = run_ingest([folder], wh)
    by_status = {o.status: o for o in report.outcomes}
    assert set(by_status) == {"ingested", "skipped"}
    assert by_status["skipped"].message.endswith(
        "xplane.pb skipped: the trace JSON next to it (host0.trace.json.gz) is ingested instead"
    )


@pytest.mark.parametrize("name", ["trace.json", "host0.json.gz", "worker.trace.json"])
def test_an_xplane_beside_its_export_under_another_name_is_passed_over_for_it(tmp_path, wh, monkeypatch, name):
    """The one trace-viewer JSON beside the one xplane.pb is its export, whatever its name
    (saved or decompressed under another stem): the JSON is ingested, the xplane.pb passed
    over saying so, never "without a trace JSON next to it"."""
    import gzip

    monkeypatch.setattr(xplane, "xprof_available", lambda: False)
    folder = _write_workload(tmp_path, SPEC, card=None)  # host0.trace.json.gz
    data = gzip.decompress((folder / "host0.trace.json.gz").read_bytes())
    (folder / "host0.trace.json.gz").unlink()
    (folder / name).write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    (folder / "10.0.0.1_6009.xplane.pb").write_bytes(b"\x0a\x00")
    report = run_ingest([folder], wh)
    by_status = {o.status: o for o in report.outcomes}
    assert set(by_status) == {"ingested", "skipped"}, report.outcomes
    assert by_status["skipped"].message.endswith(
        f"xplane.pb skipped: the trace JSON next to it ({name}) is ingested instead"
    )


def test_a_second_hosts_xplane_is_not_passed_over_for_the_first_hosts_json(tmp_path, wh, monkeypatch, fake_xprof):
    """host0's JSON beside host0's and host1's xplane.pb: host1's profile is not in it, so
    its xplane.pb is converted (here by the stand-in converter), not skipped for host0's
    JSON; without xprof it is skipped saying why, and that host0's JSON is host0's."""
    folder = _write_workload(tmp_path, SPEC, card=None)
    (folder / "host0.xplane.pb").write_bytes(b"\x0a\x00")
    write_tpu_trace(tmp_path / "host1.json", SPEC)
    (folder / "host1.xplane.pb").write_bytes((tmp_path / "host1.json").read_bytes())
    fake_xprof(_CONVERTER)
    assert xplane.sibling_trace_json(str(folder / "host0.xplane.pb")).name == "host0.trace.json.gz"
    assert xplane.sibling_trace_json(str(folder / "host1.xplane.pb")) is None
    report = run_ingest([folder], wh)
    status = {Path(o.path).name: o.status for o in report.outcomes}
    assert status == {"host0.trace.json.gz": "ingested", "host0.xplane.pb": "skipped", "host1.xplane.pb": "ingested"}, (
        report.outcomes
    )
    monkeypatch.setattr(xplane, "xprof_available", lambda: False)
    with pytest.raises(
        UnsupportedFormat,
        match="its trace JSON export is not next to it "
        r"\(host0.trace.json.gz beside it belong to other xplane.pb files\)",
    ):
        xplane.check_xplane(str(folder / "host1.xplane.pb"))


def test_an_xplane_alone_without_xprof_is_skipped_with_the_install_hint(tmp_path, wh, monkeypatch):
    monkeypatch.setattr(xplane, "xprof_available", lambda: False)
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "host0.xplane.pb").write_bytes(b"\x0a\x00")
    report = run_ingest([tmp_path / "w"], wh)
    (o,) = report.outcomes
    assert o.status == "skipped" and not report.failed
    assert "pip install 'cclq[xprof]'" in o.message


def _fake_xprof(root: Path, body: str) -> Path:
    """A stand-in `xprof` package whose converter runs ``body``."""
    pkg = root / "fake_site" / "xprof" / "convert"
    pkg.mkdir(parents=True)
    (pkg.parent / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "raw_to_tool_data.py").write_text(textwrap.dedent(body))
    return root / "fake_site"


# The stand-in reads the test's ".xplane.pb" (synthetic trace-viewer JSON), checks what
# the real converter would need, and writes a cache file next to its input as xprof does.
_CONVERTER = """\
    import json, os, pathlib

    def xspace_to_tool_data(paths, tool, params):
        assert tool == "trace_viewer", tool
        assert params.get("use_saved_result") is False
        if int(os.environ.get("TF_PROFILER_TRACE_VIEWER_MAX_EVENTS", "0")) < 10**9:
            raise RuntimeError("the event cap was not raised")
        pb = pathlib.Path(paths[0])
        (pb.parent / (pb.name + ".SSTABLE")).write_text("cache")
        return pb.read_text(), "application/json"
"""


@pytest.fixture
def fake_xprof(tmp_path, monkeypatch):
    def install(body: str) -> None:
        site = _fake_xprof(tmp_path, body)
        monkeypatch.syspath_prepend(str(site))  # for the lookup in this process
        monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]))

    return install


def test_an_xplane_alone_is_converted_with_xprof(tmp_path, wh, fake_xprof):
    fake_xprof(_CONVERTER)
    assert xplane.xprof_available()
    folder = tmp_path / "tpu_xplane"
    folder.mkdir()
    pb = folder / "t1v-n-0.xplane.pb"
    write_tpu_trace(tmp_path / "src.json", SPEC)
    pb.write_bytes((tmp_path / "src.json").read_bytes())
    report = run_ingest([folder], wh)
    (o,) = report.outcomes
    assert o.status == "ingested", o.message
    assert sorted(p.name for p in folder.iterdir()) == ["t1v-n-0.xplane.pb"]  # no cache files left here
    assert not any(wh.tmp_dir.iterdir()) if wh.tmp_dir.exists() else True
    expected_events = len(json.loads((tmp_path / "src.json").read_text())["traceEvents"])
    assert query(wh, "SELECT format, events_read, content_hash FROM files") == [
        ("xprof", expected_events, content_hash(str(pb)))
    ]
    notes = {stat for (stat,) in query(wh, "SELECT stat FROM ingest_stats WHERE NOT dropped")}
    # (ingest also notes the `{}` that closes every xprof array, not a drop)
    assert "xplane.pb converted to trace-viewer JSON with xprof" in notes
    assert notes <= {"xplane.pb converted to trace-viewer JSON with xprof", "xprof end marker {}"}
    assert value(wh, "num_comm_kernels", "tpu_xplane") == 60
    # unchanged input is not converted again
    assert [o.status for o in run_ingest([folder], wh).outcomes] == ["unchanged"]


def test_a_failing_conversion_fails_that_file_alone(tmp_path, wh, fake_xprof):
    fake_xprof("def xspace_to_tool_data(paths, tool, params):\n    raise ValueError('bad XSpace proto')\n")
    folder = _write_workload(tmp_path, SPEC, card=None)
    (tmp_path / "lone").mkdir()
    (tmp_path / "lone" / "h.xplane.pb").write_bytes(b"\x0a\x00")
    report = run_ingest([folder, tmp_path / "lone"], wh)
    assert sorted(o.status for o in report.outcomes) == ["failed", "ingested"]
    assert report.failed[0].message.endswith("xprof could not convert this xplane.pb: ValueError: bad XSpace proto")


@pytest.mark.slow
def test_real_xprof_converts_the_bert_xplane(tmp_path, wh):
    traces = require_shared()
    pytest.importorskip("xprof.convert.raw_to_tool_data")  # the optional extra cclq[xprof]
    (tmp_path / "bert").mkdir()
    src = next((traces / "xprof_tf_bert_8gpu").glob("*.xplane.pb"))
    (tmp_path / "bert" / src.name).write_bytes(src.read_bytes())
    report = run_ingest([tmp_path / "bert"], wh)
    assert [o.status for o in report.outcomes] == ["ingested"]
    # the same events as the JSON the profiler wrote next to it
    n_json = len(_raw_events(traces / "xprof_tf_bert_8gpu" / "worker.trace.json.gz"))
    assert query(wh, "SELECT events_read FROM files") == [(n_json,)]


class _ProgressRecorder:
    """A reporter that keeps what the progress bar would be told."""

    def __init__(self) -> None:
        self.total = 0
        self.advanced = 0

    def start(self, total_bytes: int, files: int) -> None:
        self.total = total_bytes

    def advance(self, nbytes: int) -> None:
        self.advanced += nbytes

    def file_done(self, outcome) -> None: ...
    def warn(self, message: str) -> None: ...
    def finish(self) -> None: ...


def test_progress_of_a_converted_xplane_stays_within_its_size(tmp_path, wh, fake_xprof):
    """xprof's JSON is bigger than the xplane.pb the bar was sized by: reads are scaled."""
    fake_xprof(_CONVERTER.replace("return pb.read_text(),", "return json.dumps(json.loads(pb.read_text()), indent=4),"))
    folder = tmp_path / "tpu_xplane"
    folder.mkdir()
    pb = folder / "t1v-n-0.xplane.pb"
    write_tpu_trace(tmp_path / "src.json", SPEC)
    pb.write_bytes((tmp_path / "src.json").read_bytes())
    recorder = _ProgressRecorder()
    report = run_ingest([folder], wh, jobs=1, reporter=recorder)
    assert [o.status for o in report.outcomes] == ["ingested"]
    size = pb.stat().st_size
    assert recorder.total == size
    assert 0.95 * size <= recorder.advanced <= size
