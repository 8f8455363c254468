"""Where the warehouse is: ``--warehouse``, else ``$CCLQ_WAREHOUSE``, else ``./.cclq/warehouse``.

Standard library only, so that a light process (the client half of ``python -m cclq.main``,
see ``cclq/daemon.py``) can find the warehouse without importing pyarrow or DuckDB.
"""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_WAREHOUSE = ".cclq/warehouse"
WAREHOUSE_ENV = "CCLQ_WAREHOUSE"


def resolve_warehouse(option: str | None) -> Path:
    """``--warehouse`` first, then ``$CCLQ_WAREHOUSE``, then ``./.cclq/warehouse``."""
    chosen = option or os.environ.get(WAREHOUSE_ENV) or DEFAULT_WAREHOUSE
    return Path(chosen).expanduser().resolve()
