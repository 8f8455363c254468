"""``cclq shell``: the DuckDB CLI with every cclq view defined, over a snapshot of the
warehouse held while it runs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import typer

from cclq.cli.common import WarehouseOpt, warehouse_at
from cclq.cli.root import root_options
from cclq.errors import UsageError

commands = typer.Typer()


@commands.command(
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    epilog='Example: cclq shell   (extra arguments go to the duckdb CLI, e.g. -c "SELECT 1")',
)
def shell(ctx: typer.Context, warehouse: WarehouseOpt = None) -> None:
    """Open the DuckDB shell with every cclq view defined.

    The shell is a full DuckDB session (it can write files, attach databases, read
    anything): unlike `cclq sql`, nothing is made read-only. It sees the warehouse as the
    last complete ingest left it when the shell started; start it again to see later ones.
    """
    import duckdb

    from cclq.query.engine import setup_script

    wh = warehouse_at(warehouse)
    exe = shutil.which("duckdb") or str(Path(sys.executable).parent / "duckdb")
    if not Path(exe).exists():
        raise UsageError(
            "the duckdb CLI is not installed",
            hint="pip install duckdb-cli (the release of the duckdb library, or the nearest one)",
        )
    cli_version = _duckdb_cli_version(exe)
    same = cli_version == duckdb.__version__
    # which CLI, on stderr (stdout is the shell's): a CLI of another release than the
    # library cannot read the views the library compiled, so they are created at start
    print(
        f"cclq shell: DuckDB CLI {cli_version or '(version unknown)'} ({exe})"
        + (
            ""
            if same
            else f"; cclq's duckdb library is {duckdb.__version__}: the views are created as the "
            "shell starts (~1 s) instead of attached compiled"
        ),
        file=sys.stderr,
    )
    with wh.open_snapshot() as snapshot:  # held for the session: its files stay
        query_settings = root_options(ctx).settings
        spill = query_settings.make_spill_folder(wh)  # a spill folder of the shell's own
        with tempfile.NamedTemporaryFile("w", suffix=".sql", prefix="cclq-init-", delete=False) as f:
            f.write(
                ".bail on\n"
                + "\n".join(query_settings.set_statements(spill))
                + "\n"
                + setup_script(snapshot, comments=True, compiled=same)
                + ".bail off\n"
            )
            init = f.name
        try:
            code = subprocess.call([exe, "-init", init, *ctx.args])
        finally:
            os.unlink(init)
            shutil.rmtree(spill, ignore_errors=True)
    raise typer.Exit(code)


def _duckdb_cli_version(exe: str) -> str | None:
    """The release of a duckdb CLI (``duckdb -version``: ``v1.5.6 (Variegata) 069cc9f9b5``)."""
    import re

    try:
        out = subprocess.run([exe, "-version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.match(r"\s*v?(\d+\.\d+\.\d+\S*)", out)
    return m.group(1) if m else None
