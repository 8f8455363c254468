"""Thousands of small files (``cclq bench --small-files N``): N copies of a workload's
Kineto files and card (DLRM's eight ranks: 3,200 files of ~0.9 MB for N = 400), linked,
not copied, each copy a workload of its own, ingested by one ``cclq ingest`` into a fresh
warehouse, compaction included. Per-file costs (opening, detecting, the head and tail,
hashing, a row group, the catalog) are what this measures, not the parse rate."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

from cclq.bench.first_run import timed_child
from cclq.bench.hta import DEFAULT_SHARED_TRACES

SMALL_FILES_SOURCE = "dlrm_param_8xV100"


def small_file_set(copies: int, out_dir: Path, source: Path = DEFAULT_SHARED_TRACES / SMALL_FILES_SOURCE) -> Path:
    """``copies`` workload folders of hard links to ``source``'s Kineto files and card (made once)."""
    from cclq.formats.detect import detect

    root = out_dir / f"{source.name}_x{copies}"
    marker = root / ".complete"
    if marker.exists():
        return root
    shutil.rmtree(root, ignore_errors=True)
    files = []
    for p in sorted(source.iterdir()):
        if p.name == "workload_card.yaml":
            files.append(p)
        elif p.is_file() and p.name.endswith((".json", ".json.gz")):
            try:
                if detect(str(p)).flavor == "kineto":
                    files.append(p)
            except Exception:  # noqa: BLE001 - not a Kineto trace: not part of the set
                continue
    for i in range(copies):
        folder = root / f"{source.name}_{i}"
        folder.mkdir(parents=True)
        for p in files:
            try:
                os.link(p, folder / p.name)
            except OSError:  # another file system: a copy
                shutil.copyfile(p, folder / p.name)
    marker.write_text("ok")
    return root


def run_small_files_bench(copies: int, repeats: int = 3, workdir: Path | None = None) -> list[dict]:
    """`cclq ingest` of the set into a fresh warehouse, best of ``repeats``."""
    base = workdir or Path(tempfile.gettempdir()) / "cclq-bench-small"
    folder = small_file_set(copies, base)
    files = sum(1 for p in folder.rglob("*.json*"))
    runs = []
    for _ in range(max(repeats, 1)):
        wh = Path(tempfile.mkdtemp(prefix="cclq-bench-small-wh-"))
        try:
            runs.append(
                timed_child([sys.executable, "-m", "cclq", "ingest", "-q", str(folder), "--warehouse", str(wh / "wh")])
            )
        finally:
            shutil.rmtree(wh, ignore_errors=True)
    best = min(runs, key=lambda r: r.wall_s)
    return [
        {
            "case": f"cclq ingest of {copies} copies of {SMALL_FILES_SOURCE}'s Kineto files",
            "files": files,
            "wall_s": round(best.wall_s, 2),
            "cpu_s": round(best.cpu_s, 2),
            "ms_cpu_per_file": round(1000 * best.cpu_s / max(files, 1), 2),
            "peak_rss_mb": round(max(r.peak_rss_mb for r in runs)),
            "errors": best.error,
        }
    ]
