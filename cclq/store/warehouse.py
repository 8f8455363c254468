"""The warehouse on disk: immutable data files, catalog snapshots, the writer lock.

Layout (everything is Parquet, so any tool can read it)::

    <warehouse>/
      CURRENT                                   id of the current catalog snapshot
      catalog/<id>/files.parquet                one row per ingested input file
      catalog/<id>/parts.parquet                which data file holds which input file's rows
      catalog/<id>/stats.parquet                dropped / noted events by reason
      catalog/<id>/cards.parquet                the workload cards, flattened, one row per trace
      events/trace=<id>/<file_id>.<uniq>.parquet   data files (trace and rank are columns inside)
      cache/metrics/<name>.v<N>.<key>.parquet   metric results (see query.cache.result_file)
      cache/metrics/<name>.v<N>.<key>.rows.json the same rows as JSON (query.cache.store_rows)
      cache/snapshots/<id>.json                 a snapshot's facts, read without pyarrow
                                                (store.summary_cache)
      tmp/                                      writes in progress (never read)
      spill/<pid>-<n>/                          what a query spills beyond its memory limit
      .lock                                     held by a running writer (ingest, compact)
      .cclq-warehouse                           the marker: cclq made this folder a warehouse

A writer never writes into, and never cleans, a folder it did not make: an existing
non-empty folder without the marker (``-w project`` by mistake) is refused before
anything is touched. A warehouse written before the marker existed (``CURRENT`` and
``catalog/``) is adopted. Garbage collection deletes only data files by the names cclq
gives them (``<table>/trace=<id>/<stem>.<12 hex>.parquet``, for the tables cclq writes),
and spill folders named ``<pid>@<host>-<n>``.

Every file is written once and never changed. A commit writes its data files under
new names (invisible: no snapshot names them yet), then a new snapshot folder, then
replaces ``CURRENT`` (``os.replace``, atomic): that last rename is the commit. So a
reader that opened snapshot N sees exactly N's files however many commits follow,
and a writer killed at any point leaves the last commit as it was.

Durability, as SQLite and DuckDB commit: before a rename publishes a file, the file is
``fsync``ed, and after the renames of a step the directories they changed are (a rename
is an entry of its directory): the data files, then their folders; the snapshot's files,
its folder and ``catalog/``; the ``CURRENT`` pointer and the root. So after a power loss
``CURRENT`` names a complete snapshot whose data files are all there, or the previous
one. ``CCLQ_FSYNC=0`` turns this off (a scratch warehouse on a disk that loses nothing,
or to measure it: ``cclq bench --commits``).

pyarrow is imported where a catalog is read or written, not at the top: a repeat
``cclq metric`` opens the warehouse and reads the kept facts without it.

Readers (``open_snapshot``) hold a shared ``flock`` on their snapshot's
``files.parquet``. ``collect_garbage`` (writers only, under the lock) deletes a
snapshot only when it can take that lock exclusively, then the data files that no
remaining snapshot names: a running query never loses a file under it. Every writer
sweeps as it takes the lock (``lock``), whatever it then does: a writer killed between
its commit and its own sweep, or before its commit, leaves files that no snapshot a
reader can hold names, and the next writer (an ingest, a ``cclq compact`` with nothing
to compact) deletes them.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import shutil
import socket
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

from cclq.errors import UsageError, show_path
from cclq.locations import DEFAULT_WAREHOUSE, WAREHOUSE_ENV, resolve_warehouse  # noqa: F401 (re-exported)
from cclq.store.catalog_summary import CatalogSummary
from cclq.store.durable import fsync_all, fsync_enabled, fsync_path, read_only_error

if TYPE_CHECKING:
    import pyarrow as pa

    from cclq.store.catalog import CatalogState

CURRENT = "CURRENT"
MARKER = ".cclq-warehouse"
MARKER_TEXT = "a cclq warehouse: cclq writes, compacts and deletes files under this folder\n"
# what collect_garbage may delete: a data file by the name new_data_path gives it
DATA_FILE = re.compile(r"trace=[^/]+/[^/]+\.[0-9a-f]{12}\.parquet")
_DATA_FILE = DATA_FILE

# Trace ids that hive-partition readers (DuckDB, Spark, Hive) turn into SQL NULL when they
# are a folder name; ``trace_folder`` escapes them so that folder names stay faithful.
_HIVE_NULLS = {"null", "__hive_default_partition__"}


def trace_folder(trace: str) -> str:
    """``trace=<id>`` with the id percent-encoded, as hive-partition readers decode it.

    cclq itself reads ``trace`` from the data files; the folder name is for people and for
    other engines, which must get the same id back (``NULL`` must not become SQL NULL).
    """
    encoded = quote(trace, safe="._-+")
    if trace.lower() in _HIVE_NULLS:
        encoded = f"%{ord(trace[0]):02X}" + encoded[1:]
    return f"trace={encoded}"


def data_path(table: str, trace: str, stem: str) -> str:
    """A fresh name (relative to the root) for a data file: never one used before. A
    module function, so that a Dask worker writing straight to object storage names its
    files as a local ingest does (and the garbage collection knows them)."""
    return f"{table}/{trace_folder(trace)}/{stem}.{uuid.uuid4().hex[:12]}.parquet"


@dataclass
class Snapshot:
    """One catalog snapshot, opened for reading: its tables and the lock that keeps its
    files from being garbage-collected while they may be read (``close`` releases it)."""

    warehouse: Warehouse
    id: str
    tables: dict[str, pa.Table]
    _fd: int | None = field(default=None, repr=False)

    @property
    def folder(self) -> Path:
        return self.warehouse.catalog_dir / self.id

    def catalog_file(self, name: str) -> Path:
        return self.folder / f"{name}.parquet"

    @cached_property
    def summary(self) -> CatalogSummary:
        """The snapshot's facts as plain values (``cclq.store.catalog_summary``)."""
        return CatalogSummary.from_tables(self.id, self.tables)

    def trace_ids(self) -> list[str]:
        """Every trace id the snapshot's catalog holds files of, sorted."""
        return self.summary.trace_ids()

    def data_files(self, table: str, traces: list[str] | None = None) -> list[Path]:
        """Absolute paths of the data files of ``table`` (optionally for some traces only),
        each once, in a stable order."""
        parts = self.tables["parts"]
        wanted = set(traces) if traces is not None else None
        paths = {
            p
            for p, t, name in zip(
                parts.column("path").to_pylist(),
                parts.column("trace").to_pylist(),
                parts.column("table_name").to_pylist(),
            )
            if name == table and (wanted is None or t in wanted)
        }
        self.warehouse.ensure_local(sorted(paths))  # a copy of a remote warehouse fetches them
        return [self.warehouse.root / p for p in sorted(paths)]

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> Snapshot:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Warehouse:
    """A warehouse in a local folder. ``cclq.store.remote.RemoteWarehouse`` is one on
    object storage: a local copy of it, with the hooks below (``ensure_local``,
    ``begin_write``, ``end_write``, ``unique_ids``) doing the transfers."""

    # snapshot ids with a random suffix: two writers that do not share this folder's lock
    # (a warehouse on object storage) never name two different snapshots alike
    unique_ids = False
    # whether a snapshot's facts are kept as JSON beside the cache (summary_cache); a
    # warehouse on object storage reads its local copy's CURRENT only after a fetch
    keeps_summaries = True

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.catalog_dir = self.root / "catalog"
        self.tmp_dir = self.root / "tmp"
        self.cache_dir = self.root / "cache" / "metrics"  # metric results, keyed by their inputs
        self.lock_fd: int | None = None  # the descriptor holding the writer lock, while held

    # -- creation and locking -------------------------------------------------
    def __str__(self) -> str:
        return str(self.root)

    def exists(self) -> bool:
        return (self.root / CURRENT).is_file()

    def ensure_local(self, paths: Sequence[str]) -> None:
        """Makes the data files ``paths`` (relative to the root) readable under the root:
        they are, in a local warehouse."""

    def begin_write(self) -> None:
        """Called under the writer lock before anything is written."""

    def end_write(self) -> None:
        """Called under the writer lock after a writer finished without an error."""

    def is_legacy(self) -> bool:
        """A warehouse written by cclq before catalog snapshots (catalog/files/*.parquet)."""
        return not self.exists() and (self.catalog_dir / "files").is_dir()

    def require(self) -> None:
        if self.is_legacy():
            raise UsageError(
                f"{self.root} was written by an older cclq",
                hint="run `cclq ingest` on its folders again: it rebuilds the warehouse",
            )
        if not self.exists():
            raise UsageError(
                f"no warehouse at {self.root}",
                hint="run `cclq ingest DIR` first, or point --warehouse / CCLQ_WAREHOUSE at one",
            )

    def is_ours(self) -> bool:
        """Whether cclq made this folder a warehouse: its marker, or (before markers) a
        ``CURRENT`` and a ``catalog/``, or the older layout's ``catalog/files/``."""
        return (self.root / MARKER).is_file() or (self.exists() and self.catalog_dir.is_dir()) or self.is_legacy()

    def claim(self) -> None:
        """Refuses a folder that is neither new, empty, nor a warehouse: cclq would write
        into it and its garbage collection would delete its ``*.parquet``. Marks the rest."""
        try:
            entries = [p.name for p in self.root.iterdir()] if self.root.is_dir() else []
        except OSError as e:
            raise UsageError(f"{show_path(self.root)}: cannot read the warehouse folder ({e.strerror or e})") from e
        if self.root.exists() and not self.root.is_dir():
            raise UsageError(f"{show_path(self.root)} is a file, not a warehouse folder")
        if entries and set(entries) != {".lock"} and not self.is_ours():
            raise UsageError(
                f"{show_path(self.root)} is not empty and is not a cclq warehouse (no {MARKER}); "
                "cclq writes only into a warehouse it made",
                hint="point --warehouse / CCLQ_WAREHOUSE at a new or empty folder",
            )
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            if not (self.root / MARKER).is_file():
                (self.root / MARKER).write_text(MARKER_TEXT)
        except PermissionError as e:
            raise read_only_error(self.root, e) from e

    def create(self) -> None:
        """Makes the folders and, for a new warehouse, an empty first snapshot (call under
        the lock, after ``claim``). A warehouse of an older layout is cleared: its data is
        ingested again."""
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            if self.is_legacy():
                print(f"cclq: warning: {self.root} was written by an older cclq; rebuilding it", file=sys.stderr)
                for old in ("events", "catalog", "cache"):
                    shutil.rmtree(self.root / old, ignore_errors=True)
            for d in (self.catalog_dir, self.tmp_dir):
                d.mkdir(parents=True, exist_ok=True)
            if not self.exists():
                from cclq.store.catalog import CatalogState

                self.commit(CatalogState())
        except PermissionError as e:
            raise read_only_error(self.root, e) from e

    @contextmanager
    def lock(self) -> Iterator[None]:
        """Exclusive lock for writers; a second writer waits for the first.

        ``lock_fd`` names the descriptor while the lock is held: a forked parser process
        inherits it and must close its copy (``cclq.ingest.parse.init_worker``), or an orphaned
        worker would keep the lock after its parent was killed.
        """
        self.claim()
        try:
            f = open(self.root / ".lock", "a+")
        except PermissionError as e:
            raise read_only_error(self.root, e) from e
        with f:
            try:
                _flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB, self.root)
            except BlockingIOError:
                print(f"cclq: waiting for another ingest into {self.root} to finish", file=sys.stderr)
                _flock(f.fileno(), fcntl.LOCK_EX, self.root)
            self.lock_fd = f.fileno()
            try:
                self.begin_write()
                self.create()
                # what a killed writer left: its temp files, snapshots no reader holds (one
                # committed but never swept, or renamed into catalog/ but never made
                # current) and the data files only they, or no snapshot, named
                self.clean_tmp()
                self.collect_garbage()
                yield
                self.end_write()
            finally:
                self.lock_fd = None
                fcntl.flock(f, fcntl.LOCK_UN)

    def clear_cache(self) -> None:
        """Drops cached metric results (keys make them safe; this only frees space)."""
        shutil.rmtree(self.cache_dir, ignore_errors=True)

    def clean_tmp(self) -> None:
        """Removes leftovers of killed runs. Only call while holding the lock, in a
        warehouse cclq made (``claim``): ``tmp/`` is then cclq's own."""
        if not self.is_ours():
            raise UsageError(f"{show_path(self.root)} is not a cclq warehouse; its tmp/ is not cleaned")
        shutil.rmtree(self.tmp_dir, ignore_errors=True)
        self.tmp_dir.mkdir(parents=True, exist_ok=True)

    def tmp_path(self, suffix: str = ".parquet") -> Path:
        return self.tmp_dir / f"{uuid.uuid4().hex}{suffix}"

    # -- paths ----------------------------------------------------------------
    def new_data_path(self, table: str, trace: str, stem: str) -> str:
        """A fresh name (relative to the root) for a data file: never one used before."""
        return data_path(table, trace, stem)

    # -- reading --------------------------------------------------------------
    def current_id(self) -> str:
        return (self.root / CURRENT).read_text().strip()

    def open_snapshot(self, timeout_s: float = 30.0, snapshot_id: str | None = None) -> Snapshot:
        """The current snapshot, locked against garbage collection until ``close``.

        Between reading ``CURRENT`` and locking, a writer may commit and collect the
        snapshot read; then the lock lands on a deleted file (no links left) and the
        current one is tried again.

        ``snapshot_id`` opens that snapshot instead of the current one: how a Dask worker
        reads exactly what its client reads (the client's own lock keeps it from being
        collected meanwhile). One that is gone is a ``UsageError``.
        """
        from cclq.store.catalog import catalog_tables

        self.require()
        if snapshot_id is not None:
            return self._open_pinned(snapshot_id)
        deadline = time.monotonic() + timeout_s
        while True:
            snap_id = self.current_id()
            path = self.catalog_dir / snap_id / "files.parquet"
            try:
                fd = os.open(path, os.O_RDONLY)
            except FileNotFoundError:
                fd = None
            if fd is not None:
                try:
                    _flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB, self.root)
                    locked = _still_there(path, fd)
                except BlockingIOError:  # a collector holds it for a moment
                    locked = False
                except BaseException:
                    os.close(fd)
                    raise
                if locked:
                    try:
                        tables = catalog_tables(self.catalog_dir / snap_id, fd)
                    except BaseException:
                        os.close(fd)
                        raise
                    return Snapshot(self, snap_id, tables, fd)
                os.close(fd)
            if time.monotonic() > deadline:
                raise UsageError(f"{self.root}: could not open the current catalog snapshot {snap_id}")
            time.sleep(0.01)

    def _open_pinned(self, snap_id: str) -> Snapshot:
        from cclq.store.catalog import catalog_tables

        if not _SNAPSHOT_ID.fullmatch(snap_id):
            raise UsageError(f"{self.root}: {snap_id!r} is not a catalog snapshot id")
        folder = self.catalog_dir / snap_id
        try:
            fd = os.open(folder / "files.parquet", os.O_RDONLY)
        except FileNotFoundError:
            fd = None
        if fd is not None:
            try:
                _flock(fd, fcntl.LOCK_SH, self.root)  # waits out a collector's check of it
                if _still_there(folder / "files.parquet", fd):
                    return Snapshot(self, snap_id, catalog_tables(folder, fd), fd)
            except BaseException:
                os.close(fd)
                raise
            os.close(fd)
        raise UsageError(f"{self.root}: catalog snapshot {snap_id} is gone (collected after a later commit)")

    def read_state(self) -> CatalogState:
        """The current snapshot as an editable state (writers, under the lock)."""
        from cclq.store.catalog import CatalogState

        with self.open_snapshot() as snap:
            return CatalogState.from_tables(snap.tables)

    # -- committing -----------------------------------------------------------
    def commit(self, state: CatalogState, moves: Sequence[tuple[Path, str]] = ()) -> str:
        """Publishes ``state`` as the new current snapshot (call under the lock).

        ``moves`` are (temp file, relative data path) pairs: the data files the new rows
        name. They are renamed into place first (invisible until the snapshot that names
        them is current), then the snapshot is written, then ``CURRENT`` is replaced. If
        anything fails before that last step, the previous snapshot stays current and the
        half-done work is garbage for ``collect_garbage``.
        """
        import pyarrow.parquet as pq  # here: a repeat `cclq metric` opens a warehouse without pyarrow

        durable = fsync_enabled()
        moves = list(moves) + self._split_shared(state)
        changed: set[Path] = set()  # directories whose entries the renames changed
        to_sync: list[Path] = []
        renames: list[tuple[Path, Path]] = []
        for tmp, rel in moves:
            target = self.root / rel
            for d in reversed(target.parents):  # new folders are entries of their parents
                if d.is_relative_to(self.root) and d != self.root and not d.is_dir():
                    d.mkdir(exist_ok=True)
                    changed.add(d.parent)
            if durable:
                to_sync.append(tmp)
            renames.append((tmp, target))
            changed.add(target.parent)
        if durable:
            fsync_all(to_sync)  # every data file on the disk before any is published
        for tmp, target in renames:
            os.replace(tmp, target)
        if durable:
            fsync_all(sorted(changed, key=lambda d: -len(d.parts)))
        previous = self.current_id() if self.exists() else None
        snap_id = _next_id(previous, self.unique_ids)
        staging = self.tmp_dir / f"snapshot-{snap_id}-{uuid.uuid4().hex[:8]}"
        staging.mkdir(parents=True)
        written = []
        for name, table in state.to_tables().items():
            pq.write_table(table, staging / f"{name}.parquet")
            written.append(staging / f"{name}.parquet")
        if durable:
            fsync_all(written)
            fsync_path(staging)
        target = self.catalog_dir / snap_id
        if target.exists():  # a killed commit renamed it but never made it current: no reader has it
            shutil.rmtree(target)
        os.replace(staging, target)
        if durable:
            fsync_path(self.catalog_dir)
        pointer = self.tmp_path(".current")
        pointer.write_text(snap_id + "\n")
        if durable:
            fsync_path(pointer)
        os.replace(pointer, self.root / CURRENT)
        if durable:
            fsync_path(self.root)
        return snap_id

    def _split_shared(self, state: CatalogState) -> list[tuple[Path, str]]:
        """Data files that hold several input files (compacted) and that some of those
        files leave in ``state`` (changed, gone, replaced): rewritten with the rows of the
        files that stay, which ``state`` then points at. Otherwise a changed file's old
        rows would still be read from the shared file."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        if not self.exists():
            return []
        try:
            current = pq.ParquetFile(self.catalog_dir / self.current_id() / "parts.parquet").read(
                columns=["file_id", "path"]
            )
        except FileNotFoundError:
            return []
        holders: dict[str, set[str]] = {}
        for fid, path in zip(current.column("file_id").to_pylist(), current.column("path").to_pylist()):
            holders.setdefault(path, set()).add(fid)
        moves: list[tuple[Path, str]] = []
        for path, fids in holders.items():
            if len(fids) < 2:
                continue
            staying = sorted(f for f in fids if any(p["path"] == path for p in state.parts.get(f, ())))
            if len(staying) == len(fids) or not staying:
                continue
            import pyarrow.compute as pc  # here: not a cost of every command that opens a warehouse

            from cclq.store.writer import ROW_GROUP_ROWS, open_data_writer

            self.ensure_local([path])
            table = pq.ParquetFile(self.root / path).read()
            kept = table.filter(pc.is_in(table.column("file_id"), value_set=pa.array(staying, pa.string())))
            tmp = self.tmp_path()
            writer = open_data_writer(tmp, kept.schema)
            try:
                writer.write_table(kept, row_group_size=ROW_GROUP_ROWS)
            finally:
                writer.close()
            some = next(p for f in staying for p in state.parts[f] if p["path"] == path)
            rel = self.new_data_path(some["table_name"], some["trace"], "compact")
            moves.append((tmp, rel))
            for f in staying:
                state.parts[f] = [dict(p, path=rel) if p["path"] == path else p for p in state.parts[f]]
        return moves

    # -- garbage --------------------------------------------------------------
    def collect_garbage(self) -> int:
        """Deletes snapshots no reader holds and data files no snapshot names (call under
        the lock). Returns how many data files went."""
        import pyarrow.parquet as pq

        if not self.is_ours():
            raise UsageError(f"{show_path(self.root)} is not a cclq warehouse; nothing in it is collected")
        current = self.current_id()
        live: list[str] = [current]
        for folder in sorted(p for p in self.catalog_dir.iterdir() if p.is_dir()) if self.catalog_dir.is_dir() else []:
            if folder.name == current:
                continue
            if not _try_delete_snapshot(folder):
                live.append(folder.name)
        referenced: set[str] = set()
        for snap_id in live:
            try:
                # not read_table: its dataset layer costs 7-30 ms to import (cclq.store.catalog)
                parts = pq.ParquetFile(self.catalog_dir / snap_id / "parts.parquet").read(columns=["path"])
            except OSError:
                continue
            referenced.update(parts.column("path").to_pylist())
        _collect_spill(self.root / "spill")
        removed = 0
        from cclq.schema import TABLE_SCHEMAS

        for table_dir in (self.root / t for t in TABLE_SCHEMAS if (self.root / t).is_dir()):
            for path in table_dir.glob("trace=*/*.parquet"):
                rel = path.relative_to(self.root).as_posix()
                if rel not in referenced and _DATA_FILE.fullmatch(path.relative_to(table_dir).as_posix()):
                    path.unlink(missing_ok=True)
                    removed += 1
            _prune_empty_dirs(table_dir)
        return removed


def _collect_spill(spill: Path) -> None:
    """Removes the spill folders (``<pid>@<host>-<random>``) of this host's processes that
    are no longer running; another host's folders are its own business."""
    if not spill.is_dir():
        return
    host = socket.gethostname()
    for folder in spill.iterdir():
        pid, _, owner = folder.name.rpartition("-")[0].partition("@")
        if owner == host and pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# What flock fails with on a file system without locks: Lustre mounted without -o flock
