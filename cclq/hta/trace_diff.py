"""``hta.trace_diff``: ``TraceDiff``, ``LabeledTrace``, ``DeviceType`` (cclq.api.hta_diff,
over the macro ``hta_trace_diff``)."""

from cclq.api.hta_diff import DeviceType, LabeledTrace, TraceDiff

__all__ = ["DeviceType", "LabeledTrace", "TraceDiff"]
