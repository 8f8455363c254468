"""``cclq sql``: ad-hoc SQL over the warehouse, read-only unless asked."""

from __future__ import annotations

from typing import Annotated

import typer

from cclq.cli.common import FormatOpt, OutputOpt, WarehouseOpt, open_session, warehouse_at, write_table
from cclq.cli.root import root_options
from cclq.present.output import OutputFormat

commands = typer.Typer()


@commands.command(epilog='Example: cclq sql "SELECT trace, rank, count(*) FROM kernels GROUP BY ALL" -f csv')
def sql(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(help="A SQL query over the views (events, kernels, traces, files, ...).")],
    warehouse: WarehouseOpt = None,
    read_write: Annotated[
        bool,
        typer.Option(
            "--read-write",
            help="Run any statement (COPY, ATTACH, reading other files), as the DuckDB "
            "shell would. Without it the query is read-only and sees only the warehouse.",
        ),
    ] = False,
    fmt: FormatOpt = OutputFormat.table,
    output: OutputOpt = None,
) -> None:
    """Run ad-hoc SQL over the warehouse (DuckDB dialect), read-only.

    Only queries run (SELECT, WITH, DESCRIBE, SHOW, SUMMARIZE, EXPLAIN); no file outside
    the warehouse can be read and none written, so ad-hoc SQL can never change what a
    metric reads. The query sees the warehouse as its last complete ingest left it.
    """
    with open_session(warehouse_at(warehouse), root_options(ctx).settings, comments=True) as session:
        table = session.run_user_query(query, read_only=not read_write)
    write_table(table, fmt, output=output)
