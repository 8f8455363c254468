"""Synthetic TPU profiles in xprof's trace-viewer JSON, for tests of the XLA views and metrics.

``generate_tpu_trace(spec)`` returns the document that xprof's converter writes for a TPU
profile (``ConvertXSpaceToTraceEvents``; shared/reference/trace-formats.md §5.1), and
``write_tpu_trace(path, spec)`` writes it (gzipped when the name ends in ``.gz``)::

    {"displayTimeUnit": "ns", "metadata": {"highres-ticks": true},
     "traceEvents": [<M events>, <X events>, ..., {}]}

* Planes: ``/device:TPU:0`` .. ``/device:TPU:<n-1>`` as pids 1..n and ``/host:CPU`` as pid
  701, named by ``process_name`` M events; each device plane has the lines (tids, named by
  ``thread_name``) ``Steps`` (1), ``XLA Modules`` (2), ``XLA Ops`` (3) and ``Framework Ops``
  (4); the host plane has a ``python`` thread (1) and a compiler thread (2).
* ``ts``/``dur`` are microseconds relative to the profile start, as floats with at most
  three decimals (every time is a whole number of nanoseconds); all ``args`` values are
  strings, as the TSL converter writes them.
* Every step ``s`` starts at ``spec.start_ns + s * spec.step_ns`` on every device. Device
  ``d`` runs, on its ``XLA Ops`` line, each op followed by ``gap_ns`` of idle time, after an
  initial gap:

  1. ``fusion.1`` (hlo_category ``convolution fusion``), ``conv_ns + d * conv_ns_per_device``
     ns, with flops, model_flops, bytes_accessed and a shape;
  2. ``all-gather-start.2`` (``ag_start_ns``), shape the tuple (operand, result);
  3. ``fusion.3`` (``loop fusion``, model_flops 0), ``loop_ns``;
  4. ``all-gather-done.2`` (``ag_done_ns``), shape the gathered result;
  5. one ``all-reduce.N`` per entry of ``allreduce_sizes``, whose device time is the ring
     model ``T = 2(n-1)*alpha + 2(n-1)/n * S * beta`` for its message size S (exact
     picoseconds in ``device_duration_ps``; the event's ``dur`` is T cut to whole ns);
  6. ``copy.9`` (``data formatting``), ``copy_ns``, WITHOUT ``device_duration_ps``.

  The fusions' ``device_duration_ps`` is their dur minus ``device_ps_shortfall`` ps, so a
  metric that reads ``dur`` instead gets a different number. The ``Steps`` event spans
  the step from its start to one gap after the last op; the ``XLA Modules`` event
  ``jit_train_step(42)`` spans the ops; a ``Framework Ops`` event covers the convolution
  (framework lines are not device ops).
* The host plane holds a ``PjitFunction(train_step)`` slice that starts ``host_lead_ns``
  before the first step and ends ``host_tail_ns`` after the last device event, per step a
  ``train N`` step annotation (from the step start to its end on the slowest device), and
  a compiler pass ``all-reduce-combiner`` (a host event whose name mentions a collective).
* ``drop_first_start`` leaves out device 0's first ``all-gather-start``, as a profiling
  window that opens mid-collective does: its ``all-gather-done`` is then an orphan.

The spec's numbers are public so that tests can work expected metric values out by hand.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

__all__ = ["TpuTraceSpec", "DTYPE_BYTES", "allreduce_ps", "generate_tpu_trace", "write_tpu_trace"]

HOST_PID = 701
STEPS_TID, MODULES_TID, OPS_TID, FRAMEWORK_TID = 1, 2, 3, 4
DTYPE_BYTES = {"bf16": 2, "f16": 2, "f32": 4, "f64": 8, "s8": 1, "u8": 1, "pred": 1, "s32": 4}


@dataclass(frozen=True)
class TpuTraceSpec:
    devices: int = 4
    steps: int = 3
    start_ns: int = 10_000
    step_ns: int = 2_000_000
    gap_ns: int = 1_000
    conv_ns: int = 40_000
    conv_ns_per_device: int = 2_000
    conv_flops: int = 8_000_000_000
    conv_model_flops: int = 6_000_000_000
    conv_bytes_accessed: int = 3_145_728
    conv_shape: str = "bf16[128,1024]{1,0}"
    loop_ns: int = 25_000
    loop_flops: int = 1_000_000
    loop_shape: str = "f32[4096]{0}"
    device_ps_shortfall: int = 500
    ag_start_ns: int = 1_000
    ag_done_ns: int = 2_000
    ag_dtype: str = "bf16"
    ag_shard_elements: int = 2_048  # the gathered result holds devices * this
    # ring-model parameters of the all-reduces: alpha in ps, beta in ps per byte
    alpha_ps: int = 1_000_000  # 1 us
    beta_ps_per_byte: Fraction = Fraction(10)  # 1e-11 s/B = 100 GB/s
    allreduce_sizes: tuple[tuple[str, int], ...] = (
        ("f32", 65_536),
        ("bf16", 262_144),
        ("f32", 1_048_576),
        ("f32", 4_194_304),
    )
    copy_ns: int = 3_000
    host_lead_ns: int = 5_000
    host_tail_ns: int = 50_000
    drop_first_start: bool = False

    @property
    def alpha_s(self) -> float:
        return self.alpha_ps / 1e12

    @property
    def beta_s_per_byte(self) -> float:
        return float(self.beta_ps_per_byte) / 1e12


def allreduce_ps(spec: TpuTraceSpec, message_bytes: int) -> int:
    """The ring-model device time of one all-reduce, in exact picoseconds."""
    n = spec.devices
    t = 2 * (n - 1) * spec.alpha_ps + Fraction(2 * (n - 1), n) * message_bytes * spec.beta_ps_per_byte
    if t.denominator != 1:
        raise ValueError(f"all-reduce of {message_bytes} B is not a whole number of ps ({t}); choose other sizes")
    return int(t)


def _us(ns: int) -> float:
    return ns / 1000  # at most three decimals: the JSON text is exact


def _x(name: str, pid: int, tid: int, ts_ns: int, dur_ns: int, args: dict[str, Any] | None = None) -> dict:
    ev: dict[str, Any] = {"ph": "X", "pid": pid, "tid": tid, "ts": _us(ts_ns), "dur": _us(dur_ns), "name": name}
    if args:
        ev["args"] = {k: str(v) for k, v in sorted(args.items())}  # strings, sorted, as TSL writes
    return ev


def _metadata(spec: TpuTraceSpec) -> list[dict]:
    out: list[dict] = []
    for d in range(spec.devices):
        pid = d + 1
        out.append({"ph": "M", "pid": pid, "name": "process_name", "args": {"name": f"/device:TPU:{d}"}})
        out.append({"ph": "M", "pid": pid, "name": "process_sort_index", "args": {"sort_index": pid}})
        for tid, line in (
            (STEPS_TID, "Steps"),
            (MODULES_TID, "XLA Modules"),
            (OPS_TID, "XLA Ops"),
            (FRAMEWORK_TID, "Framework Ops"),
        ):
            out.append({"ph": "M", "pid": pid, "tid": tid, "name": "thread_name", "args": {"name": line}})
    out.append({"ph": "M", "pid": HOST_PID, "name": "process_name", "args": {"name": "/host:CPU"}})
    out.append({"ph": "M", "pid": HOST_PID, "tid": 1, "name": "thread_name", "args": {"name": "python"}})
    out.append(
        {"ph": "M", "pid": HOST_PID, "tid": 2, "name": "thread_name", "args": {"name": "tf_PjRtCompilerThreadPool/1"}}
    )
    return out


def _op_args(spec: TpuTraceSpec, hlo_op: str, category: str, step: int, **extra: Any) -> dict[str, Any]:
    return {
        "hlo_op": hlo_op,
        "hlo_module": "jit_train_step",
        "hlo_category": category,
        "program_id": 42,
        "run_id": 1000 + step,
        "group_id": step,
        **extra,
    }


def _device_step(spec: TpuTraceSpec, d: int, s: int) -> tuple[list[dict], int]:
    """The events of device ``d`` in step ``s``, and the step's end (ns)."""
    pid = d + 1
    gap = spec.gap_ns
    step_start = spec.start_ns + s * spec.step_ns
    ops: list[dict] = []
    t = step_start + gap

    conv = spec.conv_ns + d * spec.conv_ns_per_device
    conv_ts = t
    ops.append(
        _x(
            "fusion.1",
            pid,
            OPS_TID,
            t,
            conv,
            _op_args(
                spec,
                "fusion.1",
                "convolution fusion",
                s,
                flops=spec.conv_flops,
                model_flops=spec.conv_model_flops,
                bytes_accessed=spec.conv_bytes_accessed,
                raw_bytes_accessed=spec.conv_bytes_accessed,
                shape_with_layout=spec.conv_shape,
                device_duration_ps=conv * 1000 - spec.device_ps_shortfall,
                long_name=f"%fusion.1 = {spec.conv_shape} fusion(%p0, %p1), kind=kOutput, calls=%fused_computation.1",
                tf_op="jit(train_step)/jit(main)/conv_general_dilated",
            ),
        )
    )
    t += conv + gap

    shard = f"{spec.ag_dtype}[{spec.ag_shard_elements}]{{0}}"
    gathered = f"{spec.ag_dtype}[{spec.ag_shard_elements * spec.devices}]{{0}}"
    if not (spec.drop_first_start and d == 0 and s == 0):
        ops.append(
            _x(
                "all-gather-start.2",
                pid,
                OPS_TID,
                t,
                spec.ag_start_ns,
                _op_args(
                    spec,
                    "all-gather-start.2",
                    "all-gather",
                    s,
                    shape_with_layout=f"({shard}, {gathered})",
                    device_duration_ps=spec.ag_start_ns * 1000,
                    long_name=f"%all-gather-start.2 = ({shard}, {gathered}) all-gather-start(%p2), dimensions={{0}}",
                ),
            )
        )
    t += spec.ag_start_ns + gap

    ops.append(
        _x(
            "fusion.3",
            pid,
            OPS_TID,
            t,
            spec.loop_ns,
            _op_args(
                spec,
                "fusion.3",
                "loop fusion",
                s,
                flops=spec.loop_flops,
                model_flops=0,
                bytes_accessed=65_536,
                shape_with_layout=spec.loop_shape,
                device_duration_ps=spec.loop_ns * 1000 - spec.device_ps_shortfall,
            ),
        )
    )
    t += spec.loop_ns + gap

    ops.append(
        _x(
            "all-gather-done.2",
            pid,
            OPS_TID,
            t,
            spec.ag_done_ns,
            _op_args(
                spec,
                "all-gather-done.2",
                "all-gather",
                s,
                shape_with_layout=gathered,
                device_duration_ps=spec.ag_done_ns * 1000,
            ),
        )
    )
    t += spec.ag_done_ns + gap

    for k, (dtype, elements) in enumerate(spec.allreduce_sizes):
        nbytes = elements * DTYPE_BYTES[dtype]
        ps = allreduce_ps(spec, nbytes)
        dur = ps // 1000
        name = f"all-reduce.{4 + k}"
        ops.append(
            _x(
                name,
                pid,
                OPS_TID,
                t,
                dur,
                _op_args(
                    spec,
                    name,
                    "all-reduce",
                    s,
                    shape_with_layout=f"{dtype}[{elements}]{{0}}",
                    bytes_accessed=2 * nbytes,
                    device_duration_ps=ps,
                    replica_groups="{{0,1,2,3}}",
                ),
            )
        )
        t += dur + gap

    ops.append(
        _x(
            "copy.9",
            pid,
            OPS_TID,
            t,
            spec.copy_ns,
            _op_args(
                spec,
                "copy.9",
                "data formatting",
                s,
                shape_with_layout="bf16[1024,128]{0,1}",
                bytes_accessed=524_288,
            ),
        )
    )
    ops_end = t + spec.copy_ns
    step_end = ops_end + gap

    lines = [
        _x(str(s), pid, STEPS_TID, step_start, step_end - step_start, {"group_id": s, "step_num": s}),
        _x(
            "jit_train_step(42)",
            pid,
            MODULES_TID,
            step_start + gap,
            ops_end - step_start - gap,
            {"program_id": 42, "run_id": 1000 + s, "group_id": s},
        ),
        _x("jit(train_step)/jit(main)/conv_general_dilated", pid, FRAMEWORK_TID, conv_ts, conv, {"group_id": s}),
    ]
    return lines + ops, step_end


