"""Compaction: a trace's many small data files rewritten as a few, query results unchanged.

Ingest writes one data file per input file and table, except for small files (up to 8 MB),
which it writes a group at a time into one data file (``cclq.ingest.parse.parse_group``): a
trace of 8 rank files of 20 MB is 8 data files, each with its footer and a page per column
that every query opens and decompresses. Compaction concatenates a
trace's files of one table into files of up to ``TARGET_ROWS`` rows, in row groups of
``ROW_GROUP_ROWS``, ordered by rank and input file. Every row keeps all its columns (its
trace, rank, file_id, event_idx ...), so no query result changes; the catalog's ``parts``
then points several input files at one data file.

It runs as ``cclq compact`` and, for the traces an ingest touched, at the end of that
ingest when a trace has ``MIN_FILES`` or more data files of one table averaging under
``SMALL_ROWS`` rows. Like every write it is one snapshot commit: readers see the old
files or the new, never a mix, and the old files go when no reader holds them. When one
input file of a compacted data file changes or leaves, ``Warehouse.commit`` rewrites
that data file without it (``split_shared``), so rows of an old version never linger.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from cclq.proc import init_worker_process
from cclq.store.catalog import CatalogState
from cclq.store.warehouse import Warehouse
from cclq.store.writer import ROW_GROUP_ROWS, open_data_writer

MIN_FILES = 4  # a trace's data files of one table before an ingest compacts them
SMALL_ROWS = 262_144  # ... when they average fewer rows than this
TARGET_ROWS = 4_194_304  # rows per compacted file (a larger trace gets several)


@dataclass
class Compaction:
    """One compacted group: the input files of one (trace, table) and what they became."""

    trace: str
    table: str
    files_before: int  # data files
    files_after: int
    rows: int


def plan(
    state: CatalogState, traces: set[str] | None = None, min_files: int = MIN_FILES, small_rows: int = SMALL_ROWS
) -> dict[tuple[str, str], list[str]]:
    """(trace, table) -> its data files, for the groups worth compacting: ``min_files``
    or more files averaging under ``small_rows`` rows (``traces``: only those)."""
    rows_of: dict[tuple[str, str], dict[str, int]] = {}
    for parts in state.parts.values():
        for p in parts:
            if traces is not None and p["trace"] not in traces:
                continue
            paths = rows_of.setdefault((p["trace"], p["table_name"]), {})
            paths[p["path"]] = paths.get(p["path"], 0) + (p["rows"] or 0)
    return {
        key: sorted(paths)
        for key, paths in rows_of.items()
        if len(paths) >= min_files and sum(paths.values()) / len(paths) < small_rows
    }


def rewrite(
    wh: Warehouse,
    state: CatalogState,
    groups: dict[tuple[str, str], list[str]],
    target_rows: int = TARGET_ROWS,
    jobs: int = 1,
) -> tuple[list[tuple[Path, str]], list[Compaction]]:
    """Writes the compacted files of ``groups`` under ``tmp/`` and points ``state``'s parts
    at them; returns the (temp file, data path) moves for ``Warehouse.commit``. With
    ``jobs`` > 1 the files are written by that many forked processes (groups are
    independent; decoding and re-encoding Parquet is CPU work that one core does at
    ~0.4 M rows/s)."""
    moves: list[tuple[Path, str]] = []
    done: list[Compaction] = []
    wanted = {path for paths in groups.values() for path in paths}
    owners: dict[str, list[dict]] = {}  # data file -> the parts rows (input files) in it
    for parts in state.parts.values():
        for p in parts:
            if p["path"] in wanted:
                owners.setdefault(p["path"], []).append(p)
    writes: list[tuple[list[str], Path]] = []  # (members, temp file), in the order of ``moves``
    for (trace, table), paths in sorted(groups.items()):
        # in rank, input file order
        ordered = sorted(paths, key=lambda path: min((p["rank"], p["file_id"]) for p in owners[path]))
        bins: list[list[str]] = [[]]
        rows = 0
        for path in ordered:
            n = sum(p["rows"] or 0 for p in owners[path])
            if bins[-1] and rows + n > target_rows:
                bins.append([])
                rows = 0
            bins[-1].append(path)
            rows += n
        total = 0
        for members in bins:
            tmp = wh.tmp_path()
            rel = wh.new_data_path(table, trace, "compact")
            writes.append((members, tmp))
            moves.append((tmp, rel))
            for path in members:
                for p in owners[path]:
                    state.parts[p["file_id"]] = [
                        dict(q, path=rel) if q["path"] == path else q for q in state.parts[p["file_id"]]
                    ]
                    total += p["rows"] or 0
        done.append(Compaction(trace, table, len(paths), len(bins), total))
    wh.ensure_local(sorted({m for members, _ in writes for m in members}))  # a remote warehouse's copy
    root = str(wh.root)
    if jobs > 1 and len(writes) > 1:
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(
            max_workers=min(jobs, len(writes)),
            mp_context=mp.get_context("fork"),
            initializer=init_worker_process,
            initargs=(wh.lock_fd, os.getpid()),
        ) as pool:
            list(pool.map(_write_compacted, [root] * len(writes), *zip(*writes), chunksize=4))
    else:
        for members, tmp in writes:
            _write_compacted(root, members, tmp)
    return moves, done


def _write_compacted(root: str, members: list[str], tmp: Path) -> None:
    """One compacted file: ``members`` (data files under ``root``) concatenated into
    ``tmp``, streamed: at most a row group (``ROW_GROUP_ROWS``) and one batch in memory,
    whatever the size of the trace (a whole 4M-row bin held as one table took 1.5 GB)."""
    writer: pq.ParquetWriter | None = None
    pending: list[pa.RecordBatch] = []
    held = 0
    try:
        for path in members:
            for batch in pq.ParquetFile(Path(root) / path).iter_batches(batch_size=ROW_GROUP_ROWS // 4):
                if writer is None:
                    writer = open_data_writer(tmp, batch.schema)
                pending.append(batch)
                held += batch.num_rows
                if held >= ROW_GROUP_ROWS:  # one full row group out, the rest kept
                    table = pa.Table.from_batches(pending)
                    writer.write_table(table.slice(0, ROW_GROUP_ROWS), row_group_size=ROW_GROUP_ROWS)
                    pending = table.slice(ROW_GROUP_ROWS).to_batches()
                    held -= ROW_GROUP_ROWS
        if writer is None:  # members without rows: an empty file of their schema
            writer = open_data_writer(tmp, pq.ParquetFile(Path(root) / members[0]).schema_arrow)
        if pending:
            writer.write_table(pa.Table.from_batches(pending), row_group_size=ROW_GROUP_ROWS)
    finally:
        if writer is not None:
            writer.close()


def compact(
    wh: Warehouse,
    traces: list[str] | None = None,
    min_files: int = 2,
    small_rows: int = SMALL_ROWS,
    target_rows: int = TARGET_ROWS,
    jobs: int | None = None,
) -> list[Compaction]:
    """``cclq compact``: compacts every trace (or ``traces``) whose data files of a table
    are ``min_files`` or more and small, as one commit (``jobs`` processes; default one
    per CPU)."""
    with wh.lock():  # which sweeps what a killed writer left, also when there is nothing to compact
        state = wh.read_state()
        groups = plan(state, None if traces is None else set(traces), min_files, small_rows)
        if not groups:
            return []
        moves, done = rewrite(wh, state, groups, target_rows, jobs=jobs or os.cpu_count() or 1)
        wh.commit(state, moves)
        wh.collect_garbage()
        wh.clean_tmp()
    return done
