"""The root options (``--debug``, ``--memory-limit``, ``--spill-dir``): what the root
callback of ``app`` reads into ``ctx.obj`` for every command, and the one step that lets
them go anywhere on the line.

Why anywhere: typer (click) takes a group's options only before the subcommand, but
``cclq metric X --all --memory-limit 2GB`` and ``cclq sql ... --debug`` are documented
(docs/cli.md, the options' own help: "May go anywhere on the line") and used by scripts
since 0.1. ``hoist`` only moves these options' words in front of the subcommand, where
the root callback parses them as typer parses any option; it decides nothing itself
and keeps no state. After ``--`` nothing is moved (the arguments of ``cclq shell -- ...``
belong to the duckdb CLI).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import typer

from cclq.query.settings import QuerySettings

DEBUG_ENV = "CCLQ_DEBUG"
# the root options that take a value; --debug takes none
VALUED = ("--memory-limit", "--spill-dir")


@dataclass
class RootOptions:
    """``ctx.obj`` of every command: whether to show tracebacks, and the query settings
    read once from the options and the environment. ``main()`` makes it and reads
    ``debug`` back for the error contract; a command gets it with ``root_options(ctx)``."""

    debug: bool = field(default_factory=lambda: os.environ.get(DEBUG_ENV) == "1")
    settings: QuerySettings = field(default_factory=QuerySettings)


def root_options(ctx: typer.Context) -> RootOptions:
    """The root options of the command ``ctx`` runs (the object ``main()`` passed, or a
    new one when ``app`` is called without it, as tests do)."""
    return ctx.ensure_object(RootOptions)


def hoist(args: list[str]) -> list[str]:
    """``args`` with every ``--debug``, ``--memory-limit V`` and ``--spill-dir V`` (or
    ``=V``) before ``--`` moved to the front, in their order; the rest keeps its order.
    A valued option with no value after it is dropped, as cclq always did."""
    end = args.index("--") if "--" in args else len(args)
    front: list[str] = []
    kept: list[str] = []
    i = 0
    while i < end:
        a = args[i]
        name = a.split("=", 1)[0]
        if a == "--debug":
            front.append(a)
        elif name in VALUED:
            if "=" in a:
                front.append(a)
            elif i + 1 < end:
                front.append(f"{a}={args[i + 1]}")
                i += 1
        else:
            kept.append(a)
        i += 1
    return front + kept + args[end:]
