"""Small trace files written by hand or with cclq's synthetic builders."""

from __future__ import annotations

import json
from pathlib import Path


def write_trace(path: Path, events: list, **top) -> Path:
    """A minimal Kineto-style file: top-level keys, then traceEvents."""
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"schemaVersion": 1, **top, "traceEvents": events}
    path.write_text(json.dumps(doc))
    return path


def gpu_trace(path: Path, rank: int = 0, world: int = 1, kernels: int = 2, dur_ns: int = 4_000) -> Path:
    """A Kineto trace of ``kernels`` GEMM kernels of ``dur_ns`` each, 10 us apart."""
    from cclq.synth.kineto import KinetoTraceBuilder

    b = KinetoTraceBuilder(rank=rank, world_size=world)
    for i in range(kernels):
        b.kernel("gemm", ts=i * 10_000, dur=dur_ns)
    return b.write(path)
