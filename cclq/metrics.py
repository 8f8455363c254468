"""The metric registry and runner: versioned SQL files, run over every trace at once.

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
of every rank file for some metrics; default mean, or value for trace grain).

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
tests/test_sql_contract.py runs every metric and checks the block against the result.

Versions that differ only in a rules version share one body, ``<name>_rows(<rules
version>, metric_scope)`` in ``sql/views/metric_bodies/<name>.sql``; each version's
file keeps its complete header. ``sql/metrics/CHECKSUMS`` freezes each released
version's code (``frozen_sql``).

A released version never changes meaning: a new definition is a new file.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from cclq.errors import QueryError, UsageError
from cclq.sqlfiles import sql_root

if TYPE_CHECKING:
    import duckdb

    from cclq.warehouse import Snapshot, Warehouse

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
_PARAM = re.compile(r"^(?P<name>[a-z_][a-z0-9_]*)\s*(?:=\s*card\.(?P<card>[a-z_0-9]+))?\s*(?:default\s+(?P<default>\S+))?$")


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

    @property
    def label(self) -> str:
        return f"{self.name} v{self.version}"


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
    missing = [k for k in ("metric", "version", "unit", "grain", "category", "polarity", "description")
               if k not in header]
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
    sql = "\n".join(body).strip().rstrip(";")
    return MetricSpec(name, version, header["unit"], header["grain"], header["category"], header["polarity"],
                      leaderboard, header["description"], header.get("needs", ""), summary,
                      _parse_params(header.get("params", ""), path), sql, path, text, summary_columns)


@lru_cache(maxsize=1)
def registry() -> dict[str, dict[int, MetricSpec]]:
    """name -> version -> spec, for every metric file shipped."""
    out: dict[str, dict[int, MetricSpec]] = {}
    root = sql_root() / "metrics"
    for path in sorted(root.glob("*/v*.sql")):
        spec = parse_metric_file(path)
        out.setdefault(spec.name, {})[spec.version] = spec
    return out


# Released versions, frozen: `<sha256>  <metric>/v<N>` per line (``frozen_sql``).
CHECKSUMS = "CHECKSUMS"
# The view modules that hold the shared body of several versions of one metric
# (``<metric>_rows(...)``, sql/views/metric_bodies/<metric>.sql): frozen with them.
METRIC_BODIES = "metric_bodies."


def frozen_sql(spec: MetricSpec) -> str:
    """The code that decides a version's rows, comments left out: its query, then each
    shared metric body it calls (``sql/views/metric_bodies``). ``sql/metrics/CHECKSUMS``
    holds its SHA-256 for every released version; a docs-only edit keeps it."""
    from cclq.sqlfiles import modules_for, strip_comments

    parts = [strip_comments(spec.sql)]
    parts += [strip_comments(m.sql) for m in modules_for(spec.sql) if m.name.startswith(METRIC_BODIES)]
    return "".join(parts)


def documented_columns(spec: MetricSpec) -> dict[str, str] | None:
    """The detail columns the header's ``-- columns:`` block documents, in its order,
    with their phrases; ``{}`` for ``-- columns: none``, None without the block."""
    from cclq.sqlfiles import parse_doc_block

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


def resolve(name: str, version: int | None = None) -> MetricSpec:
    versions = registry().get(name)
    if not versions:
        close = [n for n in registry() if name in n or n in name]
        hint = f"did you mean {', '.join(close)}?" if close else "`cclq metrics` lists them"
        raise UsageError(f"unknown metric {name!r}", hint=hint)
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
        rows.append({
            "metric": name,
            "versions": ",".join(f"v{v}" for v in sorted(versions)),
            "unit": latest.unit,
            "grain": latest.grain,
            "category": latest.category,
            "summary": summary_rule(latest),
            "params": ",".join(p.name for p in latest.params),
            "description": latest.description,
        })
    return pa.Table.from_pylist(rows)


def parse_param_args(values: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in values:
        if "=" not in item:
            raise UsageError(f"--param wants KEY=VALUE, got {item!r}")
        key, value = item.split("=", 1)
        out[key.strip()] = value.strip()
    return out


def _sql_literal(value: str) -> str:
    try:
        float(value)
        return value
    except ValueError:
        return "'" + value.replace("'", "''") + "'"


def _number(spec: MetricSpec, name: str, value: str) -> float:
    """A ``--param`` value as the number every metric parameter is (they are DOUBLE in
    ``metric_params``). Anything else is a usage error: substituting the card's value or
    the default for a typo would print a number the user did not ask for."""
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if not math.isfinite(number):
        raise UsageError(f"--param {name}={value!r}: {spec.label} needs a finite number for {name}",
                         hint=f"e.g. --param {name}=8 or --param {name}=7e9")
    return number


def _params_relation(spec: MetricSpec, given: dict[str, str]) -> str:
    unknown = set(given) - {p.name for p in spec.params}
    if unknown:
        known = ", ".join(p.name for p in spec.params) or "none"
        raise UsageError(f"{spec.label} takes no parameter {', '.join(sorted(unknown))} (it takes: {known})")
    cols = ["t.trace"]
    for p in spec.params:
        options = []
        if p.name in given:
            # repr of a float is a valid SQL numeric literal and round-trips exactly
            options.append(f"CAST({_number(spec, p.name, given[p.name])!r} AS DOUBLE)")
        if p.card_column:
            options.append(f"TRY_CAST(c.{p.card_column} AS DOUBLE)")
        if p.default is not None:
            options.append(f"TRY_CAST({_sql_literal(p.default)} AS DOUBLE)")
        expr = options[0] if len(options) == 1 else f"coalesce({', '.join(options)})" if options else "NULL::DOUBLE"
        cols.append(f"{expr} AS {p.name}")
    return (
        "CREATE OR REPLACE TEMP VIEW metric_params AS SELECT " + ", ".join(cols)
        + " FROM (SELECT DISTINCT trace FROM files) AS t LEFT JOIN cards AS c USING (trace)"
    )


@dataclass
class MetricResult:
    spec: MetricSpec
    table: pa.Table
    columns: list[str] = field(default_factory=list)


def cache_key(con: duckdb.DuckDBPyConnection, spec: MetricSpec, params: dict[str, str]) -> str:
    """What a metric's result depends on: its SQL, every view's SQL, the parameters, the
    cards, and the content of every input file (hash and ingest version). Equal keys mean
    equal results, so a cached result is never stale."""
    from cclq.engine import connection_snapshot

    return metric_key(*connection_snapshot(con), spec, params)


def metric_key(snapshot: Snapshot, traces: list[str] | None, spec: MetricSpec, params: dict[str, str]) -> str:
    """``cache_key`` from a catalog snapshot and a trace selection, without DuckDB: what
    a repeat ``cclq metric`` computes to find its stored result."""
    # the whole file, header included: a new unit or description is a new result table
    return inputs_key(snapshot, traces, (spec.label, spec.text, json.dumps(params, sort_keys=True), _ROW_ORDER))


def _inputs_key(con: duckdb.DuckDBPyConnection, parts: tuple[str, ...]) -> str:
    from cclq.engine import connection_snapshot

    return inputs_key(*connection_snapshot(con), parts)


def inputs_key(snapshot: Snapshot, traces: list[str] | None, parts: tuple[str, ...]) -> str:
    """A key of ``parts``, the cclq version, every view's SQL and every input of the
    selection (its files by content hash and ingest version, and its cards), read from
    the catalog snapshot the query reads: the key describes exactly what it read."""
    from cclq import __version__
    from cclq.sqlfiles import view_modules

    h = hashlib.blake2b(digest_size=16)
    for part in (__version__, *parts):
        h.update(part.encode())
        h.update(b"\0")
    for module in view_modules():
        h.update(module.sql.encode())
    wanted = None if traces is None else set(traces)
    files, cards = snapshot.tables["files"], snapshot.tables["cards"]
    inputs = sorted(row for row in zip(*(files.column(c).to_pylist() for c in
                                          ("trace", "rank", "file_id", "content_hash", "ingest_version")))
                    if wanted is None or row[0] in wanted)
    card_rows = sorted(row for row in zip(cards.column("trace").to_pylist(), cards.column("card_json").to_pylist())
                       if wanted is None or row[0] in wanted)
    h.update(repr((inputs, card_rows)).encode())
    return h.hexdigest()


def cached_result(wh: Warehouse, spec: MetricSpec, params: dict[str, str], traces: list[str] | None) -> pa.Table | None:
    """A stored result of ``spec`` for the current snapshot, if there is one: read without
    DuckDB (a repeat call needs neither the engine nor the views)."""
    with wh.open_snapshot() as snapshot:
        path = wh.cache_dir / f"{spec.name}.v{spec.version}.{metric_key(snapshot, traces, spec, params)}.parquet"
    try:
        return pq.ParquetFile(path).read() if path.exists() else None
    except (OSError, pa.ArrowException):
        return None


def run_cached_query(con: duckdb.DuckDBPyConnection, label: str, sql: str, cache_dir: Path | None) -> pa.Table:
    """A query over the views, through the same result cache as the metrics.

    For the fixed queries that report, diff and board read besides the metrics (op
    statistics, step durations): ``label`` names it in the cache, and its key covers the
    SQL, the views and every input, as a metric's does.
    """
    import duckdb

    from cclq.engine import define_views

    path = None
    if cache_dir is not None:
        path = cache_dir / f"query.{label}.{_inputs_key(con, ('query', label, sql))}.parquet"
        if path.exists():
            try:
                return pq.read_table(path)
            except (OSError, pa.ArrowException):
                pass
    define_views(con, sql)
    try:
        table = con.execute(sql).to_arrow_table()
    except duckdb.Error as e:
        raise QueryError(f"{label}: {str(e).splitlines()[0]}") from e
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        pq.write_table(table, tmp)
        os.replace(tmp, path)
    return table


def result_path(con: duckdb.DuckDBPyConnection, spec: MetricSpec, params: dict[str, str], cache_dir: Path) -> Path:
    """Where the cached result of ``spec`` over the connection's traces is (or would be)."""
    return cache_dir / f"{spec.name}.v{spec.version}.{cache_key(con, spec, params)}.parquet"


