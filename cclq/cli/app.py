"""The ``cclq`` command line: a thin typer layer over the library.

Contract: stdout carries data (tables, CSV, JSON); progress, warnings and errors
go to stderr. A ``CclqError`` prints one ``cclq: error: ...`` line and exits with
its ``ExitCode``; ``--debug`` (or ``CCLQ_DEBUG=1``) shows the traceback instead.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
import tempfile
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from cclq.bench.command import bench
from cclq.errors import CclqError, ExitCode, UsageError, show_path
from cclq.formats.limits import DEFAULT_LIMITS, MIB, ReadLimits
from cclq.locations import WAREHOUSE_ENV, resolve_warehouse
from cclq.present.output import OutputFormat
from cclq.query.settings import QuerySettings
from cclq.version import __version__

if TYPE_CHECKING:
    import pyarrow as pa

    from cclq.query.session import Session
    from cclq.store.warehouse import Warehouse

app = typer.Typer(
    name="cclq",
    help="Columnar analytics for distributed-training profiler traces (Kineto, Chrome JSON, XLA).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

WarehouseOpt = Annotated[
    Optional[str],
    typer.Option(
        "--warehouse",
        "-w",
        help=f"Warehouse folder [default: ${WAREHOUSE_ENV}, else ./.cclq/warehouse].",
        show_default=False,
    ),
]
FormatOpt = Annotated[OutputFormat, typer.Option("--format", "-f", help="Output format.")]


class DiffFormat(str, Enum):
    """`cclq diff`'s formats: OutputFormat's and a page (html)."""

    table = "table"
    csv = "csv"
    json = "json"
    parquet = "parquet"
    html = "html"


DaskOpt = Annotated[
    Optional[str],
    typer.Option(
        "--dask",
        metavar="local[:N]|ADDRESS|FILE",
        help="Run on a Dask cluster: local[:N] starts N worker processes here [default N: CPUs]; "
        "tcp://HOST:PORT or a scheduler file joins a running scheduler (e.g. dask-jobqueue's). "
        "Needs the extra: pip install 'cclq[dask]'.",
    ),
]
AllowPartialOpt = Annotated[
    bool,
    typer.Option(
        "--allow-partial",
        help="No warning for traces that hold fewer ranks than a whole run "
        "(a sample of its ranks, or an interrupted ingest).",
    ),
]
OutputOpt = Annotated[
    Optional[Path], typer.Option("--output", "-o", help="Write to this file instead of stdout (needed for parquet).")
]


def _warehouse(option: str | None) -> Warehouse:
    """The warehouse ``-w`` names: a folder, or an ``s3://`` URL (``cclq.store.remote``)."""
    from cclq.store.remote import open_warehouse

    return open_warehouse(option)


def write_table(table: pa.Table, fmt: OutputFormat, **kw: Any) -> None:
    """``cclq.present.render.write_table``, imported when a command prints (it needs pyarrow,
    which ``cclq --help`` should not load)."""
    from cclq.present.render import write_table as write

    write(table, fmt, **kw)


# --memory-limit / --spill-dir (anywhere on the line) or their environment variables, read
# once by main(); a command run through `app` directly (tests) reads the environment.
_settings: QuerySettings | None = None


def _query_settings() -> QuerySettings:
    return _settings if _settings is not None else QuerySettings.from_env()


def _session(wh: Warehouse, **kw: Any) -> Session:
    """A query session on the warehouse with the user's query settings."""
    from cclq.query.session import Session

    return Session(wh, settings=_query_settings(), **kw)


def _version(value: bool) -> None:
    """``cclq --version``: cclq's, which JSON reader is active, and the engines'."""
    if value:
        import platform
        from importlib.metadata import version

        from cclq.formats.chrome import compiled

        print(f"cclq {__version__}")
        print(f"JSON reader: {compiled.description()}")
        print(f"duckdb {version('duckdb')}, pyarrow {version('pyarrow')}, python {platform.python_version()}")
        raise typer.Exit()


@app.callback()
def _root(
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks for errors.")] = False,
    memory_limit: Annotated[
        Optional[str],
        typer.Option(
            "--memory-limit",
            help="Memory for queries (500MB, 4GiB, 25%); beyond it DuckDB spills to "
            "disk [default: $CCLQ_MEMORY_LIMIT, else half the RAM]. May go anywhere on the line.",
            show_default=False,
        ),
    ] = None,
    spill_dir: Annotated[
        Optional[str],
        typer.Option(
            "--spill-dir",
            help="Where queries spill beyond the memory limit [default: $CCLQ_SPILL_DIR, "
            "else <warehouse>/spill, else the temp folder]. May go anywhere on the line.",
            show_default=False,
        ),
    ] = None,
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_version,
            is_eager=True,
            help="Print the version, the JSON reader in use (compiled or msgspec) and the engines'.",
        ),
    ] = False,
) -> None:
    """Columnar analytics for distributed-training profiler traces."""


# ------------------------------------------------------------------------ ingest
@app.command(epilog="Example: cclq ingest trace_collection --jobs 2   (--reader ijson, --max-depth 200, ...)")
def ingest(
    paths: Annotated[
        list[str],
        typer.Argument(
            help="Workload folders, folders of workloads, or trace files; or s3://bucket/prefix URLs (the s3 extra)."
        ),
    ],
    warehouse: WarehouseOpt = None,
    jobs: Annotated[
        Optional[int],
        typer.Option(
            "--jobs",
            "-j",
            min=1,
            help="Parallel parser processes [default: CPUs]; a "
            "single file is read by one, its chunks parsed on this many threads.",
        ),
    ] = None,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Re-ingest files even if unchanged, and let a workload replace a trace of the same id "
            "that was ingested from another folder or file (without it, that workload fails).",
        ),
    ] = False,
    checksum: Annotated[
        bool,
        typer.Option(
            "--checksum",
            help="Compare content hashes to find changed files, instead of trusting an "
            "unchanged size and modification time (slower: every file is read).",
        ),
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar or summary table.")] = False,
    reader: Annotated[
        str,
        typer.Option(
            "--reader",
            help="JSON reader: 'fast' (chunks of events read by the compiled parser where "
            "it was built, else by msgspec; a file it cannot take with certainty goes "
            "to ijson), 'msgspec' (the same chunks, msgspec only) or 'ijson' (the "
            "reference, event by event).",
        ),
    ] = "fast",
    max_string_mb: Annotated[
        float,
        typer.Option(
            "--max-string-mb", min=0.001, help="Fail a file holding a JSON string or number longer than this."
        ),
    ] = DEFAULT_LIMITS.max_string_bytes / MIB,
    max_event_mb: Annotated[
        float, typer.Option("--max-event-mb", min=0.001, help="Fail a file holding one event larger than this.")
    ] = DEFAULT_LIMITS.max_event_bytes / MIB,
    max_depth: Annotated[
        int, typer.Option("--max-depth", min=1, max=900, help="Fail a file whose JSON nests deeper than this.")
    ] = DEFAULT_LIMITS.max_depth,
    max_inflate_ratio: Annotated[
        float,
        typer.Option(
            "--max-inflate-ratio",
            min=1.01,
            help="Fail a gzip file that expands more than this many times (judged past 64 MiB).",
        ),
    ] = DEFAULT_LIMITS.max_inflate_ratio,
    max_columns: Annotated[
        int, typer.Option("--max-columns", min=1, help="Fail a results CSV with more columns than this.")
    ] = DEFAULT_LIMITS.max_columns,
    max_sqlite_seconds: Annotated[
        float,
        typer.Option(
            "--max-sqlite-seconds", min=0.001, help="Fail an Nsight Systems export SQLite reads for longer than this."
        ),
    ] = DEFAULT_LIMITS.max_sqlite_seconds,
    max_sqlite_mb: Annotated[
        float,
        typer.Option(
            "--max-sqlite-mb",
            min=1,
            help="Fail an Nsight Systems export whose reading needs more SQLite memory than this.",
        ),
    ] = DEFAULT_LIMITS.max_sqlite_bytes / MIB,
    dask: DaskOpt = None,
    allow_partial: AllowPartialOpt = False,
) -> None:
    """Stream trace files into the Parquet warehouse (unchanged files are skipped).

    The --max-* bounds stop a hostile or broken file from costing time or memory out of
    proportion to its size; the defaults are far above any real trace we know of.

    With --dask, files are parsed on a Dask cluster and committed by this process, as
    without it; the warehouse (and the inputs) must be on storage every worker sees at
    the same path, or on s3:// (the workers read and write the bucket themselves).
    Example: cclq ingest /shared/traces -w /shared/wh --dask tcp://head:8786
    """
    from cclq.cli.progress import IngestProgress, print_summary
    from cclq.formats.base import READERS, ReadOptions
    from cclq.ingest.report import IngestInterrupted
    from cclq.ingest.run import ingest as run_ingest

    if reader not in READERS:
        raise UsageError(f"--reader must be one of {', '.join(READERS)}, not {reader!r}")
    if dask is not None and jobs is not None:
        raise UsageError(
            "--jobs is for parser processes on this machine; with --dask, "
            "say how many with local:N, or size the cluster you join"
        )
    limits = ReadLimits(
        max_string_bytes=int(max_string_mb * MIB),
        max_event_bytes=int(max_event_mb * MIB),
        max_depth=max_depth,
        max_inflate_ratio=max_inflate_ratio,
        max_columns=max_columns,
        max_sqlite_seconds=max_sqlite_seconds,
        max_sqlite_bytes=int(max_sqlite_mb * MIB),
    )
    wh = _warehouse(warehouse)
    from cclq.store.objects import local_inputs

    inputs = local_inputs(paths)  # s3:// traces copied (only what changed) into the local cache
    reporter = IngestProgress(enabled=not quiet)
    try:
        report = run_ingest(
            inputs,
            wh,
            jobs=jobs,
            force=force,
            reporter=reporter,
            checksum=checksum,
            options=ReadOptions(reader=reader, limits=limits),
            dask=dask,
        )
    except IngestInterrupted as e:
        # said here: typer turns a KeyboardInterrupt that leaves the command into a silent
        # exit 130, so main() would never see it
        print(f"cclq: {e.message()}", file=sys.stderr)
        raise typer.Exit(ExitCode.INTERRUPTED) from None
    if not report.outcomes:  # not one candidate file under the paths: say what was looked for
        print(f"cclq: error: no trace or results file under {', '.join(str(p) for p in paths)}", file=sys.stderr)
        print(
            "hint: cclq looks in every folder below for Kineto / Chrome trace JSON (*.json, *.json.gz), "
            "xprof trace JSON and xplane.pb, Nsight Systems SQLite exports (*.sqlite), PyTorch execution "
            "traces, Horovod timelines and benchmark results (DDLB CSV, vLLM / SGLang JSON, logs); cards, "
            "documents, images and archives are passed by",
            file=sys.stderr,
        )
        raise typer.Exit(ExitCode.FAILED)
    if not quiet:
        print_summary(report)
    for outcome in report.outcomes:
        if outcome.status == "failed":
            print(f"cclq: error: {outcome.message}", file=sys.stderr)
            if outcome.detail and _debug_enabled():
                print(outcome.detail, file=sys.stderr, end="")
    written = sorted({o.trace for o in report.outcomes if o.status == "ingested"})
    if written:  # said once, when the trace is written; `cclq traces` shows the flag
        _warn_partial(wh, written, allow_partial)
    if report.failed:
        raise typer.Exit(ExitCode.FAILED)


