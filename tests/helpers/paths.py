"""Where the repository and the project's real traces are (``../shared``, or ``$CCLQ_SHARED``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("CCLQ_SHARED", REPO.parent / "shared"))
SHARED_TRACES = SHARED / "traces"
GOLDEN = SHARED / "golden" / "hta"


def require_shared() -> Path:
    """The real traces' folder, or the calling test skipped (a fresh clone has none)."""
    if not SHARED_TRACES.is_dir():
        pytest.skip(f"real traces not available ({SHARED_TRACES} is absent)")
    return SHARED_TRACES
