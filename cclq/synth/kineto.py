"""Synthetic PyTorch-profiler (Kineto) traces, for tests and benchmarks.

Two tools, both pure standard library:

* ``KinetoTraceBuilder`` places every event by hand (times in integer nanoseconds), so a
  test can compute the expected metric values on paper and compare exactly.
* ``generate_rank_trace`` / ``generate_workload`` write realistic multi-rank training traces
  of any size, streamed straight to disk (memory stays flat however large the file), for
  benchmarks and smoke tests.

Both write what Kineto writes (libkineto ``output_json.cpp``): the object form with
``schemaVersion``, ``deviceProperties``, ``distributedInfo``, ``baseTimeNanoseconds``,
``traceEvents`` and ``traceName``; ``ts``/``dur`` as microseconds printed with exactly three
decimals (nanosecond precision). Those numbers are written as raw JSON text, never through
float formatting, so that 16-digit timestamps stay exact.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

__all__ = [
    "Micros",
    "KinetoTraceBuilder",
    "generate_rank_trace",
    "generate_workload",
    "DEFAULT_BASE_TIME_NS",
    "DEFAULT_GEN_START_NS",
    "EPOCH_START_NS",
    "TIME_FORMS",
]

DEFAULT_BASE_TIME_NS = 1_700_000_000_000_000_000
# Real Kineto relative ts are ~1e12 us (days after baseTimeNanoseconds). The default start
# (15.8 days, as in a real B200 trace) stays below 2**41 us, where a float still recovers the
# exact ns; pass e.g. start_ns=4_458_676_416_431_397 (51 days, as in HTA's nccl_data trace)
# to exercise readers' exact-decimal path instead.
DEFAULT_GEN_START_NS = 1_365_627_862_814_773

NUM_SMS = 132  # H100 SXM
_GZ_LEVEL = 1  # big synthetic files: compression speed matters more than ratio


def _us(ns: int) -> str:
    """Kineto's time text: ``{ns/1000}.{ns%1000:03}`` (exact, no float on the way)."""
    if ns < 0:
        return "-" + _us(-ns)
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
    "relative": (DEFAULT_BASE_TIME_NS, DEFAULT_GEN_START_NS, _us),
    # epoch us with 3 decimals, no base (PyTorch 2.2-2.3): 1712195495519689.047
    "epoch": (None, EPOCH_START_NS, _us),
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
        return _us(self.ns)

    def __repr__(self) -> str:
        return self.text

    __str__ = __repr__

    def __reduce__(self) -> tuple[type[Micros], tuple[int]]:  # copy/pickle keep the exact value
        return (Micros, (self.ns,))


# --------------------------------------------------------------------------------------
# Shared pieces: device properties, distributedInfo, JSON serialisation
# --------------------------------------------------------------------------------------


def _device_properties(n: int) -> list[dict[str, Any]]:
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


def _n_visible_devices(device: int, world_size: int) -> int:
    return max(device + 1, min(max(world_size, 1), 8))


def _pg_entry(name: str, desc: str, ranks: list[int]) -> dict[str, Any]:
    return {"pg_name": name, "pg_desc": desc, "backend_config": "cuda:nccl", "pg_size": len(ranks), "ranks": ranks}


def _distributed_info(rank: int, world_size: int, pgs: list[dict[str, Any]]) -> dict[str, Any]:
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


def _dump_event(ev: dict[str, Any] | str) -> str:
    """One event as JSON text; ``Micros`` values become exact 3-decimal numbers."""
    if isinstance(ev, str):
        return ev
    return _dump_value(ev)


def _open_text(path: Path, gz: bool) -> TextIO:
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


def _header(device_props: list[dict], dist: dict | None, dist_pos: str, base_ns: int | None) -> str:
    parts = ['{\n  "schemaVersion": 1,\n  "deviceProperties": ', json.dumps(device_props)]
    if dist is not None and dist_pos == "before":
        parts += [',\n  "distributedInfo": ', json.dumps(dist)]
    parts.append(',\n  "displayTimeUnit": "ms"')
    if base_ns is not None:
        parts.append(',\n  "baseTimeNanoseconds": %d' % base_ns)
    parts.append(',\n  "traceEvents": [\n')
    return "".join(parts)


def _footer(dist: dict | None, dist_pos: str, trace_name: str) -> str:
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


def _nccl_family(coll: str) -> str:
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


def _nccl_kernel_name(family: str, dtype: str) -> str:
    suffix = "(ncclDevKernelArgsStorage<4096ul>)"
    dt = _NCCL_DTYPE.get(dtype, "f32")
    if family in ("AllReduce", "ReduceScatter", "Reduce"):
        return f"ncclDevKernel_{family}_Sum_{dt}_RING_LL{suffix}"
    if family == "SendRecv":
        return f"ncclDevKernel_SendRecv{suffix}"
    return f"ncclDevKernel_{family}_RING_LL{suffix}"


