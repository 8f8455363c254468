"""The root options (``--debug``, ``--memory-limit``, ``--spill-dir``) reach a command
through typer's root callback and ``ctx.obj`` (``cclq.cli.root``), from anywhere on the
line, and nothing of one call stays for the next: no argv parser of cclq's own, no
module-level state (issue 43, a thin CLI)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from helpers.cli import invoke
from helpers.traces import gpu_trace
from typer.testing import CliRunner

from cclq.cli.app import app
from cclq.cli.root import hoist
from cclq.errors import QueryError

CLI = Path(__file__).resolve().parents[2] / "cclq" / "cli"
SHOW = "SELECT current_setting('memory_limit') AS m"


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("root")
    gpu_trace(root / "in" / "w" / "rank0.json", kernels=2)
    done = invoke("ingest", str(root / "in"), "-w", str(root / "wh"), "-q", "-j", "1")
    assert done.returncode == 0, done.stderr
    return root / "wh"


@pytest.mark.parametrize(
    ("args", "hoisted"),
    [
        (["sql", "Q", "--debug"], ["--debug", "sql", "Q"]),
        (["metric", "m", "--memory-limit", "2GB", "--all"], ["--memory-limit=2GB", "metric", "m", "--all"]),
        (["--spill-dir=/s", "traces", "-f", "csv"], ["--spill-dir=/s", "traces", "-f", "csv"]),
        # in their order: the last of one option wins, as typer takes it
        (
            ["--memory-limit", "1GB", "sql", "Q", "--memory-limit=3GB", "--debug"],
            ["--memory-limit=1GB", "--memory-limit=3GB", "--debug", "sql", "Q"],
        ),
        # after `--` the words are the duckdb CLI's (cclq shell), left where they are
        (["shell", "--", "-c", "--debug"], ["shell", "--", "-c", "--debug"]),
        (["shell", "--debug", "--", "--memory-limit", "1"], ["--debug", "shell", "--", "--memory-limit", "1"]),
        # a value-taking option at the end with no value is dropped, as cclq always did
        (["traces", "--spill-dir"], ["traces"]),
        (["sql", "Q"], ["sql", "Q"]),
    ],
)
def test_hoist_moves_only_the_root_options_to_the_front(args: list[str], hoisted: list[str]) -> None:
    assert hoist(args) == hoisted


def test_memory_limit_after_the_command_reaches_its_queries(small: Path) -> None:
    done = invoke("sql", SHOW, "-w", str(small), "-f", "csv", "--memory-limit", "300MiB")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["m", "300.0 MiB"]


def test_a_call_of_the_app_reads_its_own_options_not_the_last_calls(small: Path) -> None:
    """The settings were a module global that main() set: a later call of ``app`` itself
    (as tests and embedders make) ran with the previous call's memory limit."""
    first = invoke("--memory-limit=300MiB", "sql", SHOW, "-w", str(small), "-f", "csv")
    assert first.stdout.splitlines() == ["m", "300.0 MiB"]
    again = CliRunner().invoke(app, ["sql", SHOW, "-w", str(small), "-f", "csv"], env={"CCLQ_MEMORY_LIMIT": "200MiB"})
    assert again.exit_code == 0, again.output
    assert again.stdout.splitlines() == ["m", "200.0 MiB"]


def test_a_bad_memory_limit_anywhere_is_one_usage_error(small: Path) -> None:
    for args in (["--memory-limit", "lots", "traces"], ["traces", "--memory-limit=lots"]):
        done = invoke(*args, "-w", str(small))
        assert done.returncode == 2 and done.stderr.startswith("cclq: error: memory limit 'lots'"), args
        assert done.stderr.count("\n") == 1


def test_debug_after_the_command_lets_the_error_through(small: Path) -> None:
    """Without --debug main() turns cclq's error into one line; with it, wherever it is on
    the line, main() raises it (a process prints its traceback: test_cli.py)."""
    quiet = invoke("sql", "SELECT nope FROM kernels", "-w", str(small))
    assert quiet.returncode == 3 and "Traceback" not in quiet.stderr
    with pytest.raises(QueryError, match="nope"):
        invoke("sql", "SELECT nope FROM kernels", "-w", str(small), "--debug")


def test_the_command_line_keeps_no_module_state() -> None:
    """No ``global`` (or ``nonlocal``) statement in cclq/cli: nothing one call reads is
    left in a module by the call before (``_settings`` was); it travels in ``ctx.obj``."""
    found = []
    for path in sorted(CLI.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Global, ast.Nonlocal)):
                found.append(f"{path.name}:{node.lineno}: {type(node).__name__.lower()} {', '.join(node.names)}")
    assert not found, found
