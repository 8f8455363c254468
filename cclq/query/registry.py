"""The metric registry: versioned SQL files, parsed into ``MetricSpec``s, found by name.

A metric is ``sql/metrics/<name>/v<N>.sql``: a header of ``-- key: value`` lines,
then exactly one SELECT. Header keys:

``metric``, ``version`` (must match the path), ``unit``, ``grain`` (trace | rank |
step), ``category`` (the group reports and boards show it in: ``CATEGORIES``),
``polarity`` (higher | lower | neutral: which way is better, for sorting and diffs),
``leaderboard`` (optional: the CCL-Bench website category the metric is shown
under, ``LEADERBOARD_CATEGORIES``), ``description`` (one line), ``needs`` (what a
trace must have; shown by ``cclq metrics``), ``params`` (``name = card.<column>``
or ``name default <value>``, comma-separated), ``summary`` (how ``python -m
cclq.main`` reduces the rows of one trace to one number: ``mean`` of the values,
``sum``, ``max``, ``min``, ``value`` (the single row's), or ``ratio A / B``: ΣA / ΣB
over the rows, two detail columns pooled across ranks, as CCL-Bench pools kernels
of every rank file for some metrics; default mean, or value for trace grain),
``ccl_bench_unit`` (optional, only for a ``ratio`` metric: ``%`` where CCL-Bench's own
tool prints percent, so ``python -m cclq.main`` and CCL-Bench's website data show the
value x 100, ``MetricSpec.ccl_bench_value``; ``ratio`` where CCL-Bench writes it as a
ratio too; a ratio without it is cclq's own 0..1 fraction, which the website data shows
as percent), ``ccl_bench_trace_types`` (optional: the trace types CCL-Bench's website
config lists for the metric, comma-separated, in its order; the board writes them into
``metric_info``, and a batch computes these metrics ahead, ``compat.warm``),
``leaderboard_headline`` (optional, ``yes``: one of the board's
headline columns, shown before its category is opened; at most eight in all, so that
the board fits 1400 px), ``family`` (the question the metric answers, ``FAMILIES``: how ``cclq metrics`` and
docs/metrics.md group metrics) and ``see_also`` (near-synonyms and related metrics,
comma-separated names, each a metric).

The SELECT reads the views of ``sql/views`` plus two relations the runner defines:
``metric_scope`` (one row per selected (trace, rank)) and ``metric_params`` (one
row per selected trace, a column per declared parameter: ``--param`` first, then
the workload card, then the default). It returns ``trace``, ``value``, optionally
``rank``, ``step`` and ``reason`` (why ``value`` is NULL: the trace does not meet
the metric's needs), then any detail columns. The runner puts the columns in the
documented order: trace, rank, step, value, unit, reason, details.

``columns`` documents the detail columns, in the order the query returns them, as a
block under the header's other keys::

    -- columns:
    --   steps_used  steps averaged (the inner ones)
    --   source      the record the steps come from
    --               (a deeper-indented line continues the phrase)

(``-- columns: none ...`` when there are none). ``documented_columns`` reads it;
tests/query/test_sql_contract.py runs every metric and checks the block against the result.

Versions that differ only in a rules version share one body, ``<name>_rows(<rules
version>, metric_scope)`` in ``sql/views/metric_bodies/<name>.sql``; each version's
file keeps its complete header. ``sql/metrics/CHECKSUMS`` freezes each released
version's code (``frozen_sql``).

A released version never changes meaning: a new definition is a new file.
"""

from __future__ import annotations

import difflib
import hashlib
import re
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from cclq.errors import UsageError
from cclq.locations import sql_root
from cclq.query.sqlfiles import modules_for, parse_doc_block, strip_comments

if TYPE_CHECKING:
    import pyarrow as pa

GRAINS = ("trace", "rank", "step")


# Report groups, in the order reports show them (title for people, id in headers).
CATEGORIES: dict[str, str] = {
    "step_time": "Step time and throughput",
    "communication": "Communication",
    "compute": "Compute",
    "memory": "Memory",
    "collectives": "Collectives",
    "inference": "Inference latency",
    "hta": "HTA breakdowns",
}


POLARITIES = ("higher", "lower", "neutral")


# The question a metric answers (the header's ``family``), in the order ``cclq metrics`` and
# docs/metrics.md show them: what a newcomer looks for, rather than the report group.
FAMILIES: dict[str, str] = {
    "time": "How long does a step take, and where does the time go?",
    "communication": "How much of the time is communication?",
    "overlap": "How much communication does compute hide?",
    "collectives": "Which collective is slow, and how much does it move?",
    "stragglers": "Who straggles, and how uneven are the ranks?",
    "inference": "Inference latency and serving throughput",
    "memory": "What do memory traffic and copies cost?",
    "efficiency": "How well is the hardware used?",
    "hta": "HTA's breakdowns, as HTA computes them",
}


