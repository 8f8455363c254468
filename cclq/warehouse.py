"""The warehouse on disk: layout, the ingest lock, atomic writes and the catalog.

Layout (everything is Parquet, so any tool can read it)::

    <warehouse>/
      events/trace=<id>/rank=<r>/<file_id>.parquet   one file per ingested trace file
      catalog/files/<file_id>.parquet                one row: the ``files`` table
      catalog/stats/<file_id>.parquet                dropped/noted events by reason
      catalog/{files,stats}/_all.parquet             the same, compacted at the end of an ingest
      catalog/cards/_all.parquet                     the workload cards, flattened, one row per trace
      cache/metrics/<name>.v<N>.<key>.parquet        metric results (see metrics.cache_key)
      tmp/                                           writes in progress (never read)
      .lock                                          held by a running ingest

Nothing half-written is ever visible: every file is written under ``tmp/`` and
``os.replace``d into place. A file's catalog row is written last, so it is the
commit marker; ``sweep_orphans`` removes partitions whose commit never happened
(an ingest killed between the two renames).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from cclq.errors import UsageError

DEFAULT_WAREHOUSE = ".cclq/warehouse"
COMPACTED = "_all.parquet"  # the compacted catalog table in catalog/files and catalog/stats
WAREHOUSE_ENV = "CCLQ_WAREHOUSE"

# The catalog tables. Every catalog file is written with these schemas, so a column that
# is NULL in every row still has its type (a NULL-typed Parquet column reads back as
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


def resolve_warehouse(option: str | None) -> Path:
    """``--warehouse`` first, then ``$CCLQ_WAREHOUSE``, then ``./.cclq/warehouse``."""
    chosen = option or os.environ.get(WAREHOUSE_ENV) or DEFAULT_WAREHOUSE
    return Path(chosen).expanduser().resolve()


class Warehouse:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.events_dir = self.root / "events"
        self.files_dir = self.root / "catalog" / "files"
        self.stats_dir = self.root / "catalog" / "stats"
        self.cards_dir = self.root / "catalog" / "cards"
        self.tmp_dir = self.root / "tmp"
        self.cache_dir = self.root / "cache" / "metrics"  # metric results, keyed by their inputs
        self.lock_fd: int | None = None  # the descriptor holding the ingest lock, while held

    # -- creation and locking -------------------------------------------------
    def create(self) -> None:
        for d in (self.events_dir, self.files_dir, self.stats_dir, self.cards_dir, self.tmp_dir):
            d.mkdir(parents=True, exist_ok=True)

    def exists(self) -> bool:
        return self.files_dir.is_dir()

    def require(self) -> None:
        if not self.exists():
            raise UsageError(
                f"no warehouse at {self.root}",
                hint="run `cclq ingest DIR` first, or point --warehouse / CCLQ_WAREHOUSE at one",
            )

    @contextmanager
    def lock(self) -> Iterator[None]:
        """Exclusive lock for writers; a second ingest waits for the first.

        ``lock_fd`` names the descriptor while the lock is held: a forked parser process
        inherits it and must close its copy (``cclq.ingest._init_worker``), or an orphaned
        worker would keep the lock after its parent was killed.
        """
        self.create()
        with open(self.root / ".lock", "a+") as f:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                print(f"cclq: waiting for another ingest into {self.root} to finish", file=sys.stderr)
                fcntl.flock(f, fcntl.LOCK_EX)
            self.lock_fd = f.fileno()
            try:
                yield
            finally:
                self.lock_fd = None
                fcntl.flock(f, fcntl.LOCK_UN)

    def clear_cache(self) -> None:
        """Drops cached metric results (keys make them safe; this only frees space)."""
        shutil.rmtree(self.cache_dir, ignore_errors=True)

    def clean_tmp(self) -> None:
        """Removes leftovers of killed runs. Only call while holding the lock."""
        shutil.rmtree(self.tmp_dir, ignore_errors=True)
        self.tmp_dir.mkdir(parents=True, exist_ok=True)

    def tmp_path(self, suffix: str = ".parquet") -> Path:
        return self.tmp_dir / f"{uuid.uuid4().hex}{suffix}"

    # -- paths ----------------------------------------------------------------
    def partition_file(self, trace: str, rank: int, file_id: str) -> Path:
        return self.events_dir / f"trace={trace}" / f"rank={rank}" / f"{file_id}.parquet"

    def events_glob(self) -> str:
        return str(self.events_dir / "*" / "*" / "*.parquet")

    def has_events(self) -> bool:
        return any(self.events_dir.glob("*/*/*.parquet"))

    # -- catalog --------------------------------------------------------------
    def read_catalog(self) -> dict[str, dict]:
        """file_id -> files row (as a dict); a per-file row wins over the compacted one."""
        rows: dict[str, dict] = {}
        compacted = self.files_dir / COMPACTED
        paths = ([compacted] if compacted.exists() else []) + sorted(
            p for p in self.files_dir.glob("*.parquet") if p.name != COMPACTED
        )
        for p in paths:
            for row in pq.read_table(p).to_pylist():
                rows[row["file_id"]] = row
        return rows

    def compact_catalog(self, catalog: dict[str, dict], force: bool = False) -> None:
        """Rewrites the catalog as one file per table (call under the lock).

        Per-file rows make each commit atomic; thousands of tiny files make every
        reader slow, so the end of an ingest folds them into ``_all.parquet``. The
        compacted file is renamed into place before the per-file ones are deleted,
        and readers let a per-file row win, so a kill at any point is harmless.
        """
        import pyarrow.compute as pc

        per_file_files = [p for p in self.files_dir.glob("*.parquet") if p.name != COMPACTED]
        per_file_stats = [p for p in self.stats_dir.glob("*.parquet") if p.name != COMPACTED]
        if not per_file_files and not per_file_stats and not force:
            return
        # with the schema: rows of an older cclq may lack newer keys (NULL), and a column
        # that is NULL in every row keeps its type
        files = pa.Table.from_pylist(list(catalog.values()), schema=FILES_SCHEMA) if catalog else None
        if files is not None:
            self._write_table(files, self.files_dir / COMPACTED)
        else:
            (self.files_dir / COMPACTED).unlink(missing_ok=True)
        # stats: a file's per-file table (even an empty one) replaces its compacted rows
        fresh = {p.stem for p in per_file_stats}
        parts = [pq.read_table(p) for p in per_file_stats]
        old_stats = self.stats_dir / COMPACTED
        if old_stats.exists():
            old = pq.read_table(old_stats)
            keep_ids = pa.array(sorted(set(catalog) - fresh), pa.string())
            parts.append(old.filter(pc.is_in(old.column("file_id"), value_set=keep_ids)))
        parts = [t.filter(pc.is_in(t.column("file_id"), value_set=pa.array(sorted(catalog), pa.string())))
                 for t in parts if t.num_rows]
        if parts:
            stats = pa.concat_tables([_conform(t, STATS_SCHEMA) for t in parts])
            self._write_table(stats, self.stats_dir / COMPACTED)
        else:
            old_stats.unlink(missing_ok=True)
        for p in per_file_files + per_file_stats:
            p.unlink(missing_ok=True)

    def commit_file(
        self,
        events_tmp: Path | None,
        files_row: pa.Table,
        stats: pa.Table,
        previous: dict | None,
    ) -> None:
        """Makes one ingested file visible: events, then stats, then its catalog row."""
        row = files_row.to_pylist()[0]
        file_id = row["file_id"]
        target = self.partition_file(row["trace"], row["rank"], file_id)
        if events_tmp is not None:
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(events_tmp, target)
        if previous is not None:
            old = self.partition_file(previous["trace"], previous["rank"], file_id)
            if old != target:
                _unlink_and_prune(old, self.events_dir)
        self._write_table(stats, self.stats_dir / f"{file_id}.parquet")
        self._write_table(files_row, self.files_dir / f"{file_id}.parquet")

    def discard_commit(self, file_id: str, partitions: list[Path]) -> None:
        """Deletes a file's per-file catalog rows and the given event partitions: undoes
        a ``commit_file`` that failed half-way, or (``remove_file``) forgets a file. The
        caller drops its compacted catalog row."""
        (self.files_dir / f"{file_id}.parquet").unlink(missing_ok=True)
        (self.stats_dir / f"{file_id}.parquet").unlink(missing_ok=True)
        for p in partitions:
            _unlink_and_prune(p, self.events_dir)

    def remove_file(self, row: dict) -> None:
        """Forgets a file that disappeared from its workload folder (the compacted
        catalog drops it at the end of the ingest)."""
        self.discard_commit(row["file_id"], [self.partition_file(row["trace"], row["rank"], row["file_id"])])

    def write_cards(self, cards: dict[str, pa.Table | None]) -> None:
        """Sets (or, with ``None``, removes) the cards of some traces (call under the lock).

        All cards live in one table, ``catalog/cards/_all.parquet``, rewritten once per
        ingest: a file per trace made every connection open hundreds of tiny files.
        Cards written by older versions (``<trace>.parquet``) are folded in here.
        """
        import pyarrow.compute as pc

        target = self.cards_dir / COMPACTED
        legacy = [p for p in self.cards_dir.glob("*.parquet") if p.name != COMPACTED]
        if not cards and not legacy:
            return
        parts = [pq.read_table(p) for p in ([target] if target.exists() else []) + sorted(legacy)]
        if not legacy and _cards_unchanged(parts[0] if parts else None, cards):
            return  # a re-ingest of unchanged workloads writes nothing
        replaced = pa.array(sorted(cards), pa.string())
        parts = [t.filter(pc.invert(pc.is_in(t.column("trace"), value_set=replaced))) for t in parts]
        parts += [t for t in cards.values() if t is not None]
        parts = [t for t in parts if t.num_rows]
        if parts:
            # a legacy file of an older cclq may lack newer card columns
            merged = pa.concat_tables(parts, promote_options="default")
            # the last row per trace wins: legacy per-trace files come after the old table
            last = {trace: i for i, trace in enumerate(merged.column("trace").to_pylist())}
            self._write_table(merged.take(sorted(last.values())), target)
        else:
            target.unlink(missing_ok=True)
        for p in legacy:
            p.unlink(missing_ok=True)

    def sweep_orphans(self, catalog: dict[str, dict]) -> int:
        """Deletes event partitions that no catalog row points at."""
        removed = 0
        for p in self.events_dir.glob("*/*/*.parquet"):
            row = catalog.get(p.stem)
            if row is None or p != self.partition_file(row["trace"], row["rank"], p.stem):
                _unlink_and_prune(p, self.events_dir)
                removed += 1
        return removed

    def _write_table(self, table: pa.Table, path: Path) -> None:
        tmp = self.tmp_path()
        pq.write_table(table, tmp)
        path.parent.mkdir(parents=True, exist_ok=True)
        os.replace(tmp, path)


def _conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` with exactly ``schema``'s columns: missing ones NULL (an older cclq
    wrote it), NULL-typed ones given their type."""
    columns = [
        table.column(f.name).cast(f.type) if f.name in table.column_names else pa.nulls(table.num_rows, f.type)
        for f in schema
    ]
    return pa.Table.from_arrays(columns, schema=schema)


def _cards_unchanged(stored: pa.Table | None, cards: dict[str, pa.Table | None]) -> bool:
    """Whether writing ``cards`` over the stored table would change nothing.

    Rows are compared without their NULL fields: the stored table has the columns of
    every trace's card, a fresh card only its own.
    """
    def rows_by_trace(table: pa.Table | None) -> dict[str, list[dict]]:
        out: dict[str, list[dict]] = {}
        for row in table.to_pylist() if table is not None else []:
            out.setdefault(row["trace"], []).append({k: v for k, v in row.items() if v is not None})
        return out

    stored_rows = rows_by_trace(stored)
    return all(rows_by_trace(new).get(trace, []) == stored_rows.get(trace, []) for trace, new in cards.items())


def _unlink_and_prune(path: Path, stop: Path) -> None:
    path.unlink(missing_ok=True)
    parent = path.parent
    while parent != stop and parent.is_dir() and not any(parent.iterdir()):
        parent.rmdir()
        parent = parent.parent
