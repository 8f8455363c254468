"""Nsight Systems SQLite exports (``nsys export --type sqlite``), read with ``sqlite3``.

Every activity becomes an ``events`` row in the same shape a Kineto trace gives, so that
``kernels``, ``gpu_ops_classified``, ``collectives`` and the GPU metrics run unchanged:

===========================================  ==================================================
nsys table                                   events rows
===========================================  ==================================================
``CUPTI_ACTIVITY_KIND_KERNEL``               ``cat = 'kernel'``; name = the demangled name
                                             (``StringIds``), short name in ``args``; device,
                                             stream, correlation, grid, block, registers, shared
                                             memory; ``blocks_per_sm`` = grid blocks / the GPU's
                                             SM count, as CUPTI gives Kineto
``CUPTI_ACTIVITY_KIND_MEMCPY`` / ``_MEMSET``  ``gpu_memcpy`` / ``gpu_memset``, named as Kineto
                                             names them (``Memcpy HtoD (Pageable -> Device)``),
                                             with ``bytes`` and the copy kind
``CUPTI_ACTIVITY_KIND_SYNCHRONIZATION``      ``cuda_sync`` (``Event Sync``, ``Stream Sync``, ...)
``CUPTI_ACTIVITY_KIND_RUNTIME`` / ``_DRIVER``  ``cuda_runtime`` / ``cuda_driver`` (API names without
                                             nsys's ``_v3020`` version suffix), with correlation
``NVTX_EVENTS``                              ranges: ``user_annotation`` (``cat_raw = 'nvtx'``,
                                             the domain in ``args``); marks: instants; thread
                                             names (``MPI Rank 3``): ``thread_name`` metadata
``OSRT_API``, ``MPI_*_EVENTS``                ``os_runtime``, ``mpi``
``PROCESSES``, ``ThreadNames``               ``process_name`` / ``thread_name`` metadata (``M``)
===========================================  ==================================================

GPU rows have ``pid`` = the device and ``tid`` = the stream (as in Kineto); CPU rows the
OS pid and tid from nsys's ``globalTid``. Time: nsys counts integer ns from the session
start; ``TARGET_INFO_SESSION_START_TIME.utcEpochNs`` is added, so ``ts_ns`` is epoch ns.

Ranks. A file whose GPU work comes from one process is one rank: the file name's number
(``nsys_3.sqlite``), else the process's MPI rank (``MPI_RANKS``, or NVTX's thread name
``MPI Rank N`` that nsys's MPI tracing writes), else ingest's default. An export of a
whole node (several processes, or one process on several GPUs) holds several ranks:
each process's MPI rank when every GPU process has one, else each GPU is a rank (its CUDA
device id); CPU rows go with their process's GPU, rows of processes without GPU work
with the lowest rank.

A table that an export lacks is simply absent (no memsets recorded); a table without a
column cclq needs fails the file with a message naming both (nsys changes its schema
between versions).

An export is a file like any other input, so it is read as untrusted: opened read-only
and ``immutable``; only tables named as Nsight names them (``_NSIGHT_NAME``) are seen,
and every table name goes into SQL through ``quote_ident``; SQLite's temp store is kept
in memory under a heap bound, its values under the string bound, and its run time under
a deadline (``cclq.formats.limits``); values that are not integers where nsys writes
integers are read as NULL, and times whose epoch value leaves int64 are dropped as
``bad ts`` / ``bad dur``, as the JSON readers do.
"""

from __future__ import annotations

import json
import re
import sqlite3
import sys
from collections.abc import Iterator
from typing import Any, overload

import pyarrow as pa
import pyarrow.compute as pc

from cclq.errors import TraceFileError, UnsupportedFormat
from cclq.formats.base import (
    BatchSink,
    Detected,
    Prepared,
    ProgressFn,
    ReadOptions,
    ReadResult,
    rank_from_name,
    record_batch,
)
from cclq.formats.limits import (
    DEFAULT_LIMITS,
    ReadLimits,
    sqlite_too_hungry,
    sqlite_too_slow,
    sqlite_value_too_long,
)
from cclq.schema import EVENT_SCHEMA

