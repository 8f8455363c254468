"""What both Kineto generators write the same way (``cclq.synth.kineto``'s builder and
``cclq.synth.workload``'s streamed generator): the header, footer and device properties
Kineto writes, microsecond numbers printed from integer nanoseconds as raw JSON text, and
NCCL kernel names. Pure standard library."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path
from typing import Any, TextIO

DEFAULT_BASE_TIME_NS = 1_700_000_000_000_000_000
# Real Kineto relative ts are ~1e12 us (days after baseTimeNanoseconds). The default start
# (15.8 days, as in a real B200 trace) stays below 2**41 us, where a float still recovers the
# exact ns; pass e.g. start_ns=4_458_676_416_431_397 (51 days, as in HTA's nccl_data trace)
# to exercise readers' exact-decimal path instead.
DEFAULT_GEN_START_NS = 1_365_627_862_814_773

NUM_SMS = 132  # H100 SXM
_GZ_LEVEL = 1  # big synthetic files: compression speed matters more than ratio


def us_text(ns: int) -> str:
    """Kineto's time text: ``{ns/1000}.{ns%1000:03}`` (exact, no float on the way)."""
    if ns < 0:
        return "-" + us_text(-ns)
    return "%d.%03d" % divmod(ns, 1000)


def _us_subns(ns: int) -> str:
    """A float's repr of the time plus a sub-ns fraction (``1008491.4650139``), as
    generators and converters write microseconds computed in floating point."""
    return repr((ns + ((ns * 2654435761) % 997) / 997) / 1000)


EPOCH_START_NS = 1_712_195_495_519_689_047  # as in HTA's hta_ns_resolution trace (PyTorch 2.2-2.3)

# The timestamp forms real traces have, for benchmarks and reader tests:
# name -> (baseTimeNanoseconds or None, default start in ns, time text of ns).
TIME_FORMS: dict[str, tuple[int | None, int, Any]] = {
    # relative us with 3 decimals after baseTimeNanoseconds (PyTorch >= 2.4): 1365627862757.064
    "relative": (DEFAULT_BASE_TIME_NS, DEFAULT_GEN_START_NS, us_text),
    # epoch us with 3 decimals, no base (PyTorch 2.2-2.3): 1712195495519689.047
    "epoch": (None, EPOCH_START_NS, us_text),
    # a float's repr with sub-ns digits, no base: 1008491.4650139
    "subns": (None, 1_000_000_000, _us_subns),
}


class Micros(float):
    """A ts/dur value in microseconds that remembers its exact nanoseconds.

    It compares and computes like the float a JSON reader would see, while the builder
    writes ``text`` (exactly 3 decimals) so that large values are not rounded.
    """

    __slots__ = ("ns",)
    ns: int

    def __new__(cls, ns: int) -> Micros:
        obj = super().__new__(cls, ns / 1000)
        obj.ns = int(ns)
        return obj

    @property
    def text(self) -> str:
        return us_text(self.ns)

    def __repr__(self) -> str:
        return self.text

    __str__ = __repr__

    def __reduce__(self) -> tuple[type[Micros], tuple[int]]:  # copy/pickle keep the exact value
        return (Micros, (self.ns,))


# --------------------------------------------------------------------------------------
# Shared pieces: device properties, distributedInfo, JSON serialisation
# --------------------------------------------------------------------------------------


def kineto_device_properties(n: int) -> list[dict[str, Any]]:
    """H100 SXM properties as Kineto lists them (one entry per visible GPU)."""
    return [
        {
            "id": i,
            "name": "NVIDIA H100 80GB HBM3",
            "totalGlobalMem": 85029158912,
            "computeMajor": 9,
            "computeMinor": 0,
            "maxThreadsPerBlock": 1024,
            "maxThreadsPerMultiprocessor": 2048,
            "regsPerBlock": 65536,
            "warpSize": 32,
            "sharedMemPerBlock": 49152,
            "numSms": NUM_SMS,
            "regsPerMultiprocessor": 65536,
            "sharedMemPerBlockOptin": 232448,
            "sharedMemPerMultiprocessor": 233472,
        }
        for i in range(n)
    ]


def n_visible_devices(device: int, world_size: int) -> int:
    return max(device + 1, min(max(world_size, 1), 8))


def pg_entry(name: str, desc: str, ranks: list[int]) -> dict[str, Any]:
    return {"pg_name": name, "pg_desc": desc, "backend_config": "cuda:nccl", "pg_size": len(ranks), "ranks": ranks}


def kineto_distributed_info(rank: int, world_size: int, pgs: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "backend": "nccl",
        "rank": rank,
        "world_size": world_size,
        "pg_count": len(pgs),
        "pg_config": pgs,
        "nccl_version": "2.21.5",
    }


def _dump_value(v: Any) -> str:
    if isinstance(v, Micros):
        return v.text
    if isinstance(v, dict):
        items = (json.dumps(str(k)) + ": " + _dump_value(x) for k, x in v.items())
        return "{" + ", ".join(items) + "}"
    return json.dumps(v)


