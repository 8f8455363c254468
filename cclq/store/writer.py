"""Writes a reader's record batches to one zstd Parquet file under ``tmp/``.

The file only becomes visible when a catalog snapshot names it (``Warehouse.commit``),
so a crash or a parse error midway leaves nothing behind but a temp file that the
next ingest sweeps away. Every row gets the ``trace`` and ``rank`` it belongs to as
its first two columns (``schema.data_file_schema``).
"""

from __future__ import annotations

import os
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from cclq.schema import EVENT_SCHEMA, data_file_schema

COMPRESSION = "zstd"
# Row groups of rewritten (compacted, split) files: big enough for few footers and pages,
# small enough for DuckDB to scan a file with several threads.
ROW_GROUP_ROWS = 131_072
# zstd everywhere except the low-cardinality columns that every query filters on: their
# pages are a few dictionary indices, zstd saves nothing on them (files within 0.5%),
# and its per-page setup was the largest single cost of scanning a warehouse of many
# small files (one per rank). LZ4 decompresses those pages for nearly nothing.
_LZ4_COLUMNS = {"trace", "rank", "file_id", "ph", "cat", "cat_raw", "bp", "scope"}


def _column_options(schema: pa.Schema) -> tuple[dict[str, str], list[str]]:
    """(compression per column, columns to dictionary-encode) for a data file schema.

    Dictionaries for text only (and the constant rank): timestamps, ids and sizes are
    nearly all distinct, so a dictionary for them is as big as the data and adds a page
    per column that every scan decompresses. Measured: event files 40-45% smaller on
    real Kineto traces.
    """
    compression = {
        f.name + (".list.element" if pa.types.is_list(f.type) else ""): "lz4" if f.name in _LZ4_COLUMNS else COMPRESSION
        for f in schema
    }
    dictionary = [f.name for f in schema if f.type == pa.string() or f.name == "rank"]
    return compression, dictionary


_POOL: dict[int, ThreadPoolExecutor] = {}  # by process id: a forked child starts its own


def _encoder_pool() -> ThreadPoolExecutor:
    """The one encoding thread of this process, shared by every writer (a file's batches
    still go in order: each writer waits for its previous one). A thread started and
    stopped per file was a measurable share of ingesting thousands of small traces."""
    pid = os.getpid()
    if pid not in _POOL:
        _POOL.clear()  # a pool inherited through fork has no thread in this process
        _POOL[pid] = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cclq-parquet")
    return _POOL[pid]


class DataFileWriter:
    """Encodes and compresses on a background thread while the parser goes on.

    pyarrow releases the GIL while it encodes a row group, so the zstd work overlaps
    with the (GIL-bound) parsing. At most one batch waits, which keeps memory bounded
    by two batches. ``rows`` counts what was written.
    """

    def __init__(self, path: Path, trace: str, rank: int, schema: pa.Schema = EVENT_SCHEMA) -> None:
        self.path = path
        self.trace = trace
        self.rank = rank
        self.schema = data_file_schema(schema)
        self.rows = 0
        self._writer: pq.ParquetWriter | None = None
        self._pool = _encoder_pool()
        self._pending: Future[None] | None = None

    def _write(self, batch: pa.RecordBatch | pa.Table) -> None:
        if self._writer is None:
            self._writer = open_data_writer(self.path, self.schema)
        if isinstance(batch, pa.Table):  # the fast reader's: its chunks go into one row group without a copy
            self._writer.write_table(with_keys(batch, self.trace, self.rank, self.schema))
        else:
            self._writer.write_batch(with_keys(batch, self.trace, self.rank, self.schema))

    def write(self, batch: pa.RecordBatch | pa.Table) -> None:
        if self._pending is not None:
            self._pending.result()  # surfaces write errors and bounds the queue
        self.rows += batch.num_rows
        self._pending = self._pool.submit(self._write, batch)

    def close(self) -> None:
        try:
            if self._pending is not None:
                self._pending.result()
        finally:
            self._pending = None
        if self._writer is None:  # no rows: still write a valid, empty file
            self._writer = open_data_writer(self.path, self.schema)
        self._writer.close()

    def discard(self) -> None:
        try:
            if self._pending is not None:
                self._pending.result()
        except Exception:  # noqa: BLE001 - best effort on an error path
            pass
        self._pending = None
        if self._writer is not None:
            try:
                self._writer.close()
            except Exception:  # noqa: BLE001 - best effort on an error path
                pass
        self.path.unlink(missing_ok=True)


def with_keys(batch: pa.RecordBatch | pa.Table, trace: str, rank: int, schema: pa.Schema) -> pa.RecordBatch | pa.Table:
    """A reader's batch with its ``trace`` and ``rank`` columns in front (``schema``: the
    data file's)."""
    n = batch.num_rows
    keys = [pc.fill_null(pa.nulls(n, pa.string()), trace), pc.fill_null(pa.nulls(n, pa.int32()), rank)]
    if isinstance(batch, pa.Table):
        return pa.Table.from_arrays(keys + batch.columns, schema=schema)
    return pa.RecordBatch.from_arrays(keys + batch.columns, schema=schema)


