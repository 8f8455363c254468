"""Traces that hold fewer ranks than their world size: an interrupted ingest (Ctrl-C
commits what was parsed, and a re-run finishes it), a folder with files missing, or a
sample of a run's ranks. Their metrics cover the ranks present only, so ingest and
`cclq traces` say so (the `traces` view's `flag` says the same, by the same rule:
``expected_ranks``). Read from the snapshot's facts (``cclq.store.summary_cache``),
without the query engine or pyarrow (a cached metric loads neither)."""

from __future__ import annotations

import math

from cclq.store.summary_cache import read_summary
from cclq.store.warehouse import Warehouse

HOST_PROFILE_FORMATS = frozenset({"xprof"})  # one file per host, holding all of its devices


def expected_ranks(
    profiler_world_size: int | None, formats: set[str], total_count: int | None, count_per_node: int | None
) -> int | None:
    """How many ranks (files' ranks) a whole run of the trace has, when anything says:
    the profiler's world size (Kineto's distributedInfo), else the card's device count.
    An xprof profile is one file per host holding all of that host's devices, so there
    the card's devices give hosts only with count_per_node (total_count / count_per_node,
    rounded up); without it nothing is known (a one-host profile of 4 devices is whole)."""
    if profiler_world_size is not None:
        return profiler_world_size
    if not total_count or total_count <= 0:
        return None
    if formats & HOST_PROFILE_FORMATS:
        return math.ceil(total_count / count_per_node) if count_per_node and count_per_node > 0 else None
    return total_count


def partial_traces(wh: Warehouse, selection: list[str] | None = None) -> dict[str, str]:
    """trace -> 'N of M ranks' for the selected traces (all with None) that hold fewer
    ranks than ``expected_ranks``."""
    catalog = read_summary(wh)
    cards = {trace: (total, per_node) for trace, total, per_node in catalog.card_counts}
    wanted = None if selection is None else set(selection)
    world: dict[str, int | None] = {}
    formats: dict[str, set[str]] = {}
    for t, world_size, fmt in catalog.file_ranks:
        if wanted is not None and t not in wanted:
            continue
        formats.setdefault(t, set()).add(fmt)
        if world_size is not None:
            world[t] = max(world.get(t) or 0, world_size)
        else:
            world.setdefault(t, None)
    out = {}
    for trace in sorted(world):
        total, per_node = cards.get(trace, (None, None))
        size = expected_ranks(world[trace], formats[trace], total, per_node)
        seen = len(catalog.ranks.get(trace, ()))
        if size is not None and seen < size:
            out[trace] = f"{seen} of {size} ranks"
    return out
