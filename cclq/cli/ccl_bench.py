"""The commands for CCL-Bench's side: ``cclq ccl-bench shim`` (a checkout's tools/main.py
that calls cclq) and ``cclq daemon stop`` (the warm process ``python -m cclq.main``
keeps per warehouse)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from cclq.cli.common import WarehouseOpt
from cclq.locations import resolve_warehouse

ccl_bench_app = typer.Typer(
    help="Switching a CCL-Bench checkout over to cclq (docs/ccl-bench.md).", no_args_is_help=True, rich_markup_mode=None
)


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


# ------------------------------------------------------------------------ daemon
daemon_app = typer.Typer(
    help="The background process `python -m cclq.main` keeps per warehouse (CCL-Bench's calls answer fast from it).",
    no_args_is_help=True,
    rich_markup_mode=None,
)


@daemon_app.command("stop", epilog="Example: cclq daemon stop -w ../shared/wh")
def daemon_stop(warehouse: WarehouseOpt = None) -> None:
    """Stop the warehouse's daemon now (it also exits by itself after CCLQ_DAEMON_IDLE_S seconds
    without a call, 600 by default; CCLQ_DAEMON=0 starts none)."""
    from cclq.compat import daemon

    root = resolve_warehouse(warehouse)
    print(f"stopped the daemon of {root}" if daemon.stop(root) else f"no daemon runs for {root}", file=sys.stderr)