def _occupancy(grid: list[int], block: list[int]) -> tuple[float, float, int]:
    """(blocks per SM, warps per SM, est. achieved occupancy %) as CUPTI-derived numbers."""
    blocks = grid[0] * grid[1] * grid[2]
    threads = block[0] * block[1] * block[2]
    bps = round(blocks / NUM_SMS, 6)
    wps = round(bps * -(-threads // 32), 6)
    occ = int(min(wps, 64.0) / 64.0 * 100)
    return bps, wps, occ


_MEMCPY_NAMES = {
    "HtoD": "Memcpy HtoD (Pageable -> Device)",
    "DtoH": "Memcpy DtoH (Device -> Pageable)",
    "DtoD": "Memcpy DtoD (Device -> Device)",
    "HtoH": "Memcpy HtoH (Pageable -> Pageable)",
    "PtoP": "Memcpy PtoP (Device -> Device)",
}


# --------------------------------------------------------------------------------------
# 1. KinetoTraceBuilder
# --------------------------------------------------------------------------------------


class KinetoTraceBuilder:
    """Hand-placed Kineto events for tests whose expected values are computed on paper.

    All times are integer nanoseconds relative to the trace start (absolute when
    ``base_time_ns`` is None) and are written as Kineto does: microseconds with exactly
    three decimals. CPU events go on (``pid``, ``tid``); GPU events on (``device``, stream).
    """

    def __init__(
        self,
        rank: int = 0,
        world_size: int = 1,
        base_time_ns: int | None = DEFAULT_BASE_TIME_NS,
        pid: int = 1000,
        tid: int = 1000,
        device: int | None = None,
        distributed_info: str = "before",
    ) -> None:
        if distributed_info not in ("before", "after", "none"):
            raise ValueError("distributed_info must be 'before', 'after' or 'none'")
        self.rank = rank
        self.world_size = world_size
        self.base_time_ns = base_time_ns
        self.pid = pid
        self.tid = tid
        self.device = rank if device is None else device
        self.distributed_info = distributed_info
        self._events: list[dict[str, Any] | str] = []
        self._next_ext = 1
        self._next_corr = 1
        # (ts, end, External id, tid) of cpu_op events: a launch inherits the innermost one.
        self._cpu_ops: list[tuple[int, int, int, int]] = []
        self._cpu_tids: dict[int, None] = {tid: None}
        self._streams: dict[int, None] = {}
        # pg name -> [desc, ranks, next seq]
        self._pgs: dict[str, list[Any]] = {"0": ["default_pg", list(range(world_size)), 0]}
        self._t_min: int | None = None
        self._t_max: int | None = None

    # -- bookkeeping -------------------------------------------------------------------
    def _touch(self, ts: int, end: int | None = None) -> None:
        end = ts if end is None else end
        if self._t_min is None or ts < self._t_min:
            self._t_min = ts
        if self._t_max is None or end > self._t_max:
            self._t_max = end

    def _new_ext(self) -> int:
        ext = self._next_ext
        self._next_ext += 1
        return ext

    def _new_corr(self) -> int:
        corr = self._next_corr
        self._next_corr += 1
        return corr

    def _cpu_tid(self, tid: int | None) -> int:
        t = self.tid if tid is None else tid
        self._cpu_tids.setdefault(t, None)
        return t

    def _x(
        self, cat: str, name: str, pid: Any, tid: Any, ts: int, dur: int, args: dict[str, Any] | None
    ) -> dict[str, Any]:
        ev: dict[str, Any] = {
            "ph": "X",
            "cat": cat,
            "name": name,
            "pid": pid,
            "tid": tid,
            "ts": Micros(ts),
            "dur": Micros(dur),
        }
        if args is not None:
            ev["args"] = args
        self._events.append(ev)
        self._touch(ts, ts + dur)
        return ev

    def _enclosing_ext(self, t: int, tid: int) -> int | None:
        best: tuple[int, int] | None = None
        for ts, end, ext, op_tid in self._cpu_ops:
            if op_tid == tid and ts <= t <= end and (best is None or ts >= best[0]):
                best = (ts, ext)
        return None if best is None else best[1]

    def _launch(
        self,
        api: str,
        cbid: int,
        corr: int,
        launch_ts: int,
        launch_dur: int,
        tid: int,
        ext: int | None,
        gpu_ts: int,
        stream: int,
    ) -> None:
        """The CPU-side runtime call and its ac2g flow pair (s on the CPU, f on the GPU)."""
        args: dict[str, Any] = {}
        if ext is not None:
            args["External id"] = ext
        args["cbid"] = cbid
        args["correlation"] = corr
        self._x("cuda_runtime", api, self.pid, tid, launch_ts, launch_dur, args)
        self.flow("ac2g", corr, launch_ts, gpu_ts, stream=stream, tid=tid)

    # -- CPU side ----------------------------------------------------------------------
    def cpu_op(
        self,
        name: str,
        ts: int,
        dur: int,
        args: dict[str, Any] | None = None,
        tid: int | None = None,
        cat: str = "cpu_op",
    ) -> int:
        """An X event on the CPU thread; returns its External id (taken from args if given)."""
        t = self._cpu_tid(tid)
        extra = dict(args or {})
        ext = int(extra.pop("External id")) if "External id" in extra else self._new_ext()
        self._x(cat, name, self.pid, t, ts, dur, {"External id": ext, **extra})
        if cat == "cpu_op":
            self._cpu_ops.append((ts, ts + dur, ext, t))
        return ext

    def user_annotation(
        self, name: str, ts: int, dur: int, tid: int | None = None, args: dict[str, Any] | None = None
    ) -> int:
        """A ``record_function`` range on the CPU thread; returns its External id."""
        return self.cpu_op(name, ts, dur, args=args, tid=tid, cat="user_annotation")

    def python_function(
        self, name: str, ts: int, dur: int, tid: int | None = None, args: dict[str, Any] | None = None
    ) -> None:
        """A ``python_function`` X event (with_stack traces); carries no External id."""
        self._x("python_function", name, self.pid, self._cpu_tid(tid), ts, dur, dict(args or {}))

    def profiler_step(self, step: int, ts: int, dur: int, gpu_stream: int | None = None) -> int:
        """``ProfilerStep#<step>`` on the CPU thread, plus an identical-time GPU copy on
        ``gpu_stream`` when given; returns the External id both carry."""
        name = f"ProfilerStep#{step}"
        ext = self.user_annotation(name, ts, dur)
        if gpu_stream is not None:
            self._streams.setdefault(gpu_stream, None)
            self._x("gpu_user_annotation", name, self.device, gpu_stream, ts, dur, {"External id": ext})
        return ext

    def gpu_user_annotation(
        self, name: str, ts: int, dur: int, stream: int = 7, external_id: int | None = None
    ) -> None:
        """A ``gpu_user_annotation`` range on a GPU stream."""
        self._streams.setdefault(stream, None)
        args = {} if external_id is None else {"External id": external_id}
        self._x("gpu_user_annotation", name, self.device, stream, ts, dur, args)

    def runtime(
        self,
        name: str,
        ts: int,
        dur: int,
        cbid: int = 0,
        correlation: int | None = None,
        tid: int | None = None,
        external_id: int | None = None,
    ) -> int:
        """A ``cuda_runtime`` call with no GPU activity (e.g. cudaStreamSynchronize)."""
        t = self._cpu_tid(tid)
        corr = self._new_corr() if correlation is None else correlation
        ext = self._enclosing_ext(ts, t) if external_id is None else external_id
        args: dict[str, Any] = {} if ext is None else {"External id": ext}
        args.update({"cbid": cbid, "correlation": corr})
        self._x("cuda_runtime", name, self.pid, t, ts, dur, args)
        return corr

    # -- GPU side ----------------------------------------------------------------------
    def kernel(
        self,
        name: str,
        ts: int,
        dur: int,
        stream: int = 7,
        args: dict[str, Any] | None = None,
        launch_ts: int | None = None,
        launch_dur: int = 3000,
        cat: str = "kernel",
        *,
        tid: int | None = None,
        external_id: int | None = None,
    ) -> int:
        """A GPU kernel; returns its correlation id.

        With ``launch_ts`` also the ``cudaLaunchKernel`` runtime event and the ``ac2g`` flow
        pair. External id: ``external_id``, else ``args["External id"]``, else the innermost
        cpu_op on the launching thread that contains ``launch_ts``, else omitted (as Kineto
        does for unlinked kernels).
        """
        corr = self._new_corr()
        t = self._cpu_tid(tid)
        extra = dict(args or {})
        ext = external_id
        if ext is None and "External id" in extra:
            ext = extra["External id"]
        if ext is None and launch_ts is not None:
            ext = self._enclosing_ext(launch_ts, t)
        extra.pop("External id", None)
        kargs: dict[str, Any] = {}
        if ext is not None:
            kargs["External id"] = ext
        kargs.update(
            {
                "queued": 0,
                "device": self.device,
                "context": 1,
                "stream": stream,
                "correlation": corr,
                "registers per thread": 32,
                "shared memory": 0,
            }
        )
        grid = list(extra.get("grid", [264, 1, 1]))
        block = list(extra.get("block", [256, 1, 1]))
        bps, wps, occ = _occupancy(grid, block)
        kargs.update(
            {"blocks per SM": bps, "warps per SM": wps, "grid": grid, "block": block, "est. achieved occupancy %": occ}
        )
        kargs.update(extra)
        self._streams.setdefault(stream, None)
        if launch_ts is not None:
            self._launch("cudaLaunchKernel", 211, corr, launch_ts, launch_dur, t, ext, ts, stream)
        self._x(cat, name, self.device, stream, ts, dur, kargs)
        return corr

    def nccl_kernel(
        self,
        coll: str,
        ts: int,
        dur: int,
        stream: int = 20,
        nelems: int = 1024,
        dtype: str = "Float",
        group_size: int | None = None,
        pg_name: str = "0",
        pg_desc: str = "default_pg",
        seq: int | None = None,
        launch_ts: int | None = None,
        kernel_name: str | None = None,
        out_nelems: int | None = None,
        *,
        pg_ranks: list[int] | None = None,
        peer: int | None = None,
        in_nelems: int | None = None,
        tid: int | None = None,
        external_id: int | None = None,
    ) -> int:
        """An NCCL kernel carrying PyTorch's collective args; returns its correlation id.

        ``coll`` is written verbatim as ``Collective name`` (``allreduce``, ``allgather``,
        ``reduce_scatter``, ``all_to_all``, ``broadcast``, ``send``, ``recv`` or any PyTorch
        name such as ``_allgather_base``); the kernel name follows its NCCL family.
        ``nelems`` is the per-rank message: allgather writes Out = nelems*group_size,
        reduce_scatter In = nelems*group_size and Out = nelems.
        """
        family = _nccl_family(coll)
        gsize = self.world_size if group_size is None else group_size
        c = coll.lower()
        if in_nelems is None:
            in_nelems = nelems * gsize if family == "ReduceScatter" else nelems
        if out_nelems is None:
            out_nelems = nelems * gsize if family == "AllGather" else nelems
        if pg_name not in self._pgs:
            ranks = list(range(gsize)) if pg_ranks is None else list(pg_ranks)
            self._pgs[pg_name] = [pg_desc, ranks, 0]
        pg = self._pgs[pg_name]
        ranks = list(pg_ranks) if pg_ranks is not None else (pg[1] if len(pg[1]) == gsize else list(range(gsize)))
        if seq is None:
            seq = pg[2]
        pg[2] = max(pg[2], seq + 1)
        args: dict[str, Any] = {
            "registers per thread": 96,
            "shared memory": 87568,
            "grid": [16, 1, 1],
            "block": [512, 1, 1],
            "Collective name": coll,
            "In msg nelems": in_nelems,
            "Out msg nelems": out_nelems,
            "Group size": gsize,
            "dtype": dtype,
            "In split size": "[]",
            "Out split size": "[]",
            "Process Group Name": pg_name,
            "Process Group Description": pg_desc,
            "Process Group Ranks": str(ranks),
        }
        if c in ("send", "isend"):
            args["Dst Rank"] = (self.rank + 1) % max(gsize, 1) if peer is None else peer
        elif c in ("recv", "irecv"):
            args["Src Rank"] = (self.rank - 1) % max(gsize, 1) if peer is None else peer
        args["Seq"] = seq
        name = kernel_name or _nccl_kernel_name(family, dtype)
        return self.kernel(
            name, ts, dur, stream=stream, args=args, launch_ts=launch_ts, tid=tid, external_id=external_id
        )

    def _copy_like(
        self,
        cat: str,
        name: str,
        api: str,
        cbid: int,
        ts: int,
        dur: int,
        nbytes: int,
        stream: int,
        launch_ts: int | None,
        launch_dur: int,
        tid: int | None,
        external_id: int | None,
    ) -> int:
        corr = self._new_corr()
        t = self._cpu_tid(tid)
        ext = external_id
        if ext is None and launch_ts is not None:
            ext = self._enclosing_ext(launch_ts, t)
        args: dict[str, Any] = {} if ext is None else {"External id": ext}
        args.update(
            {
                "device": self.device,
                "context": 1,
                "stream": stream,
                "correlation": corr,
                "bytes": nbytes,
                "memory bandwidth (GB/s)": (nbytes / dur) if dur > 0 else "N/A",
            }
        )
        self._streams.setdefault(stream, None)
        if launch_ts is not None:
            self._launch(api, cbid, corr, launch_ts, launch_dur, t, ext, ts, stream)
        self._x(cat, name, self.device, stream, ts, dur, args)
        return corr

    def memcpy(
        self,
        ts: int,
        dur: int,
        nbytes: int,
        kind: str = "HtoD",
        stream: int = 7,
        *,
        launch_ts: int | None = None,
        launch_dur: int = 3000,
        tid: int | None = None,
        external_id: int | None = None,
    ) -> int:
        """A ``gpu_memcpy`` (bandwidth = bytes/ns = GB/s); returns its correlation id."""
        name = _MEMCPY_NAMES.get(kind, f"Memcpy {kind}")
        return self._copy_like(
            "gpu_memcpy", name, "cudaMemcpyAsync", 41, ts, dur, nbytes, stream, launch_ts, launch_dur, tid, external_id
        )

    def memset(
        self,
        ts: int,
        dur: int,
        nbytes: int,
        stream: int = 7,
        *,
        launch_ts: int | None = None,
        launch_dur: int = 3000,
        tid: int | None = None,
        external_id: int | None = None,
    ) -> int:
        """A ``gpu_memset`` named ``Memset (Device)``; returns its correlation id."""
        return self._copy_like(
            "gpu_memset",
            "Memset (Device)",
            "cudaMemsetAsync",
            51,
            ts,
            dur,
            nbytes,
            stream,
            launch_ts,
            launch_dur,
            tid,
            external_id,
        )

    # -- other phases ------------------------------------------------------------------
    def flow(
        self,
        cat: str,
        flow_id: int,
        src_ts: int,
        dst_ts: int,
        *,
        stream: int | None = None,
        tid: int | None = None,
        dst_tid: int | None = None,
    ) -> None:
        """A flow pair: ``s`` on the CPU thread, ``f`` (bp e) on ``stream`` of the GPU or,
        without a stream, on CPU thread ``dst_tid`` (``fwdbwd``)."""
        t = self._cpu_tid(tid)
        self._events.append(
            {"ph": "s", "id": flow_id, "pid": self.pid, "tid": t, "ts": Micros(src_ts), "cat": cat, "name": cat}
        )
        if stream is not None:
            dpid, dtid = self.device, stream
            self._streams.setdefault(stream, None)
        else:
            dpid, dtid = self.pid, self._cpu_tid(dst_tid)
        self._events.append(
            {
                "ph": "f",
                "id": flow_id,
                "pid": dpid,
                "tid": dtid,
                "ts": Micros(dst_ts),
                "cat": cat,
                "name": cat,
                "bp": "e",
            }
        )
        self._touch(min(src_ts, dst_ts), max(src_ts, dst_ts))

    def instant(self, name: str, ts: int, tid: int | None = None, args: dict[str, Any] | None = None) -> None:
        """A thread-scoped ``cpu_instant_event``."""
        self._events.append(
            {
                "ph": "i",
                "cat": "cpu_instant_event",
                "s": "t",
                "name": name,
                "pid": self.pid,
                "tid": self._cpu_tid(tid),
                "ts": Micros(ts),
                "args": dict(args or {}),
            }
        )
        self._touch(ts)

    def counter(self, name: str, ts: int, values: dict[str, Any], pid: Any = None) -> None:
        """A ``ph:"C"`` counter sample (no tid, as counters are per process)."""
        self._events.append(
            {"ph": "C", "name": name, "pid": self.pid if pid is None else pid, "ts": Micros(ts), "args": dict(values)}
        )
        self._touch(ts)

    def begin(
        self, name: str, ts: int, tid: int | None = None, cat: str | None = None, args: dict[str, Any] | None = None
    ) -> None:
        """A ``B`` event; close it with ``end``."""
        ev: dict[str, Any] = {"ph": "B"}
        if cat is not None:
            ev["cat"] = cat
        ev.update({"name": name, "pid": self.pid, "tid": self._cpu_tid(tid), "ts": Micros(ts)})
        if args is not None:
            ev["args"] = dict(args)
        self._events.append(ev)
        self._touch(ts)

    def end(self, ts: int, tid: int | None = None, args: dict[str, Any] | None = None) -> None:
        """An ``E`` event (no name, as the Trace Event format allows)."""
        ev: dict[str, Any] = {"ph": "E", "pid": self.pid, "tid": self._cpu_tid(tid), "ts": Micros(ts)}
        if args is not None:
            ev["args"] = dict(args)
        self._events.append(ev)
        self._touch(ts)

    def raw(self, event: dict[str, Any] | str) -> None:
        """Appends an event verbatim; a ``str`` is written as-is (may be invalid JSON, for
        malformed-input tests). Values are written with ``json.dumps`` (``Micros`` exactly)."""
        self._events.append(event)
        if isinstance(event, dict):
            ts = event.get("ts")
            if isinstance(ts, Micros):
                dur = event.get("dur")
                self._touch(ts.ns, ts.ns + (dur.ns if isinstance(dur, Micros) else 0))

    # -- output ------------------------------------------------------------------------
    def _trailer(self) -> list[dict[str, Any]]:
        """Kineto's closing events: process/thread names, the profiler span, window end."""
        t0 = self._t_min if self._t_min is not None else 0
        t1 = self._t_max if self._t_max is not None else t0
        m = Micros(t0)
        out: list[dict[str, Any]] = [
            {"name": "process_name", "ph": "M", "ts": m, "pid": self.pid, "tid": 0, "args": {"name": "python3"}},
            {"name": "process_labels", "ph": "M", "ts": m, "pid": self.pid, "tid": 0, "args": {"labels": "CPU"}},
        ]
        if self._streams:
            out += [
                {
                    "name": "process_name",
                    "ph": "M",
                    "ts": m,
                    "pid": self.device,
                    "tid": 0,
                    "args": {"name": f"GPU {self.device}"},
                },
                {
                    "name": "process_labels",
                    "ph": "M",
                    "ts": m,
                    "pid": self.device,
                    "tid": 0,
                    "args": {"labels": f"GPU {self.device}"},
                },
            ]
        for s in sorted(self._streams):
            out.append(
                {
                    "name": "thread_name",
                    "ph": "M",
                    "ts": m,
                    "pid": self.device,
                    "tid": s,
                    "args": {"name": f"stream {s}"},
                }
            )
        for t in self._cpu_tids:
            out.append(
                {
                    "name": "thread_name",
                    "ph": "M",
                    "ts": m,
                    "pid": self.pid,
                    "tid": t,
                    "args": {"name": f"thread {t} (python3)"},
                }
            )
        out.append(
            {
                "ph": "X",
                "cat": "Trace",
                "name": "PyTorch Profiler (0)",
                "pid": "Spans",
                "tid": "PyTorch Profiler",
                "ts": Micros(t0),
                "dur": Micros(t1 - t0),
                "args": {"Op count": 0},
            }
        )
        out.append({"name": "Record Window End", "ph": "i", "s": "g", "pid": "", "tid": "", "ts": Micros(t1)})
        return out

    def distributed_info_dict(self) -> dict[str, Any]:
        """The ``distributedInfo`` object (one pg_config entry per process group used)."""
        pgs = [_pg_entry(name, pg[0], list(pg[1])) for name, pg in self._pgs.items()]
        return _distributed_info(self.rank, self.world_size, pgs)

    def events(self) -> list[dict[str, Any] | str]:
        """All traceEvents as written (ts/dur as ``Micros``), trailer included."""
        return list(self._events) + self._trailer()

    def to_json(self, trace_name: str = "synthetic.pt.trace.json") -> str:
        """The whole file as text."""
        dist = self.distributed_info_dict() if self.distributed_info != "none" else None
        props = _device_properties(_n_visible_devices(self.device, self.world_size))
        body = ",\n".join(_dump_event(e) for e in self.events())
        return (
            _header(props, dist, self.distributed_info, self.base_time_ns)
            + body
            + _footer(dist, self.distributed_info, trace_name)
        )

    def write(self, path: Path | str, gz: bool | None = None) -> Path:
        """Writes the trace; gzip when ``gz`` or (if None) when the name ends in ``.gz``."""
        path = Path(path)
        if gz is None:
            gz = path.name.endswith(".gz")
        with _open_text(path, gz) as f:
            f.write(self.to_json(str(path)))
        return path


# --------------------------------------------------------------------------------------
# 2. Streamed realistic generator
# --------------------------------------------------------------------------------------

# Event templates (Kineto's own key order and spacing). The hot path only %-formats these.
_T_X = '{"ph": "X", "cat": "%s", "name": "%s", "pid": %d, "tid": %d, "ts": %s, "dur": %s, "args": {%s}}'
_T_OP_ARGS = '"External id": %d, "Record function id": 0, "Sequence number": %d, "Fwd thread id": 0%s, "Ev Idx": %d'
_T_PY_ARGS = '"Python parent id": %d, "Python id": %d, "Ev Idx": %d'
_T_RT_ARGS = '"External id": %d, "cbid": %d, "correlation": %d'
_T_FLOW_S = '{"ph": "s", "id": %d, "pid": %d, "tid": %d, "ts": %s, "cat": "%s", "name": "%s"}'
_T_FLOW_F = '{"ph": "f", "id": %d, "pid": %d, "tid": %d, "ts": %s, "cat": "%s", "name": "%s", "bp": "e"}'
_T_KERNEL = (
    '{"ph": "X", "cat": "kernel", "name": "%s", "pid": %d, "tid": %d, "ts": %s, '
    '"dur": %s, "args": {"External id": %d, "queued": 0, "device": %d, "context": 1, '
    '"stream": %d, "correlation": %d, %s%s}}'
)
_T_MEM = (
    '{"ph": "X", "cat": "%s", "name": "%s", "pid": %d, "tid": %d, "ts": %s, "dur": %s, '
    '"args": {"External id": %d, "device": %d, "context": 1, "stream": %d, '
    '"correlation": %d, "bytes": %d, "memory bandwidth (GB/s)": %s}}'
)
_T_GPU_ANN = (
    '{"ph": "X", "cat": "gpu_user_annotation", "name": "%s", "pid": %d, "tid": %d, '
    '"ts": %s, "dur": %s, "args": {"External id": %d}}'
)


def _kprof(regs: int, smem: int, grid: list[int], block: list[int]) -> str:
    """The fixed launch-config part of a kernel's args."""
    bps, wps, occ = _occupancy(grid, block)
    return (
        '"registers per thread": %d, "shared memory": %d, "blocks per SM": %s, '
        '"warps per SM": %s, "grid": %s, "block": %s, "est. achieved occupancy %%": %d'
        % (regs, smem, json.dumps(bps), json.dumps(wps), json.dumps(grid), json.dumps(block), occ)
    )


_GEMM = (
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_%s_n_tilesize128x128x64_warpgroupsize1x1x1_"
    "execute_segment_k_off_kernel__5x_cublas"
)
_K_GEMM_FWD = _GEMM % "tn"
_K_GEMM_DGRAD = _GEMM % "nn"
_K_GEMM_WGRAD = _GEMM % "nt"
_K_RELU = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::"
    "launch_clamp_scalar(at::TensorIteratorBase&, c10::Scalar, c10::Scalar, "
    "at::native::detail::ClampLimits)::{lambda()#1}::operator()() const::{lambda()#14}::"
    "operator()() const::{lambda(c10::BFloat16)#1}, at::detail::Array<char*, 2> >(int, "
    "at::native::(anonymous namespace)::launch_clamp_scalar(at::TensorIteratorBase&, "
    "c10::Scalar, c10::Scalar, at::native::detail::ClampLimits)::{lambda()#1}::operator()"
    "() const::{lambda()#14}::operator()() const::{lambda(c10::BFloat16)#1}, "
    "at::detail::Array<char*, 2>)"
)
_K_THRESH = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::"
    "threshold_kernel_impl<c10::BFloat16>(at::TensorIteratorBase&, c10::BFloat16, "
    "c10::BFloat16)::{lambda(c10::BFloat16, c10::BFloat16)#1}, at::detail::Array<char*, 3> "
    ">(int, at::native::(anonymous namespace)::threshold_kernel_impl<c10::BFloat16>("
    "at::TensorIteratorBase&, c10::BFloat16, c10::BFloat16)::{lambda(c10::BFloat16, "
    "c10::BFloat16)#1}, at::detail::Array<char*, 3>)"
)
_K_LOSS = (
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps"
    "<float, float, float, float>, unsigned int, float, 4> >(at::native::ReduceOp<float, "
    "at::native::MeanOps<float, float, float, float>, unsigned int, float, 4>)"
)
_K_ADAM = (
    "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::"
    "(anonymous namespace)::FusedOptimizerTensorListMetadata<4>, at::native::(anonymous "
    "namespace)::FusedAdamMathFunctor<c10::BFloat16, 4, (at::native::ADAM_MODE)1, false>, "
    "double*, double, double, double, double, double, bool, double*, double*>(at::native::"
    "(anonymous namespace)::FusedOptimizerTensorListMetadata<4>, at::native::(anonymous "
    "namespace)::FusedAdamMathFunctor<c10::BFloat16, 4, (at::native::ADAM_MODE)1, false>, "
    "double*, double, double, double, double, double, bool, double*, double*)"
)
_K_NCCL_AR = _nccl_kernel_name("AllReduce", "BFloat16")

