"""A catalog snapshot's facts (``CatalogSummary``) kept as JSON beside the result cache.

Read from the snapshot's Parquet files the facts cost the import of pyarrow and numpy,
0.2 s of a 0.6 s cached ``cclq metric``. So the first command that looks in a snapshot
keeps them in ``cache/snapshots/<id>.json`` with the identity of the snapshot's
``files.parquet`` (device, inode, mtime, size), and a later command uses them only while
``CURRENT`` names that snapshot and the file is the same one (a warehouse deleted and
made again at the same path starts its ids over). Otherwise the snapshot is read as
before. A snapshot never changes once written, so neither do its facts; a file that
cannot be written costs the next command the slower read, nothing else.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from cclq.store.catalog_summary import SUMMARY_LAYOUT, CatalogSummary
from cclq.store.durable import replace_with_text
from cclq.store.warehouse import Warehouse


def summary_file(wh: Warehouse, snapshot: str) -> Path:
    return wh.root / "cache" / "snapshots" / f"{snapshot}.json"


def _identity(wh: Warehouse, snapshot: str) -> tuple[int, ...] | None:
    try:
        st = os.stat(wh.catalog_dir / snapshot / "files.parquet")
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)


# The facts last read in this process, with the warehouse root, snapshot and identity
# they are for: one command asks for them up to three times (`cclq metric --trace T`:
# the trace check, the partial-trace warning and the cached result), and a warehouse of
# thousands of files keeps ~1 MB of JSON. A changed identity reads the file again.
_last: tuple[Path, str, tuple[int, ...], CatalogSummary] | None = None


def kept_summary(wh: Warehouse) -> CatalogSummary | None:
    """The current snapshot's kept facts, or None (none kept, another layout, a file
    that is not the snapshot's any more, a warehouse that keeps none)."""
    global _last
    if not wh.keeps_summaries or not wh.exists():
        return None
    try:
        snapshot = wh.current_id()
        identity = _identity(wh, snapshot)
        if identity is None:
            return None
        if _last is not None and _last[:3] == (wh.root, snapshot, identity):
            return _last[3]
        data = json.loads(summary_file(wh, snapshot).read_text())
        if data.get("layout") != SUMMARY_LAYOUT or tuple(data["identity"]) != identity:
            return None
        summary = CatalogSummary.from_json(data)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    _last = (wh.root, snapshot, identity, summary)
    return summary


def keep_summary(wh: Warehouse, summary: CatalogSummary) -> None:
    """Writes the facts of ``summary``'s snapshot (replacing an unreadable file), and
    removes those of snapshots that are gone. Never fails the command."""
    if not wh.keeps_summaries:
        return
    path = summary_file(wh, summary.snapshot)
    identity = _identity(wh, summary.snapshot)
    if identity is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError:
        return
    if replace_with_text(path, summary.to_json(identity)):
        for old in path.parent.glob("*.json"):
            if not (wh.catalog_dir / old.stem).is_dir():
                old.unlink(missing_ok=True)


def read_summary(wh: Warehouse) -> CatalogSummary:
    """The current snapshot's facts: kept ones, or read from the snapshot (and kept)."""
    summary = kept_summary(wh)
    if summary is None:
        with wh.open_snapshot() as snapshot:
            summary = snapshot.summary
        keep_summary(wh, summary)
    return summary
