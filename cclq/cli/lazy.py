"""The root command group, each command built only when it is used.

Why: typer turns every command's signature into click's options before any command runs
(``typing.get_type_hints`` and option objects for 16 commands and 3 groups): a third of
``cclq --help``'s time and more than a tenth of a cached ``cclq metric`` (issue 42's
start-up targets). ``LazyGroup`` knows each command by name and converts one only when
click asks for it; ``cclq --help`` lists them from their help texts alone. What is built is
what typer would have built (``typer.main``'s own converters), so options, help and errors
do not change.
"""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping
from typing import TYPE_CHECKING, Any

import typer
import typer.main
from typer.core import TyperCommand, TyperGroup
from typer.models import CommandInfo, TyperInfo

if TYPE_CHECKING:
    from typer._click import Command, Context, HelpFormatter

Entry = CommandInfo | TyperInfo
# the root group's commands, in the order `cclq --help` lists them (``register``)
_ENTRIES: dict[str, Entry] = {}


def register(app: typer.Typer, name: str | None = None) -> None:
    """Adds ``app``'s commands (``name`` None) or ``app`` as a group named ``name`` to the
    root group, unbuilt."""
    if name is not None:
        _ENTRIES[name] = TyperInfo(app, name=name)
        return
    for info in app.registered_commands:
        assert info.callback is not None, "a command has a callback"
        _ENTRIES[info.name or typer.main.get_command_name(info.callback.__name__)] = info


def registered() -> dict[str, Entry]:
    """The root group's commands and groups by name, in ``cclq --help``'s order, unbuilt
    (``cclq.cli.app`` registers them as it loads)."""
    return dict(_ENTRIES)


def _build(name: str, entry: Entry) -> Command:
    """The click command typer makes of ``entry`` as a command of the root app, through
    typer's public ``get_command`` on an app that holds only it (plain help, no completion
    options: as the root app sets)."""
    holder = typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False)
    if isinstance(entry, CommandInfo):
        holder.registered_commands.append(entry)  # one command, no callback: typer returns it
        return typer.main.get_command(holder)
    holder.callback()(_no_options)
    holder.registered_groups.append(entry)
    group = typer.main.get_command(holder)
    assert isinstance(group, TyperGroup)
    return group.commands[name]


def _no_options() -> None:
    """The holder's callback (a group of one group)."""


def _listed(entry: Entry) -> Command:
    """A stand-in with only what the listing reads: help, short help, hidden, deprecated."""
    if isinstance(entry, TyperInfo):
        assert entry.typer_instance is not None
        info = entry.typer_instance.info
        return TyperCommand(name=None, help=_value(info.help), short_help=_value(info.short_help))
    callback_doc = entry.callback.__doc__ if entry.callback is not None else None
    return TyperCommand(
        name=None,
        help=entry.help if entry.help is not None else callback_doc,
        short_help=entry.short_help,
        hidden=entry.hidden,
        deprecated=entry.deprecated,
    )


def _value(setting: Any) -> Any:
    """A ``typer.Typer`` setting (typer keeps an unset one as a ``DefaultPlaceholder``)."""
    return getattr(setting, "value", setting)


class _Commands(MutableMapping[str, "Command"]):
    """The root group's ``commands``: every name known, each built on first lookup."""

    def __init__(self) -> None:
        self.built: dict[str, Command] = {}

    def __getitem__(self, name: str) -> Command:
        if name not in self.built:
            self.built[name] = _build(name, _ENTRIES[name])
        return self.built[name]

    def __setitem__(self, name: str, command: Command) -> None:
        self.built[name] = command

    def __delitem__(self, name: str) -> None:
        raise TypeError("cclq's commands are fixed")

    def __iter__(self) -> Iterator[str]:
        return iter({**dict.fromkeys(_ENTRIES), **dict.fromkeys(self.built)})

    def __len__(self) -> int:
        return sum(1 for _ in self)


class LazyGroup(TyperGroup):
    """The root group (``typer.Typer(cls=LazyGroup)``): the commands ``register`` added,
    each built when it runs or shows its help."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self.commands = _Commands()

    def list_commands(self, ctx: Context) -> list[str]:
        return list(self.commands)

    def format_commands(self, ctx: Context, formatter: HelpFormatter) -> None:
        """The "Commands" section of ``cclq --help`` from the help texts, none built."""
        shown = [(name, command) for name, entry in _ENTRIES.items() if not (command := _listed(entry)).hidden]
        if not shown:
            return
        limit = formatter.width - 6 - max(len(name) for name, _ in shown)
        with formatter.section("Commands"):
            formatter.write_dl([(name, command.get_short_help_str(limit)) for name, command in shown])
