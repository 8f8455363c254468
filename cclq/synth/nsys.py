"""Synthetic Nsight Systems SQLite exports, for tests: the tables and columns that
``nsys export --type sqlite`` writes (nsys 2024.x schema), holding exactly the activities
a test places, with times in integer ns from the session start.

    b = NsysExportBuilder(session_start_ns=1_700_000_000_000_000_000)
    p = b.process(pid=4242, name="python", mpi_rank=0)
    b.kernel(p, device=0, stream=7, start=1_000, end=5_000, name="ncclDevKernel_AllReduce_Sum_f32_RING_LL")
    b.write(path)
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Process:
    pid: int
    name: str
    vm: int = 0
    mpi_rank: int | None = None
    threads: dict[int, str] = field(default_factory=dict)

    @property
    def global_pid(self) -> int:
        return (self.vm << 48) | (self.pid << 24)

    def global_tid(self, tid: int | None = None) -> int:
        return self.global_pid | (self.pid if tid is None else tid)


class NsysExportBuilder:
    """Collects activities, then writes them as an nsys SQLite export."""

    def __init__(
        self,
        session_start_ns: int = 1_700_000_000_000_000_000,
        gpus: int = 1,
        sm_count: int = 132,
        mpi_ranks_table: bool = True,
    ) -> None:
        self.session_start_ns = session_start_ns
        self.gpus = gpus
        self.sm_count = sm_count
        self.mpi_ranks_table = mpi_ranks_table
        self.strings: dict[str, int] = {}
        self.processes: list[Process] = []
        self.kernels: list[tuple] = []
        self.memcpys: list[tuple] = []
        self.memsets: list[tuple] = []
        self.syncs: list[tuple] = []
        self.runtime: list[tuple] = []
        self.nvtx: list[tuple] = []
        self._correlation = 0

    def _sid(self, text: str) -> int:
        return self.strings.setdefault(text, len(self.strings) + 1)

    def process(self, pid: int, name: str = "python", mpi_rank: int | None = None) -> Process:
        p = Process(pid, name, mpi_rank=mpi_rank)
        p.threads[pid] = name
        self.processes.append(p)
        return p

    def _next_correlation(self) -> int:
        self._correlation += 1
        return self._correlation

    def kernel(
        self,
        p: Process,
        device: int,
        stream: int,
        start: int,
        end: int,
        name: str,
        grid: tuple[int, int, int] = (1, 1, 1),
        block: tuple[int, int, int] = (128, 1, 1),
        launch_at: int | None = None,
        short_name: str | None = None,
    ) -> int:
        """A kernel, and the cudaLaunchKernel that issued it (``launch_at``, default 1 us
        before it starts) on the process's main thread. Returns the correlation id."""
        corr = self._next_correlation()
        self.kernels.append(
            (
                start,
                end,
                device,
                0,
                stream,
                corr,
                p.global_pid,
                self._sid(name),
                self._sid(short_name or name.split("(")[0].split("<")[0].split()[-1]),
                grid[0],
                grid[1],
                grid[2],
                block[0],
                block[1],
                block[2],
                32,
                0,
                0,
            )
        )
        at = start - 1_000 if launch_at is None else launch_at
        self.runtime.append((at, at + 500, p.global_tid(), corr, self._sid("cudaLaunchKernel_v7000")))
        return corr

    def memcpy(
        self,
        p: Process,
        device: int,
        stream: int,
        start: int,
        end: int,
        nbytes: int,
        copy_kind: int = 1,
        src_kind: int = 0,
        dst_kind: int = 2,
    ) -> None:
        corr = self._next_correlation()
        self.memcpys.append((start, end, device, 0, stream, corr, p.global_pid, nbytes, copy_kind, src_kind, dst_kind))
        self.runtime.append((start - 1_000, start - 500, p.global_tid(), corr, self._sid("cudaMemcpyAsync_v3020")))

    def memset(self, p: Process, device: int, stream: int, start: int, end: int, nbytes: int) -> None:
        self.memsets.append((start, end, device, 0, stream, self._next_correlation(), p.global_pid, nbytes, 2, 0))

    def sync(self, p: Process, device: int, stream: int, start: int, end: int, sync_type: int = 3) -> None:
        self.syncs.append((start, end, device, 0, stream, self._next_correlation(), p.global_pid, sync_type, 0))

    def nvtx_range(self, p: Process, start: int, end: int, text: str, domain: str | None = None) -> None:
        self.nvtx.append((start, end, 59, None, text, p.global_tid(), None, 0, None))

    def nvtx_thread_name(self, p: Process, text: str) -> None:
        self.nvtx.append((0, None, 39, None, text, p.global_tid(), None, 0, None))

    def write(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.unlink(missing_ok=True)
        con = sqlite3.connect(path)
        ddl = [
            "CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL)",
            "CREATE TABLE META_DATA_EXPORT (name TEXT, value TEXT)",
            "CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER, utcTime TEXT, localTime TEXT)",
            "CREATE TABLE TARGET_INFO_GPU (vmId INTEGER, id INTEGER, name TEXT, busLocation TEXT, totalMemory INTEGER, "
            "smCount INTEGER, computeMajor INTEGER, computeMinor INTEGER)",
            "CREATE TABLE PROCESSES (globalPid INTEGER, pid INTEGER, name TEXT)",
            "CREATE TABLE ThreadNames (nameId INTEGER, priority INTEGER, globalTid INTEGER)",
            "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER, "
            "contextId INTEGER, streamId INTEGER, correlationId INTEGER, globalPid INTEGER, demangledName INTEGER, "
            "shortName INTEGER, gridX INTEGER, gridY INTEGER, gridZ INTEGER, blockX INTEGER, blockY INTEGER, "
            "blockZ INTEGER, registersPerThread INTEGER, staticSharedMemory INTEGER, dynamicSharedMemory INTEGER)",
            "CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER, end INTEGER, deviceId INTEGER, contextId INTEGER, "
            "streamId INTEGER, correlationId INTEGER, globalPid INTEGER, bytes INTEGER, copyKind INTEGER, "
            "srcKind INTEGER, dstKind INTEGER)",
            "CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (start INTEGER, end INTEGER, deviceId INTEGER, contextId INTEGER, "
            "streamId INTEGER, correlationId INTEGER, globalPid INTEGER, bytes INTEGER, memKind INTEGER, "
            "value INTEGER)",
            "CREATE TABLE CUPTI_ACTIVITY_KIND_SYNCHRONIZATION (start INTEGER, end INTEGER, deviceId INTEGER, "
            "contextId INTEGER, streamId INTEGER, correlationId INTEGER, globalPid INTEGER, syncType INTEGER, "
            "eventId INTEGER)",
            "CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER, end INTEGER, globalTid INTEGER, "
            "correlationId INTEGER, nameId INTEGER)",
            "CREATE TABLE NVTX_EVENTS (start INTEGER, end INTEGER, eventType INTEGER, rangeId INTEGER, text TEXT, "
            "globalTid INTEGER, textId INTEGER, domainId INTEGER, jsonText TEXT)",
        ]
        if self.mpi_ranks_table:
            ddl.append("CREATE TABLE MPI_RANKS (globalTid INTEGER, rank INTEGER)")
        for statement in ddl:
            con.execute(statement)
        con.executemany(
            "INSERT INTO META_DATA_EXPORT VALUES (?, ?)",
            [("EXPORT_SCHEMA_VERSION", "3.13.2"), ("EXPORT_PRODUCT_NAME", "cclq.synth.nsys")],
        )
        con.execute("INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (?, '', '')", (self.session_start_ns,))
        con.executemany(
            "INSERT INTO TARGET_INFO_GPU VALUES (0, ?, 'NVIDIA H100 80GB HBM3', ?, 85899345920, ?, 9, 0)",
            [(d, f"0000:{d:02x}:00.0", self.sm_count) for d in range(self.gpus)],
        )
        for p in self.processes:
            con.execute("INSERT INTO PROCESSES VALUES (?, ?, ?)", (p.global_pid, p.pid, p.name))
            for tid, name in p.threads.items():
                con.execute("INSERT INTO ThreadNames VALUES (?, 10, ?)", (self._sid(name), p.global_tid(tid)))
            if p.mpi_rank is not None and self.mpi_ranks_table:
                con.execute("INSERT INTO MPI_RANKS VALUES (?, ?)", (p.global_tid(), p.mpi_rank))
        con.executemany(f"INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES ({', '.join('?' * 18)})", self.kernels)
        con.executemany(f"INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES ({', '.join('?' * 11)})", self.memcpys)
        con.executemany(f"INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET VALUES ({', '.join('?' * 10)})", self.memsets)
        con.executemany(f"INSERT INTO CUPTI_ACTIVITY_KIND_SYNCHRONIZATION VALUES ({', '.join('?' * 9)})", self.syncs)
        con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, ?, ?, ?)", self.runtime)
        con.executemany(f"INSERT INTO NVTX_EVENTS VALUES ({', '.join('?' * 9)})", self.nvtx)
        con.executemany("INSERT INTO StringIds VALUES (?, ?)", [(i, s) for s, i in self.strings.items()])
        con.commit()
        con.close()
        return path
