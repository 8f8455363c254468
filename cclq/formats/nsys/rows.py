"""One pass over an Nsight Systems export: each activity table's rows as ``events``
batches in the shape a Kineto trace gives (the mapping is the package's docstring)."""

from __future__ import annotations

import json
import re
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from cclq.errors import TraceFileError
from cclq.formats.base import BatchSink, Prepared, ProgressFn, ReadResult, record_batch
from cclq.formats.nsys.export import (
    GPU_TABLES,
    NVTX_DOMAIN_CREATE,
    NVTX_MARKS,
    NVTX_RANGES,
    NVTX_THREAD_NAMES,
    Export,
    int_sql,
    pid_of,
    process_key,
    quote_ident,
    tid_of,
)
from cclq.schema import EVENT_SCHEMA

# CUPTI's enums (stable across CUDA versions; exports from nsys 2023+ also carry them
# as ENUM_* tables, older ones do not), spelled as Kineto spells them in names.
_COPY_KINDS = {
    0: "Unknown",
    1: "HtoD",
    2: "DtoH",
    3: "HtoA",
    4: "AtoH",
    5: "AtoA",
    6: "AtoD",
    7: "DtoA",
    8: "DtoD",
    9: "HtoH",
    10: "PtoP",
    11: "HtoD",
    12: "DtoH",
    13: "DtoD",
}
_MEMORY_KINDS = {
    0: "Pageable",
    1: "Pinned",
    2: "Device",
    3: "Array",
    4: "Managed",
    5: "Device Static",
    6: "Managed Static",
    7: "Unknown",
}
_SYNC_KINDS = {0: "Unknown Sync", 1: "Event Sync", 2: "Stream Wait Event", 3: "Stream Sync", 4: "Context Sync"}
_API_VERSION = re.compile(r"_v\d+$")
_INT64 = (-(1 << 63), (1 << 63) - 1)
_GPU_IDS = ("deviceId", "streamId", "correlationId", "globalPid")  # in every GPU activity table


