"""Fixtures of the record tests. torch (the `record` extra) is imported by the tests that
use it, through these fixtures, never when the suite is collected: without torch they
skip, and collecting the suite does not pay torch's import (~2 s)."""

from __future__ import annotations

import warnings
from types import ModuleType

import pytest


@pytest.fixture(scope="session")
def torch() -> ModuleType:
    """torch, or the test skipped (the `record` extra is not installed)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
        return pytest.importorskip("torch", reason="torch is not installed (the record extra)")


@pytest.fixture(scope="session")
def primitives(torch: ModuleType) -> ModuleType:
    """cclq.record.primitives (it imports torch)."""
    from cclq.record import primitives

    return primitives