_P_GEMM = _kprof(168, 197632, [64, 32, 1], [384, 1, 1])
_P_ELEM = _kprof(18, 0, [65536, 1, 1], [128, 1, 1])
_P_LOSS = _kprof(32, 16, [132, 1, 1], [512, 1, 1])
_P_ADAM = _kprof(96, 0, [1320, 1, 1], [512, 1, 1])
_P_NCCL = _kprof(96, 87568, [16, 1, 1], [512, 1, 1])

# Model shape: tokens x hidden activations, hidden x hidden weights (bf16).
_TOKENS = 8 * 1024
_HIDDEN = 4096
_LAYER_NELEMS = _HIDDEN * _HIDDEN + _HIDDEN
_BUCKET_LAYERS = 2  # DDP bucket: all-reduce after every two layers' gradients
_BF16 = '"Input type": ["c10::BFloat16", "c10::BFloat16", "c10::BFloat16"]'
_A_LINEAR = ', "Input Dims": [[%d, %d], [%d, %d], [%d]], %s' % (_TOKENS, _HIDDEN, _HIDDEN, _HIDDEN, _HIDDEN, _BF16)
_A_ADDMM = (
    ', "Input Dims": [[%d], [%d, %d], [%d, %d], [], []], "Input type": ["c10::BFloat16", '
    '"c10::BFloat16", "c10::BFloat16", "Scalar", "Scalar"]' % (_HIDDEN, _TOKENS, _HIDDEN, _HIDDEN, _HIDDEN)
)
_A_T = ', "Input Dims": [[%d, %d]], "Input type": ["c10::BFloat16"]' % (_HIDDEN, _HIDDEN)
_A_ACT = ', "Input Dims": [[%d, %d]], "Input type": ["c10::BFloat16"]' % (_TOKENS, _HIDDEN)
_A_MM = ', "Input Dims": [[%d, %d], [%d, %d]], "Input type": ["c10::BFloat16", "c10::BFloat16"]' % (
    _TOKENS,
    _HIDDEN,
    _HIDDEN,
    _HIDDEN,
)
_A_THRESH = ', "Input Dims": [[%d, %d], [%d, %d], []], "Input type": ["c10::BFloat16", "c10::BFloat16", "Scalar"]' % (
    _TOKENS,
    _HIDDEN,
    _TOKENS,
    _HIDDEN,
)
_A_LOSS = ', "Input Dims": [[%d, %d], [%d, %d], []], "Input type": ["c10::BFloat16", "c10::BFloat16", "Scalar"]' % (
    _TOKENS,
    _HIDDEN,
    _TOKENS,
    _HIDDEN,
)
_A_TO = (
    ', "Input Dims": [[8, 1024], [], [], [], [], [], [], []], "Input type": ["long int", '
    '"Scalar", "Scalar", "", "", "Scalar", "Scalar", ""]'
)
_A_ITEM = ', "Input Dims": [[]], "Input type": ["float"]'
_A_NONE = ""


