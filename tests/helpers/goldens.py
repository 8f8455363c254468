"""Golden results of every released metric version (issue 43, "numbers frozen").

Each released version ``<metric>/v<N>`` (``sql/metrics/CHECKSUMS``) has its rows over a
fixed set of workloads kept in ``tests/query/golden/<metric>/v<N>.csv``: the bundled
workload (``trace_collection/``) and the synthetic workloads below, made by the package's
own generators (``cclq.synth``) with fixed seeds and placements, chosen so that every
metric version has at least one value. CHECKSUMS freezes a version's SQL; the goldens
freeze its numbers, so an edit of a view it reads that moves a released number fails
``tests/query/test_goldens.py``.

A golden is written once, by ``python -m tests.helpers.update_goldens`` (from the
repository root), never by a test run. That command adds the goldens of new versions, and
the rows of workloads a golden does not cover yet (its ``# traces:`` line), and never
rewrites a recorded row; ``--rewrite <metric>/v<N>`` rewrites one golden on purpose (a
released number that had to move: say why in the commit).

The file: a ``# traces: a, b`` line (the workloads it covers, also those with no row), then
a CSV of the metric's columns in its own row order; each cell is the value as JSON
(``null``, ``1.5``, ``3``, ``[1, 2]``), so that NULL, an integer and a float stay apart,
and a text as it is unless it would read as JSON (``"1.5"``, ``"null"``: then as JSON).
Floats compare with a relative tolerance of ``REL_TOL``; every other value exactly.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa

from cclq.query.registry import MetricSpec, registry, released_checksums
from cclq.synth.horovod import HorovodTimelineBuilder
from cclq.synth.kineto import KinetoTraceBuilder, generate_workload
from cclq.synth.nsys import NsysExportBuilder
from cclq.synth.xla import TpuTraceSpec, write_tpu_trace

REPO = Path(__file__).resolve().parents[2]
GOLDEN_DIR = REPO / "tests" / "query" / "golden"
BUNDLED = REPO / "trace_collection"
UPDATE_COMMAND = "python -m tests.helpers.update_goldens"
REL_TOL = 1e-9
# a float this close to zero equals zero (sums of a parallel aggregate may leave ~1e-22)
ABS_TOL = 1e-30

US = 1_000  # ns per microsecond
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_cublas"


# ------------------------------------------------------------------ the synthetic workloads


def _tpu_card(devices: int) -> str:
    return (
        "version: 1\nworkload:\n  model:\n    phase: training\n    model_family: tiny-xla\n"
        "    precision: bf16\n    model_arch: {num_params: 1.0e8}\n"
        f"  hardware:\n    xpu_spec: {{type: TPU, model: tpu_v6e, total_count: {devices}}}\n"
        "Model-executor:\n  framework:\n    name: jax\n"
    )


def _collectives(folder: Path) -> None:
    """`synth_collectives`: 2 ranks on one node, 3 ProfilerSteps of 1 ms; in each step a
    GEMM, then an all-gather, a reduce-scatter, an all-to-all, an all-reduce and a
    send/recv pair (bf16), a copy, a memset and a GPU user annotation; the card gives the
    network topology, the model and the batch (for bandwidth_utilization_*, mfu)."""
    for rank in range(2):
        b = KinetoTraceBuilder(rank=rank, world_size=2)
        for step in range(3):
            t0 = step * 1_000 * US
            b.profiler_step(step + 1, t0, 1_000 * US)
            b.user_annotation("forward", t0 + 5 * US, 300 * US)
            launch = t0 + 10 * US
            b.gpu_user_annotation("forward", t0 + 20 * US, 300 * US)
            b.kernel(GEMM, t0 + 20 * US, (200 + 10 * rank) * US, launch_ts=launch, args={"grid": [264, 1, 1]})
            b.nccl_kernel(
                "allgather",
                t0 + 150 * US,
                40 * US,
                nelems=250_000,
                dtype="BFloat16",
                seq=5 * step,
                launch_ts=launch + 5 * US,
            )
            b.nccl_kernel(
                "reduce_scatter",
                t0 + 300 * US,
                (40 + 5 * rank) * US,
                nelems=500_000,
                dtype="BFloat16",
                seq=5 * step + 1,
                launch_ts=launch + 10 * US,
            )
            b.nccl_kernel(
                "all_to_all",
                t0 + 400 * US,
                30 * US,
                nelems=200_000,
                dtype="BFloat16",
                seq=5 * step + 2,
                launch_ts=launch + 15 * US,
            )
            b.nccl_kernel(
                "allreduce",
                t0 + (500 + 20 * rank) * US,
                60 * US,
                nelems=1_000_000,
                dtype="BFloat16",
                seq=5 * step + 3,
                launch_ts=launch + 20 * US,
            )
            b.nccl_kernel(
                "send" if rank == 0 else "recv",
                t0 + 600 * US,
                (20 + 5 * rank) * US,
                nelems=500_000,
                dtype="BFloat16",
                pg_name="p2p",
                pg_desc="p2p",
                pg_ranks=[0, 1],
                launch_ts=launch + 25 * US,
            )
            b.memcpy(t0 + 700 * US, 10 * US, 4_000_000, launch_ts=launch + 30 * US)
            b.memset(t0 + 720 * US, 2 * US, 1_000_000, launch_ts=launch + 35 * US)
        b.write(folder / f"rank{rank}.json")
    (folder / "workload_card.yaml").write_text(
        "version: 1\nworkload:\n  model:\n    phase: training\n    precision: bf16\n"
        "    model_arch: {num_params: 8.0e9, num_params_embedding: 5.0e8, num_layers: 32, num_heads: 32,"
        " head_dim: 128}\n"
        "  data: {batch_size: 8, seq_len: 4096}\n"
        "  hardware:\n    network_topo: {bandwidth_gbps: [100, 800]}\n"
        "    xpu_spec: {type: GPU, model: nvidia_h100, total_count: 2, count_per_node: 2}\n"
    )


# vLLM engine iterations: (context requests, context tokens, generation requests, tokens, us)
_VLLM_ITERATIONS = (
    (0, 0, 0, 0, 10),
    (2, 256, 0, 0, 50),
    (1, 128, 2, 2, 30),
    (0, 0, 3, 3, 12),
    (0, 0, 3, 3, 10),
    (0, 0, 3, 3, 11),
)
_RUNNER = "vllm/v1/worker/gpu_model_runner.py(2907): execute_model"


def _vllm(folder: Path) -> None:
    """`synth_vllm`: a vLLM server's engine iterations on 2 ranks (tensor parallel), a GEMM
    and an all-reduce in each; card phase inference, output_len 4 (ttft, tpot, steps)."""
    for rank in range(2):
        b = KinetoTraceBuilder(rank=rank, world_size=2)
        t = 0
        for i, (cr, ct, gr, gt, us) in enumerate(_VLLM_ITERATIONS):
            dur = (us + 2 * rank) * US
            b.user_annotation(f"execute_context_{cr}({ct})_generation_{gr}({gt})", t, dur)
            b.python_function(_RUNNER, t + 500, dur - 1000)
            if cr or gr:
                b.kernel(GEMM, t + 2 * US, dur // 3, launch_ts=t + 1 * US)
                b.nccl_kernel(
                    "allreduce",
                    t + 2 * US + dur // 3,
                    dur // 4,
                    nelems=4096,
                    dtype="BFloat16",
                    seq=i,
                    launch_ts=t + 1500,
                )
            t += dur + 5 * US
        b.write(folder / f"rank{rank}.json")
    (folder / "workload_card.yaml").write_text(
        "version: 1\nworkload:\n  model:\n    phase: inference\n  data:\n    output_len: 4\n"
        "  hardware:\n    xpu_spec: {type: GPU, model: nvidia_a100, total_count: 2}\n"
    )


def _serving(folder: Path) -> None:
    """`synth_serving`: a vLLM ``bench serve`` result file (ttft/tpot/throughput_group_6)."""
    folder.mkdir(parents=True, exist_ok=True)
    result = {
        "backend": "vllm",
        "model_id": "meta-llama/Llama-3.1-8B",
        "num_prompts": 3,
        "duration": 12.5,
        "completed": 3,
        "total_output_tokens": 384,
        "request_throughput": 0.24,
        "output_throughput": 30.72,
        "mean_ttft_ms": 125.0,
        "median_ttft_ms": 120.0,
        "p99_ttft_ms": 240.0,
        "mean_tpot_ms": 26.0,
        "median_tpot_ms": 25.0,
        "ttfts": [0.1, 0.12, 0.3],
        "output_lens": [128, 128, 128],
    }
    (folder / "serve.json").write_text(json.dumps(result))


def _horovod(folder: Path) -> None:
    """`synth_horovod`: a Horovod timeline of 2 workers with cycle markers."""
    b = HorovodTimelineBuilder(start_epoch_us=1_700_000_000_000_000)
    fused = [
        ("QUEUE", 140, 150),
        ("MEMCPY_IN_FUSION_BUFFER", 150, 160),
        ("NCCL_ALLREDUCE", 160, 200),
        ("MEMCPY_OUT_FUSION_BUFFER", 200, 205),
    ]
    b.op("allreduce.layer1.weight", "ALLREDUCE", {0: 100, 1: 130}, fused, shape=[1000, 2048])
    b.op("allreduce.layer1.bias", "ALLREDUCE", {1: 105, 0: 120}, fused, shape=[1000])
    b.op(
        "broadcast.w",
        "BROADCAST",
        {0: 300, 1: 350},
        [("WAIT_FOR_DATA", 360, 370), ("NCCL_BCAST", 370, 390)],
        shape=[10],
    )
    b.cycle(90)
    b.cycle(290)
    b.write(folder / "timeline.json")


def _nsys(folder: Path) -> None:
    """`synth_nsys`: an Nsight Systems export of one rank: two steps (NVTX), a GEMM, an
    all-reduce overlapping its second half, a copy."""
    b = NsysExportBuilder(session_start_ns=1_700_000_000_000_000_000, sm_count=132)
    p = b.process(pid=4242)
    for step in range(2):
        t0 = step * 20_000
        b.nvtx_range(p, t0, t0 + 20_000, f"ProfilerStep#{step + 1}")
        b.kernel(p, 0, 7, t0 + 2_000, t0 + 12_000, "sm90_xmma_gemm_bf16bf16_bf16f32", grid=(264, 1, 1))
        b.kernel(
            p,
            0,
            20,
            t0 + 7_000,
            t0 + 17_000,
            "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
            grid=(16, 1, 1),
        )
        b.memcpy(p, 0, 7, t0 + 18_000, t0 + 19_000, 4_000_000)
    b.write(folder / "profile.sqlite")


def _full_queue(folder: Path) -> None:
    """`synth_full_queue`: one rank launching 1,300 kernels of 10 us, one every 1 us, on one
    stream: the launch queue passes HTA's max_queue_length of 1024 (at launch 1,138) and
    stays there until the last launch (hta_time_blocked_on_full_queue)."""
    b = KinetoTraceBuilder(rank=0, world_size=1)
    b.profiler_step(1, 0, 14_000 * US)
    for i in range(1_300):
        b.kernel("elementwise_kernel", 5 * US + i * 10 * US, 10 * US, launch_ts=i * US, launch_dur=500)
    b.write(folder / "rank0.json")


def build_synthetic(root: Path) -> Path:
    """The fixed synthetic workloads, one folder each under ``root`` (returned)."""
    generate_workload(root / "synth_dp2", ranks=2, steps=4, layers=2, seed=3)
    generate_workload(root / "synth_one_rank", ranks=1, steps=3, layers=1, seed=5)
    devices = 4
    write_tpu_trace(root / "synth_tpu" / "host0.trace.json", TpuTraceSpec(devices=devices, steps=4))
    (root / "synth_tpu" / "workload_card.yaml").write_text(_tpu_card(devices))
    for name, build in (
        ("synth_collectives", _collectives),
        ("synth_vllm", _vllm),
        ("synth_serving", _serving),
        ("synth_horovod", _horovod),
        ("synth_nsys", _nsys),
        ("synth_full_queue", _full_queue),
    ):
        (root / name).mkdir(parents=True, exist_ok=True)
        build(root / name)
    return root


def golden_inputs(root: Path) -> list[Path]:
    """What the goldens are computed over: the bundled workloads and the synthetic ones."""
    return [BUNDLED, build_synthetic(root)]


# ------------------------------------------------------------------ the file and comparing


def released() -> list[MetricSpec]:
    """Every released version (a line of CHECKSUMS), by name and version."""
    labels = released_checksums()
    return [
        spec
        for name, versions in sorted(registry().items())
        for v, spec in sorted(versions.items())
        if f"{name}/v{v}" in labels
    ]


def golden_path(spec: MetricSpec) -> Path:
    return GOLDEN_DIR / spec.name / f"v{spec.version}.csv"


def _plain(value: Any) -> Any:
    """A cell as JSON can hold it (the few Arrow types JSON lacks as tagged text)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, Decimal):
        return {"decimal": str(value)}
    if isinstance(value, (datetime, date, timedelta)):
        return {type(value).__name__: str(value)}
    if isinstance(value, bytes):
        return {"bytes": value.hex()}
    return value


