"""What the command groups share: the options that read alike everywhere (``-w``,
``-f``, ``-o``, ``--dask``, ``--param``, ...) and the steps several commands take (open
the warehouse and a session, warn of partial traces, ingest a path given where a trace id
was expected, exit 3 after naming failed metrics).

Nothing here imports pyarrow, DuckDB or polars at its top: every command module imports
this one when ``cclq --help`` starts (tests/cli/test_startup_imports.py).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from cclq.errors import ExitCode, UsageError, show_path
from cclq.locations import WAREHOUSE_ENV
from cclq.present.output import OutputFormat

if TYPE_CHECKING:
    import pyarrow as pa

    from cclq.query.session import Session
    from cclq.query.settings import QuerySettings
    from cclq.store.warehouse import Warehouse

WarehouseOpt = Annotated[
    str | None,
    typer.Option(
        "--warehouse",
        "-w",
        help=f"Warehouse folder [default: ${WAREHOUSE_ENV}, else ./.cclq/warehouse].",
        show_default=False,
    ),
]
FormatOpt = Annotated[OutputFormat, typer.Option("--format", "-f", help="Output format.")]
DaskOpt = Annotated[
    str | None,
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
    Path | None, typer.Option("--output", "-o", help="Write to this file instead of stdout (needed for parquet).")
]
ParamOpt = Annotated[
    list[str] | None, typer.Option("--param", "-p", help="KEY=VALUE for the metrics that take it (repeatable).")
]
NoCacheOpt = Annotated[bool, typer.Option("--no-cache", help="Compute again even if a cached result matches.")]


def warehouse_at(option: str | None) -> Warehouse:
    """The warehouse ``-w`` names: a folder, or an ``s3://`` URL (``cclq.store.remote``)."""
    from cclq.store.remote import open_warehouse

    return open_warehouse(option)


def write_table(table: pa.Table, fmt: OutputFormat, **kw: Any) -> None:
    """``cclq.present.render.write_table``, imported when a command prints (it needs pyarrow,
    which ``cclq --help`` should not load)."""
    from cclq.present.render import write_table as write

    write(table, fmt, **kw)


def open_session(wh: Warehouse, settings: QuerySettings, **kw: Any) -> Session:
    """A query session on the warehouse with the user's query settings (``root_options``)."""
    from cclq.query.session import Session

    return Session(wh, settings=settings, **kw)


def warn_partial(wh: Warehouse, selection: list[str] | None, allow_partial: bool) -> None:
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


def first_look(wh: Warehouse, args: list[str], known: set[str]) -> tuple[list[str], list[str], bool]:
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


def no_trace(wh: Warehouse, trace: str, known: list[str]) -> None:
    """A trace id the warehouse lacks: a usage error with the nearest of ``known``."""
    from cclq.query.registry import did_you_mean

    raise UsageError(f"no trace {trace!r} in {wh.root}", hint=did_you_mean(trace, known, "`cclq traces` lists them"))


def require_traces(session: Session, wh: Warehouse, wanted: list[str]) -> None:
    """Every trace of ``wanted`` is in the session's snapshot, or a usage error names the first
    one missing (before any metric runs on a selection that silently matched nothing)."""
    known = {row[0] for row in session.execute("SELECT DISTINCT trace FROM files").fetchall()}
    missing = [t for t in wanted if t not in known]
    if missing:  # the session may see only the selected traces: suggest from all of them
        with wh.open_snapshot() as snapshot:
            every = snapshot.trace_ids()
        no_trace(wh, missing[0], every)


def known_traces(wh: Warehouse) -> set[str]:
    """The warehouse's trace ids (none when it does not exist yet)."""
    if not wh.exists():
        return set()
    with wh.open_snapshot() as snapshot:
        return set(snapshot.trace_ids())


def exit_if_failed(failures: list[str]) -> None:
    """Names each metric that failed (its SQL did not run) on stderr and exits with
    ``ExitCode.QUERY``, after the rest was written: what ``metric``, ``report``, ``diff``
    and ``board`` do alike, so that a failure is never taken for "does not apply"."""
    for line in failures:
        print(f"cclq: error: {line}", file=sys.stderr)
    if failures:
        raise typer.Exit(ExitCode.QUERY)


def prepare_output(output: Path | None, folder: bool = False) -> None:
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


def run_label(run: Any) -> str:
    """A metric in a progress line: its name, and whether it was decided from the catalog
    (it applies to none of the traces: its SQL did not run) or failed."""
    if run.table is None and run.error is None and run.not_applicable:
        return f"{run.spec.name}: not applicable (from the catalog)"
    return f"{run.spec.name}: failed" if run.error else run.spec.name


def shared_label(names: list[str]) -> str:
    """The stage before the metrics: the views they share, each computed once alongside
    the metrics that do not read it."""
    return f"{len(names)} shared view(s), each computed once" + (f" ({', '.join(names)})" if names else "")