BATCH_ROWS = 32768
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
# NVTX event types (ENUM_NSYS_EVENT_TYPE)
_NVTX_RANGES = (59, 60, 70, 71)  # push/pop and start/end ranges (NVTX and NVTXt)
_NVTX_MARKS = (34, 65)
_NVTX_THREAD_NAMES = (39, 72)
_NVTX_DOMAIN_CREATE = 75
_MPI_RANK_NAME = re.compile(r"^MPI Rank (\d+)$")
_API_VERSION = re.compile(r"_v\d+$")
_NSYS_TABLES = (
    "TARGET_INFO_SESSION_START_TIME",
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "NVTX_EVENTS",
    "META_DATA_EXPORT",
    "EXPORT_META_DATA",
    "ThreadNames",
)


# What Nsight Systems names its tables (``CUPTI_ACTIVITY_KIND_KERNEL``, ``StringIds``,
# ``MPI_P2P_EVENTS``): a letter, then letters, digits and underscores. Other tables are
# not nsys's and are never read.
_NSIGHT_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,127}")
_INT64 = (-(1 << 63), (1 << 63) - 1)


def quote_ident(name: str) -> str:
    """A SQLite identifier as SQL text: the one way a name from a file enters SQL here."""
    return '"' + name.replace('"', '""') + '"'


def _int_sql(expr: str) -> str:
    """``expr`` when SQLite holds an integer there, else NULL (a text in an integer column)."""
    return f"CASE WHEN typeof({expr}) = 'integer' THEN {expr} END"


def _uri(path: str) -> str:
    from urllib.parse import quote

    return f"file:{quote(path)}?mode=ro&immutable=1"


def _open(path: str, limits: ReadLimits = DEFAULT_LIMITS) -> sqlite3.Connection:
    """The export, read-only: ``immutable`` asks SQLite for no locks and no journal, so a
    file on a read-only disk (or being copied) is read as it is. Temp tables and sorts go
    to memory, under SQLite's heap limit (process-wide: one export is read per parser
    process at a time), values under the string bound; the deadline is ``_Deadline``'s."""
    con = sqlite3.connect(_uri(path), uri=True, check_same_thread=False)
    con.text_factory = lambda b: b.decode("utf-8", errors="replace")
    con.execute("PRAGMA query_only = true")
    con.execute("PRAGMA trusted_schema = false")
    con.execute("PRAGMA temp_store = MEMORY")
    con.execute(f"PRAGMA hard_heap_limit = {int(limits.max_sqlite_bytes)}")
    if sys.version_info >= (3, 11):  # Connection.setlimit is 3.11+; on 3.10 the heap limit above bounds it
        con.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, min(int(limits.max_string_bytes), (1 << 31) - 1))
    return con


class _Deadline:
    """Interrupts SQLite past ``max_sqlite_seconds`` since the file was opened."""

    def __init__(self, con: sqlite3.Connection, seconds: float) -> None:
        import time

        self._now = time.monotonic
        self.until = time.monotonic() + seconds
        self.passed = False
        con.set_progress_handler(self._check, 10_000)

    def _check(self) -> int:
        if self._now() > self.until:
            self.passed = True
            return 1
        return 0


def _tables(con: sqlite3.Connection) -> set[str]:
    return {
        name
        for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        if isinstance(name, str) and _NSIGHT_NAME.fullmatch(name)
    }


def _columns(con: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in con.execute(f"PRAGMA table_info({quote_ident(table)})")}


def detect_sqlite(path: str) -> Detected:
    """A SQLite file is an Nsight Systems export when it has ``StringIds`` and nsys tables."""
    try:
        con = _open(path)
        try:
            tables = _tables(con)
        finally:
            con.close()
    except sqlite3.Error as e:
        raise TraceFileError(path, f"not a readable SQLite database ({e})") from e
    if "StringIds" in tables and any(t in tables for t in _NSYS_TABLES):
        return Detected("nsys_sqlite", "nsys", False, b"")
    raise UnsupportedFormat(path, "a SQLite database, but not an Nsight Systems export (no StringIds and nsys tables)")