class TableRows:
    """One pass over an export: each table's rows, as events batches."""

    def __init__(
        self, ex: Export, prepared: Prepared, file_id: str, sink: BatchSink, progress: ProgressFn | None
    ) -> None:
        self.ex = ex
        self.meta = prepared.metadata
        self.session = self.meta["session_start_ns"]
        self.multi_rank = prepared.ranks is not None
        self.file_id = file_id
        self.sink = sink
        self.progress = progress
        self.result = ReadResult(base_time_ns=self.session)
        self.result.metadata["deviceProperties"] = self.meta["device_properties"] or None
        self.next_idx = 0
        self.sm_counts = {p["id"]: p.get("numSms") for p in self.meta["device_properties"] if p.get("numSms")}
        # GPU rows: by device (rank_mode "device") or by process (MPI ranks); CPU rows by
        # process; rows of processes without GPU work: the lowest rank
        self.rank_mode = self.meta.get("rank_mode")
        self.rank_of_process = self.meta.get("rank_of_process", {})
        self.lowest_rank = min(prepared.ranks) if prepared.ranks else 0
        self.rank_of_gpu = {
            d: self.rank_of_process[p] for p, d in self.meta["device_of_process"].items() if p in self.rank_of_process
        }

    def run(self) -> ReadResult:
        ex = self.ex
        steps = [
            ("CUPTI_ACTIVITY_KIND_KERNEL", self._kernels),
            ("CUPTI_ACTIVITY_KIND_MEMCPY", self._memcpys),
            ("CUPTI_ACTIVITY_KIND_MEMSET", self._memsets),
            ("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", self._syncs),
            ("CUPTI_ACTIVITY_KIND_RUNTIME", lambda t: self._api(t, "cuda_runtime")),
            ("CUPTI_ACTIVITY_KIND_DRIVER", lambda t: self._api(t, "cuda_driver")),
            ("NVTX_EVENTS", self._nvtx),
            ("OSRT_API", lambda t: self._api(t, "os_runtime")),
        ]
        steps += [
            (t, lambda t: self._api(t, "mpi"))
            for t in sorted(ex.tables)
            if t.startswith("MPI_") and t.endswith("_EVENTS")
        ]
        present = [(t, fn) for t, fn in steps if ex.has(t)]
        if not any(t in ex.tables for t in GPU_TABLES + ("CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS")):
            raise TraceFileError(
                ex.path, f"Nsight Systems export (schema {ex.version}) without CUDA or NVTX activity: nothing to ingest"
            )
        self._metadata_events()  # first: a later NVTX thread name wins (thread_names takes the last)
        for table, fn in present:
            fn(table)
        return self.result

    # -- one table each -------------------------------------------------------
    def _gpu_columns(self, table: str, *needed: str) -> str:
        """The first six columns of every GPU activity table's SELECT: start, end, device,
        stream, correlation id and process (``_emit_gpu`` reads them in this order)."""
        self.ex.require(table, "start", "end", *_GPU_IDS, *needed)
        return "t.start, t.end, " + ", ".join(int_sql(f"t.{c}") for c in _GPU_IDS)

    def _emit_gpu(self, c: list[tuple], cat: str, name: Any, **promoted: Any) -> None:
        """One batch of a GPU table, its columns ``c`` led by ``_gpu_columns``' six."""
        self._emit(
            len(c[0]), c[0], c[1], cat=cat, name=name, device=c[2], stream=c[3], correlation=c[4], gpid=c[5], **promoted
        )

    def _kernels(self, table: str) -> None:
        ex = self.ex
        cols = ex.columns(table)
        name_col = "demangledName" if "demangledName" in cols else "shortName"
        leading = self._gpu_columns(table, name_col)
        short = "LEFT JOIN StringIds AS sn ON sn.id = t.shortName" if "shortName" in cols else ""
        sql = f"""
            SELECT {leading},
                   dn.value AS name, {"sn.value" if short else "NULL"} AS short_name,
                   {ex.col(table, "gridX")}, {ex.col(table, "gridY")}, {ex.col(table, "gridZ")},
                   {ex.col(table, "blockX")}, {ex.col(table, "blockY")}, {ex.col(table, "blockZ")},
                   {ex.col(table, "registersPerThread")}, {ex.col(table, "staticSharedMemory")},
                   {ex.col(table, "dynamicSharedMemory")}, {ex.col(table, "contextId")},
                   {ex.col(table, "graphNodeId")}
            FROM {quote_ident(table)} AS t
            LEFT JOIN StringIds AS dn ON dn.id = t.{quote_ident(name_col)}
            {short}"""
        for rows in ex.batches(sql):
            c = list(zip(*rows))
            grid = [None if x is None else [x, y, z] for x, y, z in zip(c[8], c[9], c[10])]
            block = [None if x is None else [x, y, z] for x, y, z in zip(c[11], c[12], c[13])]
            shared = [None if a is None and b is None else (a or 0) + (b or 0) for a, b in zip(c[15], c[16])]
            per_sm = [
                None if g is None or self.sm_counts.get(d) is None else g[0] * g[1] * g[2] / self.sm_counts[d]
                for g, d in zip(grid, c[2])
            ]
            args = [
                _args({"short name": s, "context": ctx, "graph node id": g}) for s, ctx, g in zip(c[7], c[17], c[18])
            ]
            self._emit_gpu(
                c,
                "kernel",
                c[6],
                grid=grid,
                block=block,
                registers_per_thread=c[14],
                shared_memory_bytes=shared,
                blocks_per_sm=per_sm,
                args=args,
            )

    def _memcpys(self, table: str) -> None:
        ex = self.ex
        sql = f"""SELECT {self._gpu_columns(table, "bytes", "copyKind")}, {int_sql("t.bytes")},
                         {int_sql("t.copyKind")},
                         {ex.col(table, "srcKind")}, {ex.col(table, "dstKind")}, {ex.col(table, "contextId")}
                  FROM {quote_ident(table)} AS t"""
        for rows in ex.batches(sql):
            c = list(zip(*rows))
            names = [
                f"Memcpy {_COPY_KINDS.get(k, 'Unknown')} ({_MEMORY_KINDS.get(s, 'Unknown')} -> "
                f"{_MEMORY_KINDS.get(d, 'Unknown')})"
                for k, s, d in zip(c[7], c[8], c[9])
            ]
            bw = [
                b / (e - s) if type(b) is int and type(e) is int and type(s) is int and e > s else None
                for s, e, b in zip(c[0], c[1], c[6])
            ]  # bytes per ns = GB/s
            args = [
                _args({"copy kind": k, "src kind": s, "dst kind": d, "context": ctx})
                for k, s, d, ctx in zip(c[7], c[8], c[9], c[10])
            ]
            self._emit_gpu(c, "gpu_memcpy", names, bytes=c[6], memory_bw_gbps=bw, args=args)

    def _memsets(self, table: str) -> None:
        ex = self.ex
        sql = f"""SELECT {self._gpu_columns(table, "bytes")}, {int_sql("t.bytes")},
                         {ex.col(table, "memKind")}, {ex.col(table, "value")}
                  FROM {quote_ident(table)} AS t"""
        for rows in ex.batches(sql):
            c = list(zip(*rows))
            names = [f"Memset ({_MEMORY_KINDS.get(k, 'Device')})" for k in c[7]]
            self._emit_gpu(c, "gpu_memset", names, bytes=c[6], args=[_args({"value": v}) for v in c[8]])

    def _syncs(self, table: str) -> None:
        sql = f"SELECT {self._gpu_columns(table, 'syncType')}, {int_sql('t.syncType')} FROM {quote_ident(table)} AS t"
        for rows in self.ex.batches(sql):
            c = list(zip(*rows))
            self._emit_gpu(c, "cuda_sync", [_SYNC_KINDS.get(k, "Unknown Sync") for k in c[6]])

    def _api(self, table: str, cat: str) -> None:
        """CPU-side calls: CUDA runtime/driver API, OS runtime, MPI."""
        ex = self.ex
        cols = ex.columns(table)
        name_col = next((c for c in ("nameId", "textId") if c in cols), "nameId")
        ex.require(table, name_col)  # fails naming nameId when neither is there
        ex.require(table, "start", "end", "globalTid")
        sql = f"""SELECT t.start, t.end, {int_sql("t.globalTid")}, {ex.col(table, "correlationId")}, s.value
                  FROM {quote_ident(table)} AS t LEFT JOIN StringIds AS s ON s.id = t.{quote_ident(name_col)}"""
        for rows in ex.batches(sql):
            c = list(zip(*rows))
            names = [None if v is None else _API_VERSION.sub("", v) for v in c[4]]
            self._emit(len(rows), c[0], c[1], cat=cat, name=names, gtid=c[2], correlation=c[3])

    def _nvtx(self, table: str) -> None:
        ex = self.ex
        ex.require(table, "start", "eventType", "globalTid")
        cols = ex.columns(table)
        domains = {}
        if "domainId" in cols:
            domains = dict(
                ex.query(f"SELECT domainId, text FROM {quote_ident(table)} WHERE eventType = {NVTX_DOMAIN_CREATE}")
            )
        text = "coalesce(t.text, s.value)" if "textId" in cols else "t.text"
        join = "LEFT JOIN StringIds AS s ON s.id = t.textId" if "textId" in cols else ""
        wanted = NVTX_RANGES + NVTX_MARKS + NVTX_THREAD_NAMES
        sql = f"""SELECT t.start, {ex.col(table, "end", expr='t."end"')}, {int_sql("t.globalTid")}, t.eventType,
                         {text} AS name, {ex.col(table, "domainId", expr="t.domainId")}, {ex.col(table, "category")},
                         {ex.col(table, "jsonText", expr="t.jsonText")}
                  FROM {quote_ident(table)} AS t {join}
                  WHERE t.eventType IN ({", ".join(map(str, wanted))})"""
        for rows in ex.batches(sql):
            c = list(zip(*rows))
            n = len(rows)
            ph = ["X" if t in NVTX_RANGES else "i" if t in NVTX_MARKS else "M" for t in c[3]]
            names = [nm if p != "M" else "thread_name" for nm, p in zip(c[4], ph)]
            args = [
                _args({"name": nm}) if p == "M" else _args({"domain": domains.get(d), "category": cat, "payload": js})
                for nm, p, d, cat, js in zip(c[4], ph, c[5], c[6], c[7])
            ]
            ends = [e if p == "X" else None for e, p in zip(c[1], ph)]
            cats = [None if p == "M" else "user_annotation" for p in ph]
            self._emit(
                n,
                c[0],
                ends,
                cat=cats,
                cat_raw=[None if p == "M" else "nvtx" for p in ph],
                name=names,
                gtid=c[2],
                ph=ph,
                scope=["t" if p == "i" else None for p in ph],
                args=args,
            )

    def _metadata_events(self) -> None:
        """``process_name`` / ``thread_name`` for the processes and threads seen, and a
        name per GPU, so that process_names / thread_names work as on Kineto traces."""
        ex = self.ex
        rows: list[tuple[Any, ...]] = []  # (gpid or None, device or None, gtid or None, name, value)
        if ex.has("PROCESSES") and {"globalPid", "name"} <= ex.columns("PROCESSES"):
            seen = set(self.meta["device_of_process"]) | set(self.rank_of_process)
            for gpid, name in ex.query(f"SELECT {int_sql('globalPid')}, name FROM PROCESSES"):
                if process_key(gpid) in seen:
                    rows.append((gpid, None, None, "process_name", name))
        if ex.has("ThreadNames") and {"nameId", "globalTid"} <= ex.columns("ThreadNames"):
            for gtid, name in ex.query(
                f"SELECT {int_sql('t.globalTid')}, s.value FROM ThreadNames AS t JOIN StringIds AS s ON s.id = t.nameId"
            ):
                rows.append((None, None, gtid, "thread_name", name))
        for prop in self.meta["device_properties"]:
            if prop["id"] in self.meta["devices"]:
                rows.append((None, prop["id"], None, "process_name", f"GPU {prop['id']}: {prop.get('name')}"))
        if not rows:
            return
        c = list(zip(*rows))
        n = len(rows)
        gtid = [g if g is not None else p for p, g in zip(c[0], c[2])]
        self._emit(
            n,
            [None] * n,
            [None] * n,
            ph=["M"] * n,
            name=c[3],
            gtid=gtid,
            device=c[1],
            args=[_args({"name": v}) for v in c[4]],
            meta=True,
        )

    # -- shared ---------------------------------------------------------------
    def _emit(
        self,
        n: int,
        start: Any,
        end: Any,
        *,
        name: Any,
        cat: Any = None,
        cat_raw: Any = None,
        ph: Any = None,
        scope: Any = None,
        gpid: Any = None,
        gtid: Any = None,
        device: Any = None,
        meta: bool = False,
        **promoted: Any,
    ) -> None:
        """One batch of rows: time made epoch ns, GPU rows on (device, stream), CPU rows on
        (pid, tid); rows that cannot be used dropped and counted."""
        ph = ph if ph is not None else ["X"] * n
        cats = cat if isinstance(cat, list) else [cat] * n
        self.result.events_read += n
        keep = [True] * n
        if not meta:
            start, end, keep = self._times(start, end, ph)
        starts = pa.array(start, pa.int64())
        ends = pa.array(end, pa.int64())
        durs = pc.subtract(ends, starts)
        gpu = device is not None and not meta
        if gpu:
            pids = [None if d is None else str(d) for d in device]
            tids = [None if s is None else str(s) for s in promoted["stream"]]
        else:
            pids = [None if g is None else str(pid_of(g)) for g in gtid] if gtid is not None else [None] * n
            tids = (
                [None if g is None or meta and tid_of(g) == 0 else str(tid_of(g)) for g in gtid]
                if gtid is not None
                else [None] * n
            )
            if meta and device is not None:  # a GPU's name: its pid is the device
                pids = [str(d) if d is not None else p for d, p in zip(device, pids)]
        ts = pc.add(starts, self.session) if not meta else pa.array([self.session] * n, pa.int64())
        for key in ("shared_memory_bytes", "bytes"):  # sums and raw values that may leave int64
            if key in promoted:
                promoted[key] = [v if type(v) is int and _INT64[0] <= v <= _INT64[1] else None for v in promoted[key]]
        name = [_text(v) for v in name] if isinstance(name, (list, tuple)) else name
        columns: dict[str, Any] = {
            "file_id": pa.array([self.file_id] * n, pa.string()),
            "event_idx": pa.array(range(self.next_idx, self.next_idx + n), pa.int64()),
            "ph": ph,
            "cat": cats,
            "cat_raw": cat_raw,
            "name": name,
            "pid": pids,
            "tid": tids,
            "ts_ns": ts,
            "dur_ns": None if meta else durs,
            "scope": scope,
            "device": device if gpu else None,
            **promoted,
        }
        self.next_idx += n
        batch = record_batch(EVENT_SCHEMA, columns, n)
        if not all(keep):
            batch = batch.filter(pa.array(keep))
        if batch.num_rows == 0:
            return
        if not meta:
            timed = batch.column("ts_ns")
            lo, hi = pc.min(timed).as_py(), pc.max(pc.add(timed, pc.fill_null(batch.column("dur_ns"), 0))).as_py()
            if lo is not None:
                r = self.result
                r.ts_min_ns = lo if r.ts_min_ns is None else min(r.ts_min_ns, lo)
                r.ts_max_ns = hi if r.ts_max_ns is None else max(r.ts_max_ns, hi)
        if self.multi_rank:
            batch = self._with_ranks(batch, gpid, gtid, device, keep)
        self.sink(batch)
        self.result.rows_written += batch.num_rows

    def _times(self, start: Any, end: Any, ph: list[str]) -> tuple[list[Any], list[Any], list[bool]]:
        """Starts and ends that make epoch ns within int64, and which rows keep: the others
        are dropped and counted as the JSON readers count them (``bad ts``: not an
        integer, or beyond int64 once the session start is added; ``bad dur``;
        ``negative dur``; ``no start``)."""
        lo, hi = _INT64
        session = self.session
        starts: list[Any] = []
        ends: list[Any] = []
        keep: list[bool] = []
        drops = self.result.drops
        for s, e, p in zip(start, end, ph):
            reason = None
            if s is None:
                reason = "no start"
            elif type(s) is not int or not lo <= s + session <= hi:
                reason = "bad ts"
            elif e is not None and (type(e) is not int or not lo <= e + session <= hi or not lo <= e - s <= hi):
                reason = "bad dur"
            elif e is not None and e < s:
                reason = "negative dur"
            if reason is None:
                starts.append(s)
                ends.append(e)
                keep.append(True)
            else:
                drops[reason, p] += 1
                starts.append(None)
                ends.append(None)
                keep.append(False)
        return starts, ends, keep

    def _with_ranks(self, batch: pa.RecordBatch, gpid: Any, gtid: Any, device: Any, keep: list[bool]) -> pa.RecordBatch:
        """The batch with its rows' ranks in front: a GPU row's rank is its device's (or its
        process's MPI rank), a CPU row's its process's; others the file's lowest rank."""
        by_process = self.rank_of_process
        n = len(keep)
        ranks = []
        for d, p, t in zip(device or [None] * n, gpid or [None] * n, gtid or [None] * n):
            if d is not None and self.rank_mode == "device":
                ranks.append(d)
            elif p is not None or t is not None:
                ranks.append(by_process.get(process_key(p if p is not None else t), self.lowest_rank))
            else:  # a GPU's name row: the rank of the process that drives it
                ranks.append(self.rank_of_gpu.get(d, self.lowest_rank))
        ranks = [r for r, k in zip(ranks, keep) if k]
        columns = [pa.array(ranks, pa.int32())] + batch.columns
        return pa.RecordBatch.from_arrays(columns, names=["rank"] + batch.schema.names)


def _args(values: dict[str, Any]) -> str | None:
    kept = {k: _text(v) if isinstance(v, bytes) else v for k, v in values.items() if v is not None}
    return json.dumps(kept, default=str) if kept else None


def _text(value: Any) -> str | None:
    """A value read where nsys writes text: a blob or a number from a crafted file as text."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)
