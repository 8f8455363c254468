"""Synthetic Horovod timelines (``HOROVOD_TIMELINE``), written the way Horovod's
``TimelineWriter`` writes them (horovod/common/timeline.cc), for tests:

* one JSON array for the whole job, written by rank 0; each tensor is a "process"
  (``pid`` = a 1-based index in order of first appearance, named by a ``process_name``
  metadata event), events carry no ``tid`` and no ``cat``, ``ts`` is in microseconds
  from the timeline's start;
* per tensor operation: ``NEGOTIATE_<OP>`` (B), one ``X`` tick of zero duration per rank
  as it reports ready (named by the rank number), E; then ``<OP>`` (B) with nested
  activities (``QUEUE``, ``MEMCPY_IN_FUSION_BUFFER``, ``NCCL_ALLREDUCE``, ...) and a
  closing E whose args give the tensor's dtype and shape;
* ``CYCLE_START`` instants (``s: g``, no pid) when cycles are marked;
* ``version="new"`` (Horovod >= 0.20.1): valid JSON, opened by the pid-0 metadata with
  ``start_time_since_epoch_in_micros``; ``version="old"`` (<= 0.20.0): ``[`` then every
  event followed by ``,\\n`` and no closing ``]``; ``truncate_bytes`` cuts the file short
  (a killed job).

Times are integer microseconds placed by the test, so expected metric values can be
worked out by hand.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class TensorOp:
    """One tensor's operation: when each rank reported ready, and its phases."""

    tensor: str
    op: str  # ALLREDUCE, ALLGATHER, BROADCAST, ...
    ready_us: dict[int, int]  # rank -> tick time (negotiation spans first tick .. last tick + 1)
    phases: list[tuple[str, int, int]]  # (activity, start us, end us), inside the op
    dtype: str = "float32"
    shape: list[int] = field(default_factory=lambda: [1024])


class HorovodTimelineBuilder:
    def __init__(self, start_epoch_us: int = 1_700_000_000_000_000) -> None:
        self.start_epoch_us = start_epoch_us
        self.ops: list[TensorOp] = []
        self.cycles: list[int] = []

    def op(
        self,
        tensor: str,
        op: str,
        ready_us: dict[int, int],
        phases: list[tuple[str, int, int]],
        dtype: str = "float32",
        shape: list[int] | None = None,
    ) -> TensorOp:
        t = TensorOp(tensor, op, ready_us, phases, dtype, shape or [1024])
        self.ops.append(t)
        return t

    def cycle(self, ts_us: int) -> None:
        self.cycles.append(ts_us)

    def events(self, version: str = "new") -> list[dict[str, Any]]:
        """The events in the order Horovod writes them (by time; metadata first)."""
        timed: list[tuple[int, int, dict[str, Any]]] = []  # (ts, order, event)
        pids: dict[str, int] = {}
        head: list[dict[str, Any]] = []
        if version == "new":
            head.append(
                {
                    "name": "process_name",
                    "ph": "M",
                    "pid": 0,
                    "args": {"start_time_since_epoch_in_micros": self.start_epoch_us},
                }
            )
            head.append({"name": "process_sort_index", "ph": "M", "pid": 0, "args": {"sort_index": 0}})
        order = 0
        for t in self.ops:
            if t.tensor not in pids:
                pids[t.tensor] = len(pids) + 1
                pid = pids[t.tensor]
                first = min(t.ready_us.values())
                timed.append(
                    (first, order, {"name": "process_name", "ph": "M", "pid": pid, "args": {"name": t.tensor}})
                )
                timed.append(
                    (
                        first,
                        order + 1,
                        {"name": "process_sort_index", "ph": "M", "pid": pid, "args": {"sort_index": pid}},
                    )
                )
                order += 2
            pid = pids[t.tensor]
            ticks = sorted((ts, r) for r, ts in t.ready_us.items())
            timed.append((ticks[0][0], order, {"ph": "B", "name": f"NEGOTIATE_{t.op}", "ts": ticks[0][0], "pid": pid}))
            for ts, r in ticks:
                order += 1
                timed.append((ts, order, {"ph": "X", "name": str(r), "ts": ts, "pid": pid, "dur": 0}))
            order += 1
            timed.append((ticks[-1][0] + 1, order, {"ph": "E", "ts": ticks[-1][0] + 1, "pid": pid}))
            op_start = min(s for _, s, _ in t.phases)
            op_end = max(e for _, _, e in t.phases)
            order += 1
            timed.append((op_start, order, {"ph": "B", "name": t.op, "ts": op_start, "pid": pid}))
            for name, s, e in t.phases:
                order += 1
                timed.append((s, order, {"ph": "B", "name": name, "ts": s, "pid": pid}))
                order += 1
                timed.append((e, order, {"ph": "E", "ts": e, "pid": pid}))
            order += 1
            timed.append(
                (
                    op_end,
                    order,
                    {"ph": "E", "ts": op_end, "pid": pid, "args": {"dtype": t.dtype, "shape": str(t.shape)}},
                )
            )
            order += 1
        for ts in self.cycles:
            order += 1
            timed.append((ts, order, {"ph": "i", "name": "CYCLE_START", "ts": ts, "s": "g"}))
        return head + [ev for _, _, ev in sorted(timed, key=lambda x: (x[0], x[1]))]

    def write(self, path: str | Path, version: str = "new", truncate_bytes: int | None = None) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        events = self.events(version)
        if version == "new":
            text = "[\n" + ",\n".join(json.dumps(e) for e in events) + "\n]\n"
        else:  # TimelineWriter before 0.20.1: "[", then every event followed by ",\n"
            text = "[\n" + "".join(json.dumps(e) + ",\n" for e in events)
        data = text.encode()
        if truncate_bytes is not None:
            data = data[: len(data) - truncate_bytes]
        path.write_bytes(data)
        return path