def _cell(value: Any) -> str:
    if isinstance(value, str):
        try:
            json.loads(value)
        except ValueError:
            return value  # plain text, which no reader takes for another value
    return json.dumps(_plain(value), sort_keys=True)


def _value(cell: str) -> Any:
    try:
        return json.loads(cell)
    except ValueError:
        return cell


@dataclass
class Golden:
    """A metric version's rows by trace (every covered trace, also those with no row)."""

    columns: list[str]
    rows: dict[str, list[list[Any]]]

    def text(self) -> str:
        out = io.StringIO()
        out.write(f"# traces: {', '.join(sorted(self.rows))}\n")
        w = csv.writer(out, lineterminator="\n")
        w.writerow(self.columns)
        for trace in sorted(self.rows):
            for row in self.rows[trace]:
                w.writerow([_cell(v) for v in row])
        return out.getvalue()

    @classmethod
    def parse(cls, text: str) -> Golden:
        first, _, rest = text.partition("\n")
        if not first.startswith("# traces:"):
            raise ValueError("a golden starts with a `# traces:` line")
        traces = [t.strip() for t in first.removeprefix("# traces:").split(",") if t.strip()]
        reader = csv.reader(io.StringIO(rest))
        columns = next(reader)
        rows: dict[str, list[list[Any]]] = {t: [] for t in traces}
        at = columns.index("trace")
        for line in reader:
            row = [_value(cell) for cell in line]
            rows[row[at]].append(row)
        return cls(columns, rows)

    @classmethod
    def of(cls, table: pa.Table, traces: Iterable[str]) -> Golden:
        """The golden of a result table over ``traces`` (rows in the table's order)."""
        rows: dict[str, list[list[Any]]] = {t: [] for t in traces}
        names = table.column_names
        for record in table.to_pylist():
            rows[record["trace"]].append([_plain(record[c]) for c in names])
        return cls(list(names), rows)

    def has_value(self) -> bool:
        at = self.columns.index("value")
        return any(row[at] is not None for rows in self.rows.values() for row in rows)