class _Export:
    """An open export: which tables and columns it has, and the checks on them."""

    def __init__(self, path: str, limits: ReadLimits = DEFAULT_LIMITS) -> None:
        self.path = path
        self.limits = limits
        self.version = "unknown"
        try:
            self.con = _open(path, limits)
            self.deadline = _Deadline(self.con, limits.max_sqlite_seconds)
            self.tables = _tables(self.con)
        except sqlite3.Error as e:
            raise self._error(e, "not a readable SQLite database") from e
        self._cols: dict[str, set[str]] = {}
        self.version = self._meta("EXPORT_SCHEMA_VERSION") or "unknown"

    def _error(self, e: sqlite3.Error, what: str | None = None) -> TraceFileError:
        """A SQLite error as the file's one line: a bound when one was hit."""
        text = str(e)
        if self.deadline_passed():
            return sqlite_too_slow(self.path, self.limits)
        if "too big" in text:
            return sqlite_value_too_long(self.path, self.limits)
        if "out of memory" in text:
            return sqlite_too_hungry(self.path, self.limits)
        return TraceFileError(
            self.path, f"{what} ({e})" if what else f"Nsight Systems export (schema {self.version}): {e}"
        )

    def deadline_passed(self) -> bool:
        deadline = getattr(self, "deadline", None)
        return deadline is not None and deadline.passed

    def has(self, table: str) -> bool:
        return table in self.tables

    def columns(self, table: str) -> set[str]:
        if table not in self._cols:
            self._cols[table] = _columns(self.con, table)
        return self._cols[table]

    def require(self, table: str, *columns: str) -> None:
        missing = [c for c in columns if c not in self.columns(table)]
        if missing:
            raise TraceFileError(
                self.path,
                f"Nsight Systems export (schema {self.version}): table {table} "
                f"has no column {', '.join(missing)}; cclq reads the columns of "
                "nsys 2022.2 and later",
            )

    def col(self, table: str, column: str, alias: str | None = None, expr: str | None = None) -> str:
        """``expr AS alias`` when the table has the column, else ``NULL AS alias``; an
        integer column (no ``expr``) reads NULL where the file holds something else."""
        alias = alias or column
        if column in self.columns(table):
            return f"{expr or _int_sql('t.' + column)} AS {alias}"
        return f"NULL AS {alias}"

    def query(self, sql: str, params: tuple = ()) -> list[tuple]:
        try:
            return self.con.execute(sql, params).fetchall()
        except sqlite3.Error as e:
            raise self._error(e) from e
        except MemoryError as e:  # SQLite's NOMEM: its heap bound
            raise sqlite_too_hungry(self.path, self.limits) from e

    def batches(self, sql: str) -> Iterator[list[tuple]]:
        try:
            cursor = self.con.execute(sql)
            while rows := cursor.fetchmany(BATCH_ROWS):
                yield rows
        except sqlite3.Error as e:
            raise self._error(e) from e
        except MemoryError as e:
            raise sqlite_too_hungry(self.path, self.limits) from e

    def _meta(self, key: str) -> str | None:
        for table in ("META_DATA_EXPORT", "EXPORT_META_DATA"):
            if table in self.tables:
                row = self.query(f"SELECT value FROM {quote_ident(table)} WHERE name = ?", (key,))
                if row:
                    return str(row[0][0])
        return None

    def close(self) -> None:
        self.con.close()


def _pid(global_id: int | None) -> int | None:
    """nsys packs (vm id, pid, tid) into one 64-bit ``globalTid`` / ``globalPid``."""
    return None if global_id is None else (global_id >> 24) & 0xFFFFFF


def _tid(global_tid: int | None) -> int | None:
    return None if global_tid is None else global_tid & 0xFFFFFF


@overload
def _process_key(global_id: int) -> int: ...
@overload
def _process_key(global_id: None) -> None: ...
def _process_key(global_id: int | None) -> int | None:
    """The process part of a ``globalTid`` (``globalPid`` has the thread bits zero)."""
    return None if global_id is None else global_id & ~0xFFFFFF


_GPU_TABLES = (
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
)


