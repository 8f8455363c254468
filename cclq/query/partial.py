"""Traces that hold fewer ranks than their world size: an interrupted ingest (Ctrl-C
commits what was parsed, and a re-run finishes it), a folder with files missing, or a
sample of a run's ranks. Their metrics cover the ranks present only, so ingest and
`cclq traces` say so (the `traces` view's `flag` says the same, by the same rule:
``expected_ranks``). Read from the snapshot's catalog tables, without starting the query
engine (a cached metric never starts it either)."""

from __future__ import annotations

import math

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
    with wh.open_snapshot() as snapshot:
        files = snapshot.tables["files"].select(["trace", "world_size", "format"]).to_pylist()
        parts = snapshot.tables["parts"].select(["trace", "rank"]).to_pylist()
        cards = {
            row["trace"]: row
            for row in snapshot.tables["cards"].select(["trace", "total_count", "count_per_node"]).to_pylist()
        }
    wanted = None if selection is None else set(selection)
    world: dict[str, int | None] = {}
    formats: dict[str, set[str]] = {}
    for row in files:
        if wanted is not None and row["trace"] not in wanted:
            continue
        t = row["trace"]
        formats.setdefault(t, set()).add(row["format"])
        if row["world_size"] is not None:
            world[t] = max(world.get(t) or 0, row["world_size"])
        else:
            world.setdefault(t, None)
    ranks: dict[str, set[int]] = {}
    for row in parts:
        ranks.setdefault(row["trace"], set()).add(row["rank"])
    out = {}
    for trace in sorted(world):
        card = cards.get(trace, {})
        size = expected_ranks(world[trace], formats[trace], card.get("total_count"), card.get("count_per_node"))
        seen = len(ranks.get(trace, ()))
        if size is not None and seen < size:
            out[trace] = f"{seen} of {size} ranks"
    return out