# (ENOSYS), some FUSE, SMB or NFS-without-lockd mounts (EOPNOTSUPP, ENOLCK).
_NO_LOCKS = {errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOLCK}


def _flock(fd: int, operation: int, root: Path) -> None:
    """``fcntl.flock``; a file system without locks is a usage error naming the warehouse
    (a ``BlockingIOError`` of a non-blocking request goes to the caller)."""
    try:
        fcntl.flock(fd, operation)
    except OSError as e:
        if e.errno not in _NO_LOCKS:
            raise
        raise UsageError(
            f"{root}: the file system does not support file locks (flock: {e.strerror or e})",
            hint="cclq needs them to keep ingests and readers apart: put the warehouse on a file "
            "system with locks (a local disk, NFSv4, Lustre mounted with -o flock)",
        ) from e


def _still_there(path: Path, fd: int) -> bool:
    """Whether the file locked through ``fd`` is still the one at ``path``. A collector
    that deleted it between our open and our lock unlinked it (no links left) or, on NFS,
    where a client renames an open file it deletes (".nfsXXXX"), moved it away."""
    held = os.fstat(fd)
    if held.st_nlink == 0:
        return False
    try:
        now = os.stat(path)
    except FileNotFoundError:
        return False
    return (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino)


SNAPSHOT_ID = re.compile(r"[0-9]+(?:-[0-9a-f]{8})?")  # what _next_id makes: no path can hide in one
_SNAPSHOT_ID = SNAPSHOT_ID


def _next_id(previous: str | None, unique: bool = False) -> str:
    n = int(previous.split("-")[0]) + 1 if previous else 1
    return f"{n:010d}-{uuid.uuid4().hex[:8]}" if unique else f"{n:010d}"


def _try_delete_snapshot(folder: Path) -> bool:
    """Deletes an old snapshot unless a reader holds it. The file is unlinked while the
    exclusive lock is held, so a reader that locks it afterwards sees no links left."""
    files = folder / "files.parquet"
    try:
        fd = os.open(files, os.O_RDONLY)
    except FileNotFoundError:
        shutil.rmtree(folder, ignore_errors=True)  # a snapshot folder left half-deleted
        return True
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        files.unlink()
        shutil.rmtree(folder, ignore_errors=True)
        return True
    finally:
        os.close(fd)


def _prune_empty_dirs(top: Path) -> None:
    for dirpath, _dirnames, _files in sorted(os.walk(top, topdown=False), key=lambda t: -len(t[0])):
        d = Path(dirpath)
        if d != top and not any(d.iterdir()):
            d.rmdir()