# CCL-Bench's website categories (website/benchmark_config.json, metric_categories).
LEADERBOARD_CATEGORIES: dict[str, str] = {
    "model_execution": "Model Execution",
    "gpu_efficiency": "GPU Efficiency",
    "memory": "Memory",
    "communication": "Communication",
    "what_if": "What-If Simulation",
}


SUMMARIES = ("mean", "sum", "max", "min", "value", "ratio")


# `ratio <numerator column> / <denominator column>`
_RATIO = re.compile(r"^ratio\s+(?P<num>[a-z_][a-z0-9_]*)\s*/\s*(?P<den>[a-z_][a-z0-9_]*)$")


_HEADER = re.compile(r"^--\s*([a-z_]+):\s*(.*?)\s*$")


_PARAM = re.compile(
    r"^(?P<name>[a-z_][a-z0-9_]*)\s*(?:=\s*card\.(?P<card>[a-z_0-9]+))?"
    r"\s*(?:default\s+(?P<default>\S+))?$"
)


@dataclass(frozen=True)
class Param:
    name: str
    card_column: str | None
    default: str | None


@dataclass(frozen=True)
class MetricSpec:
    name: str
    version: int
    unit: str
    grain: str
    category: str
    polarity: str
    leaderboard: str | None
    description: str
    needs: str
    summary: str  # mean | sum | max | min | value | ratio
    params: tuple[Param, ...]
    sql: str
    path: Path
    text: str  # the whole file: header and SQL (part of the result cache key)

    summary_columns: tuple[str, str] | None  # (numerator, denominator) of a ratio summary
    ccl_bench_unit: str | None = None  # what CCL-Bench's tool prints, when it is not ``unit``
    # what the value takes for granted that a trace may not give (``-- assumes:``): ``gpu``
    # (GPUs ran it), or parameter names whose default stands for the hardware
    # (``link_gbs``); report and board say so where it is the case
    assumes: tuple[str, ...] = ()
    # the trace types CCL-Bench's website config lists for it (``-- ccl_bench_trace_types:``)
    ccl_bench_trace_types: tuple[str, ...] = ()
    family: str | None = None  # the question it answers (``FAMILIES``)
    # a headline column of the board, shown before its category is opened
    leaderboard_headline: bool = False
    see_also: tuple[str, ...] = ()  # near-synonyms and related metrics, by name

    @property
    def label(self) -> str:
        return f"{self.name} v{self.version}"

    @property
    def ccl_bench_scale(self) -> float:
        """The factor from this metric's value to the number CCL-Bench's tool prints."""
        return 100.0 if self.ccl_bench_unit == "%" else 1.0

    @property
    def shown_unit(self) -> str:
        """The unit of ``ccl_bench_value``: CCL-Bench's where it declares one, else ``unit``."""
        return self.ccl_bench_unit or self.unit

    def ccl_bench_value(self, value: float | None) -> float | None:
        """A summary in the unit CCL-Bench's own tool prints it in (percent where that tool
        prints percent): what ``python -m cclq.main`` prints and what CCL-Bench's website
        data holds."""
        return None if value is None else value * self.ccl_bench_scale


def _parse_params(text: str, path: Path) -> tuple[Param, ...]:
    params = []
    for part in (p.strip() for p in text.split(",")):
        if not part or part == "none":
            continue
        m = _PARAM.match(part)
        if not m:
            raise ValueError(f"{path}: bad params entry {part!r} (want `name = card.column` or `name default V`)")
        params.append(Param(m["name"], m["card"], m["default"]))
    return tuple(params)