def generate_tpu_trace(spec: TpuTraceSpec | None = None) -> dict[str, Any]:
    """The whole trace-viewer document for ``spec`` (see the module docstring)."""
    spec = spec or TpuTraceSpec()
    if spec.step_ns <= 0 or spec.devices < 1 or spec.steps < 1:
        raise ValueError("need at least one device and one step, and a positive step_ns")
    device_events: list[dict] = []
    step_ends: list[int] = []  # per step, the end on the slowest device
    for s in range(spec.steps):
        step_ends.append(0)
        for d in range(spec.devices):
            events, end = _device_step(spec, d, s)
            if end > spec.start_ns + (s + 1) * spec.step_ns:
                raise ValueError(f"step {s} on device {d} ends at {end} ns, after the next step starts")
            device_events.extend(events)
            step_ends[s] = max(step_ends[s], end)
    last_end = step_ends[-1]

    host: list[dict] = []
    first = spec.start_ns
    host.append(
        _x(
            "PjitFunction(train_step)",
            HOST_PID,
            1,
            first - spec.host_lead_ns,
            last_end + spec.host_tail_ns - (first - spec.host_lead_ns),
        )
    )
    for s in range(spec.steps):
        step_start = spec.start_ns + s * spec.step_ns
        host.append(
            _x(
                f"train {s}",
                HOST_PID,
                1,
                step_start,
                step_ends[s] - step_start,
                {"group_id": s, "step_name": f"train {s}", "step_num": s},
            )
        )
    host.append(_x("all-reduce-combiner", HOST_PID, 2, first - spec.host_lead_ns + 100, 2_000))

    events = _metadata(spec) + host + sorted(device_events, key=lambda e: (e["ts"], e["pid"], e["tid"]))
    events.append({})  # the converter ends the array with an empty event
    return {"displayTimeUnit": "ns", "metadata": {"highres-ticks": True}, "traceEvents": events}


def write_tpu_trace(path: str | Path, spec: TpuTraceSpec | None = None) -> Path:
    """Writes ``generate_tpu_trace(spec)`` to ``path`` (gzip when it ends in ``.gz``)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(generate_tpu_trace(spec))
    if path.name.endswith(".gz"):
        with gzip.open(path, "wt") as f:
            f.write(text)
    else:
        path.write_text(text)
    return path
