"""The commands that fill and keep the warehouse: ``cclq ingest`` (trace files in),
``cclq compact`` (small data files rewritten as large ones) and ``cclq traces`` (what it
holds)."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from cclq.cli.common import (
    AllowPartialOpt,
    DaskOpt,
    FormatOpt,
    OutputOpt,
    WarehouseOpt,
    open_session,
    warehouse_at,
    warn_partial,
    write_table,
)
from cclq.cli.root import root_options
from cclq.errors import ExitCode, UsageError
from cclq.formats.limits import DEFAULT_LIMITS, MIB, ReadLimits
from cclq.present.output import OutputFormat

commands = typer.Typer()


# ------------------------------------------------------------------------ ingest
@commands.command(epilog="Example: cclq ingest trace_collection --jobs 2   (--reader ijson, --max-depth 200, ...)")
def ingest(
    ctx: typer.Context,
    paths: Annotated[
        list[str],
        typer.Argument(
            help="Workload folders, folders of workloads, or trace files; or s3://bucket/prefix URLs (the s3 extra)."
        ),
    ],
    warehouse: WarehouseOpt = None,
    jobs: Annotated[
        int | None,
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
    wh = warehouse_at(warehouse)
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
            if outcome.detail and root_options(ctx).debug:
                print(outcome.detail, file=sys.stderr, end="")
    written = sorted({o.trace for o in report.outcomes if o.status == "ingested"})
    if written:  # said once, when the trace is written; `cclq traces` shows the flag
        warn_partial(wh, written, allow_partial)
    if report.failed:
        raise typer.Exit(ExitCode.FAILED)


# ----------------------------------------------------------------------- compact
@commands.command(epilog="Example: cclq compact   (every trace whose data files are many and small)")
def compact(
    trace: Annotated[
        list[str] | None, typer.Option("--trace", "-t", help="Compact only this trace (repeatable).")
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

    wh = warehouse_at(warehouse)
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
@commands.command(epilog="Example: cclq traces --format csv")
def traces(
    ctx: typer.Context,
    warehouse: WarehouseOpt = None,
    fmt: FormatOpt = OutputFormat.table,
    output: OutputOpt = None,
    allow_partial: AllowPartialOpt = False,
) -> None:
    """List the ingested traces: format, world size, ranks, span, card fields.

    `flag` says why a trace may not be one whole run: `partial: N of M ranks` (a sample of
    its ranks, or an interrupted ingest), `guessed ranks`, `files start D days apart`; the
    partial ones are also named on stderr (--allow-partial: not)."""
    wh = warehouse_at(warehouse)
    con = open_session(wh, root_options(ctx).settings)
    cols = (
        "trace, format, world_size, ranks_seen, files, events, events_dropped, round(span_s, 6) AS span_s, "
        "rank_source, flag"
    )
    if fmt is not OutputFormat.table:
        cols = "*"
    table = con.arrow(f"SELECT {cols} FROM traces ORDER BY trace")
    write_table(table, fmt, output=output)
    warn_partial(wh, None, allow_partial)