def run_metric(
    con: duckdb.DuckDBPyConnection,
    spec: MetricSpec,
    params: dict[str, str] | None = None,
    cache_dir: Path | None = None,
    compute: Callable[[MetricSpec, dict[str, str]], pa.Table] | None = None,
) -> pa.Table:
    """Runs one metric over every trace the connection sees, in one query.

    With ``cache_dir``, a result is stored under a key of everything it depends on
    (``cache_key``) and a repeat run with the same inputs reads it back. The connection
    needs only the base relations (``connect(..., views=False)``): the views the metric
    uses are created here, and only when the result is not cached.

    ``compute`` computes a result that is not cached somewhere else than on ``con``
    (``cclq.distributed``: by trace partitions on a Dask cluster); it must give what the
    query on ``con`` would. Parameters are checked and the cache is keyed here as always.
    """
    from cclq.engine import define_views

    params = params or {}
    con.execute("CREATE OR REPLACE TEMP VIEW metric_scope AS SELECT DISTINCT trace, rank FROM parts")
    con.execute(_params_relation(spec, params))
    cached: Path | None = None
    if cache_dir is not None:
        cached = result_path(con, spec, params, cache_dir)
        if cached.exists():
            try:
                return pq.read_table(cached)
            except (OSError, pa.ArrowException):
                pass  # unreadable (disk trouble, a killed writer): compute it again
    if compute is not None:
        table = compute(spec, params)
    else:
        define_views(con, spec.sql)
        table = _run_query(con, spec)
    if cached is not None:
        _store(table, cached)
    return table


