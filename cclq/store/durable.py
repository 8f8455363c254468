"""Durability and the disk's refusals: fsync before a rename publishes a file (as SQLite
and DuckDB commit), and the errors a full or read-only disk gives, as the user reads them."""

from __future__ import annotations

import errno
import os
import threading
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


def replace_with_text(path: Path, text: str) -> bool:
    """Writes ``text`` to a new file beside ``path`` and renames it over ``path``, so that
    a reader, or a process that has it open, never sees half a file. False when it cannot
    be written (the new file removed): for files that only save time (caches)."""
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}-{threading.get_ident()}")  # threads of a daemon too
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
        return True
    except OSError:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        return False
