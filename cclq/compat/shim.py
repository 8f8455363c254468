"""``cclq ccl-bench shim DIR``: makes a CCL-Bench checkout answer through cclq.

CCL-Bench's website scripts (``website/generate_data.py``, ``website/process_upload.py``)
run ``python tools/main.py --trace D --metric M`` by path and read the last line of
stdout. The shim written to ``DIR/tools/main.py`` keeps that call and hands it to
``python -m cclq.main`` (same flags, same output, the warm daemon included), with the
warehouse pinned to ``DIR/.cclq/warehouse`` whatever folder the scripts run from.
CCL-Bench's own main.py is kept beside it as ``tools/main_ccl_bench.py`` (it still
runs: it finds its tool folders from its own location), and ``.cclq/`` is added to
``DIR/.gitignore`` so the warehouse is never committed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cclq.errors import UsageError

SHIM = '''#!/usr/bin/env python3
"""CCL-Bench's metric entry point, answered by cclq (written by `cclq ccl-bench shim`).

Same call as before: python tools/main.py --trace DIR --metric NAME [--model_params N]
prints one number as its last stdout line (nan where the metric does not apply; the
reason goes to stderr). The traces are ingested once into .cclq/warehouse at the top
of this checkout and answered from there (docs/ccl-bench.md in cclq). CCL-Bench's own
dispatcher is tools/main_ccl_bench.py.
"""
import os
import sys

if __name__ == "__main__":
    # os.path, not pathlib: pathlib's imports were a third of a warm call's start
    root = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
    os.environ.setdefault("CCLQ_WAREHOUSE", os.path.join(root, ".cclq", "warehouse"))
    try:
        from cclq.compat.main import main
    except ImportError:
        sys.exit("tools/main.py: cclq is not installed in this Python (pip install cclq), "
                 "or run tools/main_ccl_bench.py for CCL-Bench's own tools")
    sys.exit(main())
'''
MARK = "written by `cclq ccl-bench shim`"
IGNORE_LINE = ".cclq/"


@dataclass
class ShimResult:
    shim: Path
    kept: Path | None  # where CCL-Bench's main.py went (None: there was none, or already a shim)
    gitignore_changed: bool


def write_shim(checkout: Path, force: bool = False) -> ShimResult:
    """Writes the shim; refuses to replace a main.py that is not a shim unless ``force``."""
    if not checkout.is_dir():
        raise UsageError(f"{checkout}: no such folder", hint="give the CCL-Bench checkout (the folder holding tools/)")
    tools = checkout / "tools"
    main = tools / "main.py"
    kept = None
    if main.is_file() and MARK not in main.read_text(encoding="utf-8", errors="replace"):
        backup = tools / "main_ccl_bench.py"
        if not force:
            raise UsageError(
                f"{main} is CCL-Bench's own dispatcher",
                hint=f"--force moves it to {backup.name} and writes the shim in its place",
            )
        if backup.exists():
            raise UsageError(f"{backup} exists already; move it away first")
        main.rename(backup)
        kept = backup
    tools.mkdir(parents=True, exist_ok=True)
    tmp = main.with_name(".main.py.tmp")
    tmp.write_text(SHIM, encoding="utf-8")
    tmp.chmod(0o755)
    tmp.replace(main)
    ignore = checkout / ".gitignore"
    lines = ignore.read_text(encoding="utf-8").splitlines() if ignore.is_file() else []
    changed = IGNORE_LINE not in {ln.strip() for ln in lines}
    if changed:
        ignore.write_text(
            "\n".join([*lines, "# cclq's warehouse (cclq ccl-bench shim)", IGNORE_LINE]) + "\n", encoding="utf-8"
        )
    return ShimResult(main, kept, changed)
