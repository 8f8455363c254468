"""Comparing result rows of two runs of the same query."""

from __future__ import annotations

import math


def close(a: object, b: object) -> bool:
    """Equal, floats to 1e-12 relative (dicts key by key): DuckDB sums and averages in the
    order its threads finish, so a float's last bits may differ between two runs of one
    query (docs/dask.md names the metrics where it was seen)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(close(a[k], b[k]) for k in a)
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, (int, float)) and isinstance(b, (int, float)) and math.isclose(a, b, rel_tol=1e-12)
    return a == b
