"""The README stays true: every command and every metric is documented there."""

from __future__ import annotations

from cclq.cli.app import app
from cclq.query.metrics import registry
from conftest import REPO

README = (REPO / "README.md").read_text()


def test_every_command_is_in_the_readme():
    for command in app.registered_commands:
        name = command.name or command.callback.__name__
        assert f"cclq {name}" in README, name


def test_every_metric_is_in_the_readme():
    missing = [name for name in registry() if f"`{name}`" not in README]
    assert not missing, f"README lacks metrics: {missing}"


def test_readme_metric_table_matches_the_headers():
    """The README's metric table says what each metric's header says (latest version)."""
    for name, versions in registry().items():
        spec = versions[max(versions)]
        row = f"| `{name}` | {spec.unit} | {spec.grain} | {spec.description.replace('|', chr(92) + '|')} |"
        assert row in README, f"README row for {name} is stale; want: {row}"


def test_readme_install_is_what_ci_runs():
    ci = (REPO / ".ci" / "run").read_text()
    for line in ("python3 -m venv .venv", ". .venv/bin/activate", "pip install -e '.[test]'", "pytest"):
        assert line in README and line in ci, line