def same(a: Any, b: Any) -> bool:
    """Equal cells: floats within ``REL_TOL`` (NaN equals NaN), all else exactly."""
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return math.isclose(a, b, rel_tol=REL_TOL, abs_tol=ABS_TOL)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def differences(label: str, want: Golden, got: Golden, limit: int = 5) -> list[str]:
    """What differs between a golden and a fresh result, over the golden's traces."""
    out: list[str] = []
    if want.columns != got.columns:
        return [f"{label}: columns {got.columns}, golden {want.columns}"]
    for trace in sorted(want.rows):
        a, b = want.rows[trace], got.rows.get(trace, [])
        if len(a) != len(b):
            out.append(f"{label} {trace}: {len(b)} rows, golden {len(a)}")
            continue
        for i, (ra, rb) in enumerate(zip(a, b, strict=True)):
            for col, x, y in zip(want.columns, ra, rb, strict=True):
                if not same(x, y):
                    out.append(f"{label} {trace} row {i} {col}: {y!r}, golden {x!r}")
    return out[:limit]


# ------------------------------------------------------------------ computing them


def compute(root: Path) -> dict[str, Golden]:
    """Every released version's golden computed now, over a warehouse built in ``root``
    from ``golden_inputs``: ``<metric>/v<N>`` -> its rows. The versions run in a batch per
    version number (a batch holds one version of a metric), sharing their views."""
    from cclq.ingest.run import ingest
    from cclq.query.metrics import run_metrics
    from cclq.query.session import connect
    from cclq.store.warehouse import Warehouse

    wh = Warehouse(root / "wh")
    report = ingest(golden_inputs(root / "in"), wh, jobs=1)
    if report.failed:
        raise RuntimeError(f"the golden workloads did not ingest: {[o.message for o in report.outcomes]}")
    session = connect(wh)
    try:
        traces = [row[0] for row in session.execute("SELECT trace FROM traces ORDER BY trace").fetchall()]
        specs = released()
        out: dict[str, Golden] = {}
        for version in sorted({s.version for s in specs}):
            batch = [s for s in specs if s.version == version]
            runs = run_metrics(session, batch)
            for spec in batch:
                run = runs[spec.name]
                label = f"{spec.name}/v{spec.version}"
                if run.error is not None or run.table is None:
                    raise RuntimeError(f"{label} failed: {run.error}")
                out[label] = Golden.of(run.table, traces)
        return out
    finally:
        session.close()