class SharedDataFileWriter:
    """One data file for several small input files of one trace (``cclq.ingest.parse``'s
    groups). Each file's rows are appended whole, once its parse has succeeded, so the
    file never holds part of an input file. Rows are written in row groups of up to
    ``ROW_GROUP_ROWS`` (as compaction writes them), not one per input file: a column
    chunk has a fixed cost, and eight DLRM rank files (26k rows) took 37 ms of CPU as
    eight row groups against 20 ms as one, in a file 45% smaller. Written on the calling
    thread: less than starting a thread per file cost. The catalog's ``parts`` then
    points every one of those input files at this data file, as compaction would have,
    without a second pass."""

    def __init__(self, path: Path, schema: pa.Schema = EVENT_SCHEMA) -> None:
        self.path = path
        self.schema = data_file_schema(schema)
        self._writer: pq.ParquetWriter | None = None  # opened with the first rows (_flush)
        self._pending: list[pa.Table] = []
        self._held = 0

    def append(self, trace: str, rank: int, pieces: list[pa.RecordBatch | pa.Table]) -> int:
        """Adds one input file's batches (its trace and rank); returns its rows."""
        rows = 0
        for p in pieces:
            if p.num_rows:
                table = p if isinstance(p, pa.Table) else pa.Table.from_batches([p])
                self._pending.append(with_keys(table, trace, rank, self.schema))
                rows += p.num_rows
        self._held += rows
        if self._held >= ROW_GROUP_ROWS:
            self._flush()
        return rows

    def _flush(self) -> None:
        if self._pending:
            table = pa.concat_tables(self._pending)
            if self._writer is None:
                # the columns NULL in every row of the first rows (half of a Kineto trace's:
                # XLA's, collectives' on a CPU op) stored uncompressed: there is nothing to
                # compress, and a zstd context per column chunk was 15% of the encoding of
                # DLRM's eight rank files (22.9 -> 19.4 ms, the same 305 KB)
                empty = {n for n, column in zip(table.column_names, table.columns) if column.null_count == len(column)}
                self._writer = open_data_writer(self.path, self.schema, uncompressed=empty)
            self._writer.write_table(table, row_group_size=ROW_GROUP_ROWS)
        self._pending, self._held = [], 0

    def close(self) -> None:
        self._flush()
        if self._writer is None:  # no rows: still a valid, empty file
            self._writer = open_data_writer(self.path, self.schema)
        self._writer.close()

    def discard(self) -> None:
        self._pending = []
        try:
            if self._writer is not None:
                self._writer.close()
        except Exception:  # noqa: BLE001 - best effort on an error path
            pass
        self.path.unlink(missing_ok=True)


def keep_input_files(path: Path, file_ids: set[str]) -> None:
    """Rewrites a shared data file in place with only the rows of ``file_ids`` (input
    files of it that could not be committed leave it: their rows must not be read)."""
    table = pq.read_table(path)
    kept = table.filter(pc.is_in(table.column("file_id"), value_set=pa.array(sorted(file_ids), pa.string())))
    target = path.with_name(path.name + ".kept")
    writer = open_data_writer(target, kept.schema)
    try:
        writer.write_table(kept, row_group_size=ROW_GROUP_ROWS)
    finally:
        writer.close()
    os.replace(target, path)


def open_data_writer(
    path: Path, schema: pa.Schema, uncompressed: frozenset[str] | set[str] = frozenset()
) -> pq.ParquetWriter:
    # store_schema=False: no base64 copy of the Arrow schema in every footer (4 KB of the
    # 11 KB footer of a 57-column file). The Parquet types say everything (string, int64,
    # double, list<int64>), and footers are what a scan of many small files pays for.
    # ``uncompressed``: columns stored without compression (known to hold only NULLs).
    compression, dictionary = _column_options(schema)
    for key in compression:
        if key.split(".")[0] in uncompressed:
            compression[key] = "none"
    return pq.ParquetWriter(path, schema, compression=compression, use_dictionary=dictionary, store_schema=False)


def rewrite_rank(path: Path, rank: int) -> Path:
    """A copy of a temp data file with every row's ``rank`` set to ``rank`` (for a file
    whose rank was a guess that had to move); the original is removed."""
    table = pq.read_table(path)
    n = table.num_rows
    i = table.schema.get_field_index("rank")
    table = table.set_column(i, table.schema.field(i), pc.fill_null(pa.nulls(n, pa.int32()), rank))
    target = path.with_name(f"{path.stem}.r{rank}.parquet")
    writer = open_data_writer(target, table.schema)
    try:
        writer.write_table(table)
    finally:
        writer.close()
    path.unlink()
    return target
