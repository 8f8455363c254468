"""The root group builds a command only when it is used (cclq.cli.lazy), and what it
shows is what typer's own eager group shows."""

from __future__ import annotations

import pytest
import typer
import typer.main
from typer.models import CommandInfo
from typer.testing import CliRunner

from cclq.cli import lazy
from cclq.cli.app import app


def _eager() -> typer.Typer:
    """The same app as typer builds it: every command converted up front."""
    eager = typer.Typer(
        name="cclq",
        help=app.info.help,
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
    )
    assert app.registered_callback is not None
    eager.registered_callback = app.registered_callback
    for entry in lazy.registered().values():
        if isinstance(entry, CommandInfo):
            eager.registered_commands.append(entry)
        else:
            eager.registered_groups.append(entry)
    return eager


def _said(target: typer.Typer, args: list[str]) -> tuple[int, str]:
    done = CliRunner().invoke(target, args)
    return done.exit_code, done.output


def test_every_help_is_what_the_eager_group_shows():
    eager = _eager()
    names = list(lazy.registered())
    assert len(names) == 16
    for args in [["--help"], [], ["nope"], ["metirc"]] + [[name, "--help"] for name in names]:
        assert _said(app, args) == _said(eager, args), args


def test_help_builds_no_command_and_a_command_only_itself(capsys: pytest.CaptureFixture[str]):
    group = typer.main.get_command(app)
    assert isinstance(group, lazy.LazyGroup)
    with pytest.raises(SystemExit) as done:
        group.main(["--help"], prog_name="cclq")
    assert done.value.code == 0 and "metric " in capsys.readouterr().out
    assert group.commands.built == {}
    with pytest.raises(SystemExit) as done:
        group.main(["sql", "--help"], prog_name="cclq")
    assert done.value.code == 0 and "Usage: cclq sql" in capsys.readouterr().out
    assert list(group.commands.built) == ["sql"]
