"""The ``cclq`` command line: a thin typer layer over the library.

Contract: stdout carries data (tables, CSV, JSON); progress, warnings and errors
go to stderr. A ``CclqError`` prints one ``cclq: error: ...`` line and exits with
its ``ExitCode``; ``--debug`` (or ``CCLQ_DEBUG=1``) shows the traceback instead.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Annotated, Optional

import typer

from cclq import __version__
from cclq.errors import CclqError, ExitCode, QueryError, UsageError
from cclq.formats.limits import DEFAULT_LIMITS, MIB, ReadLimits
from cclq.render import OutputFormat, write_table
from cclq.warehouse import WAREHOUSE_ENV, Warehouse, resolve_warehouse

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
OutputOpt = Annotated[
    Optional[Path], typer.Option("--output", "-o", help="Write to this file instead of stdout (needed for parquet).")
]


def _warehouse(option: str | None) -> Warehouse:
    return Warehouse(resolve_warehouse(option))


def _version(value: bool) -> None:
    if value:
        print(f"cclq {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks for errors.")] = False,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")
    ] = False,
) -> None:
    """Columnar analytics for distributed-training profiler traces."""


# ------------------------------------------------------------------------ ingest
@app.command(epilog="Example: cclq ingest trace_collection --jobs 2   (--reader ijson, --max-depth 200, ...)")
def ingest(
    paths: Annotated[list[Path], typer.Argument(help="Workload folders, folders of workloads, or trace files.")],
    warehouse: WarehouseOpt = None,
    jobs: Annotated[
        Optional[int], typer.Option("--jobs", "-j", min=1, help="Parallel parser processes [default: CPUs]; a "
                                    "single file is read by one and its chunks built by this many helpers.")
    ] = None,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Re-ingest files even if unchanged, and let a workload replace a trace of the same id "
            "that was ingested from another folder or file (without it, that workload fails).",
        ),
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar or summary table.")] = False,
    reader: Annotated[
        str,
        typer.Option("--reader", help="JSON reader: 'fast' (msgspec, in chunks; a file it cannot take with "
                                      "certainty goes to ijson) or 'ijson' (the reference, event by event)."),
    ] = "fast",
    max_string_mb: Annotated[
        float, typer.Option("--max-string-mb", min=0.001, help="Fail a file holding a JSON string or number longer than this.")
    ] = DEFAULT_LIMITS.max_string_bytes / MIB,
    max_event_mb: Annotated[
        float, typer.Option("--max-event-mb", min=0.001, help="Fail a file holding one event larger than this.")
    ] = DEFAULT_LIMITS.max_event_bytes / MIB,
    max_depth: Annotated[
        int, typer.Option("--max-depth", min=1, max=900, help="Fail a file whose JSON nests deeper than this.")
    ] = DEFAULT_LIMITS.max_depth,
    max_inflate_ratio: Annotated[
        float, typer.Option("--max-inflate-ratio", min=1.01,
                            help="Fail a gzip file that expands more than this many times (judged past 64 MiB).")
    ] = DEFAULT_LIMITS.max_inflate_ratio,
) -> None:
    """Stream trace files into the Parquet warehouse (unchanged files are skipped).

    The --max-* bounds stop a hostile or broken file from costing time or memory out of
    proportion to its size; the defaults are far above any real trace we know of.
    """
    from cclq.formats.reading import READERS, ReadOptions
    from cclq.ingest import ingest as run_ingest
    from cclq.progress import IngestProgress, print_summary

    if reader not in READERS:
        raise UsageError(f"--reader must be one of {', '.join(READERS)}, not {reader!r}")
    limits = ReadLimits(max_string_bytes=int(max_string_mb * MIB), max_event_bytes=int(max_event_mb * MIB),
                        max_depth=max_depth, max_inflate_ratio=max_inflate_ratio)
    wh = _warehouse(warehouse)
    reporter = IngestProgress(enabled=not quiet)
    report = run_ingest(paths, wh, jobs=jobs, force=force, reporter=reporter,
                        options=ReadOptions(reader=reader, limits=limits))
    if not quiet:
        print_summary(report)
    for outcome in report.outcomes:
        if outcome.status == "failed":
            print(f"cclq: error: {outcome.message}", file=sys.stderr)
    if report.failed:
        raise typer.Exit(ExitCode.FAILED)


# ------------------------------------------------------------------------ traces
@app.command(epilog="Example: cclq traces --format csv")
def traces(warehouse: WarehouseOpt = None, fmt: FormatOpt = OutputFormat.table, output: OutputOpt = None) -> None:
    """List the ingested traces: format, world size, ranks, span, card fields."""
    from cclq.engine import connect

    con = connect(_warehouse(warehouse))
    cols = "trace, format, world_size, ranks_seen, files, events, events_dropped, round(span_s, 6) AS span_s"
    if fmt is not OutputFormat.table:
        cols = "*"
    table = con.execute(f"SELECT {cols} FROM traces ORDER BY trace").to_arrow_table()
    write_table(table, fmt, output=output)


# --------------------------------------------------------------------------- sql
@app.command(epilog="Example: cclq sql \"SELECT trace, rank, count(*) FROM kernels GROUP BY ALL\" -f csv")
def sql(
    query: Annotated[str, typer.Argument(help="A SQL query over the views (events, kernels, traces, files, ...).")],
    warehouse: WarehouseOpt = None,
    fmt: FormatOpt = OutputFormat.table,
    output: OutputOpt = None,
) -> None:
    """Run ad-hoc SQL over the warehouse (DuckDB dialect)."""
    import duckdb

    from cclq.engine import connect

    con = connect(_warehouse(warehouse), for_sql=query)
    try:
        table = con.execute(query).to_arrow_table()
    except duckdb.Error as e:
        raise QueryError(str(e).splitlines()[0]) from e
    write_table(table, fmt, output=output)


# ----------------------------------------------------------------------- metrics
@app.command(epilog="Example: cclq metrics --format csv")
def metrics(fmt: FormatOpt = OutputFormat.table, output: OutputOpt = None) -> None:
    """List every metric: versions, unit, grain, parameters and what it measures."""
    from cclq.metrics import catalog_table

    write_table(catalog_table(), fmt, output=output)


@app.command(epilog="Example: cclq metric communication_overlap_ratio --all --format csv")
def metric(
    name: Annotated[str, typer.Argument(help="Metric name (see `cclq metrics`).")],
    all_traces: Annotated[bool, typer.Option("--all", help="Run over every trace in the warehouse.")] = False,
    trace: Annotated[
        Optional[list[str]], typer.Option("--trace", "-t", help="Run over this trace (repeatable).")
    ] = None,
    version: Annotated[Optional[int], typer.Option("--version", "-v", help="Pin a metric version [default: latest].")] = None,
    param: Annotated[
        Optional[list[str]], typer.Option("--param", "-p", help="KEY=VALUE, overrides the workload card (repeatable).")
    ] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Compute again even if a cached result matches.")] = False,
    warehouse: WarehouseOpt = None,
    fmt: FormatOpt = OutputFormat.table,
    output: OutputOpt = None,
) -> None:
    """Compute one metric for every selected trace in a single DuckDB query.

    Results are cached in the warehouse under a key of the metric's SQL, the views, the
    parameters and the content hash of every input file, so a repeat is read back and a
    changed input or definition is computed again.
    """
    from cclq.engine import connect
    from cclq.metrics import parse_param_args, resolve, run_metric

    if all_traces == bool(trace):
        raise UsageError("say which traces: --all, or --trace T (repeatable)")
    spec = resolve(name, version)
    params = parse_param_args(param or [])
    wh = _warehouse(warehouse)
    con = connect(wh, traces=None if all_traces else list(trace or []), views=False)
    if trace:
        known = {row[0] for row in con.execute("SELECT DISTINCT trace FROM files").fetchall()}
        missing = [t for t in trace if t not in known]
        if missing:
            raise UsageError(f"no trace {', '.join(map(repr, missing))} in {wh.root}", hint="`cclq traces` lists them")
    table = run_metric(con, spec, params, cache_dir=None if no_cache else wh.cache_dir)
    write_table(table, fmt, output=output, title=f"{spec.label} ({spec.unit})")


# ------------------------------------------------------------------------- shell
@app.command(
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    epilog="Example: cclq shell   (extra arguments go to the duckdb CLI, e.g. -c \"SELECT 1\")",
)
def shell(ctx: typer.Context, warehouse: WarehouseOpt = None) -> None:
    """Open the DuckDB shell with every cclq view defined."""
    from cclq.engine import setup_script

    wh = _warehouse(warehouse)
    wh.require()
    exe = shutil.which("duckdb") or str(Path(sys.executable).parent / "duckdb")
    if not Path(exe).exists():
        raise UsageError("the duckdb CLI is not installed", hint="pip install duckdb-cli (the version pinned in pyproject.toml)")
    with tempfile.NamedTemporaryFile("w", suffix=".sql", prefix="cclq-init-", delete=False) as f:
        f.write(".bail on\n" + setup_script(wh) + ".bail off\n")
        init = f.name
    try:
        code = subprocess.call([exe, "-init", init, *ctx.args])
    finally:
        os.unlink(init)
    raise typer.Exit(code)


# ------------------------------------------------------------------------- bench
@app.command(epilog="Example: cclq bench --sizes 127x1,1000x1,1000x8 --perf-traces ../shared/perf-traces")
def bench(
    sizes: Annotated[
        str, typer.Option(help="Synthetic trace sizes in MB (all ranks together), comma-separated; "
                               "MBxR for R ranks (1000x1: one file of 1 GB).")
    ] = "250",
    ranks: Annotated[int, typer.Option(help="Ranks (files) per synthetic trace when a size does not say.")] = 8,
    workdir: Annotated[
        Optional[Path], typer.Option(help="Keep generated traces here and reuse them [default: a temp dir].")
    ] = None,
    perf_traces: Annotated[
        Optional[Path], typer.Option("--perf-traces", help="Also benchmark every folder of real traces here.")
    ] = None,
    ingest_part: Annotated[bool, typer.Option("--ingest/--no-ingest", help="Run the ingest benchmark.")] = True,
    metrics_part: Annotated[bool, typer.Option("--metrics/--no-metrics", help="Run the metric benchmark.")] = True,
    traces_dir: Annotated[
        Optional[Path], typer.Option("--traces", help="Real traces to run every metric over (one process).")
    ] = None,
    copies: Annotated[str, typer.Option(help="Copies of an 8-rank trace for the one-query vs loop scaling.")] = "1,10,100",
    metric: Annotated[str, typer.Option(help="Metric for the scaling run.")] = "communication_overlap_ratio",
    hta_python: Annotated[
        Optional[str],
        typer.Option("--hta-python", help="Python with HolisticTraceAnalysis 0.5.0: compare against HTA."),
    ] = None,
    hta_copies: Annotated[
        int, typer.Option("--hta-copies", help="Also compare with HTA on N ranks made of hta_df_index_resolver "
                                               "(8: a 430 MB set).")
    ] = 0,
    repeats: Annotated[int, typer.Option(help="Runs of each timed case (ingest, one query and loop, HTA); the best is kept.")] = 2,
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """Measure the readers and ingest (MB/s, memory) against raw ijson, and metrics: one query vs trace by trace."""
    import pyarrow as pa

    from cclq.bench import parse_sizes, rows_to_table, run_ingest_bench, run_metric_bench

    try:
        size_list = parse_sizes(sizes, ranks)
        copy_list = [int(s) for s in copies.split(",") if s.strip()]
    except ValueError as e:
        raise UsageError(f"--sizes takes MB or MBxRANKS, --copies integers, comma-separated: {e}") from e
    if ingest_part:
        rows = run_ingest_bench(size_list, ranks, workdir, perf_traces, repeats)
        write_table(rows_to_table(rows), fmt, title="readers and ingest vs raw ijson (MB of JSON per second)")
    if metrics_part:
        from dataclasses import asdict

        scaling, per_metric = run_metric_bench(copy_list, metric, traces_dir, repeats)
        if per_metric:
            write_table(pa.Table.from_pylist(per_metric), fmt, title=f"every metric over {traces_dir}")
        write_table(pa.Table.from_pylist([asdict(r) for r in scaling]), fmt,
                    title="one query over all traces vs a loop trace by trace (seconds)")
    if hta_python:
        from cclq.bench_hta import COPIES_SOURCE, DEFAULT_SHARED_TRACES, rank_copies, run_hta_bench

        rows = run_hta_bench(hta_python=hta_python, repeats=repeats)
        write_table(pa.Table.from_pylist(rows), fmt, title="cclq vs HTA 0.5.0 on the HTA traces")
        if hta_copies:
            (source,) = (DEFAULT_SHARED_TRACES / COPIES_SOURCE).glob("*.json.gz")
            folder = rank_copies(source, hta_copies, (workdir or Path(tempfile.gettempdir())) / "cclq-bench-hta-sets")
            rows = run_hta_bench([folder], hta_python=hta_python, repeats=repeats)
            write_table(pa.Table.from_pylist(rows), fmt, title=f"cclq vs HTA 0.5.0 on {folder.name}")


def _strip_debug(args: list[str]) -> tuple[list[str], bool]:
    """Takes ``--debug`` out of the arguments wherever it is (typer accepts it only
    before the subcommand); after a ``--`` everything is left alone."""
    end = args.index("--") if "--" in args else len(args)
    kept = [a for a in args[:end] if a != "--debug"] + args[end:]
    return kept, len(kept) != len(args)


def main() -> None:
    """Entry point: maps user errors to one line on stderr and an exit code."""
    args, debug_flag = _strip_debug(sys.argv[1:])
    debug = debug_flag or os.environ.get("CCLQ_DEBUG") == "1"
    try:
        app(args=args)  # standalone mode: typer itself reports usage errors (exit 2)
    except CclqError as e:
        if debug:
            raise
        print(f"cclq: error: {e.message}", file=sys.stderr)
        if e.hint:
            print(f"hint: {e.hint}", file=sys.stderr)
        sys.exit(e.exit_code)
    except KeyboardInterrupt:
        print("cclq: interrupted", file=sys.stderr)
        sys.exit(ExitCode.INTERRUPTED)
    except Exception as e:
        if debug:
            raise
        print(f"cclq: error: {type(e).__name__}: {e}", file=sys.stderr)
        print("hint: this is a bug in cclq; run again with --debug for the traceback", file=sys.stderr)
        sys.exit(ExitCode.FAILED)
