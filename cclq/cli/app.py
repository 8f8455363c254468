"""The ``cclq`` command line: a thin typer layer over the library.

This module is the app, its root options and the error contract; each command group is
a module of its own (warehouse.py: ingest, compact, traces; sql.py; metrics.py: metrics,
metric; reports.py: report, diff; board.py; shell.py; serve.py; record.py; cards.py;
ccl_bench.py: ccl-bench, daemon), what they share is in common.py, what they print in
``cclq.present``.

Contract: stdout carries data (tables, CSV, JSON); progress, warnings and errors
go to stderr. A ``CclqError`` prints one ``cclq: error: ...`` line and exits with
its ``ExitCode``; ``--debug`` (or ``CCLQ_DEBUG=1``) shows the traceback instead.
"""

from __future__ import annotations

import errno
import sys
from typing import Annotated

import typer

from cclq.bench.command import bench
from cclq.cli import board, cards, ccl_bench, metrics, record, reports, serve, shell, sql, warehouse
from cclq.cli.lazy import LazyGroup, register
from cclq.cli.root import RootOptions, hoist, root_options
from cclq.errors import CclqError, ExitCode, show_path
from cclq.query.settings import QuerySettings
from cclq.version import __version__

app = typer.Typer(
    name="cclq",
    help="Columnar analytics for distributed-training profiler traces (Kineto, Chrome JSON, XLA).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    cls=LazyGroup,
)


def _version(value: bool) -> None:
    """``cclq --version``: cclq's, which JSON reader is active, and the engines'."""
    if value:
        import platform
        from importlib.metadata import version
        from importlib.util import find_spec

        from cclq.formats.chrome import compiled

        print(f"cclq {__version__}")
        print(f"JSON reader: {compiled.description()}")
        built = find_spec("cclq.query.dagpath") is not None  # found, not imported (pyarrow-free)
        print(f"critical path: {'compiled (C)' if built else 'Python (the C longest path was not built)'}")
        print(f"duckdb {version('duckdb')}, pyarrow {version('pyarrow')}, python {platform.python_version()}")
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks for errors.")] = False,
    memory_limit: Annotated[
        str | None,
        typer.Option(
            "--memory-limit",
            help="Memory for queries (500MB, 4GiB, 25%); beyond it DuckDB spills to "
            "disk [default: $CCLQ_MEMORY_LIMIT, else 600 MiB a core, at most half the RAM]. "
            "May go anywhere on the line.",
            show_default=False,
        ),
    ] = None,
    spill_dir: Annotated[
        str | None,
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
    # read once, for every command: root_options(ctx) in a command, main() for --debug
    options = root_options(ctx)
    options.debug = options.debug or debug
    options.settings = QuerySettings.from_env(memory_limit, spill_dir)


# The commands, in the order `cclq --help` lists them; then the groups with subcommands.
# Each is turned into click's only when it is used (cclq.cli.lazy).
for group in (warehouse, sql, metrics, reports, board, shell, serve, record):
    register(group.commands)
bench_app = typer.Typer()
bench_app.command(epilog="Example: cclq bench --sizes 127x1,1000x1,1000x8 --perf-traces ../shared/perf-traces")(bench)
register(bench_app)
register(ccl_bench.daemon_app, "daemon")
register(cards.cards_app, "cards")
register(ccl_bench.ccl_bench_app, "ccl-bench")


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
    options = RootOptions()  # filled by the root callback; its debug read back here
    _log_to_stderr()
    try:
        # standalone mode: typer itself reports usage errors (exit 2)
        app(args=hoist(sys.argv[1:]), obj=options)
    except CclqError as e:
        if options.debug:
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
        if options.debug:
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
