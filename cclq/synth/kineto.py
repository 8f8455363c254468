"""Synthetic PyTorch-profiler (Kineto) traces, for tests and benchmarks.

Two tools, both pure standard library:

* ``KinetoTraceBuilder`` places every event by hand (times in integer nanoseconds), so a
  test can compute the expected metric values on paper and compare exactly.
* ``generate_rank_trace`` / ``generate_workload`` (``cclq.synth.workload``, named here too,
  where callers have always imported them) write realistic multi-rank training traces
  of any size, streamed straight to disk (memory stays flat however large the file), for
  benchmarks and smoke tests.

Both write what Kineto writes (libkineto ``output_json.cpp``): the object form with
``schemaVersion``, ``deviceProperties``, ``distributedInfo``, ``baseTimeNanoseconds``,
``traceEvents`` and ``traceName``; ``ts``/``dur`` as microseconds printed with exactly three
decimals (nanosecond precision). Those numbers are written as raw JSON text, never through
float formatting, so that 16-digit timestamps stay exact.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cclq.synth.kineto_json import (
    DEFAULT_BASE_TIME_NS,
    DEFAULT_GEN_START_NS,
    EPOCH_START_NS,
    MEMCPY_NAMES,
    TIME_FORMS,
    Micros,
    dump_event,
    kineto_device_properties,
    kineto_distributed_info,
    kineto_footer,
    kineto_header,
    n_visible_devices,
    nccl_family,
    nccl_kernel_name,
    occupancy,
    open_text,
    pg_entry,
)

# the streamed generator lives in cclq.synth.workload; named here too, where the tests and
# the bench have always imported it from
from cclq.synth.workload import generate_rank_trace, generate_workload  # noqa: E402

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
        bps, wps, occ = occupancy(grid, block)
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
        family = nccl_family(coll)
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
        name = kernel_name or nccl_kernel_name(family, dtype)
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
        name = MEMCPY_NAMES.get(kind, f"Memcpy {kind}")
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
        pgs = [pg_entry(name, pg[0], list(pg[1])) for name, pg in self._pgs.items()]
        return kineto_distributed_info(self.rank, self.world_size, pgs)

    def events(self) -> list[dict[str, Any] | str]:
        """All traceEvents as written (ts/dur as ``Micros``), trailer included."""
        return list(self._events) + self._trailer()

    def to_json(self, trace_name: str = "synthetic.pt.trace.json") -> str:
        """The whole file as text."""
        dist = self.distributed_info_dict() if self.distributed_info != "none" else None
        props = kineto_device_properties(n_visible_devices(self.device, self.world_size))
        body = ",\n".join(dump_event(e) for e in self.events())
        return (
            kineto_header(props, dist, self.distributed_info, self.base_time_ns)
            + body
            + kineto_footer(dist, self.distributed_info, trace_name)
        )

    def write(self, path: Path | str, gz: bool | None = None) -> Path:
        """Writes the trace; gzip when ``gz`` or (if None) when the name ends in ``.gz``."""
        path = Path(path)
        if gz is None:
            gz = path.name.endswith(".gz")
        with open_text(path, gz) as f:
            f.write(self.to_json(str(path)))
        return path


# --------------------------------------------------------------------------------------