_cache_warned = False


def _store(table: pa.Table, cached: Path) -> None:
    """Writes a result to the cache; a cache that cannot be written (a read-only
    warehouse, a full disk) costs a note, never the result."""
    global _cache_warned
    tmp = cached.with_suffix(f".tmp{os.getpid()}")
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, tmp)
        os.replace(tmp, cached)
    except OSError as e:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        if not _cache_warned:
            _cache_warned = True
            print(f"cclq: note: results are not cached ({cached.parent}: {e.strerror or e}); "
                  "computed without the cache", file=sys.stderr)


@dataclass
class MetricRun:
    """One metric's outcome in a batch: its result table, or why there is none."""

    spec: MetricSpec
    table: pa.Table | None
    error: str | None = None  # the metric failed as a whole (its SQL did not run)


def check_batch_params(specs: list[MetricSpec], params: dict[str, str]) -> None:
    """A ``--param`` that no metric of a batch takes is a typo: a usage error, not ignored."""
    known = {p.name for s in specs for p in s.params}
    unknown = sorted(set(params) - known)
    if unknown:
        raise UsageError(f"no metric here takes the parameter {', '.join(unknown)} "
                         f"(they take: {', '.join(sorted(known)) or 'none'})")


def params_for(spec: MetricSpec, params: dict[str, str]) -> dict[str, str]:
    """The parameters ``spec`` declares, out of a set given for many metrics at once."""
    declared = {p.name for p in spec.params}
    return {k: v for k, v in params.items() if k in declared}