class _RankSim:
    """Simulates one rank's CPU threads and GPU streams step by step, yielding event text.

    Only the current step's events are held; everything else is a handful of counters.
    """

    def __init__(self, rank: int, world_size: int, layers: int, seed: int, start_ns: int) -> None:
        self.us = _us  # the time text (TIME_FORMS)
        self.rng = random.Random(seed + rank)
        r = self.rng
        self.rank = rank
        self.world_size = world_size
        self.layers = layers
        self.device = rank % 8
        self.pid = 2000 + 17 * rank
        self.tid = self.pid
        self.bwd_tid = self.pid + 311
        self.speed = 1.0 + r.uniform(-0.04, 0.04)  # per-rank GPU speed difference
        self.t = start_ns + r.randint(0, 400_000)  # per-rank start skew, up to 0.4 ms
        self.gpu7 = self.t
        self.gpu20 = self.t
        self.t_min = self.t
        self.t_max = self.t
        self.ext = 0
        self.corr = 0
        self.seqnr = 0
        self.evidx = 0
        self.pyid = 0
        self.fwdbwd = 0
        self.coll_seq = 0
        self.pg_ranks = str(list(range(world_size)))
        self.ev: list[str] = []
        self.gpu: list[str] = []
        self.first7: int | None = None

    # -- primitives (append to the current step's lists) -------------------------------
    def jit(self, base: int) -> int:
        return int(base * (0.9 + 0.2 * self.rng.random()))

    def open_x(self) -> int:
        self.ev.append("")
        return len(self.ev) - 1

    def close_op(
        self, idx: int, name: str, tid: int, ts: int, ext: int, seq: int, extra: str, evidx: int, cat: str = "cpu_op"
    ) -> None:
        self.ev[idx] = _T_X % (
            cat,
            name,
            self.pid,
            tid,
            self.us(ts),
            self.us(self.t - ts),
            _T_OP_ARGS % (ext, seq, extra, evidx),
        )

    def op(self, name: str, tid: int, extra: str = _A_NONE, seq: int | None = None) -> tuple[int, Callable[[], int]]:
        """Starts a cpu_op; returns a closer to call when its children are done."""
        self.t += self.jit(3_000)
        self.ext += 1
        self.evidx += 1
        if seq is None:
            self.seqnr += 1
            seq = self.seqnr
        idx, ts, ext, evidx = self.open_x(), self.t, self.ext, self.evidx

        def close() -> int:
            self.t += self.jit(1_500)
            self.close_op(idx, name, tid, ts, ext, seq, extra, evidx)
            return ext

        return ext, close

    def annotation(self, name: str, tid: int) -> tuple[int, int, Callable[[], int]]:
        self.ext += 1
        self.evidx += 1
        idx, ts, ext, evidx = self.open_x(), self.t, self.ext, self.evidx

        def close() -> int:
            self.ev[idx] = _T_X % (
                "user_annotation",
                name,
                self.pid,
                tid,
                self.us(ts),
                self.us(self.t - ts),
                '"External id": %d, "Record function id": 0, "Ev Idx": %d' % (ext, evidx),
            )
            return ext

        return ext, ts, close

    def py(self, name: str, tid: int, parent: int) -> tuple[int, Callable[[], None]]:
        self.t += self.jit(1_000)
        self.pyid += 1
        self.evidx += 1
        idx, ts, pyid, evidx = self.open_x(), self.t, self.pyid, self.evidx

        def close() -> None:
            self.t += self.jit(800)
            self.ev[idx] = _T_X % (
                "python_function",
                name,
                self.pid,
                tid,
                self.us(ts),
                self.us(self.t - ts),
                _T_PY_ARGS % (parent, pyid, evidx),
            )

        return pyid, close

    def launch(
        self,
        tid: int,
        ext: int,
        kname: str,
        prof: str,
        kdur: int,
        stream: int = 7,
        ready: int = 0,
        api: str = "cudaLaunchKernel",
        cbid: int = 211,
        kextra: str = "",
    ) -> tuple[int, int]:
        """Runtime launch + flow + kernel; returns the kernel's (start, end)."""
        self.t += self.jit(2_000)
        self.corr += 1
        corr = self.corr
        lts, ldur = self.t, self.jit(5_500)
        ev = self.ev
        ev.append(
            _T_X % ("cuda_runtime", api, self.pid, tid, self.us(lts), self.us(ldur), _T_RT_ARGS % (ext, cbid, corr))
        )
        ev.append(_T_FLOW_S % (corr, self.pid, tid, self.us(lts), "ac2g", "ac2g"))
        self.t = lts + ldur
        earliest = lts + self.jit(4_000)
        if stream == 7:
            ks = max(self.gpu7 + self.jit(1_500), earliest, ready)
        else:
            ks = max(self.gpu20 + self.jit(2_000), earliest, ready)
        kd = int(kdur * self.speed * (0.96 + 0.08 * self.rng.random()))
        ke = ks + kd
        if stream == 7:
            self.gpu7 = ke
            if self.first7 is None:
                self.first7 = ks
        else:
            self.gpu20 = ke
        sks = self.us(ks)
        self.gpu.append(_T_FLOW_F % (corr, self.device, stream, sks, "ac2g", "ac2g"))
        self.gpu.append(
            _T_KERNEL % (kname, self.device, stream, sks, self.us(kd), ext, self.device, stream, corr, prof, kextra)
        )
        return ks, ke

    def copy(self, tid: int, ext: int, kind: str, nbytes: int, kdur: int) -> int:
        """cudaMemcpyAsync + flow + gpu_memcpy on stream 7; returns the copy's end."""
        self.t += self.jit(2_000)
        self.corr += 1
        corr = self.corr
        lts, ldur = self.t, self.jit(9_000)
        self.ev.append(
            _T_X
            % (
                "cuda_runtime",
                "cudaMemcpyAsync",
                self.pid,
                tid,
                self.us(lts),
                self.us(ldur),
                _T_RT_ARGS % (ext, 41, corr),
            )
        )
        self.ev.append(_T_FLOW_S % (corr, self.pid, tid, self.us(lts), "ac2g", "ac2g"))
        self.t = lts + ldur
        ks = max(self.gpu7 + self.jit(1_500), lts + self.jit(3_000))
        kd = self.jit(kdur)
        self.gpu7 = ks + kd
        if self.first7 is None:
            self.first7 = ks
        self.gpu.append(_T_FLOW_F % (corr, self.device, 7, self.us(ks), "ac2g", "ac2g"))
        self.gpu.append(
            _T_MEM
            % (
                "gpu_memcpy",
                _MEMCPY_NAMES[kind],
                self.device,
                7,
                self.us(ks),
                self.us(kd),
                ext,
                self.device,
                7,
                corr,
                nbytes,
                repr(nbytes / kd),
            )
        )
        return ks + kd

    def runtime(self, tid: int, ext: int, name: str, cbid: int, dur: int) -> None:
        self.t += self.jit(1_500)
        self.corr += 1
        self.ev.append(
            _T_X
            % ("cuda_runtime", name, self.pid, tid, self.us(self.t), self.us(dur), _T_RT_ARGS % (ext, cbid, self.corr))
        )
        self.t += dur

    # -- one training step -------------------------------------------------------------
    def step(self, n: int) -> list[str]:
        self.ev, self.gpu, self.first7 = [], [], None
        tid, btid = self.tid, self.bwd_tid
        self.t += self.jit(60_000)  # dataloader / python between steps
        step_ext, step_ts, close_step = self.annotation(f"ProfilerStep#{n}", tid)
        py_step, close_py_step = self.py("train.py(87): train_step", tid, 0)

        # Input batch to the GPU.
        ext, close = self.op("aten::to", tid, _A_TO)
        ext2, close2 = self.op("aten::_to_copy", tid, _A_TO)
        ext3, close3 = self.op("aten::copy_", tid)
        self.copy(tid, ext3, "HtoD", 8 * 1024 * 8, 9_000)
        close3(), close2(), close()

        # Forward.
        fwd_seq: list[int] = []
        fwd_flow: list[int] = []
        py_model, close_model = self.py("nn.Module: SyntheticMLP_0", tid, py_step)
        for layer in range(self.layers):
            py_l, close_l = self.py(f"nn.Module: Linear_{layer}", tid, py_model)
            ext, close_lin = self.op("aten::linear", tid, _A_LINEAR)
            ext_t, close_t = self.op("aten::t", tid, _A_T)
            close_t()
            ext_mm, close_mm = self.op("aten::addmm", tid, _A_ADDMM)
            fwd_seq.append(self.seqnr)
            self.fwdbwd += 1
            fwd_flow.append(self.fwdbwd)
            self.ev.append(_T_FLOW_S % (self.fwdbwd, self.pid, tid, self.us(self.t), "fwdbwd", "fwdbwd"))
            self.launch(tid, ext_mm, _K_GEMM_FWD, _P_GEMM, 640_000)
            close_mm(), close_lin(), close_l()
            ext_r, close_r = self.op("aten::relu", tid, _A_ACT)
            self.launch(tid, ext_r, _K_RELU, _P_ELEM, 58_000)
            close_r()
        close_model()
        ext, close = self.op("aten::mse_loss", tid, _A_LOSS)
        self.launch(tid, ext, _K_LOSS, _P_LOSS, 41_000)
        close()

        # Backward on the autograd thread, while the main thread waits in backward().
        py_bw, close_bw = self.py("torch/_tensor.py(626): backward", tid, py_step)
        main_t = self.t
        self.t += self.jit(12_000)
        bucket_nelems, bucket_n, grad_ready = 0, 0, 0
        for layer in reversed(range(self.layers)):
            seq = fwd_seq[layer]
            ext, close_e = self.op("autograd::engine::evaluate_function: ReluBackward0", btid, seq=seq + 1)
            ext2, close2 = self.op("ReluBackward0", btid, seq=seq + 1)
            ext3, close3 = self.op("aten::threshold_backward", btid, _A_THRESH)
            self.launch(btid, ext3, _K_THRESH, _P_ELEM, 86_000)
            close3(), close2(), close_e()
            ext, close_e = self.op("autograd::engine::evaluate_function: AddmmBackward0", btid, seq=seq)
            self.ev.append(_T_FLOW_F % (fwd_flow[layer], self.pid, btid, self.us(self.t), "fwdbwd", "fwdbwd"))
            ext2, close2 = self.op("AddmmBackward0", btid, seq=seq)
            if layer > 0:
                ext3, close3 = self.op("aten::mm", btid, _A_MM)
                self.launch(btid, ext3, _K_GEMM_DGRAD, _P_GEMM, 650_000)
                close3()
            ext3, close3 = self.op("aten::mm", btid, _A_MM)
            _, grad_ready = self.launch(btid, ext3, _K_GEMM_WGRAD, _P_GEMM, 660_000)
            close3(), close2(), close_e()
            bucket_nelems += _LAYER_NELEMS
            bucket_n += 1
            if bucket_n == _BUCKET_LAYERS or layer == 0:
                self.allreduce(btid, bucket_nelems, grad_ready)
                bucket_nelems, bucket_n = 0, 0
        self.t = max(self.t, main_t) + self.jit(8_000)
        close_bw()

        # Optimizer: waits for the last all-reduce (cudaStreamWaitEvent), then fused AdamW.
        ext_o, _, close_o = self.annotation("Optimizer.step#AdamW.step", tid)
        ext, close = self.op("aten::_fused_adamw_", tid)
        self.runtime(tid, ext, "cudaStreamWaitEvent", 147, self.jit(2_000))
        self.launch(tid, ext, _K_ADAM, _P_ADAM, 95_000 * self.layers, ready=self.gpu20)
        close()
        self.t += self.jit(4_000)
        close_o()
        ext_z, _, close_z = self.annotation("Optimizer.zero_grad#AdamW.zero_grad", tid)
        self.t += self.jit(25_000)
        close_z()

        # loss.item(): a small DtoH copy, then the CPU blocks until the GPU catches up.
        ext, close = self.op("aten::item", tid, _A_ITEM)
        ext2, close2 = self.op("aten::_local_scalar_dense", tid, _A_ITEM)
        copy_end = self.copy(tid, ext2, "DtoH", 4, 2_000)
        sync_ts = self.t + self.jit(1_500)
        self.corr += 1
        sync_end = max(sync_ts + 2_000, copy_end + self.jit(3_000))
        self.ev.append(
            _T_X
            % (
                "cuda_runtime",
                "cudaStreamSynchronize",
                self.pid,
                tid,
                self.us(sync_ts),
                self.us(sync_end - sync_ts),
                _T_RT_ARGS % (ext2, 131, self.corr),
            )
        )
        self.t = sync_end
        close2(), close()
        close_py_step()
        self.t += self.jit(5_000)
        close_step()

        g0 = self.first7 if self.first7 is not None else step_ts
        g1 = max(self.gpu7, g0)
        # Kineto shifts gpu_user_annotation by -1 ns / +2 ns.
        self.gpu.append(
            _T_GPU_ANN % (f"ProfilerStep#{n}", self.device, 7, self.us(g0 - 1), self.us(g1 - g0 + 2), step_ext)
        )
        self.t_max = max(self.t_max, self.t, self.gpu7, self.gpu20)
        out = self.ev
        out.extend(self.gpu)
        self.ev, self.gpu = [], []
        return out

    def allreduce(self, tid: int, nelems: int, ready: int) -> None:
        """DDP bucket all-reduce: record_param_comms + nccl:all_reduce + NCCL kernel on 20."""
        seq = self.coll_seq
        self.coll_seq += 1
        ws = self.world_size
        self.t += self.jit(4_000)
        self.ext += 1
        self.evidx += 1
        idx, ts, ext, evidx = self.open_x(), self.t, self.ext, self.evidx
        ext_a, ts_a, close_a = self.annotation("nccl:all_reduce", tid)
        self.runtime(tid, ext, "cudaEventRecord", 135, self.jit(2_500))
        self.runtime(tid, ext, "cudaStreamWaitEvent", 147, self.jit(1_800))
        if ws > 1:  # ring all-reduce: 2(n-1)/n of the bytes at ~180 GB/s bus bandwidth
            kdur = 18_000 + int(2 * (ws - 1) / ws * nelems * 2 / 180.0)
        else:
            kdur = 6_000
        extra = (
            ', "Collective name": "allreduce", "In msg nelems": %d, "Out msg nelems": %d, '
            '"Group size": %d, "dtype": "BFloat16", "In split size": "[]", '
            '"Out split size": "[]", "Process Group Name": "0", '
            '"Process Group Description": "default_pg", "Process Group Ranks": "%s", '
            '"Seq": %d' % (nelems, nelems, ws, self.pg_ranks, seq)
        )
        ks, ke = self.launch(
            tid,
            ext,
            _K_NCCL_AR,
            _P_NCCL,
            kdur,
            stream=20,
            ready=ready,
            api="cudaLaunchKernelExC",
            cbid=430,
            kextra=extra,
        )
        self.gpu.append(_T_GPU_ANN % ("nccl:all_reduce", self.device, 20, self.us(ks - 1), self.us(ke - ks + 2), ext_a))
        self.t += self.jit(3_000)
        close_a()
        self.t += self.jit(2_000)
        self.ev[idx] = _T_X % (
            "cpu_op",
            "record_param_comms",
            self.pid,
            tid,
            self.us(ts),
            self.us(self.t - ts),
            '"External id": %d, "Record function id": 0, "Collective name": "allreduce", '
            '"dtype": "BFloat16", "In msg nelems": %d, "Out msg nelems": %d, "Group size": %d, '
            '"Process Group Name": "0", "Process Group Description": "default_pg", '
            '"Process Group Ranks": "%s", "Rank": %d, "Global rank start": 0, '
            '"Global rank stride": 1, "Seq": %d, "Ev Idx": %d'
            % (ext, nelems, nelems, ws, self.pg_ranks, self.rank, seq, evidx),
        )

    def trailer(self) -> list[str]:
        m = self.us(self.t_min)
        pid, dev = self.pid, self.device
        meta = [
            ("process_name", pid, 0, '"name": "python3"'),
            ("process_labels", pid, 0, '"labels": "CPU"'),
            ("process_name", dev, 0, '"name": "GPU %d"' % dev),
            ("process_labels", dev, 0, '"labels": "GPU %d"' % dev),
            ("thread_name", dev, 7, '"name": "stream 7"'),
            ("thread_name", dev, 20, '"name": "stream 20"'),
            ("thread_name", pid, self.tid, '"name": "thread %d (pt_main_thread)"' % self.tid),
            ("thread_name", pid, self.bwd_tid, '"name": "thread %d (pt_autograd_0)"' % self.bwd_tid),
        ]
        out = [
            '{"name": "%s", "ph": "M", "ts": %s, "pid": %d, "tid": %d, "args": {%s}}' % (name, m, p, t, a)
            for name, p, t, a in meta
        ]
        out.append(
            '{"ph": "X", "cat": "Trace", "ts": %s, "dur": %s, "pid": "Spans", '
            '"tid": "PyTorch Profiler", "name": "PyTorch Profiler (0)", '
            '"args": {"Op count": 0}}' % (m, self.us(self.t_max - self.t_min))
        )
        out.append(
            '{"name": "Record Window End", "ph": "i", "s": "g", "pid": "", "tid": "", "ts": %s}' % self.us(self.t_max)
        )
        return out


