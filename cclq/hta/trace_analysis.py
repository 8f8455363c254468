"""``hta.trace_analysis``: ``TraceAnalysis`` and ``TimeSeriesTypes`` (cclq.api.hta)."""

from cclq.api.hta import TimeSeriesTypes, TraceAnalysis

__all__ = ["TimeSeriesTypes", "TraceAnalysis"]
