"""A cclq cache folder of a test's own that starts with the session's compiled views."""

from __future__ import annotations

import os
import shutil
from pathlib import Path


def own_cache(folder: Path) -> str:
    """``folder`` as a new ``$CCLQ_CACHE_DIR`` for the ``cclq`` processes a test starts
    (results cached apart from every other test's), holding the compiled views of this
    session (tests/conftest.py): each such folder compiled them again, 2-5 s of a busy
    machine, in every S3 and Dask test. The file is linked (copied across file systems);
    cclq only ever replaces it by renaming a new one over it."""
    from cclq.query.view_catalog import catalog_file

    views = catalog_file()
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / views.name
    if not target.exists():
        try:
            os.link(views, target)
        except OSError:
            shutil.copyfile(views, target)
    return str(folder)
