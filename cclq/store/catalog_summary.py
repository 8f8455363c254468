"""A catalog snapshot's facts as plain values: what a repeat ``cclq metric`` needs.

A cached metric reads its stored result; before that it needs a few facts of the
catalog: the trace ids (``--trace``), which traces are partial (the warning), and the
inputs its cache key is made of. ``Snapshot.summary`` gives them from the snapshot's
tables; ``cclq.store.summary_cache`` keeps them as JSON, so that a later command reads
them without pyarrow.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

# the layout of the JSON file; another number is a file this cclq does not read
SUMMARY_LAYOUT = 1


@dataclass(frozen=True)
class CatalogSummary:
    """The facts of one snapshot, as plain Python values."""

    snapshot: str
    # (trace, rank, file_id, content_hash, ingest_version): every input file
    inputs: list[tuple[Any, ...]]
    # (trace, card_json): every workload card
    cards: list[tuple[Any, ...]]
    # (trace, world_size, format): every input file, for the partial-trace rule
    file_ranks: list[tuple[Any, ...]]
    # trace -> the ranks that have rows (the parts table)
    ranks: dict[str, list[int]]
    # (trace, total_count, count_per_node): the cards' device counts
    card_counts: list[tuple[Any, ...]]

    def trace_ids(self) -> list[str]:
        """Every trace id the snapshot holds files of, sorted."""
        return sorted({row[0] for row in self.inputs})

    @classmethod
    def from_tables(cls, snapshot: str, tables: dict[str, pa.Table]) -> CatalogSummary:
        files, parts, cards = tables["files"], tables["parts"], tables["cards"]

        def rows(table: pa.Table, columns: tuple[str, ...]) -> list[tuple[Any, ...]]:
            return list(zip(*(table.column(c).to_pylist() for c in columns)))

        ranks: dict[str, set[int]] = {}
        for trace, rank in rows(parts, ("trace", "rank")):
            ranks.setdefault(trace, set()).add(rank)
        return cls(
            snapshot=snapshot,
            inputs=rows(files, ("trace", "rank", "file_id", "content_hash", "ingest_version")),
            cards=rows(cards, ("trace", "card_json")),
            file_ranks=rows(files, ("trace", "world_size", "format")),
            ranks={t: sorted(r) for t, r in ranks.items()},
            card_counts=rows(cards, ("trace", "total_count", "count_per_node")),
        )

    def to_json(self, identity: tuple[int, ...]) -> str:
        return json.dumps(
            {
                "layout": SUMMARY_LAYOUT,
                "snapshot": self.snapshot,
                "identity": list(identity),
                "inputs": self.inputs,
                "cards": self.cards,
                "file_ranks": self.file_ranks,
                "ranks": self.ranks,
                "card_counts": self.card_counts,
            }
        )

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CatalogSummary:
        return cls(
            snapshot=data["snapshot"],
            inputs=[tuple(r) for r in data["inputs"]],
            cards=[tuple(r) for r in data["cards"]],
            file_ranks=[tuple(r) for r in data["file_ranks"]],
            ranks={t: list(r) for t, r in data["ranks"].items()},
            card_counts=[tuple(r) for r in data["card_counts"]],
        )
