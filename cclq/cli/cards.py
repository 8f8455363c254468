"""``cclq cards check``: workload cards checked against CCL-Bench's template."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from cclq.cli.common import FormatOpt, OutputOpt, write_table
from cclq.errors import ExitCode
from cclq.present.output import OutputFormat, text_output

cards_app = typer.Typer(
    help="Workload cards: check them against CCL-Bench's template.", no_args_is_help=True, rich_markup_mode=None
)


@cards_app.command("check", epilog="Example: cclq cards check trace_collection ../shared/traces")
def cards_check(
    paths: Annotated[
        list[Path] | None,
        typer.Argument(help="Card files, workload folders or folders of workloads [default: .].", show_default=False),
    ] = None,
    fmt: FormatOpt = OutputFormat.table,
    output: OutputOpt = None,
) -> None:
    """Check workload cards against CCL-Bench's template: one line per problem (file: field: problem).

    Required fields, types of counts, known phase / precision / granularity values,
    parallelism factors that multiply to the device count, misspelled keys. Exit status 1
    if any card has a problem. `--format csv|json` gives the problems as rows.
    """
    import pyarrow as pa

    from cclq.ingest.plan import check_input_cards

    report = check_input_cards(paths or [Path(".")])
    if fmt is OutputFormat.table:
        with text_output(output) as out:
            for problem in report.problems:
                print(problem.line(), file=out)
    else:
        rows = [{"file": p.path, "field": p.field, "problem": p.problem} for p in report.problems]
        schema = pa.schema([("file", pa.string()), ("field", pa.string()), ("problem", pa.string())])
        write_table(pa.Table.from_pylist(rows, schema=schema), fmt, output=output)
    bad = len({p.path for p in report.problems})
    print(
        f"{len(report.cards)} card(s) checked: {len(report.problems)} problem(s) in {bad} card(s)"
        + (f"; {len(report.without_card)} workload(s) without a card" if report.without_card else ""),
        file=sys.stderr,
    )
    if report.problems:
        raise typer.Exit(ExitCode.FAILED)