def parse_metric_file(path: Path) -> MetricSpec:
    header: dict[str, str] = {}
    body: list[str] = []
    in_header = True
    text = path.read_text()
    for line in text.splitlines():
        m = _HEADER.match(line) if in_header else None
        if m:
            key, value = m.groups()
            header[key] = (header[key] + " " + value).strip() if key in header else value
            continue
        if in_header and line.startswith("--") and header:
            continue  # free comment lines inside the header
        in_header = False
        body.append(line)
    missing = [
        k for k in ("metric", "version", "unit", "grain", "category", "polarity", "description") if k not in header
    ]
    if missing:
        raise ValueError(f"{path}: header lacks {', '.join(missing)}")
    name, version = header["metric"], int(header["version"])
    if path.parent.name != name or path.stem != f"v{version}":
        raise ValueError(f"{path}: header says {name} v{version}, the path says otherwise")
    if header["grain"] not in GRAINS:
        raise ValueError(f"{path}: grain must be one of {GRAINS}")
    if header["category"] not in CATEGORIES:
        raise ValueError(f"{path}: category must be one of {tuple(CATEGORIES)}")
    if header["polarity"] not in POLARITIES:
        raise ValueError(f"{path}: polarity must be one of {POLARITIES}")
    leaderboard = header.get("leaderboard")
    if leaderboard is not None and leaderboard not in LEADERBOARD_CATEGORIES:
        raise ValueError(f"{path}: leaderboard must be one of {tuple(LEADERBOARD_CATEGORIES)}")
    summary = header.get("summary", "mean" if header["grain"] != "trace" else "value")
    summary_columns: tuple[str, str] | None = None
    ratio = _RATIO.match(summary)
    if ratio:
        summary, summary_columns = "ratio", (ratio["num"], ratio["den"])
    elif summary not in SUMMARIES or summary == "ratio":
        raise ValueError(f"{path}: summary must be one of {SUMMARIES[:-1]} or `ratio <column> / <column>`")
    ccl_bench_unit = header.get("ccl_bench_unit")
    if ccl_bench_unit is not None and not (ccl_bench_unit in ("%", "ratio") and header["unit"] == "ratio"):
        raise ValueError(
            f"{path}: ccl_bench_unit is `%` or `ratio` for a metric whose unit is ratio (leave it "
            "out where CCL-Bench prints the metric's own unit)"
        )
    family = header.get("family")
    if family is not None and family not in FAMILIES:
        raise ValueError(f"{path}: family must be one of {tuple(FAMILIES)}")
    headline = header.get("leaderboard_headline")
    if headline is not None and (headline != "yes" or leaderboard is None):
        raise ValueError(f"{path}: leaderboard_headline is `yes` on a metric with a leaderboard category")
    sql = "\n".join(body).strip().rstrip(";")
    return MetricSpec(
        name,
        version,
        header["unit"],
        header["grain"],
        header["category"],
        header["polarity"],
        leaderboard,
        header["description"],
        header.get("needs", ""),
        summary,
        _parse_params(header.get("params", ""), path),
        sql,
        path,
        text,
        summary_columns,
        ccl_bench_unit,
        _words(header.get("assumes", "")),
        ccl_bench_trace_types=_words(header.get("ccl_bench_trace_types", "")),
        family=family,
        see_also=_words(header.get("see_also", "")),
        leaderboard_headline=headline == "yes",
    )


def _words(value: str) -> tuple[str, ...]:
    """A comma-separated header value as its items."""
    return tuple(a.strip() for a in value.split(",") if a.strip())


@lru_cache(maxsize=1)
def registry() -> dict[str, dict[int, MetricSpec]]:
    """name -> version -> spec, for every metric file shipped."""
    return {name: versions_of(name) for name in sorted(metric_names())}


@lru_cache(maxsize=1)
def metric_names() -> frozenset[str]:
    """Every metric's name (its folder), without reading a file: parsing all 112 files
    was 30 ms of a cached ``cclq metric`` that needs one."""
    return frozenset(path.parent.name for path in (sql_root() / "metrics").glob("*/v*.sql"))


@cache
def versions_of(name: str) -> dict[int, MetricSpec]:
    """version -> spec of one metric (empty for an unknown name)."""
    if name not in metric_names():
        return {}
    specs = (parse_metric_file(path) for path in sorted((sql_root() / "metrics" / name).glob("v*.sql")))
    return {spec.version: spec for spec in specs}


def forget_metric_files() -> None:
    """Forgets every parsed metric file: for a caller that changes them (tests)."""
    for cached in (registry, metric_names, versions_of):
        cached.cache_clear()


# Released versions, frozen: `<sha256>  <metric>/v<N>` per line (``frozen_sql``).
CHECKSUMS = "CHECKSUMS"
# The view modules that hold the shared body of several versions of one metric
# (``<metric>_rows(...)``, sql/views/metric_bodies/<metric>.sql): frozen with them.
METRIC_BODIES = "metric_bodies."


def frozen_sql(spec: MetricSpec) -> str:
    """The code that decides a version's rows, comments left out: its query, then each
    shared metric body it calls (``sql/views/metric_bodies``). ``sql/metrics/CHECKSUMS``
    holds its SHA-256 for every released version; a docs-only edit keeps it."""
    parts = [strip_comments(spec.sql)]
    parts += [strip_comments(m.sql) for m in modules_for(spec.sql) if m.name.startswith(METRIC_BODIES)]
    return "".join(parts)


def documented_columns(spec: MetricSpec) -> dict[str, str] | None:
    """The detail columns the header's ``-- columns:`` block documents, in its order,
    with their phrases; ``{}`` for ``-- columns: none``, None without the block."""
    header = []
    for line in spec.text.splitlines():
        if not line.startswith("--"):
            break
        header.append(line)
    if not any(re.match(r"^--\s*columns:", line) for line in header):
        return None
    return parse_doc_block(header)[1]


