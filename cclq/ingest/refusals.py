"""Files refused because another file holds their rank, remembered until either changes.

Two files of one folder may claim one rank: CCL-Bench's own layout keeps
``rank0_trace.json`` beside ``kineto_trace_0.json``. The committer keeps the first by path
and refuses the other (``Committer._check``); nothing of the refused file enters the
catalog, so without a memory every later ingest of the folder, and every
``python -m cclq.main`` call on it, parsed it again only to refuse it again (2-3 s a call,
and the same error each time). So a refusal is written down, by the refused file's size,
modification time and content hash and the holder's content hash, in
``<warehouse>/cache/refused.json``, and a later ingest passes the file over ("skipped",
with the reason) while neither file has changed: the refused file's size, mtime or hash
(hash as for ingested files: when the mtime moved, or always with ``--checksum``), or the
holder's content. ``--force`` reads it again. Deleting the file only costs a parse.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

from cclq.errors import show_path
from cclq.ingest.commit import is_unchanged
from cclq.ingest.parse import FileTask
from cclq.ingest.report import FileOutcome
from cclq.schema import INGEST_VERSION
from cclq.store.catalog import CatalogState
from cclq.store.warehouse import Warehouse

FILE = "refused.json"


def memory_path(warehouse: Warehouse) -> Path:
    return warehouse.root / "cache" / FILE


def load(warehouse: Warehouse) -> dict[str, dict]:
    """file_id -> the refusal as written down (empty when there is none, or it cannot be read)."""
    try:
        data = json.loads(memory_path(warehouse).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in data.items() if isinstance(v, dict)} if isinstance(data, dict) else {}


def refusal(task: FileTask, content_hash: str, holder: dict, reason: str) -> dict:
    """What is written down for a file refused in favour of the catalog row ``holder``."""
    return {
        "path": str(task.path),
        "trace": task.trace,
        "size_bytes": task.size,
        "mtime_ns": task.mtime_ns,
        "content_hash": content_hash,
        "ingest_version": INGEST_VERSION,
        "holder": holder["file_id"],
        "holder_path": holder["path"],
        "holder_hash": holder["content_hash"],
        "reason": reason,
    }


def still_refused(
    tasks: list[FileTask], warehouse: Warehouse, state: CatalogState, force: bool, checksum: bool
) -> tuple[list[FileTask], list[FileOutcome]]:
    """``tasks`` without the files a previous ingest refused whose refusal still holds
    (the file and its holder unchanged, the holder still in ``state``), and a "skipped"
    outcome for each of those."""
    memory = {} if force else load(warehouse)
    if not memory:
        return tasks, []
    by_id = {t.file_id: t for t in tasks}
    keep: list[FileTask] = []
    passed: list[FileOutcome] = []
    for task in tasks:
        entry = memory.get(task.file_id)
        if task.previous is None and entry is not None and _holds(entry, task, by_id, state, checksum):
            passed.append(
                FileOutcome(
                    str(task.path),
                    task.trace,
                    "skipped",
                    f"{show_path(task.path)}: not read again: {entry['reason']} (refused before; neither file "
                    "has changed since)",
                    size_bytes=task.size,
                )
            )
        else:
            keep.append(task)
    return keep, passed


def _holds(entry: dict, task: FileTask, by_id: dict[str, FileTask], state: CatalogState, checksum: bool) -> bool:
    if entry.get("path") != str(task.path):
        return False
    try:
        if not is_unchanged(replace(task, previous=entry), False, checksum):
            return False
    except (KeyError, TypeError):  # an entry of another shape: read the file again
        return False
    holder = state.files.get(str(entry.get("holder")))
    if holder is None or holder["content_hash"] != entry.get("holder_hash"):
        return False
    holder_task = by_id.get(holder["file_id"])
    return holder_task is None or is_unchanged(holder_task, False, checksum)


def remember(warehouse: Warehouse, refused: dict[str, dict], ingested: set[str]) -> None:
    """Writes the new refusals down beside the old ones (call under the ingest lock); drops
    those of files ``ingested`` now and of files no longer there. Written only when it
    changes, atomically."""
    path = memory_path(warehouse)
    old = load(warehouse)
    new = {k: v for k, v in old.items() if k not in ingested and k not in refused and os.path.exists(v.get("path", ""))}
    new.update(refused)
    if new == old:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{FILE}.{os.getpid()}")
        tmp.write_text(json.dumps(new, indent=1, sort_keys=True), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        pass  # a memory, not data: the next ingest reads the file again
