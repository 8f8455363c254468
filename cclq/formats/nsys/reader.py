"""Nsight Systems SQLite exports as a reader: which ranks an export holds (``prepare``),
then its rows (``read``, by ``rows.TableRows``)."""

from __future__ import annotations

import re
from typing import Any

from cclq.formats.base import BatchSink, Detected, Prepared, ProgressFn, ReadOptions, ReadResult, rank_from_name
from cclq.formats.limits import DEFAULT_LIMITS
from cclq.formats.nsys.export import (
    GPU_TABLES,
    NVTX_THREAD_NAMES,
    Export,
    int_sql,
    process_key,
    quote_ident,
)
from cclq.formats.nsys.rows import TableRows

_MPI_RANK_NAME = re.compile(r"^MPI Rank (\d+)$")


class NsysReader:
    """Nsight Systems SQLite exports (``detect`` kind ``nsys_sqlite``)."""

    name = "nsys_sqlite/sqlite3"
    tables = ("events",)

    def __init__(self, options: ReadOptions | None = None) -> None:
        self.limits = options.limits if options is not None else DEFAULT_LIMITS

    # -- prepare --------------------------------------------------------------
    def prepare(self, path: str, detected: Detected) -> Prepared:
        ex = Export(path, self.limits)
        try:
            return self._prepare(ex, path)
        finally:
            ex.close()

    def _prepare(self, ex: Export, path: str) -> Prepared:
        session = 0
        if ex.has("TARGET_INFO_SESSION_START_TIME"):
            ex.require("TARGET_INFO_SESSION_START_TIME", "utcEpochNs")
            row = ex.query("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME LIMIT 1")
            session = row[0][0] if row and type(row[0][0]) is int else 0
        # which process drives which GPU (most of its kernels and copies)
        work: dict[int, dict[int, int]] = {}  # process key -> device -> activities
        for table in GPU_TABLES:
            if ex.has(table):
                ex.require(table, "deviceId", "globalPid")
                for gpid, device, n in ex.query(
                    f"SELECT {int_sql('globalPid')}, {int_sql('deviceId')}, count(*) FROM {quote_ident(table)} "
                    "GROUP BY 1, 2"
                ):
                    if gpid is None or device is None:
                        continue
                    work.setdefault(process_key(gpid), {}).setdefault(device, 0)
                    work[process_key(gpid)][device] += n
        devices = sorted({d for per in work.values() for d in per})
        mpi = mpi_ranks(ex)
        prepared = Prepared(metadata={"session_start_ns": session, "schema": ex.version})
        device_of = {p: max(per, key=lambda d: (per[d], -d)) for p, per in work.items()}
        prepared.metadata["device_of_process"] = device_of
        prepared.metadata["devices"] = devices
        prepared.metadata["device_properties"] = device_properties(ex)
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
        ex = Export(path, self.limits)
        try:
            return TableRows(ex, prepared, file_id, sinks["events"], progress).run()
        finally:
            ex.close()


def mpi_ranks(ex: Export) -> dict[int, int]:
    """process key -> MPI rank: nsys's ``MPI_RANKS`` table, else NVTX thread names
    ``MPI Rank N`` (what nsys's MPI tracing records in older versions)."""
    ranks: dict[int, int] = {}
    if ex.has("MPI_RANKS"):
        ex.require("MPI_RANKS", "globalTid", "rank")
        for gtid, rank in ex.query(f"SELECT {int_sql('globalTid')}, {int_sql('rank')} FROM MPI_RANKS"):
            if gtid is not None and rank is not None:
                ranks[process_key(gtid)] = rank
    if not ranks and ex.has("NVTX_EVENTS") and {"eventType", "text", "globalTid"} <= ex.columns("NVTX_EVENTS"):
        for gtid, text in ex.query(
            f"SELECT {int_sql('globalTid')}, text FROM NVTX_EVENTS "
            f"WHERE eventType IN {NVTX_THREAD_NAMES} AND text LIKE 'MPI Rank %'"
        ):
            m = _MPI_RANK_NAME.match(text) if isinstance(text, str) else None
            if m and gtid is not None and len(m.group(1)) < 10:
                ranks[process_key(gtid)] = int(m.group(1))
    return ranks


def device_properties(ex: Export) -> list[dict[str, Any]]:
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
    rows = ex.query(f"SELECT {', '.join(c if c in texts else int_sql(c) for c, _ in present)} FROM TARGET_INFO_GPU")
    return [dict(zip((k for _, k in present), row)) for row in rows if row[0] is not None]