def generate_rank_trace(
    path: Path | str,
    rank: int,
    world_size: int,
    steps: int = 3,
    layers: int = 4,
    seed: int = 0,
    target_bytes: int | None = None,
    gz: bool = False,
    *,
    base_time_ns: int | None = DEFAULT_BASE_TIME_NS,
    start_ns: int = DEFAULT_GEN_START_NS,
    distributed_info: str = "before",
    time_form: str = "relative",
) -> dict[str, Any]:
    """Writes one rank's realistic DDP training trace, streaming events to ``path``.

    Each step: ``ProfilerStep#N``, an HtoD input copy, ``layers`` Linear+ReLU forward layers,
    backward on the autograd thread with bucketed NCCL all-reduces on stream 20 overlapping
    backward GEMMs, fused AdamW and a DtoH ``loss.item()`` sync. Deterministic for
    (seed, rank). With ``target_bytes`` steps are added until the uncompressed size reaches
    it (``steps`` is then ignored). Returns ``{"path", "rank", "events", "bytes", "steps"}``.
    ``time_form`` (``TIME_FORMS``) other than ``relative`` sets the base time and the
    start itself.
    """
    if distributed_info not in ("before", "after", "none"):
        raise ValueError("distributed_info must be 'before', 'after' or 'none'")
    if time_form not in TIME_FORMS:
        raise ValueError(f"time_form must be one of {', '.join(TIME_FORMS)}")
    us = TIME_FORMS[time_form][2]
    if time_form != "relative":
        base_time_ns, start_ns = TIME_FORMS[time_form][:2]
    path = Path(path)
    layers = max(1, int(layers))
    sim = _RankSim(rank, world_size, layers, seed, start_ns)
    sim.us = us
    dist = None
    if distributed_info != "none":
        dist = _distributed_info(rank, world_size, [_pg_entry("0", "default_pg", list(range(world_size)))])
    props = _device_properties(_n_visible_devices(sim.device, world_size))
    n_events = 0
    n_steps = 0
    with _open_text(path, gz) as f:
        head = _header(props, dist, distributed_info, base_time_ns)
        f.write(head)
        written = len(head)
        sep = ""

        def emit(chunk: list[str]) -> None:
            nonlocal written, n_events, sep
            text = sep + ",\n".join(chunk)
            f.write(text)
            written += len(text)
            n_events += len(chunk)
            sep = ",\n"

        while True:
            if target_bytes is not None:
                if written >= target_bytes and n_steps > 0:
                    break
            elif n_steps >= steps:
                break
            emit(sim.step(n_steps))
            n_steps += 1
        emit(sim.trailer())
        tail = _footer(dist, distributed_info, str(path))
        f.write(tail)
        written += len(tail)
    return {"path": path, "rank": rank, "events": n_events, "bytes": written, "steps": n_steps}