class NsysReader:
    """Nsight Systems SQLite exports (``detect`` kind ``nsys_sqlite``)."""

    name = "nsys_sqlite/sqlite3"
    tables = ("events",)

    def __init__(self, options: ReadOptions | None = None) -> None:
        self.limits = options.limits if options is not None else DEFAULT_LIMITS

    # -- prepare --------------------------------------------------------------
    def prepare(self, path: str, detected: Detected) -> Prepared:
        ex = _Export(path, self.limits)
        try:
            return self._prepare(ex, path)
        finally:
            ex.close()

    def _prepare(self, ex: _Export, path: str) -> Prepared:
        session = 0
        if ex.has("TARGET_INFO_SESSION_START_TIME"):
            ex.require("TARGET_INFO_SESSION_START_TIME", "utcEpochNs")
            row = ex.query("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME LIMIT 1")
            session = row[0][0] if row and type(row[0][0]) is int else 0
        # which process drives which GPU (most of its kernels and copies)
        work: dict[int, dict[int, int]] = {}  # process key -> device -> activities
        for table in _GPU_TABLES:
            if ex.has(table):
                ex.require(table, "deviceId", "globalPid")
                for gpid, device, n in ex.query(
                    f"SELECT {_int_sql('globalPid')}, {_int_sql('deviceId')}, count(*) FROM {quote_ident(table)} "
                    "GROUP BY 1, 2"
                ):
                    if gpid is None or device is None:
                        continue
                    work.setdefault(_process_key(gpid), {}).setdefault(device, 0)
                    work[_process_key(gpid)][device] += n
        devices = sorted({d for per in work.values() for d in per})
        mpi = _mpi_ranks(ex)
        prepared = Prepared(metadata={"session_start_ns": session, "schema": ex.version})
        device_of = {p: max(per, key=lambda d: (per[d], -d)) for p, per in work.items()}
        prepared.metadata["device_of_process"] = device_of
        prepared.metadata["devices"] = devices
        prepared.metadata["device_properties"] = _device_properties(ex)
        if len(work) <= 1 and len(devices) <= 1:  # one rank: the name, else the process's MPI rank
            (process,) = work or [None]
            if rank_from_name(path.rsplit("/", 1)[-1]) is None:
                rank = (
                    mpi.get(process) if process is not None else (next(iter(mpi.values())) if len(mpi) == 1 else None)
                )
                if rank is not None:
                    prepared.rank, prepared.rank_source = rank, "MPI rank"
            return prepared
        if work and all(p in mpi for p in work):  # a node's processes, each with its MPI rank
            prepared.metadata["rank_mode"] = "process"
            prepared.metadata["rank_of_process"] = {p: mpi[p] for p in work}
            prepared.rank_source = "MPI rank per process"
            prepared.ranks = sorted({mpi[p] for p in work})
        else:  # one GPU, one rank; a process's CPU rows go with its (main) GPU
            prepared.metadata["rank_mode"] = "device"
            prepared.metadata["rank_of_process"] = dict(device_of)
            prepared.rank_source = "CUDA device id (no MPI rank per process)"
            prepared.ranks = devices
            if len(devices) > 1:
                prepared.warnings.append(
                    f"{path}: {len(devices)} GPUs and no MPI rank for each of their processes; "
                    "each GPU is taken as the rank of its CUDA device id"
                )
        if len(prepared.ranks) == 1:  # several GPUs, but all of one rank
            prepared.rank, prepared.ranks = prepared.ranks[0], None
        return prepared

    # -- read -----------------------------------------------------------------
    def read(
        self,
        path: str,
        detected: Detected,
        prepared: Prepared,
        file_id: str,
        sinks: dict[str, BatchSink],
        progress: ProgressFn | None,
    ) -> ReadResult:
        ex = _Export(path, self.limits)
        try:
            return _Read(ex, prepared, file_id, sinks["events"], progress).run()
        finally:
            ex.close()


def _mpi_ranks(ex: _Export) -> dict[int, int]:
    """process key -> MPI rank: nsys's ``MPI_RANKS`` table, else NVTX thread names
    ``MPI Rank N`` (what nsys's MPI tracing records in older versions)."""
    ranks: dict[int, int] = {}
    if ex.has("MPI_RANKS"):
        ex.require("MPI_RANKS", "globalTid", "rank")
        for gtid, rank in ex.query(f"SELECT {_int_sql('globalTid')}, {_int_sql('rank')} FROM MPI_RANKS"):
            if gtid is not None and rank is not None:
                ranks[_process_key(gtid)] = rank
    if not ranks and ex.has("NVTX_EVENTS") and {"eventType", "text", "globalTid"} <= ex.columns("NVTX_EVENTS"):
        for gtid, text in ex.query(
            f"SELECT {_int_sql('globalTid')}, text FROM NVTX_EVENTS "
            f"WHERE eventType IN {_NVTX_THREAD_NAMES} AND text LIKE 'MPI Rank %'"
        ):
            m = _MPI_RANK_NAME.match(text) if isinstance(text, str) else None
            if m and gtid is not None and len(m.group(1)) < 10:
                ranks[_process_key(gtid)] = int(m.group(1))
    return ranks