# ----------------------------------------------------------------------- compact
@app.command(epilog="Example: cclq compact   (every trace whose data files are many and small)")
def compact(
    trace: Annotated[
        Optional[list[str]], typer.Option("--trace", "-t", help="Compact only this trace (repeatable).")
    ] = None,
    warehouse: WarehouseOpt = None,
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """Rewrite each trace's many small data files as a few large ones.

    Queries pay per file (a footer, a page per column); a trace of small rank files is
    cheaper to read as one file. Rows and query results stay exactly the same; the
    rewrite is one commit, so readers see the old files or the new, never a mix. Ingest
    does this by itself for the traces it writes when their files are many and small.
    """
    import pyarrow as pa

    from cclq.store.compaction import compact as run_compact

    wh = _warehouse(warehouse)
    wh.require()
    done = run_compact(wh, traces=list(trace) if trace else None)
    rows = [
        {
            "trace": c.trace,
            "table": c.table,
            "files_before": c.files_before,
            "files_after": c.files_after,
            "rows": c.rows,
        }
        for c in done
    ]
    if not rows:
        print("nothing to compact", file=sys.stderr)
        return
    write_table(pa.Table.from_pylist(rows), fmt, title="compacted")


# ------------------------------------------------------------------------ traces
@app.command(epilog="Example: cclq traces --format csv")
def traces(
    warehouse: WarehouseOpt = None,
    fmt: FormatOpt = OutputFormat.table,
    output: OutputOpt = None,
    allow_partial: AllowPartialOpt = False,
) -> None:
    """List the ingested traces: format, world size, ranks, span, card fields.

    `flag` says why a trace may not be one whole run: `partial: N of M ranks` (a sample of
    its ranks, or an interrupted ingest), `guessed ranks`, `files start D days apart`; the
    partial ones are also named on stderr (--allow-partial: not)."""
    wh = _warehouse(warehouse)
    con = _session(wh)
    cols = (
        "trace, format, world_size, ranks_seen, files, events, events_dropped, round(span_s, 6) AS span_s, "
        "rank_source, flag"
    )
    if fmt is not OutputFormat.table:
        cols = "*"
    table = con.arrow(f"SELECT {cols} FROM traces ORDER BY trace")
    write_table(table, fmt, output=output)
    _warn_partial(wh, None, allow_partial)


# --------------------------------------------------------------------------- sql
@app.command(epilog='Example: cclq sql "SELECT trace, rank, count(*) FROM kernels GROUP BY ALL" -f csv')
def sql(
    query: Annotated[str, typer.Argument(help="A SQL query over the views (events, kernels, traces, files, ...).")],
    warehouse: WarehouseOpt = None,
    read_write: Annotated[
        bool,
        typer.Option(
            "--read-write",
            help="Run any statement (COPY, ATTACH, reading other files), as the DuckDB "
            "shell would. Without it the query is read-only and sees only the warehouse.",
        ),
    ] = False,
    fmt: FormatOpt = OutputFormat.table,
    output: OutputOpt = None,
) -> None:
    """Run ad-hoc SQL over the warehouse (DuckDB dialect), read-only.

    Only queries run (SELECT, WITH, DESCRIBE, SHOW, SUMMARIZE, EXPLAIN); no file outside
    the warehouse can be read and none written, so ad-hoc SQL can never change what a
    metric reads. The query sees the warehouse as its last complete ingest left it.
    """
    with _session(_warehouse(warehouse), comments=True) as session:
        table = session.run_user_query(query, read_only=not read_write)
    write_table(table, fmt, output=output)


# ----------------------------------------------------------------------- metrics
@app.command(
    epilog="Examples: cclq metrics communication   |   cclq metrics overlap   |   "
    "cclq metrics --applicable dlrm_param_8xV100   |   cclq metrics --long --format csv"
)
def metrics(
    words: Annotated[
        Optional[list[str]],
        typer.Argument(
            help="A metric's name (its card: family, see also), a category (step_time, "
            "communication, compute, memory, collectives, inference, hta) or words to search "
            "for in names, descriptions and needs.",
            show_default=False,
        ),
    ] = None,
    category: Annotated[
        Optional[list[str]], typer.Option("--category", "-c", help="Only this category (repeatable).")
    ] = None,
    applicable: Annotated[
        Optional[str],
        typer.Option(
            "--applicable",
            help="What can apply to this trace, and why the rest cannot (decided from the catalog, no metric is run).",
        ),
    ] = None,
    long: Annotated[bool, typer.Option("--long", "-l", help="Every column: versions, grain, summary, params.")] = False,
    warehouse: WarehouseOpt = None,
    fmt: FormatOpt = OutputFormat.table,
    output: OutputOpt = None,
) -> None:
    """List the metrics, one line each (name, unit, category, what it measures); filter by
    category or search words; `--applicable TRACE` says which can apply to a trace; one
    metric's name shows its card (the question it answers and its near-synonyms)."""
    from cclq.query.registry import CATEGORIES, catalog_table, did_you_mean, latest_specs, metric_card

    specs = latest_specs()
    if (
        words
        and len(words) == 1
        and not category
        and applicable is None
        and not long
        and fmt is OutputFormat.table
        and words[0] in {s.name for s in specs}
    ):
        # one metric by its name: its card, with the question it answers and its relatives
        card = "\n".join(metric_card(words[0])) + "\n"
        if output is not None:
            output.write_text(card)
        else:
            sys.stdout.write(card)
        return
    chosen = set(category or [])
    search: list[str] = []
    for w in words or []:
        if w in CATEGORIES:
            chosen.add(w)
        else:
            search.append(w)
    unknown = sorted(chosen - set(CATEGORIES))
    if unknown:
        raise UsageError(
            f"no category {', '.join(unknown)}",
            hint=did_you_mean(unknown[0], set(CATEGORIES), f"categories: {', '.join(CATEGORIES)}"),
        )
    if chosen:
        specs = [s for s in specs if s.category in chosen]
    for w in search:
        specs = [s for s in specs if w.lower() in " ".join((s.name, s.description, s.needs, s.category)).lower()]
    if not specs:
        names = {s.name for s in latest_specs()} | set(CATEGORIES)
        raise UsageError(
            f"no metric matches {' '.join(search or sorted(chosen))!r}",
            hint=did_you_mean(search[0] if search else "", names, "`cclq metrics` lists them all"),
        )
    if applicable is not None:
        _applicable(_warehouse(warehouse), applicable, specs, fmt, output)
        return
    if long or fmt is not OutputFormat.table:
        table = catalog_table()
        keep = {s.name for s in specs}
        write_table(table.filter([m in keep for m in table.column("metric").to_pylist()]), fmt, output=output)
        return
    _write_lines([(s.name, s.unit, s.category, s.description) for s in specs], output)


def _write_lines(rows: list[tuple[str, ...]], output: Path | None) -> None:
    """Aligned columns, one line per row, the last column cut to the terminal's width
    (120 when not a terminal) with an ellipsis: a listing that fits on one screen line each."""
    width = shutil.get_terminal_size((120, 24)).columns if output is None else 200
    sizes = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    lines = []
    for r in rows:
        head = "  ".join(c.ljust(n) for c, n in zip(r[:-1], sizes))
        room = max(width - len(head) - 2, 20)
        tail = r[-1] if len(r[-1]) <= room else r[-1][: room - 1].rstrip() + "…"
        lines.append(f"{head}  {tail}".rstrip())
    text = "\n".join(lines) + "\n"
    if output is not None:
        output.write_text(text)
    else:
        sys.stdout.write(text)


def _applicable(wh: Warehouse, trace: str, specs: list, fmt: OutputFormat, output: Path | None) -> None:
    """``cclq metrics --applicable TRACE``: the catalog's decision for each metric."""
    import pyarrow as pa

    from cclq.query.applicability import parse_facts, trace_facts, unmet

    with _session(wh, traces=[trace]) as session:
        _require_traces(session, wh, [trace])
        facts = trace_facts(session)[trace]
    rows = []
    for s in specs:
        reason = unmet(s, facts)
        checked = ", ".join(str(f) for f in parse_facts(s))
        rows.append(
            {
                "metric": s.name,
                "category": s.category,
                "applies": "no" if reason else "may",
                "why": reason
                or (
                    f"the catalog has {checked}; its SQL decides"
                    if checked
                    else "no catalog facts declared; its SQL decides"
                ),
                "needs": s.needs,
            }
        )
    rows.sort(key=lambda r: (r["applies"] == "no", r["category"], r["metric"]))
    if fmt is not OutputFormat.table:
        write_table(pa.Table.from_pylist(rows), fmt, output=output)
        return
    may = sum(r["applies"] == "may" for r in rows)
    print(
        f"{trace}: formats {', '.join(sorted(facts.formats)) or 'none'}, tables "
        f"{', '.join(sorted(facts.tables)) or 'none'}, {facts.ranks} rank(s), "
        f"card phase {facts.card_phase if facts.card_phase is not None else 'none'}\n"
        f"{may} metric(s) may apply (their SQL decides), {len(rows) - may} cannot (from the catalog):"
    )
    _write_lines([(r["metric"], r["applies"], r["why"]) for r in rows], output)


@app.command(
    epilog="Examples: cclq metric communication_overlap_ratio --all --format csv\n\n"
    "cclq metric total_kernel_time avg_step_time --trace dlrm_param_8xV100\n\n"
    "cclq metric --category communication --all -o results/   (one CSV per metric)"
)
def metric(
    names: Annotated[
        Optional[list[str]],
        typer.Argument(
            help="Metric names (see `cclq metrics`); several run on one connection. "
            "A workload folder or trace file among them is ingested first and "
            "its traces are the ones run over."
        ),
    ] = None,
    all_traces: Annotated[bool, typer.Option("--all", help="Run over every trace in the warehouse.")] = False,
    trace: Annotated[
        Optional[list[str]],
        typer.Option(
            "--trace", "-t", help="Run over this trace (repeatable; a glob pattern such as 'run1_*' takes every match)."
        ),
    ] = None,
    category: Annotated[
        Optional[list[str]],
        typer.Option(
            "--category",
            "-c",
            help="Every metric of this category (repeatable): step_time, communication, "
            "compute, memory, collectives, inference, hta.",
        ),
    ] = None,
    version: Annotated[
        Optional[int], typer.Option("--version", "-v", help="Pin a metric version [default: latest].")
    ] = None,
    param: Annotated[
        Optional[list[str]], typer.Option("--param", "-p", help="KEY=VALUE, overrides the workload card (repeatable).")
    ] = None,
    no_cache: Annotated[
        bool, typer.Option("--no-cache", help="Compute again even if a cached result matches.")
    ] = False,
    warehouse: WarehouseOpt = None,
    fmt: FormatOpt = OutputFormat.table,
    output: Annotated[
        Optional[Path],
        typer.Option(
            "--output",
            "-o",
            help="Write to this file instead of stdout; with several metrics, a folder "
            "(existing, or a name without a suffix) gets one file per metric.",
        ),
    ] = None,
    dask: DaskOpt = None,
    allow_partial: AllowPartialOpt = False,
    explain: Annotated[
        bool, typer.Option("--explain", help="Show the metric's header, SQL file and version instead of running it.")
    ] = False,
) -> None:
    """Compute metrics for every selected trace, each in a single DuckDB query.

    One metric prints its rows; several (names, or --category) run on one connection,
    sharing the views they build, and print one long table with a `metric` column and
    each metric's own columns folded into `details` (or one file per metric with -o DIR).
    Results are cached in the warehouse under a key of the metric's file, the views, the
    parameters and the content hash of every input file, so a repeat is read back (without
    starting the query engine) and a changed input or definition is computed again.

    With --dask, results that are not cached are computed on a Dask cluster, one task per
    group of traces, and put together as one query gives them. Example:
    cclq metric collective_busbw --all --dask tcp://head:8786 -w /shared/wh
    """
    from cclq.query.params import check_batch_params, parse_param_args
    from cclq.query.registry import CATEGORIES, did_you_mean, latest_specs, resolve

    if explain:
        if not names:
            raise UsageError("--explain wants metric names")
        for n in names:
            _explain(resolve(n, version))
        return
    from cclq.query.registry import registry

    ingest_failed = False
    looked: list[str] = []
    if names and any(n not in registry() for n in names):
        names, looked, ingest_failed = _first_look(_warehouse(warehouse), list(names), set(registry()))
        trace = [*(trace or []), *looked]
    if all_traces == bool(trace):
        raise UsageError("say which traces: --all, --trace T (repeatable), or a trace folder or file to ingest")
    unknown = sorted(set(category or []) - set(CATEGORIES))
    if unknown:
        raise UsageError(
            f"no category {', '.join(unknown)}",
            hint=did_you_mean(unknown[0], set(CATEGORIES), f"categories: {', '.join(CATEGORIES)}"),
        )
    specs = [resolve(n, version) for n in names or []]
    specs += [s for s in latest_specs() if s.category in (category or []) and s.name not in {x.name for x in specs}]
    if not specs:
        raise UsageError("say which metrics: names, or --category C", hint="`cclq metrics` lists them")
    if version is not None and len(specs) > 1:
        raise UsageError("--version pins one metric; give one name with it")
    params = parse_param_args(param or [])
    wh = _warehouse(warehouse)
    selection = None if all_traces else _check_traces(wh, list(trace or []))
    if dask is not None:
        from cclq.ingest.dask import parse_cluster

        parse_cluster(dask)  # a bad --dask is a usage error before anything runs
    _prepare_output(output, folder=len(specs) > 1 and output is not None and _is_folder_output(output))
    _warn_partial(wh, selection, allow_partial)
    if len(specs) == 1:
        _one_metric(wh, specs[0], params, selection, no_cache, fmt, output, dask)
    else:
        check_batch_params(specs, params)
        _several_metrics(wh, specs, params, selection, no_cache, fmt, output, dask)
    if ingest_failed:
        raise typer.Exit(ExitCode.FAILED)


def _warn_partial(wh: Warehouse, selection: list[str] | None, allow_partial: bool) -> None:
    """A trace with fewer ranks than its world size (an interrupted ingest, files
    missing): its values cover the ranks present only; say so unless allowed."""
    if allow_partial or not wh.exists():
        return
    from cclq.query.partial import partial_traces

    partial = partial_traces(wh, selection)
    if len(partial) == 1:
        ((trace, what),) = partial.items()
        print(
            f"cclq: warning: trace {trace!r} is partial ({what}): its values cover those ranks only "
            "(re-run `cclq ingest` if it was interrupted; --allow-partial to accept)",
            file=sys.stderr,
        )
    elif partial:  # one line, not one per trace: a folder of rank samples has many
        listed = ", ".join(f"{trace} ({what})" for trace, what in partial.items())
        print(
            f"cclq: warning: {len(partial)} traces are partial, their values cover the ranks present only: "
            f"{listed} (re-run `cclq ingest` if one was interrupted; --allow-partial to accept)",
            file=sys.stderr,
        )


def _first_look(wh: Warehouse, args: list[str], known: set[str]) -> tuple[list[str], list[str], bool]:
    """The first look at a new trace as one command: of ``args``, those that are not in
    ``known`` (metric names, trace ids) but are files or folders on disk are ingested
    first, with the progress of `cclq ingest` on stderr and its rules (unchanged files
    are skipped, a trace id taken by another folder fails). Returns the other args, the
    traces the paths hold, and whether a file failed (its error already printed: the run
    goes on with the rest, the exit status says it failed)."""
    paths = [Path(a) for a in args if a not in known and Path(a).exists()]
    rest = [a for a in args if a in known or not Path(a).exists()]
    if not paths:
        return rest, [], False
    from cclq.cli.progress import IngestProgress
    from cclq.ingest.report import IngestInterrupted
    from cclq.ingest.run import ingest as run_ingest

    try:
        report = run_ingest(paths, wh, reporter=IngestProgress())
    except IngestInterrupted as e:
        print(f"cclq: {e.message()}", file=sys.stderr)
        raise typer.Exit(ExitCode.INTERRUPTED) from None
    for outcome in report.failed:
        print(f"cclq: error: {outcome.message}", file=sys.stderr)
    traces = sorted({o.trace for o in report.outcomes if o.status in ("ingested", "unchanged")})
    if not traces:
        raise UsageError(
            f"no trace ingested from {', '.join(str(p) for p in paths)}",
            hint="`cclq ingest PATH` says what it looked for",
        )
    return rest, traces, bool(report.failed)


def _explain(spec: Any) -> None:
    """``cclq metric NAME --explain``: where the metric is defined and what it says of itself."""
    from cclq.query.registry import METRIC_BODIES, registry
    from cclq.query.sqlfiles import modules_for

    versions = sorted(registry()[spec.name])
    header = []
    for line in spec.text.splitlines():
        if not line.startswith("--"):
            break
        header.append(line[2:].strip() if not line.startswith("--   ") else "  " + line[2:].strip())
    bodies = [str(m.path) for m in modules_for(spec.sql) if m.name.startswith(METRIC_BODIES)]
    print(f"{spec.label} (versions: {', '.join(f'v{v}' for v in versions)})")
    print(f"SQL file: {spec.path}")
    for body in bodies:
        print(f"shared body: {body}")
    print("\n".join(header))
    print(f"query: {len(spec.sql.splitlines())} lines after the header; `cclq shell` has every view it reads")


def _check_traces(wh: Warehouse, selection: list[str]) -> list[str]:
    """The trace ids ``--trace`` names: ids, or glob patterns (``'run1_*'``, as ``diff``
    takes them) matched against the warehouse's; an unknown id is a usage error with the
    nearest ids (the same id in another case first)."""
    import fnmatch

    if not selection:
        return selection
    with wh.open_snapshot() as snapshot:
        known = snapshot.trace_ids()
    out: list[str] = []
    for t in selection:
        if t in known:
            out.append(t)
        elif any(c in t for c in "*?["):
            matched = fnmatch.filter(known, t)
            if not matched:
                raise UsageError(f"no trace matches {t!r} in {wh.root}", hint="`cclq traces` lists them")
            out += matched
        else:
            _no_trace(wh, t, known)
    return list(dict.fromkeys(out))


def _no_trace(wh: Warehouse, trace: str, known: list[str]) -> None:
    from cclq.query.registry import did_you_mean

    raise UsageError(f"no trace {trace!r} in {wh.root}", hint=did_you_mean(trace, known, "`cclq traces` lists them"))


def _one_metric(
    wh: Warehouse,
    spec,  # noqa: ANN001
    params: dict[str, str],
    selection: list[str] | None,
    no_cache: bool,
    fmt: OutputFormat,
    output: Path | None,
    dask: str | None,
) -> None:
    from cclq.query.cache import cached_result
    from cclq.query.metrics import run_metric

    table = None if no_cache else cached_result(wh, spec, params, selection)  # no DuckDB for a repeat
    if table is None:
        with _session(wh, traces=selection, cache=not no_cache) as session:
            if dask is None:
                from cclq.query.metrics import batch_queries, shared_views

                # as in a batch: the views its query reads several times over (ALWAYS_SHARED)
                # stored once; collective_busbw on a 127 MB rank 2.3 s -> 0.8 s of query
                with shared_views(session, batch_queries(session, [spec], params)):
                    table = run_metric(session, spec, params)
            else:
                from cclq.cli.progress import CountedProgress
                from cclq.query.dask import run_metric_on_dask

                with CountedProgress(f"{spec.name} on dask: partitions") as bar:
                    table = run_metric_on_dask(session, spec, params, dask, on_partition=bar.update)
    write_table(table, fmt, output=output, title=f"{spec.label} ({spec.unit})")


def _several_metrics(
    wh: Warehouse,
    specs: list,
    params: dict[str, str],
    selection: list[str] | None,
    no_cache: bool,
    fmt: OutputFormat,
    output: Path | None,
    dask: str | None,
) -> None:
    from cclq.cli.progress import StepProgress
    from cclq.query.metrics import MetricRun, run_metrics

    with _session(wh, traces=selection, cache=not no_cache) as session, StepProgress("metrics", len(specs)) as progress:

        def done(run: MetricRun) -> None:
            progress.advance(_run_label(run))

        if dask is None:  # what the catalog rules out is not run (docs/metrics.md: applicability)
            runs = run_metrics(session, specs, params, on_done=done, plan_first=True)
            _add_catalog_rows(runs)
        else:  # the metrics not cached are computed together, one task per trace partition
            from cclq.query.dask import run_metrics_on_dask

            runs = run_metrics_on_dask(session, specs, params, dask, on_done=done)
    failed = [r for r in runs.values() if r.error]
    ok = [r for r in runs.values() if r.table is not None]
    if output is not None and _is_folder_output(output):
        # one file per metric; "table" (the default) writes CSV, as the help says
        file_fmt = OutputFormat.csv if fmt is OutputFormat.table else fmt
        for run in ok:
            write_table(
                run.table,
                file_fmt,
                output=output / f"{run.spec.name}.{file_fmt.value}",
                title=f"{run.spec.label} ({run.spec.unit})",
            )
    else:
        _write_long_form(ok, fmt, output)
    _exit_if_failed([f"{run.spec.label}: {run.error}" for run in failed])


def _exit_if_failed(failures: list[str]) -> None:
    """Names each metric that failed (its SQL did not run) on stderr and exits with
    ``ExitCode.QUERY``, after the rest was written: what ``metric``, ``report``, ``diff``
    and ``board`` do alike, so that a failure is never taken for "does not apply"."""
    for line in failures:
        print(f"cclq: error: {line}", file=sys.stderr)
    if failures:
        raise typer.Exit(ExitCode.QUERY)


def _add_catalog_rows(runs: dict) -> None:  # name -> MetricRun
    """A metric the catalog rules out for every trace ran no SQL: its result is one row per
    trace with no value and the catalog's reason (``cclq.query.metrics.catalog_rows``)."""
    from cclq.query.metrics import catalog_rows

    for run in runs.values():
        if run.table is None and run.error is None and run.not_applicable:
            run.table = catalog_rows(run)


def _is_folder_output(output: Path) -> bool:
    """-o with several metrics: a folder (existing, or a name without a suffix)."""
    return output.is_dir() or not output.suffix


def _prepare_output(output: Path | None, folder: bool = False) -> None:
    """Creates the output's folder (or its parent folders) before any work is done, so
    that a long computation never fails at the end for want of a folder; a folder
    that cannot be made is a usage error (exit 2) before anything is computed."""
    if output is None:
        return
    target = output if folder else output.parent
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(
            f"{show_path(output)}: cannot create {'the folder' if folder else 'its folder'}: {e.strerror or e}"
        ) from None
    if not folder and output.is_dir():
        raise UsageError(f"{show_path(output)} is a folder; give a file name")


def _detail_type(types: list) -> Any:  # noqa: ANN401 - a pyarrow DataType
    """One type for a detail column that several metrics return: theirs if they agree,
    else text."""
    import pyarrow as pa

    known = {t for t in types if not pa.types.is_null(t)}
    if len(known) == 1:
        return known.pop()
    return pa.null() if not known else pa.string()


def _write_long_form(ok: list, fmt: OutputFormat, output: Path | None) -> None:  # list[MetricRun]
    """Several metrics as one long table: a `metric` column, the fixed columns and each
    metric's own columns in `details`: a struct in Parquet (fields: every detail column
    of every metric, null where a metric has none), an object of that metric's own
    columns in JSON, a JSON text in CSV and the table."""
    import pyarrow as pa

    from cclq.query.outcomes import FIXED_COLUMNS

    own: dict[str, list[str]] = {}
    types: dict[str, list] = {}
    for run in ok:
        own[run.spec.name] = [c for c in run.table.column_names if c not in FIXED_COLUMNS]
        for c in own[run.spec.name]:
            types.setdefault(c, []).append(run.table.schema.field(c).type)
    struct = pa.struct([(c, _detail_type(t)) for c, t in types.items()]) if types else None
    rows = []
    for run in ok:
        for row in run.table.to_pylist():
            details = {k: row[k] for k in own[run.spec.name]}
            if struct is not None and details:
                details = {
                    k: (
                        str(v)
                        if v is not None and pa.types.is_string(struct.field(k).type) and not isinstance(v, str)
                        else v
                    )
                    for k, v in details.items()
                }
            rows.append(
                {
                    "metric": run.spec.name,
                    "version": run.spec.version,
                    **{k: row[k] for k in FIXED_COLUMNS},
                    "details": details or None,
                }
            )
    if fmt is OutputFormat.json:
        _dump_json(rows, output)
        return
    fields = [
        ("metric", pa.string()),
        ("version", pa.int32()),
        ("trace", pa.string()),
        ("rank", pa.int32()),
        ("step", pa.int64()),
        ("value", pa.float64()),
        ("unit", pa.string()),
        ("reason", pa.string()),
    ]
    if fmt is OutputFormat.parquet and struct is not None:
        schema = pa.schema([*fields, ("details", struct)])
    else:
        schema = pa.schema([*fields, ("details", pa.string())])
        rows = [{**r, "details": json.dumps(r["details"], default=str) if r["details"] else None} for r in rows]
    write_table(
        pa.Table.from_pylist(rows, schema=schema),
        fmt,
        output=output,
        title=f"{len(ok)} metrics (long form; `details` holds each metric's own columns)",
    )


def _finite(v: Any) -> Any:  # noqa: ANN401
    """JSON has no NaN or infinity: null, at any depth."""
    if isinstance(v, float) and (v != v or v in (float("inf"), float("-inf"))):
        return None
    if isinstance(v, dict):
        return {k: _finite(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_finite(x) for x in v]
    return v


def _dump_json(rows: list[dict], output: Path | None) -> None:
    text = json.dumps(_finite(rows), default=str, indent=1) + "\n"
    if output is None:
        sys.stdout.write(text)
    else:
        output.write_text(text)


# ------------------------------------------------------------------------ report
class ReportFormat(str, Enum):
    table = "table"
    json = "json"
    html = "html"


ParamOpt = Annotated[
    Optional[list[str]], typer.Option("--param", "-p", help="KEY=VALUE for the metrics that take it (repeatable).")
]
NoCacheOpt = Annotated[bool, typer.Option("--no-cache", help="Compute again even if a cached result matches.")]


def _run_label(run: Any) -> str:
    """A metric in a progress line: its name, and whether it was decided from the catalog
    (it applies to none of the traces: its SQL did not run) or failed."""
    if run.table is None and run.error is None and run.not_applicable:
        return f"{run.spec.name}: not applicable (from the catalog)"
    return f"{run.spec.name}: failed" if run.error else run.spec.name


def _shared_label(names: list[str]) -> str:
    """The stage before the metrics: the views they share, each computed once alongside
    the metrics that do not read it."""
    return f"{len(names)} shared view(s), each computed once" + (f" ({', '.join(names)})" if names else "")


def _require_traces(session: Session, wh: Warehouse, wanted: list[str]) -> None:
    known = {row[0] for row in session.execute("SELECT DISTINCT trace FROM files").fetchall()}
    missing = [t for t in wanted if t not in known]
    if missing:  # the session may see only the selected traces: suggest from all of them
        with wh.open_snapshot() as snapshot:
            every = snapshot.trace_ids()
        _no_trace(wh, missing[0], every)


@app.command(epilog="Example: cclq report dlrm_param_8xV100 --format html -o dlrm.html")
def report(
    trace: Annotated[
        str,
        typer.Argument(
            help="Trace id (see `cclq traces`), or a workload folder or trace file "
            "not yet in the warehouse: it is ingested first."
        ),
    ],
    fmt: Annotated[ReportFormat, typer.Option("--format", "-f", help="Output format.")] = ReportFormat.table,
    output: OutputOpt = None,
    param: ParamOpt = None,
    no_cache: NoCacheOpt = False,
    all_metrics: Annotated[
        bool,
        typer.Option(
            "--all-metrics",
            help="List the metrics that do not apply too, each with the reason (the table folds them into one line).",
        ),
    ] = False,
    warehouse: WarehouseOpt = None,
) -> None:
    """Every metric of one trace at once, grouped by category, with the reason for each one
    that does not apply (table; `--format json` for machines, `html` for a page with plots).

    A metric whose SQL failed is listed as failed with its error (never as n/a) and named
    on stderr; the exit status is then 3, as for `cclq metric`."""
    from cclq.cli.progress import StepProgress
    from cclq.present.report import collect_reports, print_report, report_dict
    from cclq.query.params import check_batch_params, parse_param_args
    from cclq.query.registry import latest_specs

    wh = _warehouse(warehouse)
    params = parse_param_args(param or [])
    specs = latest_specs()
    check_batch_params(specs, params)
    ingest_failed = False
    if Path(trace).exists() and trace not in _known_traces(wh):
        _, looked, ingest_failed = _first_look(wh, [trace], set())
        if len(looked) > 1:
            raise UsageError(
                f"{trace} holds {len(looked)} traces ({', '.join(looked)}); the report is of one",
                hint=f"cclq report {looked[0]}",
            )
        trace = looked[0]
    _prepare_output(output)
    with _session(wh, traces=[trace], cache=not no_cache) as session:
        _require_traces(session, wh, [trace])
        with StepProgress("metrics", len(specs)) as bar:
            reports = collect_reports(
                session,
                specs,
                params,
                on_metric=lambda run: bar.advance(_run_label(run)),
                on_shared=lambda names: bar.stage(_shared_label(names)),
            )
    data = report_dict(reports[trace], rows=fmt is ReportFormat.json)
    out = open(output, "w") if output else sys.stdout
    try:
        if fmt is ReportFormat.json:
            json.dump(data, out, indent=1, default=str)
            out.write("\n")
        elif fmt is ReportFormat.html:
            from cclq.present.board.pages import workload_page

            out.write(workload_page(data, standalone=True))
        else:
            print_report(data, out, all_metrics=all_metrics)
    finally:
        if output:
            out.close()
    _exit_if_failed([f"{f['metric']}: {f['reason']}" for f in data["metrics_failed"]])
    if ingest_failed:
        raise typer.Exit(ExitCode.FAILED)


def _known_traces(wh: Warehouse) -> set[str]:
    """The warehouse's trace ids (none when it does not exist yet)."""
    if not wh.exists():
        return set()
    with wh.open_snapshot() as snapshot:
        return set(snapshot.trace_ids())


# -------------------------------------------------------------------------- diff
@app.command(epilog="Example: cclq diff llama_tp4 llama_tp8   (sets: cclq diff 'run1_*' 'run2_*' --format csv)")
def diff(
    a: Annotated[str, typer.Argument(help="Side A: a trace id, ids separated by commas, or a glob pattern.")],
    b: Annotated[str, typer.Argument(help="Side B, the same way.")],
    rank: Annotated[Optional[int], typer.Option("--rank", "-r", help="Compare this rank alone on both sides.")] = None,
    top: Annotated[int, typer.Option("--top", min=1, help="Ops shown in the table (CSV/JSON list all).")] = 30,
    fmt: Annotated[
        DiffFormat,
        typer.Option("--format", "-f", help="Output format (html: a page with the report's plots of both sides)."),
    ] = DiffFormat.table,
    output: OutputOpt = None,
    param: ParamOpt = None,
    no_cache: NoCacheOpt = False,
    warehouse: WarehouseOpt = None,
) -> None:
    """Compare two traces (or two sets): every applicable metric with its absolute and relative
    change, and per kernel name / class / collective type the calls and time on each side.

    Traces of different rank counts compare as per-rank means; per-rank metrics are
    compared rank by rank when both sides have the same ranks. `--format csv` gives one
    long table with a `part` column (metric, op_group, op); `json` an object. A metric
    that failed is listed as failed and named on stderr, and the exit status is 3.
    """
    import pyarrow as pa

    from cclq.cli.progress import StepProgress
    from cclq.present.diff import (
        DIFF_COLUMNS,
        diff_dict,
        long_rows,
        print_diff,
        resolve_side,
    )
    from cclq.present.diff import diff as run_diff
    from cclq.query.params import check_batch_params, parse_param_args
    from cclq.query.registry import latest_specs

    params = parse_param_args(param or [])
    check_batch_params(latest_specs(), params)
    wh = _warehouse(warehouse)
    wh.require()
    with wh.open_snapshot() as snapshot:
        known = snapshot.trace_ids()
    side_a, side_b = resolve_side(a, known), resolve_side(b, known)
    specs = latest_specs()
    reports: dict[str, Any] = {}
    with _session(wh, traces=side_a + side_b, cache=not no_cache) as session:
        if fmt is DiffFormat.html:  # the report's plots of every trace: its metrics and figure data
            from cclq.present.report import collect_reports, report_dict

            with StepProgress("metrics (plots)", len(specs)) as bar:
                reports = {
                    t: report_dict(r, rows=False)
                    for t, r in collect_reports(
                        session, specs, params, on_metric=lambda run: bar.advance(_run_label(run))
                    ).items()
                }
        with StepProgress("metrics", len(specs)) as bar:
            result = run_diff(
                session, specs, side_a, side_b, params, rank=rank, on_metric=lambda run: bar.advance(_run_label(run))
            )
    if fmt is DiffFormat.html:
        from cclq.present.diff_page import diff_page

        page = diff_page(result, reports, top=top)
        if output:
            output.write_text(page)
        else:
            sys.stdout.write(page)
    elif fmt is DiffFormat.table:
        out = open(output, "w") if output else sys.stdout
        try:
            print_diff(result, out, top=top)
        finally:
            if output:
                out.close()
    elif fmt is DiffFormat.json:
        text = json.dumps(diff_dict(result), indent=1, default=str) + "\n"
        if output:
            output.write_text(text)
        else:
            sys.stdout.write(text)
    else:
        types = {
            "rank": pa.int64(),
            "a": pa.float64(),
            "b": pa.float64(),
            "delta": pa.float64(),
            "rel": pa.float64(),
            "calls_a": pa.float64(),
            "calls_b": pa.float64(),
            "valid_a": pa.bool_(),
            "valid_b": pa.bool_(),
        }
        schema = pa.schema([(c, types.get(c, pa.string())) for c in DIFF_COLUMNS])
        write_table(pa.Table.from_pylist(long_rows(result), schema=schema), OutputFormat(fmt.value), output=output)
    _exit_if_failed([f"{f['metric']}: {f['reason']}" for f in result.failed])


# ------------------------------------------------------------------------- board
@app.command(
    epilog="Example: cclq board site/ && python -m http.server -d site   (or open site/index.html)\n\n"
    "cclq board website --config website/benchmark_config.json   (CCL-Bench's website data)"
)
def board(
    out_dir: Annotated[Path, typer.Argument(help="Folder to write to (created; updated in place).")],
    param: ParamOpt = None,
    all_metrics: Annotated[
        bool,
        typer.Option(
            "--all-metrics",
            help="Compute every metric for the workload pages, not only the leaderboard's and the plots'.",
        ),
    ] = False,
    force: Annotated[
        bool, typer.Option("--force", help="Recompute every workload, not only the changed ones.")
    ] = False,
    no_cache: NoCacheOpt = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar or summary line.")] = False,
    config: Annotated[
        Optional[Path],
        typer.Option(
            "--config",
            help="CCL-Bench's website/benchmark_config.json: its pairs "
            "(ingested as needed), `auto` or listed metrics, "
            "required_update; benchmark_data.json follows it.",
        ),
    ] = None,
    pages: Annotated[
        Optional[bool],
        typer.Option(
            "--pages/--no-pages",
            show_default=False,
            help="Write cclq's site (index.html, assets/, w/, data/) beside "
            "benchmark_data.json and data.js [default: only in a folder that is new, "
            "empty or a cclq board; into any other, such as CCL-Bench's website/, "
            "only those two files].",
        ),
    ] = None,
    write_config: Annotated[
        Optional[Path],
        typer.Option(
            "--write-config", help='Also write a benchmark_config.json naming every workload of the warehouse ("auto").'
        ),
    ] = None,
    allow_partial: AllowPartialOpt = False,
    warehouse: WarehouseOpt = None,
) -> None:
    """Build the static leaderboard site: one row per workload, a page per workload with plots,
    and benchmark_data.json in CCL-Bench's format. A rebuild recomputes only changed workloads.
    A metric that failed shows as "failed" on the pages, is named on stderr, and the exit
    status is 3 (the site is still written; the next build computes those workloads again).

    With --config, CCL-Bench's website config drives benchmark_data.json / data.js, as its
    generate_data.py would write them through `python -m cclq.main`: its pairs (ingested
    as needed, into a new warehouse too), their metrics (`auto`: the metric_info entries
    whose trace_types meet the card's metric_source.traces) and required_update
    (docs/ccl-bench.md). Exit status 1 if a pair or metric failed (each named on stderr;
    the rest is written)."""
    from cclq.cli.progress import IngestProgress, StepProgress
    from cclq.present.board.build import board_specs, build_board, check_out_dir, is_board_folder
    from cclq.present.board.build import write_config as write_board_config
    from cclq.query.params import check_batch_params, parse_param_args

    params = parse_param_args(param or [])
    check_batch_params(board_specs(all_metrics), params)
    wh = _warehouse(warehouse)
    if config is not None:
        from cclq.present.board.config import load_board_config

        load_board_config(config)  # a config that cannot be read is a usage error before any work
    pages = is_board_folder(out_dir) if pages is None else pages
    check_out_dir(out_dir)
    bar: list[StepProgress] = []

    def start(traces: int, metrics: int) -> None:
        if traces and not quiet:
            bar.append(StepProgress(f"metrics over {traces} workload(s)", metrics).__enter__())

    if config is not None:
        from cclq.present.board.ccl_bench import build_from_config

        try:
            cresult = build_from_config(
                wh,
                out_dir,
                config,
                params,
                use_cache=not no_cache,
                on_start=start,
                settings=_query_settings(),
                pages=pages,
                reporter=IngestProgress(enabled=not quiet),
                on_metric=lambda run: bar[0].advance(run.spec.name) if bar else None,
            )
        finally:
            for b in bar:
                b.__exit__(None, None, None)
        written = (
            sorted({o.trace for o in cresult.ingest.outcomes if o.status == "ingested"})
            if cresult.ingest is not None
            else []
        )
        if written:  # as `cclq ingest` says it, once, for the traces this build wrote
            _warn_partial(wh, written, allow_partial)
        for line in cresult.notes:
            print(f"cclq: note: {line}", file=sys.stderr)
        for line in cresult.problems:
            print(f"cclq: error: {line}", file=sys.stderr)
        if write_config is not None and wh.exists():
            n = write_board_config(wh, write_config)
            if not quiet:
                print(f"board: wrote {write_config} ({n} pair(s))", file=sys.stderr)
        if not quiet:
            print(
                f"board: {cresult.pairs} pair(s) from {config}: {cresult.computed} value(s) computed, "
                f"{cresult.reused} reused -> {out_dir / 'benchmark_data.json'}, data.js"
                + ("" if pages else _no_pages_note(out_dir)),
                file=sys.stderr,
            )
        if cresult.problems:
            raise typer.Exit(1)
        return
    try:
        result = build_board(
            wh,
            out_dir,
            params,
            all_metrics=all_metrics,
            use_cache=not no_cache,
            force=force or no_cache,
            on_start=start,
            settings=_query_settings(),
            pages=pages,
            on_metric=lambda run: bar[0].advance(_run_label(run)) if bar else None,
            on_shared=lambda names: bar[0].stage(_shared_label(names)) if bar else None,
        )
    finally:
        for b in bar:
            b.__exit__(None, None, None)
    if not quiet:
        where = (out_dir / "index.html") if pages else (out_dir / "benchmark_data.json")
        print(
            f"board: {result.workloads} workload(s), {len(result.computed)} computed, {result.reused} unchanged"
            + (f", {result.removed} removed" if result.removed else "")
            + f" -> {where} ({result.seconds:.1f} s)"
            + ("" if pages else _no_pages_note(out_dir)),
            file=sys.stderr,
        )
    if write_config is not None:
        n = write_board_config(wh, write_config)
        if not quiet:
            print(f"board: wrote {write_config} ({n} pair(s))", file=sys.stderr)
    _exit_if_failed(result.failed)


def _no_pages_note(out_dir: Path) -> str:
    return (
        f"; only benchmark_data.json and data.js: {out_dir} is not a cclq board (--pages writes cclq's site there too)"
    )


# ------------------------------------------------------------------------ daemon
daemon_app = typer.Typer(
    help="The background process `python -m cclq.main` keeps per warehouse (CCL-Bench's calls answer fast from it).",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(daemon_app, name="daemon")


@daemon_app.command("stop", epilog="Example: cclq daemon stop -w ../shared/wh")
def daemon_stop(warehouse: WarehouseOpt = None) -> None:
    """Stop the warehouse's daemon now (it also exits by itself after CCLQ_DAEMON_IDLE_S seconds
    without a call, 600 by default; CCLQ_DAEMON=0 starts none)."""
    from cclq.compat import daemon

    root = resolve_warehouse(warehouse)
    print(f"stopped the daemon of {root}" if daemon.stop(root) else f"no daemon runs for {root}", file=sys.stderr)


# ------------------------------------------------------------------------- cards
cards_app = typer.Typer(
    help="Workload cards: check them against CCL-Bench's template.", no_args_is_help=True, rich_markup_mode=None
)
app.add_typer(cards_app, name="cards")


@cards_app.command("check", epilog="Example: cclq cards check trace_collection ../shared/traces")
def cards_check(
    paths: Annotated[
        Optional[list[Path]],
        typer.Argument(help="Card files, workload folders or folders of workloads [default: .].", show_default=False),
    ] = None,
    fmt: FormatOpt = OutputFormat.table,
    output: OutputOpt = None,
) -> None:
    """Check workload cards against CCL-Bench's template: one line per problem (file: field: problem).

    Required fields, types of counts, known phase / precision / granularity values,
    parallelism factors that multiply to the device count, misspelled keys. Exit status 1
    if any card has a problem. `--format csv|json` gives the problems as rows.
    """
    import pyarrow as pa

    from cclq.ingest.plan import check_input_cards

    report = check_input_cards(paths or [Path(".")])
    if fmt is OutputFormat.table:
        out = open(output, "w") if output else sys.stdout
        try:
            for problem in report.problems:
                print(problem.line(), file=out)
        finally:
            if output:
                out.close()
    else:
        rows = [{"file": p.path, "field": p.field, "problem": p.problem} for p in report.problems]
        schema = pa.schema([("file", pa.string()), ("field", pa.string()), ("problem", pa.string())])
        write_table(pa.Table.from_pylist(rows, schema=schema), fmt, output=output)
    bad = len({p.path for p in report.problems})
    print(
        f"{len(report.cards)} card(s) checked: {len(report.problems)} problem(s) in {bad} card(s)"
        + (f"; {len(report.without_card)} workload(s) without a card" if report.without_card else ""),
        file=sys.stderr,
    )
    if report.problems:
        raise typer.Exit(ExitCode.FAILED)


# ------------------------------------------------------------------------- shell
@app.command(
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    epilog='Example: cclq shell   (extra arguments go to the duckdb CLI, e.g. -c "SELECT 1")',
)
def shell(ctx: typer.Context, warehouse: WarehouseOpt = None) -> None:
    """Open the DuckDB shell with every cclq view defined.

    The shell is a full DuckDB session (it can write files, attach databases, read
    anything): unlike `cclq sql`, nothing is made read-only. It sees the warehouse as the
    last complete ingest left it when the shell started; start it again to see later ones.
    """
    import duckdb

    from cclq.query.engine import setup_script

    wh = _warehouse(warehouse)
    exe = shutil.which("duckdb") or str(Path(sys.executable).parent / "duckdb")
    if not Path(exe).exists():
        raise UsageError(
            "the duckdb CLI is not installed",
            hint="pip install duckdb-cli (the release of the duckdb library, or the nearest one)",
        )
    cli_version = _duckdb_cli_version(exe)
    same = cli_version == duckdb.__version__
    # which CLI, on stderr (stdout is the shell's): a CLI of another release than the
    # library cannot read the views the library compiled, so they are created at start
    print(
        f"cclq shell: DuckDB CLI {cli_version or '(version unknown)'} ({exe})"
        + (
            ""
            if same
            else f"; cclq's duckdb library is {duckdb.__version__}: the views are created as the "
            "shell starts (~1 s) instead of attached compiled"
        ),
        file=sys.stderr,
    )
    with wh.open_snapshot() as snapshot:  # held for the session: its files stay
        query_settings = _query_settings()
        spill = query_settings.make_spill_folder(wh)  # a spill folder of the shell's own
        with tempfile.NamedTemporaryFile("w", suffix=".sql", prefix="cclq-init-", delete=False) as f:
            f.write(
                ".bail on\n"
                + "\n".join(query_settings.set_statements(spill))
                + "\n"
                + setup_script(snapshot, comments=True, compiled=same)
                + ".bail off\n"
            )
            init = f.name
        try:
            code = subprocess.call([exe, "-init", init, *ctx.args])
        finally:
            os.unlink(init)
            shutil.rmtree(spill, ignore_errors=True)
    raise typer.Exit(code)


def _duckdb_cli_version(exe: str) -> str | None:
    """The release of a duckdb CLI (``duckdb -version``: ``v1.5.6 (Variegata) 069cc9f9b5``)."""
    import re

    try:
        out = subprocess.run([exe, "-version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.match(r"\s*v?(\d+\.\d+\.\d+\S*)", out)
    return m.group(1) if m else None


# ------------------------------------------------------------------------- serve
@app.command(epilog="Example: cclq serve --port 8000   (then open http://127.0.0.1:8000/)")
def serve(
    data_dir: Annotated[
        Path,
        typer.Option(
            "--data",
            help="Folder for upload jobs (uploads/<id>/) and, unless --board says otherwise, the board (board/).",
        ),
    ] = Path(".cclq/serve"),
    host: Annotated[
        str, typer.Option("--host", help="Address to bind; 127.0.0.1 keeps it on this machine.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", "-p", min=0, max=65535, help="Port to listen on.")] = 8000,
    board_dir: Annotated[
        Optional[Path], typer.Option("--board", help="The board's folder [default: DATA/board].")
    ] = None,
    site_dir: Annotated[
        Optional[Path],
        typer.Option(
            "--site",
            help="Serve this static site as it is instead of cclq's board (a "
            "CCL-Bench checkout: its index.html's upload form works as is).",
        ),
    ] = None,
    config: Annotated[
        Optional[Path],
        typer.Option(
            "--config",
            help="CCL-Bench's benchmark_config.json: an upload gets its "
            "metric_info metrics (`auto` by the card's trace types).",
        ),
    ] = None,
    token: Annotated[
        Optional[str],
        typer.Option(
            "--token",
            envvar="CCLQ_SERVE_TOKEN",
            show_default=False,
            help="Uploads need `Authorization: Bearer TOKEN` [env: CCLQ_SERVE_TOKEN].",
        ),
    ] = None,
    max_upload_mb: Annotated[int, typer.Option("--max-upload-mb", min=1, help="Largest upload (request body).")] = 1024,
    max_unpacked_mb: Annotated[
        int, typer.Option("--max-unpacked-mb", min=1, help="Most an upload may unpack to.")
    ] = 8192,
    max_files: Annotated[int, typer.Option("--max-files", min=1, help="Most files an upload may unpack to.")] = 20000,
    jobs: Annotated[int, typer.Option("--jobs", "-j", min=1, max=64, help="Upload jobs run at once.")] = 1,
    queue_size: Annotated[int, typer.Option("--queue", min=1, help="Jobs that may wait; more are refused (503).")] = 64,
    job_timeout: Annotated[
        float,
        typer.Option(
            "--job-timeout", min=1, help="Seconds one job may run in its process before it is stopped (and fails)."
        ),
    ] = 3600,
    job_memory_mb: Annotated[
        Optional[int],
        typer.Option(
            "--job-memory-mb",
            min=256,
            help="Address space of a job's process (MB); over it the job fails, not the server [default: no limit].",
        ),
    ] = None,
    allow_host: Annotated[
        Optional[list[str]],
        typer.Option(
            "--allow-host",
            help="Another name this server is reached by (a request "
            "whose Host names neither it nor --host is refused; "
            "repeatable).",
        ),
    ] = None,
    header_timeout: Annotated[
        float, typer.Option("--header-timeout", min=0.1, help="Seconds a connection has to send a request's headers.")
    ] = 10.0,
    body_timeout: Annotated[
        float, typer.Option("--body-timeout", min=0.1, help="Seconds an upload may go without sending a byte.")
    ] = 60.0,
    max_connections: Annotated[
        int, typer.Option("--max-connections", min=1, help="Open connections at once; more are answered 503.")
    ] = 128,
    keep_uploads_hours: Annotated[
        float,
        typer.Option(
            "--keep-uploads-hours",
            min=0.0,
            help="Hours a finished job's folder (the upload, its "
            "results.json) is kept; then it is removed (the "
            "workload stays on the board).",
        ),
    ] = 168.0,
    warehouse: WarehouseOpt = None,
) -> None:
    """Serve the board with CCL-Bench's upload API: POST /api/upload (a zip/tar/tar.gz/.gz of a
    trace folder), GET /api/results/<id> (results.json), GET /health.

    An upload is unpacked safely (no paths out of its folder, no links, bounded size, file
    count and inflation), its card checked, then a job queue ingests it, computes the metrics
    and rebuilds the board. Needs the extra: pip install 'cclq[serve]'."""
    try:
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        raise UsageError("cclq serve needs Starlette and uvicorn", hint="pip install 'cclq[serve]'") from None
    from cclq.present.serve.app import ServeSettings
    from cclq.present.serve.app import serve as run_server
    from cclq.present.serve.archive import Limits

    if host not in ("127.0.0.1", "localhost", "::1") and not token:
        print(f"cclq: warning: serving on {host} without a token: anyone who reaches it can upload", file=sys.stderr)
    settings = ServeSettings(
        data_dir=data_dir,
        warehouse=_warehouse(warehouse),
        board_dir=board_dir or data_dir / "board",
        config_path=config,
        token=token,
        site_dir=site_dir,
        limits=Limits(max_upload_bytes=max_upload_mb * MIB, max_total_bytes=max_unpacked_mb * MIB, max_files=max_files),
        workers=jobs,
        queue_size=queue_size,
        job_timeout=job_timeout,
        job_memory_mb=job_memory_mb,
        listen_host=host,
        allow_hosts=tuple(allow_host or ()),
        header_timeout=header_timeout,
        body_timeout=body_timeout,
        max_connections=max_connections,
        keep_uploads_hours=keep_uploads_hours,
    )
    print(
        f"cclq serve: http://{host}:{port}/  (uploads in {data_dir / 'uploads'}, warehouse "
        f"{settings.warehouse.root}; Ctrl-C stops)",
        file=sys.stderr,
    )
    if token:
        print(
            f"cclq serve: uploads need the token; a browser signs in once at http://{host}:{port}/_serve/login "
            "(then the site's own upload form, CCL-Bench's included, works as it is)",
            file=sys.stderr,
        )
    run_server(settings, host, port)


# --------------------------------------------------------------------- ccl-bench
ccl_bench_app = typer.Typer(
    help="Switching a CCL-Bench checkout over to cclq (docs/ccl-bench.md).", no_args_is_help=True, rich_markup_mode=None
)
app.add_typer(ccl_bench_app, name="ccl-bench")


@ccl_bench_app.command("shim", epilog="Example: cclq ccl-bench shim ~/ccl-bench --force")
def ccl_bench_shim(
    checkout: Annotated[Path, typer.Argument(help="The CCL-Bench checkout (the folder holding tools/ and website/).")],
    force: Annotated[
        bool, typer.Option("--force", help="Replace CCL-Bench's own tools/main.py (kept as tools/main_ccl_bench.py).")
    ] = False,
) -> None:
    """Write tools/main.py so CCL-Bench's website scripts get their numbers from cclq, and add
    .cclq/ to the checkout's .gitignore."""
    from cclq.compat.shim import write_shim

    result = write_shim(checkout, force=force)
    print(
        f"wrote {result.shim}"
        + (f" (CCL-Bench's dispatcher kept as {result.kept.name})" if result.kept else "")
        + ("; .cclq/ added to .gitignore" if result.gitignore_changed else ""),
        file=sys.stderr,
    )


# ------------------------------------------------------------------------ record
@app.command(epilog="Example: cclq record ddlb_config.json -o runs --nproc 2 && cclq ingest runs")
def record(
    config: Annotated[
        Path, typer.Argument(help="DDLB's config.json (its `benchmark` object), or cclq's extension of it.")
    ],
    out_dir: Annotated[
        Path, typer.Option("--output", "-o", help="Folder to put one workload folder per configuration in.")
    ],
    nproc: Annotated[
        int, typer.Option("--nproc", "-n", min=1, help="World size: rank processes per configuration.")
    ] = 2,
    timeout: Annotated[
        float, typer.Option("--timeout", min=1, help="Seconds one configuration may take before its ranks are stopped.")
    ] = 600,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """Run distributed primitives under the PyTorch profiler: one workload folder per configuration.

    Every list in the config (sizes, dtype, implementation options) expands to the
    cartesian product. Each configuration leaves a Kineto trace per rank
    (kineto_trace_<rank>.json, ProfilerStep per timed iteration), DDLB's results CSV
    (ddlb_results.csv; OUT_DIR/ddlb_results.csv gathers them all) and a filled
    workload_card.yaml, so `cclq ingest OUT_DIR` takes it whole. A configuration that
    cannot run here (unsupported backend, out of memory) is reported with its reason
    and the others go on; the exit status is then 1. Needs PyTorch: pip install -e '.[record]'.
    """
    from cclq.cli.record_progress import RecordProgress, summary_table
    from cclq.record.runner import record as run_record

    if not config.is_file():
        raise UsageError(f"{config}: no such file")
    outcomes = run_record(config, out_dir, nproc, timeout_s=timeout, reporter=RecordProgress(enabled=not quiet))
    table = summary_table(outcomes)
    if fmt is OutputFormat.table:  # the workload name already says implementation, sizes and dtype
        table = table.select(["workload", "status", "mean_time_ms", "std_time_ms", "tflops", "valid", "reason"])
    write_table(table, fmt, title=f"cclq record -> {out_dir}")
    if any(o.status == "failed" for o in outcomes):
        raise typer.Exit(ExitCode.FAILED)


# ------------------------------------------------------------------------- bench
app.command(epilog="Example: cclq bench --sizes 127x1,1000x1,1000x8 --perf-traces ../shared/perf-traces")(bench)


_QUERY_OPTIONS = ("--memory-limit", "--spill-dir")


def _take_query_options(args: list[str]) -> tuple[list[str], dict[str, str]]:
    """``--memory-limit SIZE`` and ``--spill-dir DIR`` (or ``=VALUE``) anywhere before
    ``--``: every command's queries run with them. (The arguments without them, the values.)"""
    end = args.index("--") if "--" in args else len(args)
    kept: list[str] = []
    values: dict[str, str] = {}
    i = 0
    while i < end:
        a = args[i]
        name = a.split("=", 1)[0]
        if name in _QUERY_OPTIONS:
            if "=" in a:
                values[name] = a.split("=", 1)[1]
            elif i + 1 < end:
                values[name] = args[i + 1]
                i += 1
            i += 1
            continue
        kept.append(a)
        i += 1
    return kept + args[end:], values


def _strip_debug(args: list[str]) -> tuple[list[str], bool]:
    """Takes ``--debug`` out of the arguments wherever it is (typer accepts it only
    before the subcommand); after a ``--`` everything is left alone."""
    end = args.index("--") if "--" in args else len(args)
    kept = [a for a in args[:end] if a != "--debug"] + args[end:]
    return kept, len(kept) != len(args)


def _debug_enabled() -> bool:
    return os.environ.get("CCLQ_DEBUG") == "1"


def _log_to_stderr() -> None:
    """What the library logs (notes, warnings) goes to stderr as ``cclq: note: ...``."""
    import logging

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("cclq: %(levelname)s: %(message)s"))
    logging.addLevelName(logging.INFO, "note")
    logging.addLevelName(logging.WARNING, "warning")
    logger = logging.getLogger("cclq")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False


_DISK_ERRORS = {
    errno.ENOSPC: "disk full",
    errno.EDQUOT: "disk quota exceeded",
    errno.EROFS: "read-only file system",
    errno.EACCES: "permission denied",
}


def _say_interrupted(e: KeyboardInterrupt) -> None:
    from cclq.ingest.report import IngestInterrupted

    print(f"cclq: {e.message()}" if isinstance(e, IngestInterrupted) else "cclq: interrupted", file=sys.stderr)


def main() -> None:
    """Entry point: maps user errors to one line on stderr and an exit code."""
    global _settings
    args, query_options = _take_query_options(sys.argv[1:])
    args, debug_flag = _strip_debug(args)
    if debug_flag:
        os.environ["CCLQ_DEBUG"] = "1"  # also for what the commands print themselves
    debug = _debug_enabled()
    _log_to_stderr()
    try:
        _settings = QuerySettings.from_env(query_options.get("--memory-limit"), query_options.get("--spill-dir"))
        app(args=args)  # standalone mode: typer itself reports usage errors (exit 2)
    except CclqError as e:
        if debug:
            raise
        print(f"cclq: error: {e.message}", file=sys.stderr)
        if e.hint:
            print(f"hint: {e.hint}", file=sys.stderr)
        sys.exit(e.exit_code)
    except KeyboardInterrupt as e:
        _say_interrupted(e)
        sys.exit(ExitCode.INTERRUPTED)
    except SystemExit as e:
        # typer turns a Ctrl-C inside a command into a silent exit 130 (its Exit, caused
        # by the KeyboardInterrupt): say so, as for one that reaches here
        cause = getattr(e.__context__, "__cause__", None)
        if isinstance(cause, KeyboardInterrupt):
            _say_interrupted(cause)
        raise
    except Exception as e:
        if debug:
            raise
        if isinstance(e, OSError) and e.errno in _DISK_ERRORS:
            # a full or read-only disk under what a command writes (the board, compaction,
            # an output file) is the user's to fix, not a bug: one line naming where
            where = show_path(e.filename) if e.filename else "the output"
            print(f"cclq: error: {where}: {_DISK_ERRORS[e.errno]} ({e.strerror})", file=sys.stderr)
            sys.exit(ExitCode.FAILED)
        print(f"cclq: error: {type(e).__name__}: {e}", file=sys.stderr)
        print("hint: this is a bug in cclq; run again with --debug for the traceback", file=sys.stderr)
        sys.exit(ExitCode.FAILED)
