"""``hta.common.trace``: ``Trace``, what ``TraceAnalysis.t`` is (cclq.api.hta_trace). It is
made by ``TraceAnalysis`` (or ``LabeledTrace``) from an ingested folder; HTA's
``Trace(trace_dir=...)`` constructor and parser options are not covered."""

from cclq.api.hta_trace import Trace

__all__ = ["Trace"]