def _device_properties(ex: _Export) -> list[dict[str, Any]]:
    """The GPUs as Kineto's ``deviceProperties`` lists them (``numSms`` feeds SM coverage)."""
    if not ex.has("TARGET_INFO_GPU"):
        return []
    cols = ex.columns("TARGET_INFO_GPU")
    wanted = [
        ("id", "id"),
        ("name", "name"),
        ("totalMemory", "totalGlobalMem"),
        ("smCount", "numSms"),
        ("computeMajor", "computeMajor"),
        ("computeMinor", "computeMinor"),
        ("busLocation", "busLocation"),
        ("memoryBandwidth", "memoryBandwidth"),
        ("clockRate", "clockRate"),
    ]
    present = [(c, k) for c, k in wanted if c in cols]
    if not any(c == "id" for c, _ in present):
        return []
    texts = {"name", "busLocation"}
    rows = ex.query(f"SELECT {', '.join(c if c in texts else _int_sql(c) for c, _ in present)} FROM TARGET_INFO_GPU")
    return [dict(zip((k for _, k in present), row)) for row in rows if row[0] is not None]


class _Read:
    """One pass over an export: each table's rows, as events batches."""

    def __init__(
        self, ex: _Export, prepared: Prepared, file_id: str, sink: BatchSink, progress: ProgressFn | None
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
        if not any(t in ex.tables for t in _GPU_TABLES + ("CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS")):
            raise TraceFileError(
                ex.path, f"Nsight Systems export (schema {ex.version}) without CUDA or NVTX activity: nothing to ingest"
            )
        self._metadata_events()  # first: a later NVTX thread name wins (thread_names takes the last)
        for table, fn in present:
            fn(table)
        return self.result

    # -- one table each -------------------------------------------------------
    def _kernels(self, table: str) -> None:
        ex = self.ex
        ex.require(table, "start", "end", "deviceId", "streamId", "correlationId", "globalPid")
        cols = ex.columns(table)
        name_col = "demangledName" if "demangledName" in cols else "shortName"
        ex.require(table, name_col)
        short = "LEFT JOIN StringIds AS sn ON sn.id = t.shortName" if "shortName" in cols else ""
        sql = f"""
            SELECT t.start, t.end, {_int_sql("t.deviceId")}, {_int_sql("t.streamId")},
                   {_int_sql("t.correlationId")}, {_int_sql("t.globalPid")},
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
            n = len(rows)
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
            self._emit(
                n,
                c[0],
                c[1],
                cat="kernel",
                name=c[6],
                device=c[2],
                stream=c[3],
                correlation=c[4],
                gpid=c[5],
                grid=grid,
                block=block,
                registers_per_thread=c[14],
                shared_memory_bytes=shared,
                blocks_per_sm=per_sm,
                args=args,
            )

    def _memcpys(self, table: str) -> None:
        ex = self.ex
        ex.require(table, "start", "end", "deviceId", "streamId", "correlationId", "globalPid", "bytes", "copyKind")
        sql = f"""SELECT t.start, t.end, {_int_sql("t.deviceId")}, {_int_sql("t.streamId")},
                         {_int_sql("t.correlationId")}, {_int_sql("t.globalPid")}, {_int_sql("t.bytes")},
                         {_int_sql("t.copyKind")},
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
            self._emit(
                len(rows),
                c[0],
                c[1],
                cat="gpu_memcpy",
                name=names,
                device=c[2],
                stream=c[3],
                correlation=c[4],
                gpid=c[5],
                bytes=c[6],
                memory_bw_gbps=bw,
                args=args,
            )

    def _memsets(self, table: str) -> None:
        ex = self.ex
        ex.require(table, "start", "end", "deviceId", "streamId", "correlationId", "globalPid", "bytes")
        sql = f"""SELECT t.start, t.end, {_int_sql("t.deviceId")}, {_int_sql("t.streamId")},
                         {_int_sql("t.correlationId")}, {_int_sql("t.globalPid")}, {_int_sql("t.bytes")},
                         {ex.col(table, "memKind")}, {ex.col(table, "value")}
                  FROM {quote_ident(table)} AS t"""
        for rows in ex.batches(sql):
            c = list(zip(*rows))
            names = [f"Memset ({_MEMORY_KINDS.get(k, 'Device')})" for k in c[7]]
            args = [_args({"value": v}) for v in c[8]]
            self._emit(
                len(rows),
                c[0],
                c[1],
                cat="gpu_memset",
                name=names,
                device=c[2],
                stream=c[3],
                correlation=c[4],
                gpid=c[5],
                bytes=c[6],
                args=args,
            )

    def _syncs(self, table: str) -> None:
        ex = self.ex
        ex.require(table, "start", "end", "deviceId", "streamId", "correlationId", "globalPid", "syncType")
        sql = (
            f"SELECT t.start, t.end, {_int_sql('t.deviceId')}, {_int_sql('t.streamId')}, "
            f"{_int_sql('t.correlationId')}, {_int_sql('t.globalPid')}, {_int_sql('t.syncType')} "
            f"FROM {quote_ident(table)} AS t"
        )
        for rows in ex.batches(sql):
            c = list(zip(*rows))
            names = [_SYNC_KINDS.get(k, "Unknown Sync") for k in c[6]]
            self._emit(
                len(rows),
                c[0],
                c[1],
                cat="cuda_sync",
                name=names,
                device=c[2],
                stream=c[3],
                correlation=c[4],
                gpid=c[5],
            )

    def _api(self, table: str, cat: str) -> None:
        """CPU-side calls: CUDA runtime/driver API, OS runtime, MPI."""
        ex = self.ex
        cols = ex.columns(table)
        name_col = next((c for c in ("nameId", "textId") if c in cols), "nameId")
        ex.require(table, name_col)  # fails naming nameId when neither is there
        ex.require(table, "start", "end", "globalTid")
        sql = f"""SELECT t.start, t.end, {_int_sql("t.globalTid")}, {ex.col(table, "correlationId")}, s.value
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
                ex.query(f"SELECT domainId, text FROM {quote_ident(table)} WHERE eventType = {_NVTX_DOMAIN_CREATE}")
            )
        text = "coalesce(t.text, s.value)" if "textId" in cols else "t.text"
        join = "LEFT JOIN StringIds AS s ON s.id = t.textId" if "textId" in cols else ""
        wanted = _NVTX_RANGES + _NVTX_MARKS + _NVTX_THREAD_NAMES
        sql = f"""SELECT t.start, {ex.col(table, "end", expr='t."end"')}, {_int_sql("t.globalTid")}, t.eventType,
                         {text} AS name, {ex.col(table, "domainId", expr="t.domainId")}, {ex.col(table, "category")},
                         {ex.col(table, "jsonText", expr="t.jsonText")}
                  FROM {quote_ident(table)} AS t {join}
                  WHERE t.eventType IN ({", ".join(map(str, wanted))})"""
        for rows in ex.batches(sql):
            c = list(zip(*rows))
            n = len(rows)
            ph = ["X" if t in _NVTX_RANGES else "i" if t in _NVTX_MARKS else "M" for t in c[3]]
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
            for gpid, name in ex.query(f"SELECT {_int_sql('globalPid')}, name FROM PROCESSES"):
                if _process_key(gpid) in seen:
                    rows.append((gpid, None, None, "process_name", name))
        if ex.has("ThreadNames") and {"nameId", "globalTid"} <= ex.columns("ThreadNames"):
            for gtid, name in ex.query(
                f"SELECT {_int_sql('t.globalTid')}, s.value FROM ThreadNames AS t "
                "JOIN StringIds AS s ON s.id = t.nameId"
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
            pids = [None if g is None else str(_pid(g)) for g in gtid] if gtid is not None else [None] * n
            tids = (
                [None if g is None or meta and _tid(g) == 0 else str(_tid(g)) for g in gtid]
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
                ranks.append(by_process.get(_process_key(p if p is not None else t), self.lowest_rank))
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
