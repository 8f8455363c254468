"""Traces that hold fewer ranks than their world size: an interrupted ingest (Ctrl-C
commits what was parsed, and a re-run finishes it) or a folder with files missing.
Their metrics cover the ranks present only, so the entry points warn (the `traces`
view's `flag` says the same). Read from the snapshot's catalog tables, without
starting the query engine (a cached metric never starts it either)."""

from __future__ import annotations

from cclq.store.warehouse import Warehouse


def partial_traces(wh: Warehouse, selection: list[str] | None = None) -> dict[str, str]:
    """trace -> 'N of M ranks' for the selected traces (all with None) whose files state
    a world size larger than the ranks the warehouse holds."""
    with wh.open_snapshot() as snapshot:
        files = snapshot.tables["files"].select(["trace", "world_size"]).to_pylist()
        parts = snapshot.tables["parts"].select(["trace", "rank"]).to_pylist()
    wanted = None if selection is None else set(selection)
    world: dict[str, int] = {}
    for row in files:
        if row["world_size"] is not None and (wanted is None or row["trace"] in wanted):
            world[row["trace"]] = max(world.get(row["trace"], 0), row["world_size"])
    ranks: dict[str, set[int]] = {}
    for row in parts:
        ranks.setdefault(row["trace"], set()).add(row["rank"])
    return {trace: f"{len(ranks.get(trace, ()))} of {size} ranks" for trace, size in sorted(world.items())
            if len(ranks.get(trace, ())) < size}
