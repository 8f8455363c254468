"""The catalog: the tables a snapshot is made of (their schemas), the state a writer
edits, and the reading of a snapshot's tables (cached per process: a snapshot never
changes once written)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from cclq.cards.load import CARD_SCHEMA
from cclq.schema import as_type

# The catalog tables. Every snapshot is written with these schemas, so a column that is
# NULL in every row still has its type (a NULL-typed Parquet column reads back as
# INTEGER and breaks e.g. ``drop_reasons LIKE ...``).
FILES_SCHEMA = pa.schema(
    [
        ("file_id", pa.string()),
        ("trace", pa.string()),
        ("rank", pa.int32()),
        ("path", pa.string()),
        ("relpath", pa.string()),
        ("size_bytes", pa.int64()),
        ("mtime_ns", pa.int64()),
        ("content_hash", pa.string()),
        ("format", pa.string()),
        ("parser", pa.string()),
        ("ingest_version", pa.int32()),
        ("cclq_version", pa.string()),
        ("rank_source", pa.string()),
        ("world_size", pa.int32()),
        ("events_read", pa.int64()),
        ("events_written", pa.int64()),
        ("events_dropped", pa.int64()),
        ("drop_reasons", pa.string()),  # JSON {"<reason>": count}; by phase in ingest_stats
        ("decompressed_bytes", pa.int64()),
        ("base_time_ns", pa.int64()),
        ("ts_min_ns", pa.int64()),
        ("ts_max_ns", pa.int64()),
        ("distributed_info", pa.string()),
        ("device_properties", pa.string()),
        ("ingested_at", pa.timestamp("us", tz="UTC")),
        ("ingest_seconds", pa.float64()),
    ]
)

PARTS_SCHEMA = pa.schema(
    [
        ("file_id", pa.string()),  # the input file (files.file_id)
        ("trace", pa.string()),
        ("rank", pa.int32()),
        ("table_name", pa.string()),  # the table its rows belong to: events, ...
        ("path", pa.string()),  # the data file, relative to the warehouse root
        ("rows", pa.int64()),  # rows of this input file in that data file
    ]
)

STATS_SCHEMA = pa.schema(
    [
        ("file_id", pa.string()),
        ("trace", pa.string()),
        ("rank", pa.int32()),
        ("stat", pa.string()),  # the reason, e.g. "E without B"
        ("ph", pa.string()),
        ("dropped", pa.bool_()),  # False: the event was kept but is worth knowing
        ("count", pa.int64()),
    ]
)

CATALOG_SCHEMAS: dict[str, pa.Schema] = {
    "files": FILES_SCHEMA,
    "parts": PARTS_SCHEMA,
    "stats": STATS_SCHEMA,
    "cards": CARD_SCHEMA,
}


class CatalogState:
    """A snapshot's catalog as the writer edits it: rows by input file, cards by trace."""

    def __init__(
        self,
        files: dict[str, dict] | None = None,
        parts: dict[str, list[dict]] | None = None,
        stats: dict[str, list[dict]] | None = None,
        cards: dict[str, dict] | None = None,
    ) -> None:
        self.files: dict[str, dict] = files or {}
        self.parts: dict[str, list[dict]] = parts or {}
        self.stats: dict[str, list[dict]] = stats or {}
        self.cards: dict[str, dict] = cards or {}

    @classmethod
    def from_tables(cls, tables: dict[str, pa.Table]) -> CatalogState:
        state = cls()
        for row in tables["files"].to_pylist():
            state.files[row["file_id"]] = row
        for name, target in (("parts", state.parts), ("stats", state.stats)):
            for row in tables[name].to_pylist():
                target.setdefault(row["file_id"], []).append(row)
        for row in tables["cards"].to_pylist():
            state.cards[row["trace"]] = row
        return state

    def put_file(self, row: dict, parts: list[dict], stats: list[dict]) -> None:
        fid = row["file_id"]
        self.files[fid] = row
        self.parts[fid] = parts
        self.stats[fid] = stats

    def drop_file(self, file_id: str) -> None:
        self.files.pop(file_id, None)
        self.parts.pop(file_id, None)
        self.stats.pop(file_id, None)

    def to_tables(self) -> dict[str, pa.Table]:
        def rows(by_file: dict[str, list[dict]]) -> list[dict]:
            return [r for fid in sorted(by_file) if fid in self.files for r in by_file[fid]]

        return {
            "files": pa.Table.from_pylist([self.files[f] for f in sorted(self.files)], schema=FILES_SCHEMA),
            "parts": pa.Table.from_pylist(rows(self.parts), schema=PARTS_SCHEMA),
            "stats": pa.Table.from_pylist(rows(self.stats), schema=STATS_SCHEMA),
            "cards": pa.Table.from_pylist([self.cards[t] for t in sorted(self.cards)], schema=CARD_SCHEMA),
        }


# The tables of the last few snapshots this process opened. A snapshot never changes once
# written (a commit writes a new one), so a process that opens the same snapshot again
# (the daemon behind `python -m cclq.main`: ingest's check, the partial-trace check and
# the query session each open it, call after call) reads its catalog once. Keyed by the
# folder and its files.parquet's identity (device, inode, mtime, size: a warehouse
# deleted and made again at the same path starts its snapshot ids over).
_SNAPSHOT_TABLES: dict[tuple[str, int, int, int, int], dict[str, pa.Table]] = {}
__SNAPSHOT_TABLESKEPT = 4


def catalog_tables(folder: Path, fd: int) -> dict[str, pa.Table]:
    """The catalog tables of the snapshot in ``folder`` (``fd``: its files.parquet, locked)."""
    st = os.fstat(fd)
    key = (str(folder), st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)
    tables = _SNAPSHOT_TABLES.get(key)
    if tables is None:
        tables = {
            name: read_catalog_table(folder / f"{name}.parquet", schema) for name, schema in CATALOG_SCHEMAS.items()
        }
        while len(_SNAPSHOT_TABLES) >= __SNAPSHOT_TABLESKEPT:
            del _SNAPSHOT_TABLES[next(iter(_SNAPSHOT_TABLES))]
        _SNAPSHOT_TABLES[key] = tables
    return dict(tables)


def read_catalog_table(path: Path, schema: pa.Schema) -> pa.Table:
    """A catalog table with exactly ``schema``'s columns: missing ones NULL (an older
    cclq wrote it), NULL-typed ones given their type."""
    table = pq.ParquetFile(path).read()  # not read_table: its dataset layer costs 30 ms to import
    columns: list[Any] = [_column_as(table, f) for f in schema]
    return pa.Table.from_arrays(columns, schema=schema)


def _column_as(table: pa.Table, field: pa.Field) -> Any:
    """``table``'s column of ``field``'s name as its type (NULLs where absent; ``as_type``:
    no pyarrow.compute for a command that opens a snapshot, a cached ``cclq metric``
    among them)."""
    if field.name not in table.column_names:
        return pa.nulls(table.num_rows, field.type)
    return as_type(table.column(field.name), field.type)