def body_checksum(spec: MetricSpec) -> str:
    return hashlib.sha256(frozen_sql(spec).encode()).hexdigest()


def released_checksums() -> dict[str, str]:
    """``<metric>/v<N>`` -> SHA-256 of ``frozen_sql``, from ``sql/metrics/CHECKSUMS``."""
    path = sql_root() / "metrics" / CHECKSUMS
    out: dict[str, str] = {}
    for line in path.read_text().splitlines() if path.exists() else []:
        if line.strip() and not line.startswith("#"):
            digest, label = line.split()
            out[label] = digest
    return out


def nearest(word: str, names: list[str] | set[str], n: int = 3) -> list[str]:
    """The names a mistyped ``word`` most likely meant, best first: the same name in
    another case (alone), else close spellings (difflib), then names containing it or contained
    in it. Empty when nothing is close."""
    names = sorted(set(names))
    lower = word.lower()
    same_case = [x for x in names if x.lower() == lower]
    if same_case:  # the name in another case: that is what was meant
        return same_case[:n]
    by_lower: dict[str, list[str]] = {}
    for x in names:
        by_lower.setdefault(x.lower(), []).append(x)
    close = [x for m in difflib.get_close_matches(lower, list(by_lower), n=n, cutoff=0.6) for x in by_lower[m]]
    within = [x for x in names if lower and (lower in x.lower() or x.lower() in lower)]
    return list(dict.fromkeys(same_case + close + within))[:n]


def did_you_mean(word: str, names: list[str] | set[str], fallback: str) -> str:
    """A usage-error hint: ``did you mean A, B?`` or ``fallback`` when nothing is close."""
    close = nearest(word, names)
    return f"did you mean {', '.join(close)}?" if close else fallback


def resolve(name: str, version: int | None = None) -> MetricSpec:
    versions = versions_of(name)
    if not versions:
        raise UsageError(
            f"unknown metric {name!r}", hint=did_you_mean(name, set(metric_names()), "`cclq metrics` lists them")
        )
    if version is None:
        return versions[max(versions)]
    if version not in versions:
        raise UsageError(f"{name} has no version {version} (versions: {', '.join(map(str, sorted(versions)))})")
    return versions[version]


def catalog_table() -> pa.Table:
    """One row per metric: what ``cclq metrics`` prints."""
    rows = []
    for name, versions in sorted(registry().items()):
        latest = versions[max(versions)]
        rows.append(
            {
                "metric": name,
                "versions": ",".join(f"v{v}" for v in sorted(versions)),
                "unit": latest.unit,
                "grain": latest.grain,
                "category": latest.category,
                "summary": summary_rule(latest),
                "params": ",".join(p.name for p in latest.params),
                "description": latest.description,
                "family": latest.family or "",
                "see_also": ",".join(latest.see_also),
            }
        )
    import pyarrow as pa

    return pa.Table.from_pylist(rows)


def metric_card(name: str) -> list[str]:
    """``cclq metrics NAME``: what the latest version measures, the question it answers
    (its family) and where to look instead (its near-synonyms and relatives)."""
    versions = registry()[name]
    spec = versions[max(versions)]
    lines = [
        f"{spec.label} (versions: {', '.join(f'v{v}' for v in sorted(versions))})",
        f"  {spec.description}",
        f"unit: {spec.unit}   grain: {spec.grain}   category: {spec.category}   polarity: {spec.polarity}",
    ]
    if spec.family:
        lines.append(f"family: {spec.family} ({FAMILIES[spec.family]})")
    if spec.see_also:
        lines.append(f"see also: {', '.join(spec.see_also)}")
    if spec.needs:
        lines.append(f"needs: {spec.needs}")
    lines.append(f"summary: {summary_rule(spec)}")
    lines.append(f"`cclq metric {name} --explain` shows the whole header; docs/metrics.md groups the metrics by family")
    return lines


def latest_specs() -> list[MetricSpec]:
    """The latest version of every metric, by name."""
    return [versions[max(versions)] for _, versions in sorted(registry().items())]


def summary_rule(spec: MetricSpec) -> str:
    """The summary as words: how one trace's rows become the one number of ``cclq.main``."""
    over = {"rank": "ranks", "step": "ranks and steps", "trace": "rows"}[spec.grain]
    if spec.summary == "ratio" and spec.summary_columns is not None:
        num, den = spec.summary_columns
        return f"Σ{num} / Σ{den} over {over} (pooled)"
    return {
        "mean": f"mean over {over}",
        "sum": f"sum over {over}",
        "max": f"max over {over}",
        "min": f"min over {over}",
        "value": "the trace's value",
    }[spec.summary]
