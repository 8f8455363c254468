"""cclq: a columnar analytics engine for distributed-training profiler traces.

From Python (a notebook): ``ws = cclq.open()`` opens the warehouse (``cclq.api``);
``cclq.TraceAnalysis(trace_dir=...)`` is HTA's API over it (pandas, with the ``hta`` extra). The CLI is ``cclq``
(``cclq.cli``). The package's layers are drawn in docs/architecture.md.

This module is an entry point: its public names are imported when first used, so
``import cclq`` stays light and nothing inside the package imports it.
"""

from __future__ import annotations

from cclq.version import __version__

# not `from typing import ...`: `python -m cclq.main` imports this package first, and its
# client half must start in milliseconds (typing alone costs ~15 ms); mypy reads the name
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from cclq.api.hta import TimeSeriesTypes, TraceAnalysis
    from cclq.api.workspace import Workspace, open

__all__ = ["__version__", "open", "Workspace", "TraceAnalysis", "TimeSeriesTypes"]


def __getattr__(name: str) -> Any:
    if name in ("open", "Workspace"):
        from cclq.api import workspace

        return getattr(workspace, name)
    if name in ("TraceAnalysis", "TimeSeriesTypes"):
        from cclq.api import hta

        return getattr(hta, name)
    raise AttributeError(f"module 'cclq' has no attribute {name!r}")
