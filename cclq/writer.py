"""Writes a reader's record batches to one zstd Parquet file under ``tmp/``.

The file only becomes visible when the warehouse renames it into its partition,
so a crash or a parse error midway leaves nothing behind but a temp file that the
next ingest sweeps away.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from cclq.schema import EVENT_SCHEMA

COMPRESSION = "zstd"
# Dictionary-encode text only. Timestamps, ids and sizes are nearly all distinct, so a
# dictionary for them is as big as the data and adds a page per column that every scan
# decompresses. Measured: event files 40-45% smaller on real Kineto traces.
DICTIONARY_COLUMNS = [f.name for f in EVENT_SCHEMA if f.type == pa.string()]
# zstd everywhere except the low-cardinality columns that every query filters on: their
# pages are a few dictionary indices, zstd saves nothing on them (files within 0.5%),
# and its per-page setup was the largest single cost of scanning a warehouse of many
# small files (one per rank). LZ4 decompresses those pages for nearly nothing.
_LZ4_COLUMNS = {"file_id", "ph", "cat", "cat_raw", "bp", "scope"}
COLUMN_COMPRESSION = {
    f.name + (".list.element" if pa.types.is_list(f.type) else ""): "lz4" if f.name in _LZ4_COLUMNS else COMPRESSION
    for f in EVENT_SCHEMA
}


class EventFileWriter:
    """Encodes and compresses on a background thread while the parser goes on.

    pyarrow releases the GIL while it encodes a row group, so the zstd work overlaps
    with the (GIL-bound) JSON parsing. At most one batch waits, which keeps memory
    bounded by two batches.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._writer: pq.ParquetWriter | None = None
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cclq-parquet")
        self._pending: Future[None] | None = None

    def _write(self, batch: pa.RecordBatch | pa.Table) -> None:
        if self._writer is None:
            self._writer = _open_writer(self.path)
        self._writer.write(batch)  # a table's chunks go into one row group without a copy

    def write(self, batch: pa.RecordBatch | pa.Table) -> None:
        if self._pending is not None:
            self._pending.result()  # surfaces write errors and bounds the queue
        self._pending = self._pool.submit(self._write, batch)

    def close(self) -> None:
        if self._pending is not None:
            self._pending.result()
            self._pending = None
        self._pool.shutdown()
        if self._writer is None:  # no rows: still write a valid, empty file
            self._writer = _open_writer(self.path)
        self._writer.close()

    def discard(self) -> None:
        try:
            if self._pending is not None:
                self._pending.result()
        except Exception:  # noqa: BLE001 - best effort on an error path
            pass
        self._pool.shutdown()
        if self._writer is not None:
            try:
                self._writer.close()
            except Exception:  # noqa: BLE001 - best effort on an error path
                pass
        self.path.unlink(missing_ok=True)


def _open_writer(path: Path) -> pq.ParquetWriter:
    # store_schema=False: no base64 copy of the Arrow schema in every footer (4 KB of the
    # 11 KB footer of a 57-column file). The Parquet types say everything (string, int64,
    # double, list<int64>), and footers are what a scan of many small files pays for.
    return pq.ParquetWriter(path, EVENT_SCHEMA, compression=COLUMN_COMPRESSION,
                            use_dictionary=DICTIONARY_COLUMNS, store_schema=False)