def dump_event(ev: dict[str, Any] | str) -> str:
    """One event as JSON text; ``Micros`` values become exact 3-decimal numbers."""
    if isinstance(ev, str):
        return ev
    return _dump_value(ev)


def open_text(path: Path, gz: bool) -> TextIO:
    """A text sink; gzip with mtime 0 so that the same input gives the same bytes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if gz:
        raw = open(path, "wb")
        gzf = gzip.GzipFile(
            filename=path.name[:-3] if path.name.endswith(".gz") else path.name,
            mode="wb",
            compresslevel=_GZ_LEVEL,
            fileobj=raw,
            mtime=0,
        )
        return _ClosingTextWrapper(gzf, raw)
    return open(path, "w", encoding="ascii", newline="\n", buffering=1 << 20)


class _ClosingTextWrapper(io.TextIOWrapper):
    """TextIOWrapper over a GzipFile that also closes the underlying OS file."""

    def __init__(self, gzf: gzip.GzipFile, raw: io.BufferedWriter) -> None:
        super().__init__(gzf, encoding="ascii", newline="\n", write_through=False)
        self._raw_file = raw

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._raw_file.close()


def kineto_header(device_props: list[dict], dist: dict | None, dist_pos: str, base_ns: int | None) -> str:
    parts = ['{\n  "schemaVersion": 1,\n  "deviceProperties": ', json.dumps(device_props)]
    if dist is not None and dist_pos == "before":
        parts += [',\n  "distributedInfo": ', json.dumps(dist)]
    parts.append(',\n  "displayTimeUnit": "ms"')
    if base_ns is not None:
        parts.append(',\n  "baseTimeNanoseconds": %d' % base_ns)
    parts.append(',\n  "traceEvents": [\n')
    return "".join(parts)


def kineto_footer(dist: dict | None, dist_pos: str, trace_name: str) -> str:
    parts = ["\n  ]"]
    if dist is not None and dist_pos == "after":
        parts += [',\n  "distributedInfo": ', json.dumps(dist)]
    parts += [',\n  "traceName": ', json.dumps(trace_name), "\n}\n"]
    return "".join(parts)


# --------------------------------------------------------------------------------------
# NCCL naming
# --------------------------------------------------------------------------------------

_NCCL_DTYPE = {
    "Float": "f32",
    "BFloat16": "bf16",
    "Half": "f16",
    "Double": "f64",
    "Int": "i32",
    "Long": "i64",
    "Char": "i8",
    "Byte": "u8",
    "Bool": "u8",
    "Float8_e4m3fn": "f8e4m3",
}


def nccl_family(coll: str) -> str:
    """NCCL kernel family for a PyTorch collective name (``allreduce``, ``_allgather_base`` ...)."""
    c = coll.lower().replace("-", "_")
    if "all_to_all" in c or "alltoall" in c:
        return "SendRecv"
    if "reduce_scatter" in c or "reducescatter" in c:
        return "ReduceScatter"
    if "allgather" in c or "all_gather" in c:
        return "AllGather"
    if "allreduce" in c or "all_reduce" in c or c == "barrier":
        return "AllReduce"
    if "broadcast" in c:
        return "Broadcast"
    if c in ("send", "recv", "isend", "irecv", "batch_isend_irecv"):
        return "SendRecv"
    if c == "reduce":
        return "Reduce"
    raise ValueError(
        f"unknown collective {coll!r}; use one of allreduce, allgather, reduce_scatter, "
        "all_to_all, broadcast, send, recv (or a PyTorch name such as _allgather_base)"
    )


def nccl_kernel_name(family: str, dtype: str) -> str:
    suffix = "(ncclDevKernelArgsStorage<4096ul>)"
    dt = _NCCL_DTYPE.get(dtype, "f32")
    if family in ("AllReduce", "ReduceScatter", "Reduce"):
        return f"ncclDevKernel_{family}_Sum_{dt}_RING_LL{suffix}"
    if family == "SendRecv":
        return f"ncclDevKernel_SendRecv{suffix}"
    return f"ncclDevKernel_{family}_RING_LL{suffix}"


def occupancy(grid: list[int], block: list[int]) -> tuple[float, float, int]:
    """(blocks per SM, warps per SM, est. achieved occupancy %) as CUPTI-derived numbers."""
    blocks = grid[0] * grid[1] * grid[2]
    threads = block[0] * block[1] * block[2]
    bps = round(blocks / NUM_SMS, 6)
    wps = round(bps * -(-threads // 32), 6)
    occ = int(min(wps, 64.0) / 64.0 * 100)
    return bps, wps, occ


MEMCPY_NAMES = {
    "HtoD": "Memcpy HtoD (Pageable -> Device)",
    "DtoH": "Memcpy DtoH (Device -> Pageable)",
    "DtoD": "Memcpy DtoD (Device -> Device)",
    "HtoH": "Memcpy HtoH (Pageable -> Pageable)",
    "PtoP": "Memcpy PtoP (Device -> Device)",
}
