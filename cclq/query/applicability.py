"""Which metrics can apply to which traces, decided from the catalog without running SQL.

A metric's header may state what a trace must have for the metric to give a value, as
``-- applies_if:`` lines of facts that ingest already recorded in the catalog (one per
line, all must hold)::

    -- applies_if: format xprof chrome | no XLA ops (not an XLA/xprof profile)
    -- applies_if: table events | no GPU kernels
    -- applies_if: ranks >= 2 | fewer than two ranks
    -- applies_if: card phase inference serving none | the workload card says phase {phase} (...)

``format F ...``: a file of the trace was read as one of these formats (``files.format``:
kineto, chrome, xprof, horovod, nsys_*, pytorch_et, ddlb_csv, ...; ``*`` ends a prefix);
``table T ...``: the trace has rows in one of these data tables (``parts``); ``ranks >= N``: it has data
of N ranks or more; ``card phase P ...``: the trace's workload card gives one of these phases
(lower case; ``none``: no card, or no phase in it). The text after ``|`` is the reason shown
for a trace that fails the fact, the same words the metric's SQL gives for it (``{phase}`` is
the card's phase); a fact that the SQL checks before others comes first, so that the first
fact a trace fails gives the reason the SQL would.

A fact is a necessary condition only: a trace that meets every fact still runs the SQL,
which may find the metric does not apply for a finer reason. Report, diff and board skip
a metric whose facts no selected trace meets (``plan``), and answer "not applicable" for
it from the catalog (``cclq.query.metrics.run_metrics``); ``cclq metrics --applicable``
lists the decision. The ``needs:`` line stays the words for people.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING

from cclq.query.registry import MetricSpec

if TYPE_CHECKING:
    from cclq.query.session import Session

KEY = "applies_if"
_LINE = re.compile(r"^--\s*applies_if:\s*(?P<fact>.*?)\s*\|\s*(?P<reason>.+?)\s*$")
_FORMAT = re.compile(r"^format\s+(?P<values>[a-z0-9_* ]+)$")
_TABLE = re.compile(r"^table\s+(?P<tables>[a-z_ ]+)$")
_RANKS = re.compile(r"^ranks\s*>=\s*(?P<n>\d+)$")
_PHASE = re.compile(r"^card phase\s+(?P<values>[a-z_ ]+)$")


@dataclass(frozen=True)
class Fact:
    """One ``applies_if`` line: what the catalog must show, and the reason if it does not."""

    kind: str  # format | table | ranks | card_phase
    values: tuple[str, ...]  # formats (a trailing * is a prefix), the tables, the rank count or the phases
    reason: str

    def holds(self, facts: TraceFacts) -> bool:
        if self.kind == "format":
            return any(f == v or (v.endswith("*") and f.startswith(v[:-1])) for v in self.values for f in facts.formats)
        if self.kind == "table":
            return any(t in facts.tables for t in self.values)
        if self.kind == "card_phase":  # `none` is the absence of a phase, never a card's own word
            if facts.card_phase is None:
                return "none" in self.values
            return facts.card_phase != "none" and facts.card_phase in self.values
        return facts.ranks >= int(self.values[0])

    def reason_for(self, facts: TraceFacts) -> str:
        return self.reason.replace("{phase}", facts.card_phase or "")

    def __str__(self) -> str:
        text = {
            "format": "format " + " ".join(self.values),
            "table": "table " + " ".join(self.values),
            "ranks": f"ranks >= {self.values[0]}",
            "card_phase": "card phase " + " ".join(self.values),
        }[self.kind]
        return text


@dataclass(frozen=True)
class TraceFacts:
    """What the catalog knows of one trace: the formats of its files, the data tables it
    has rows in, how many ranks it has data of, and its card's phase (lower case; None
    without a card or a phase)."""

    trace: str
    formats: frozenset[str] = field(default_factory=frozenset)
    tables: frozenset[str] = field(default_factory=frozenset)
    ranks: int = 0
    card_phase: str | None = None


@lru_cache(maxsize=1024)
def parse_facts(spec: MetricSpec) -> tuple[Fact, ...]:
    """The ``applies_if`` lines of a metric's header, in order (cached: the board asks
    for every (metric, trace), 16,500 parses and 2 s over 500 workloads before)."""
    facts = []
    for line in spec.text.splitlines():
        if not line.startswith("--"):
            break
        if not re.match(r"^--\s*applies_if:", line):
            continue
        m = _LINE.match(line)
        if not m:
            raise ValueError(f"{spec.path}: bad applies_if line {line!r} (want `-- applies_if: FACT | reason`)")
        fact, reason = m["fact"], m["reason"]
        if (f := _FORMAT.match(fact)) is not None:
            facts.append(Fact("format", tuple(f["values"].split()), reason))
        elif (t := _TABLE.match(fact)) is not None:
            facts.append(Fact("table", tuple(t["tables"].split()), reason))
        elif (r := _RANKS.match(fact)) is not None:
            facts.append(Fact("ranks", (r["n"],), reason))
        elif (c := _PHASE.match(fact)) is not None:
            facts.append(Fact("card_phase", tuple(c["values"].split()), reason))
        else:
            raise ValueError(
                f"{spec.path}: unknown applies_if fact {fact!r} (format F.., table T.., ranks >= N, card phase P..)"
            )
    return tuple(facts)


def unmet(spec: MetricSpec, facts: TraceFacts) -> str | None:
    """The reason the metric cannot apply to this trace, from the catalog; None if it may."""
    for fact in parse_facts(spec):
        if not fact.holds(facts):
            return fact.reason_for(facts)
    return None


def trace_facts(session: Session) -> dict[str, TraceFacts]:
    """trace -> TraceFacts for every trace the session sees, from its catalog tables
    (``files``, ``parts``: small in-memory tables, no data file is read). Asked once per
    session (its snapshot does not change): a batch plans before its shared views are
    computed and again inside their block, where a query on the session would wait for
    them."""
    known = session.memo.get("trace_facts")
    if known is not None:
        return dict(known)
    rows = session.execute(
        "SELECT trace, list(DISTINCT format) FILTER (WHERE format IS NOT NULL) FROM files GROUP BY trace"
    ).fetchall()
    formats = {t: frozenset(f or []) for t, f in rows}
    parts = session.execute(
        "SELECT trace, list(DISTINCT table_name) FILTER (WHERE rows > 0), "
        "count(DISTINCT rank) FILTER (WHERE table_name <> 'results') FROM parts GROUP BY trace"
    ).fetchall()
    tables = {t: (frozenset(names or []), int(n or 0)) for t, names, n in parts}
    phases = dict(session.execute("SELECT trace, lower(phase) FROM cards WHERE phase IS NOT NULL").fetchall())
    facts = {
        t: TraceFacts(t, formats.get(t, frozenset()), *tables.get(t, (frozenset(), 0)), card_phase=phases.get(t))
        for t in sorted(set(formats) | set(tables))
    }
    session.memo["trace_facts"] = facts
    return dict(facts)


@dataclass
class Plan:
    """For each metric: the traces it may apply to (its SQL runs), and the reason for each
    trace it cannot apply to (from the catalog)."""

    runs: dict[str, list[str]]  # metric -> traces whose facts hold
    skipped: dict[str, dict[str, str]]  # metric -> trace -> reason

    def applies_nowhere(self, name: str) -> bool:
        return not self.runs.get(name)


def plan(specs: list[MetricSpec], facts: dict[str, TraceFacts]) -> Plan:
    runs: dict[str, list[str]] = {}
    skipped: dict[str, dict[str, str]] = {}
    for spec in specs:
        for trace, f in facts.items():
            reason = unmet(spec, f)
            if reason is None:
                runs.setdefault(spec.name, []).append(trace)
            else:
                skipped.setdefault(spec.name, {})[trace] = reason
    return Plan(runs, skipped)