def _card_text(ranks: int, steps: int, layers: int, seed: int) -> str:
    # GPUs per node: up to 8 (an H100 node), and a divisor of the job's GPU count
    per_node = max(d for d in range(1, min(ranks, 8) + 1) if ranks % d == 0)
    return f"""version: 1
description: >
  Synthetic {layers}-layer MLP (hidden {_HIDDEN}) trained with DDP on {ranks} ranks, {steps}
  profiled steps per rank, bucketed NCCL all-reduce overlapping backward
  (generated by cclq.synth.kineto, seed {seed}).
hf_url:
trace_url:
contributor: cclq.synth.kineto
contact:
workload:
  model:
    phase: training
    moe: false
    granularity: model_fwd_bwd_pass
    model_family: synthetic-mlp
    precision: bf16
    epochs: 1
    iteration: {steps}
    model_arch:
      num_params: {layers * _LAYER_NELEMS}
      num_layers: {layers}
  data:
    batch_size: 8
    seq_len: 1024
    dataset: synthetic
  hardware:
    xpu_spec:
      type: GPU
      model: nvidia_h100
      total_count: {ranks}
      count_per_node: {per_node}
Model-executor:
  framework:
    name: pytorch
    compiler_tool_selection: plain_pytorch
  model_plan_parallelization:
    dp_replicate: {ranks}
    dp_shard: 1
    tp: 1
    pp: 1
    cp: 1
    ep: 1
  communication_library:
    name: NCCL
    version: 2.21.5
metric_source:
  traces: [json]
  metrics_specific_trace: []
"""