def run_metrics(
    con: duckdb.DuckDBPyConnection,
    specs: list[MetricSpec],
    params: dict[str, str] | None = None,
    cache_dir: Path | None = None,
    on_done: Callable[[MetricRun], None] | None = None,
) -> dict[str, MetricRun]:
    """Runs several metrics over every trace the connection sees, on that one connection.

    What report, diff and board share: each metric is one query over all the traces (or a
    cached result, see ``run_metric``), and a metric whose SQL fails is recorded with the
    error instead of ending the batch, so one broken metric cannot hide the others.
    ``params`` may hold parameters for many metrics; each gets the ones it declares.
    ``on_done`` is called after each metric (progress bars).
    """
    params = params or {}
    pending = [s for s in specs
               if cache_dir is None or not result_path(con, s, params_for(s, params), cache_dir).exists()]
    shared = _share_views(con, pending)
    runs: dict[str, MetricRun] = {}
    try:
        for spec in specs:
            try:
                run = MetricRun(spec, run_metric(con, spec, params_for(spec, params), cache_dir))
            except QueryError as e:
                run = MetricRun(spec, None, e.message)
            runs[spec.name] = run
            if on_done is not None:
                on_done(run)
    finally:
        for view in shared:
            con.execute(f"DROP TABLE IF EXISTS temp.{view}")
    return runs


# Views that several metrics read and that cost much more than their result holds:
# ``collectives`` matches every communication kernel with the CPU ops around it (most of
# the time of collective_skew, collective_busbw and straggler_rank), and its result is
# one row per collective per rank. When two or more metrics of a batch will compute it,
# it is computed once into a temporary table of the same name, which DuckDB resolves
# before the view, so each metric reads the stored rows (the same rows: the result and
# its cache key do not change).
SHARED_VIEWS = ("collectives",)


def _share_views(con: duckdb.DuckDBPyConnection, pending: list[MetricSpec]) -> list[str]:
    """Materializes the SHARED_VIEWS that two or more ``pending`` metrics use; their names."""
    import duckdb

    from cclq.engine import define_views
    from cclq.sqlfiles import defined_names, modules_for

    done = []
    for view in SHARED_VIEWS:
        users = [s for s in pending if any(view in defined_names(m) for m in modules_for(s.sql))]
        if len(users) < 2:
            continue
        try:
            define_views(con, f"SELECT * FROM {view}")
            con.execute(f"CREATE TEMP TABLE {view} AS SELECT * FROM main.{view}")
        except duckdb.Error:
            continue  # the metrics then run on the view, and report their own error
        done.append(view)
    return done




def latest_specs() -> list[MetricSpec]:
    """The latest version of every metric, by name."""
    return [versions[max(versions)] for _, versions in sorted(registry().items())]


def _run_query(con: duckdb.DuckDBPyConnection, spec: MetricSpec) -> pa.Table:
    import duckdb

    try:
        described = con.execute(f"DESCRIBE ({spec.sql})").fetchall()
    except duckdb.Error as e:
        raise QueryError(f"{spec.label} ({spec.path.name}) does not compile: {str(e).splitlines()[0]}") from e
    names = [row[0] for row in described]
    if "trace" not in names or "value" not in names:
        raise QueryError(f"{spec.label}: the query must return `trace` and `value` columns")
    fixed = {"trace", "rank", "step", "value", "reason"}
    extras = [f'm."{n}"' for n in names if n not in fixed]
    select = [
        "m.trace",
        "CAST(m.rank AS INTEGER) AS rank" if "rank" in names else "CAST(NULL AS INTEGER) AS rank",
        "CAST(m.step AS BIGINT) AS step" if "step" in names else "CAST(NULL AS BIGINT) AS step",
        "CAST(m.value AS DOUBLE) AS value",
        f"{_sql_literal(spec.unit)} AS unit",
        "CAST(m.reason AS VARCHAR) AS reason" if "reason" in names else "CAST(NULL AS VARCHAR) AS reason",
    ] + extras
    out_names = ["trace", "rank", "step", "value", "unit", "reason"] + [n for n in names if n not in fixed]
    # sorted by the output columns (not m's), exactly as combine_results sorts them
    query = f"SELECT * FROM (SELECT {', '.join(select)} FROM ({spec.sql}) AS m) ORDER BY {_order_by(out_names)}"
    try:
        return con.execute(query).to_arrow_table()
    except duckdb.Error as e:
        raise QueryError(f"{spec.label}: {str(e).splitlines()[0]}") from e


