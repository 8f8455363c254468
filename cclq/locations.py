"""Where things are: the warehouse (``--warehouse``, else ``$CCLQ_WAREHOUSE``, else
``./.cclq/warehouse``), the package's own files and the SQL folder.

Standard library only, so that a light process (the client half of ``python -m cclq.main``,
see ``cclq/compat/daemon.py``) can find the warehouse without importing pyarrow or DuckDB.
"""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_WAREHOUSE = ".cclq/warehouse"
WAREHOUSE_ENV = "CCLQ_WAREHOUSE"
PACKAGE_DIR = Path(__file__).resolve().parent  # the installed (or checked-out) cclq/


def sql_root() -> Path:
    """The SQL folder: ``cclq/sql`` in a wheel (pyproject maps it there), ``sql/`` beside
    the package in a checkout."""
    packaged = PACKAGE_DIR / "sql"
    if packaged.is_dir():
        return packaged
    checkout = PACKAGE_DIR.parent / "sql"
    if checkout.is_dir():
        return checkout
    raise FileNotFoundError("cclq's sql/ folder is missing from this installation")


def resolve_warehouse(option: str | None) -> Path:
    """``--warehouse`` first, then ``$CCLQ_WAREHOUSE``, then ``./.cclq/warehouse``."""
    chosen = option or os.environ.get(WAREHOUSE_ENV) or DEFAULT_WAREHOUSE
    return Path(chosen).expanduser().resolve()