def _rank_job(kw: dict[str, Any]) -> dict[str, Any]:
    return generate_rank_trace(**kw)


def generate_workload(
    out_dir: Path | str,
    ranks: int = 4,
    steps: int = 3,
    layers: int = 4,
    seed: int = 0,
    target_bytes_per_rank: int | None = None,
    gz: bool = False,
    card: bool = True,
    *,
    jobs: int = 1,
    start_ns: int = DEFAULT_GEN_START_NS,
    time_form: str = "relative",
) -> list[Path]:
    """Writes ``kineto_trace_{r}.json[.gz]`` for each rank (and ``workload_card.yaml``).

    Returns the trace paths in rank order (not the card). ``jobs`` > 1 writes ranks in
    parallel processes. ``time_form``: see ``TIME_FORMS``.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    suffix = ".json.gz" if gz else ".json"
    kws = [
        dict(
            path=out / f"kineto_trace_{r}{suffix}",
            rank=r,
            world_size=ranks,
            steps=steps,
            layers=layers,
            seed=seed,
            target_bytes=target_bytes_per_rank,
            gz=gz,
            start_ns=start_ns,
            time_form=time_form,
        )
        for r in range(ranks)
    ]
    if jobs > 1 and ranks > 1:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(max_workers=min(jobs, ranks, os.cpu_count() or 1)) as ex:
            results = list(ex.map(_rank_job, kws))
    else:
        results = [_rank_job(kw) for kw in kws]
    if card:
        n_steps = results[0]["steps"] if results else steps
        (out / "workload_card.yaml").write_text(_card_text(ranks, n_steps, layers, seed))
    return [Path(r["path"]) for r in results]
