"""Durability and the disk's refusals: fsync before a rename publishes a file (as SQLite
and DuckDB commit), and the errors a full or read-only disk gives, as the user reads them."""

from __future__ import annotations

import errno
import os
from collections.abc import Sequence
from pathlib import Path

from cclq.errors import UsageError

FSYNC_ENV = "CCLQ_FSYNC"


def fsync_enabled() -> bool:
    return os.environ.get(FSYNC_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


FSYNC_THREADS = 8


def fsync_all(paths: Sequence[Path]) -> None:
    """``fsync_path`` of every path, several at once: a commit of many small files waited
    for each fsync in turn (a few ms each on the reference VM, most of a small file's
    commit); the disk and the journal take concurrent ones together. Errors surface as
    the first one's."""
    if len(paths) <= 1:
        for path in paths:
            fsync_path(path)
        return
    from concurrent.futures import ThreadPoolExecutor  # only for commits with several files

    with ThreadPoolExecutor(min(FSYNC_THREADS, len(paths)), thread_name_prefix="cclq-fsync") as pool:
        for _ in pool.map(fsync_path, paths):
            pass


def fsync_path(path: Path) -> None:
    """Flushes a file's data, or a directory's entries, to the disk."""
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if path.is_dir() else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class ReadOnlyWarehouse(UsageError):
    """The warehouse cannot be written (a read-only mount, no permission)."""


def read_only_error(root: Path, e: OSError) -> UsageError:
    return ReadOnlyWarehouse(
        f"{root}: the warehouse is not writable ({e.strerror or e}); cclq ingest cannot write it",
        hint="point --warehouse at a writable folder; reading commands work on a read-only warehouse",
    )


def is_disk_full(e: BaseException) -> bool:
    return isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT)
