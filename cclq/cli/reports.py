"""``cclq report`` (every metric of one trace, as a table, JSON or a page) and ``cclq
diff`` (two traces or two sets compared, metric by metric and op by op)."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer

from cclq.cli.common import (
    NoCacheOpt,
    OutputOpt,
    ParamOpt,
    WarehouseOpt,
    exit_if_failed,
    first_look,
    known_traces,
    open_session,
    prepare_output,
    require_traces,
    run_label,
    shared_label,
    warehouse_at,
    write_table,
)
from cclq.cli.root import root_options
from cclq.errors import ExitCode, UsageError
from cclq.present.output import OutputFormat, json_text, text_output, write_text

commands = typer.Typer()


class ReportFormat(str, Enum):
    table = "table"
    json = "json"
    html = "html"


class DiffFormat(str, Enum):
    """`cclq diff`'s formats: OutputFormat's and a page (html)."""

    table = "table"
    csv = "csv"
    json = "json"
    parquet = "parquet"
    html = "html"


@commands.command(epilog="Example: cclq report dlrm_param_8xV100 --format html -o dlrm.html")
def report(
    ctx: typer.Context,
    trace: Annotated[
        str,
        typer.Argument(
            help="Trace id (see `cclq traces`), or a workload folder or trace file "
            "not yet in the warehouse: it is ingested first."
        ),
    ],
    fmt: Annotated[ReportFormat, typer.Option("--format", "-f", help="Output format.")] = ReportFormat.table,
    output: OutputOpt = None,
    param: ParamOpt = None,
    no_cache: NoCacheOpt = False,
    all_metrics: Annotated[
        bool,
        typer.Option(
            "--all-metrics",
            help="List the metrics that do not apply too, each with the reason (the table folds them into one line).",
        ),
    ] = False,
    warehouse: WarehouseOpt = None,
) -> None:
    """Every metric of one trace at once, grouped by category, with the reason for each one
    that does not apply (table; `--format json` for machines, `html` for a page with plots).

    A metric whose SQL failed is listed as failed with its error (never as n/a) and named
    on stderr; the exit status is then 3, as for `cclq metric`."""
    from cclq.cli.progress import StepProgress
    from cclq.present.report import collect_reports, print_report, report_dict
    from cclq.query.params import check_batch_params, parse_param_args
    from cclq.query.registry import latest_specs

    wh = warehouse_at(warehouse)
    params = parse_param_args(param or [])
    specs = latest_specs()
    check_batch_params(specs, params)
    ingest_failed = False
    if Path(trace).exists() and trace not in known_traces(wh):
        _, looked, ingest_failed = first_look(wh, [trace], set())
        if len(looked) > 1:
            raise UsageError(
                f"{trace} holds {len(looked)} traces ({', '.join(looked)}); the report is of one",
                hint=f"cclq report {looked[0]}",
            )
        trace = looked[0]
    prepare_output(output)
    with open_session(wh, root_options(ctx).settings, traces=[trace], cache=not no_cache) as session:
        require_traces(session, wh, [trace])
        with StepProgress("metrics", len(specs)) as bar:
            reports = collect_reports(
                session,
                specs,
                params,
                on_metric=lambda run: bar.advance(run_label(run)),
                on_shared=lambda names: bar.stage(shared_label(names)),
            )
    data = report_dict(reports[trace], rows=fmt is ReportFormat.json)
    with text_output(output) as out:
        if fmt is ReportFormat.json:
            out.write(json_text(data))
        elif fmt is ReportFormat.html:
            from cclq.present.board.pages import workload_page

            out.write(workload_page(data, standalone=True))
        else:
            print_report(data, out, all_metrics=all_metrics)
    exit_if_failed([f"{f['metric']}: {f['reason']}" for f in data["metrics_failed"]])
    if ingest_failed:
        raise typer.Exit(ExitCode.FAILED)


# -------------------------------------------------------------------------- diff
@commands.command(epilog="Example: cclq diff llama_tp4 llama_tp8   (sets: cclq diff 'run1_*' 'run2_*' --format csv)")
def diff(
    ctx: typer.Context,
    a: Annotated[str, typer.Argument(help="Side A: a trace id, ids separated by commas, or a glob pattern.")],
    b: Annotated[str, typer.Argument(help="Side B, the same way.")],
    rank: Annotated[int | None, typer.Option("--rank", "-r", help="Compare this rank alone on both sides.")] = None,
    top: Annotated[int, typer.Option("--top", min=1, help="Ops shown in the table (CSV/JSON list all).")] = 30,
    fmt: Annotated[
        DiffFormat,
        typer.Option("--format", "-f", help="Output format (html: a page with the report's plots of both sides)."),
    ] = DiffFormat.table,
    output: OutputOpt = None,
    param: ParamOpt = None,
    no_cache: NoCacheOpt = False,
    warehouse: WarehouseOpt = None,
) -> None:
    """Compare two traces (or two sets): every applicable metric with its absolute and relative
    change, and per kernel name / class / collective type the calls and time on each side.

    Traces of different rank counts compare as per-rank means; per-rank metrics are
    compared rank by rank when both sides have the same ranks. `--format csv` gives one
    long table with a `part` column (metric, op_group, op); `json` an object. A metric
    that failed is listed as failed and named on stderr, and the exit status is 3.
    """
    from cclq.cli.progress import StepProgress
    from cclq.present.diff import diff as run_diff
    from cclq.present.diff import diff_dict, long_table, print_diff, resolve_side
    from cclq.query.params import check_batch_params, parse_param_args
    from cclq.query.registry import latest_specs

    params = parse_param_args(param or [])
    check_batch_params(latest_specs(), params)
    wh = warehouse_at(warehouse)
    wh.require()
    with wh.open_snapshot() as snapshot:
        known = snapshot.trace_ids()
    side_a, side_b = resolve_side(a, known), resolve_side(b, known)
    specs = latest_specs()
    reports: dict[str, Any] = {}
    with open_session(wh, root_options(ctx).settings, traces=side_a + side_b, cache=not no_cache) as session:
        if fmt is DiffFormat.html:  # the report's plots of every trace: its metrics and figure data
            from cclq.present.report import collect_reports, report_dict

            with StepProgress("metrics (plots)", len(specs)) as bar:
                reports = {
                    t: report_dict(r, rows=False)
                    for t, r in collect_reports(
                        session, specs, params, on_metric=lambda run: bar.advance(run_label(run))
                    ).items()
                }
        with StepProgress("metrics", len(specs)) as bar:
            result = run_diff(
                session, specs, side_a, side_b, params, rank=rank, on_metric=lambda run: bar.advance(run_label(run))
            )
    if fmt is DiffFormat.html:
        from cclq.present.diff_page import diff_page

        write_text(diff_page(result, reports, top=top), output)
    elif fmt is DiffFormat.table:
        with text_output(output) as out:
            print_diff(result, out, top=top)
    elif fmt is DiffFormat.json:
        write_text(json_text(diff_dict(result)), output)
    else:
        write_table(long_table(result), OutputFormat(fmt.value), output=output)
    exit_if_failed([f"{f['metric']}: {f['reason']}" for f in result.failed])