# A result's rows come in one total order: trace, rank, step, then the detail columns,
# value and reason. Rows that tie on (trace, rank, step) (one per stream, per collective,
# per kernel type) would otherwise come in whatever order DuckDB's parallel sort leaves
# them, which changes from run to run. The total order makes a result the same bytes each
# time it is computed, and lets results computed in parts (``--dask``) be put together
# in exactly the order of one query (``combine_results``). Part of the cache key.
_ROW_ORDER = "rows: trace, rank, step, details, value, reason"


def _order_by(columns: list[str]) -> str:
    """The ORDER BY list of a result with these columns (``_ROW_ORDER``)."""
    first, last = ["trace", "rank", "step"], ["value", "reason"]
    middle = [c for c in columns if c not in first + last + ["unit"]]  # unit is one constant
    return ", ".join('"' + c.replace('"', '""') + '"' for c in first + middle + last if c in columns)


def combine_results(parts: list[pa.Table]) -> pa.Table:
    """One metric's results over disjoint sets of traces, as the one result a query over
    all of them gives: concatenated, then sorted by DuckDB with the ORDER BY of
    ``_run_query`` (so that strings, NULLs and NaNs sort exactly as there). The rows
    keep their Arrow values; only their order changes."""
    import duckdb

    # ``take`` copies into fresh buffers: tables unpickled from another process may have
    # unaligned ones, which DuckDB's Arrow scan (Acero) warns about
    table = pa.concat_tables(parts)
    table = table.take(pa.array(range(table.num_rows), pa.int64()))
    index = "__cclq_row"
    con = duckdb.connect(":memory:")
    try:
        con.register("result_parts", table.append_column(index, pa.array(range(table.num_rows), pa.int64())))
        order = con.execute(f"SELECT {index} FROM result_parts ORDER BY {_order_by(table.column_names)}").to_arrow_table()
    finally:
        con.close()
    return table.take(order.column(0)).combine_chunks()


def summarize(spec: MetricSpec, table: pa.Table) -> tuple[float | None, str | None]:
    """One number for one trace (CCL-Bench's interface), and the reason if there is none."""
    return summarize_rows(spec, table.to_pylist())


def summarize_rows(spec: MetricSpec, rows: list[dict[str, Any]]) -> tuple[float | None, str | None]:
    """``summarize`` over one trace's rows as dicts (``value`` and ``reason`` keys)."""
    values = [r["value"] for r in rows if r["value"] is not None]
    if not values:
        reasons = sorted({r["reason"] for r in rows if r["reason"]})
        return None, "; ".join(reasons) or "no value"
    if spec.summary == "sum":
        return float(sum(values)), None
    if spec.summary == "max":
        return float(max(values)), None
    if spec.summary == "min":
        return float(min(values)), None
    if spec.summary == "value":
        return float(values[0]), None
    if spec.summary == "ratio" and spec.summary_columns is not None:
        num, den = spec.summary_columns
        pairs = [(r.get(num), r.get(den)) for r in rows if r["value"] is not None]
        pairs = [(a, b) for a, b in pairs if a is not None and b is not None]
        total = sum(b for _, b in pairs)
        if not pairs or total == 0:
            return None, f"no rows with {num} and a non-zero {den}"
        return float(sum(a for a, _ in pairs) / total), None
    return float(sum(values) / len(values)), None


def describe_metric(spec: MetricSpec) -> dict[str, Any]:
    return {"metric": spec.name, "version": spec.version, "unit": spec.unit, "grain": spec.grain,
            "category": spec.category, "polarity": spec.polarity, "leaderboard": spec.leaderboard,
            "summary": summary_rule(spec), "needs": spec.needs, "description": spec.description}


def summary_rule(spec: MetricSpec) -> str:
    """The summary as words: how one trace's rows become the one number of ``cclq.main``."""
    over = {"rank": "ranks", "step": "ranks and steps", "trace": "rows"}[spec.grain]
    if spec.summary == "ratio" and spec.summary_columns is not None:
        num, den = spec.summary_columns
        return f"Σ{num} / Σ{den} over {over} (pooled)"
    return {"mean": f"mean over {over}", "sum": f"sum over {over}", "max": f"max over {over}",
            "min": f"min over {over}", "value": "the trace's value"}[spec.summary]
