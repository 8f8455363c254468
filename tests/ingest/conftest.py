"""Fixtures of the ingest tests."""

from __future__ import annotations

from types import ModuleType

import pytest


@pytest.fixture(scope="session")
def distributed() -> ModuleType:
    """dask's distributed, or the test skipped (the dask extra is not installed). A
    fixture, so that collecting the suite does not import dask (~0.5 s)."""
    return pytest.importorskip("distributed", reason="dask is not installed (the dask extra)")
