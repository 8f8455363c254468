"""A warehouse on object storage (``-w s3://bucket/prefix``), read and written through a
local copy.

The layout under the prefix is the local one (``cclq.store.warehouse``): ``CURRENT``,
``catalog/<id>/*.parquet``, immutable uniquely named data files. What differs is how a
commit is published, since object storage has no rename and no lock:

- A writer takes the local copy's lock, reads ``CURRENT`` with its ETag, writes its
  snapshots into the local copy as a local ingest does (snapshot ids get a random suffix,
  so two writers never name two snapshots alike), then uploads the data files the final
  snapshot names that the one it started from did not, then that snapshot's catalog,
  and last replaces ``CURRENT`` with a conditional write: ``If-Match`` the ETag read at
  the start (``If-None-Match: *`` for a new warehouse). Of two writers only one can win;
  the other gets ``ChangedMeanwhile`` ("the warehouse changed meanwhile: run again") and
  its uploads are garbage. A writer killed at any point leaves ``CURRENT`` as it was.
- A reader mirrors ``CURRENT`` and its snapshot's catalog (kilobytes) into the local copy
  and fetches the data files of the traces it queries (``ensure_local``), once: data
  files never change, so a copy is good for ever. DuckDB then reads local files.
- Dask workers (``cclq ingest --dask``) upload the data files they parse themselves,
  under the names a local ingest gives (``data_path``), and hand back only the
  metadata; the client commits them as above without uploading them (``placed``).
  The files of an attempt whose worker died, or of a result the client did not commit,
  are named by no snapshot: garbage like a killed writer's uploads.
- Garbage: after a commit, snapshots superseded more than a grace period ago
  (``$CCLQ_REMOTE_GC_GRACE_S``, default an hour) and data files that no remaining
  snapshot names and are older than that are deleted. A reader that opened a snapshot
  fetches its files within the grace period; a writer's uploads younger than it are
  never taken for garbage.

The local copy lives in ``$CCLQ_REMOTE_CACHE`` (else ``~/.cache/cclq/remote``); deleting
it is always safe. It is trimmed to the current snapshot's files when it grows past
``$CCLQ_REMOTE_CACHE_MB`` (default 10240).
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from cclq.errors import UsageError
from cclq.locations import WAREHOUSE_ENV, resolve_warehouse
from cclq.store.objects import ObjectStore, cache_root, is_url, url_key
from cclq.store.warehouse import CURRENT, DATA_FILE, MARKER, MARKER_TEXT, SNAPSHOT_ID, Snapshot, Warehouse

GRACE_ENV = "CCLQ_REMOTE_GC_GRACE_S"
CACHE_MB_ENV = "CCLQ_REMOTE_CACHE_MB"


def open_warehouse(option: str | None) -> Warehouse:
    """The warehouse ``-w`` / ``$CCLQ_WAREHOUSE`` names: a local folder, or a URL
    (``s3://bucket/prefix``; an unknown scheme or a missing extra is a usage error)."""
    chosen = option or os.environ.get(WAREHOUSE_ENV)
    if chosen and is_url(chosen):
        return RemoteWarehouse(chosen)
    return Warehouse(resolve_warehouse(option))


def is_remote(wh: Warehouse) -> bool:
    return isinstance(wh, RemoteWarehouse)


class RemoteWarehouse(Warehouse):
    """A warehouse on object storage, through its local copy (the module docstring)."""

    unique_ids = True
    keeps_summaries = False

    def __init__(self, url: str) -> None:
        self.store = ObjectStore(url)
        self.url = self.store.url
        super().__init__(cache_root() / "warehouses" / url_key(self.url))
        self._writing = False
        self._remote: tuple[str, str] | None = None  # (ETag, snapshot id) of CURRENT, when read
        self._read = False
        self._base: tuple[str, str] | None = None  # what a writer started from
        self._base_paths: set[str] = set()  # the data files it names (the copy may collect it)
        # data files that Dask workers wrote straight to the store (``cclq.ingest.dask``):
        # a commit names them and does not upload them; the local copy has none of them
        self.placed: set[str] = set()

    def __str__(self) -> str:
        return self.url

    # -- reading ------------------------------------------------------------
    def _current(self) -> tuple[str, str] | None:
        if not self._read:
            self.refresh()
        return self._remote

    def refresh(self) -> tuple[str, str] | None:
        """Reads ``CURRENT`` (with its ETag) and mirrors its snapshot's catalog."""
        got = self.store.read(CURRENT)
        self._read = True
        if got is None:
            self._remote = None
            return None
        data, etag = got
        snap_id = data.decode(errors="replace").strip()
        if not SNAPSHOT_ID.fullmatch(snap_id):
            raise UsageError(f"{self.url}: {CURRENT} names no catalog snapshot; this is not a cclq warehouse")
        self._mirror_catalog(snap_id)
        self._remote = (etag, snap_id)
        return self._remote

    def _mirror_catalog(self, snap_id: str) -> None:
        folder = self.catalog_dir / snap_id
        if (folder / "files.parquet").is_file():
            return
        from cclq.store.catalog import CATALOG_SCHEMAS

        self._make_copy()
        staging = self.root / "pull" / f"{snap_id}-{uuid.uuid4().hex[:8]}"
        self.store.download(
            [(f"catalog/{snap_id}/{name}.parquet", staging / f"{name}.parquet") for name in CATALOG_SCHEMAS]
        )
        try:
            os.replace(staging, folder)
        except OSError:  # another process of this machine mirrored it meanwhile
            shutil.rmtree(staging, ignore_errors=True)

    def _make_copy(self) -> None:
        self.catalog_dir.mkdir(parents=True, exist_ok=True)
        if not (self.root / MARKER).is_file():
            (self.root / MARKER).write_text(MARKER_TEXT)

    def exists(self) -> bool:
        return super().exists() if self._writing else self._current() is not None

    def current_id(self) -> str:
        if self._writing:
            return super().current_id()
        current = self._current()
        if current is None:
            self.require()
        assert current is not None
        # a writer of this machine may have collected it from the copy since: fetched again
        self._mirror_catalog(current[1])
        return current[1]

    def require(self) -> None:
        if not self.exists():
            raise UsageError(f"no warehouse at {self.url}", hint=f"run `cclq ingest DIR -w {self.url}` first")

    def open_snapshot(self, timeout_s: float = 30.0, snapshot_id: str | None = None) -> Snapshot:
        if not self._writing:
            if snapshot_id is None:
                self.refresh()  # the remote's CURRENT now, not when this object was made
            else:
                self._mirror_catalog(snapshot_id)
            self.trim_cache()
        return super().open_snapshot(timeout_s, snapshot_id)

    def ensure_local(self, paths: Sequence[str]) -> None:
        missing = [p for p in paths if not (self.root / p).is_file()]
        self.store.download([(p, self.root / p) for p in missing])

    def trim_cache(self) -> None:
        """Past ``$CCLQ_REMOTE_CACHE_MB``, drops the copies of data files that the current
        snapshot does not name (a local reader's snapshot keeps its own, as locally)."""
        limit = int(float(os.environ.get(CACHE_MB_ENV, "10240")) * 2**20)
        if not self.root.is_dir() or _folder_bytes(self.root) <= limit:
            return
        import fcntl

        try:
            with open(self.root / ".lock", "a+") as f:
                try:
                    fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    return  # a writer of this machine is at work: trimmed next time
                super().collect_garbage()
        except OSError:
            return

    # -- writing ------------------------------------------------------------
    @contextmanager
    def lock(self) -> Iterator[None]:
        self._make_copy()
        try:
            with super().lock():
                yield
        finally:
            self._writing = False

    def begin_write(self) -> None:
        """The local copy starts from the remote's current snapshot (none: a new warehouse)."""
        self._base = self.refresh()
        self._base_paths = set(self._paths(self._base[1])) if self._base else set()
        self._writing = True
        pointer = self.root / CURRENT
        if self._base is None:
            pointer.unlink(missing_ok=True)
            return
        tmp = self.tmp_dir / f"{uuid.uuid4().hex}.current"
        tmp.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(self._base[1] + "\n")
        os.replace(tmp, pointer)

    def end_write(self) -> None:
        """Publishes the local copy's last snapshot (module docstring), or nothing if the
        writer changed nothing."""
        final = super().current_id()
        base_id = self._base[1] if self._base else None
        if final == base_id:
            return
        from cclq.store.catalog import CATALOG_SCHEMAS

        new = sorted(set(self._paths(final)) - self._base_paths - self.placed)
        self.store.upload([(self.root / p, p) for p in new])
        self.store.upload(
            [
                (self.catalog_dir / final / f"{name}.parquet", f"catalog/{final}/{name}.parquet")
                for name in CATALOG_SCHEMAS
            ]
        )
        if self._base is None:
            self.store.put_bytes(MARKER, MARKER_TEXT.encode())
            etag = self.store.put_bytes(CURRENT, (final + "\n").encode(), if_none_match=True)
        else:
            etag = self.store.put_bytes(CURRENT, (final + "\n").encode(), if_match=self._base[0])
        self._remote = (etag, final)
        self._base, self._base_paths = self._remote, set(self._paths(final))
        self.collect_remote_garbage()

    def _paths(self, snap_id: str) -> list[str]:
        import pyarrow.parquet as pq

        parts = pq.ParquetFile(self.catalog_dir / snap_id / "parts.parquet").read(columns=["path"])
        return parts.column("path").to_pylist()

    # -- garbage ------------------------------------------------------------
    def collect_remote_garbage(self, grace_s: float | None = None) -> int:
        """Deletes snapshots superseded more than ``grace_s`` ago, then data objects that
        no remaining snapshot names and that are older than ``grace_s``. Returns how many
        data objects went."""
        if grace_s is None:
            grace_s = float(os.environ.get(GRACE_ENV, "3600"))
        current = self._current()
        if current is None:
            return 0
        now = time.time_ns()
        grace_ns = int(grace_s * 1e9)
        objects = self.store.list()
        written: dict[str, int] = {}  # snapshot -> when its files.parquet was written
        for key, info in objects.items():
            parts = key.split("/")
            if len(parts) == 3 and parts[0] == "catalog" and parts[2] == "files.parquet":
                written[parts[1]] = info.mtime_ns
        order = sorted(written, key=lambda s: (int(s.split("-")[0]), written[s]))
        gone: list[str] = []
        for i, snap in enumerate(order):
            if snap == current[1]:
                continue
            later = [written[s] for s in order[i + 1 :]] or [now]
            if now - min(later) > grace_ns:  # not current for longer than the grace period
                gone.append(snap)
        live = [s for s in written if s not in gone]
        referenced: set[str] = set()
        for snap in live:
            self._mirror_catalog(snap)
            referenced.update(self._paths(snap))
        doomed = [
            k for k in objects if k.split("/")[0] == "catalog" and len(k.split("/")) == 3 and k.split("/")[1] in gone
        ]
        # the markers of Dask ingests whose client was killed (a live one removes its own)
        doomed += [k for k, info in objects.items() if k.startswith("tmp/") and now - info.mtime_ns > grace_ns]
        data = [
            k
            for k, info in objects.items()
            if data_file_name(k) and k not in referenced and now - info.mtime_ns > grace_ns
        ]
        self.store.delete(doomed + data)
        return len(data)


def data_file_name(key: str) -> bool:
    """Whether ``key`` is a data file by the name cclq gives one (``<table>/trace=<id>/
    <stem>.<12 hex>.parquet``, for a table cclq writes): the only objects collected."""
    from cclq.schema import TABLE_SCHEMAS

    table, _, rest = key.partition("/")
    return table in TABLE_SCHEMAS and bool(DATA_FILE.fullmatch(rest))


def _folder_bytes(root: os.PathLike[str]) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            try:
                total += os.stat(os.path.join(dirpath, name)).st_size
            except OSError:
                pass
    return total
