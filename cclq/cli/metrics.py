"""``cclq metrics`` (what there is to compute, one metric's card, what may apply to a
trace) and ``cclq metric`` (computing them: one, or several on one connection; cached,
or on a Dask cluster)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from cclq.cli.common import (
    AllowPartialOpt,
    DaskOpt,
    FormatOpt,
    OutputOpt,
    WarehouseOpt,
    exit_if_failed,
    first_look,
    no_trace,
    open_session,
    prepare_output,
    require_traces,
    run_label,
    warehouse_at,
    warn_partial,
    write_table,
)
from cclq.cli.root import root_options
from cclq.errors import ExitCode, UsageError
from cclq.present.output import OutputFormat, write_lines, write_text

if TYPE_CHECKING:
    from cclq.query.settings import QuerySettings
    from cclq.store.warehouse import Warehouse

commands = typer.Typer()


# ----------------------------------------------------------------------- metrics
@commands.command(
    epilog="Examples: cclq metrics communication   |   cclq metrics overlap   |   "
    "cclq metrics --applicable dlrm_param_8xV100   |   cclq metrics --long --format csv"
)
def metrics(
    ctx: typer.Context,
    words: Annotated[
        list[str] | None,
        typer.Argument(
            help="A metric's name (its card: family, see also), a category (step_time, "
            "communication, compute, memory, collectives, inference, hta) or words to search "
            "for in names, descriptions and needs.",
            show_default=False,
        ),
    ] = None,
    category: Annotated[
        list[str] | None, typer.Option("--category", "-c", help="Only this category (repeatable).")
    ] = None,
    applicable: Annotated[
        str | None,
        typer.Option(
            "--applicable",
            help="What can apply to this trace, and why the rest cannot (decided from the catalog, no metric is run).",
        ),
    ] = None,
    long: Annotated[bool, typer.Option("--long", "-l", help="Every column: versions, grain, summary, params.")] = False,
    warehouse: WarehouseOpt = None,
    fmt: FormatOpt = OutputFormat.table,
    output: OutputOpt = None,
) -> None:
    """List the metrics, one line each (name, unit, category, what it measures); filter by
    category or search words; `--applicable TRACE` says which can apply to a trace; one
    metric's name shows its card (the question it answers and its near-synonyms)."""
    from cclq.query.registry import CATEGORIES, catalog_table, did_you_mean, latest_specs, metric_card

    specs = latest_specs()
    if (
        words
        and len(words) == 1
        and not category
        and applicable is None
        and not long
        and fmt is OutputFormat.table
        and words[0] in {s.name for s in specs}
    ):
        # one metric by its name: its card, with the question it answers and its relatives
        write_text("\n".join(metric_card(words[0])) + "\n", output)
        return
    chosen = set(category or [])
    search: list[str] = []
    for w in words or []:
        if w in CATEGORIES:
            chosen.add(w)
        else:
            search.append(w)
    unknown = sorted(chosen - set(CATEGORIES))
    if unknown:
        raise UsageError(
            f"no category {', '.join(unknown)}",
            hint=did_you_mean(unknown[0], set(CATEGORIES), f"categories: {', '.join(CATEGORIES)}"),
        )
    if chosen:
        specs = [s for s in specs if s.category in chosen]
    for w in search:
        specs = [s for s in specs if w.lower() in " ".join((s.name, s.description, s.needs, s.category)).lower()]
    if not specs:
        names = {s.name for s in latest_specs()} | set(CATEGORIES)
        raise UsageError(
            f"no metric matches {' '.join(search or sorted(chosen))!r}",
            hint=did_you_mean(search[0] if search else "", names, "`cclq metrics` lists them all"),
        )
    if applicable is not None:
        _applicable(warehouse_at(warehouse), root_options(ctx).settings, applicable, specs, fmt, output)
        return
    if long or fmt is not OutputFormat.table:
        table = catalog_table()
        keep = {s.name for s in specs}
        write_table(table.filter([m in keep for m in table.column("metric").to_pylist()]), fmt, output=output)
        return
    write_lines([(s.name, s.unit, s.category, s.description) for s in specs], output)


def _applicable(
    wh: Warehouse, settings: QuerySettings, trace: str, specs: list, fmt: OutputFormat, output: Path | None
) -> None:
    """``cclq metrics --applicable TRACE``: the catalog's facts of the trace, and for each
    metric whether it may apply (``cclq.present.metric_output.write_applicable``)."""
    from cclq.present.metric_output import write_applicable
    from cclq.query.applicability import trace_facts

    with open_session(wh, settings, traces=[trace]) as session:
        require_traces(session, wh, [trace])
        facts = trace_facts(session)[trace]
    write_applicable(trace, facts, specs, fmt, output)


@commands.command(
    epilog="Examples: cclq metric communication_overlap_ratio --all --format csv\n\n"
    "cclq metric total_kernel_time avg_step_time --trace dlrm_param_8xV100\n\n"
    "cclq metric --category communication --all -o results/   (one CSV per metric)"
)
def metric(
    ctx: typer.Context,
    names: Annotated[
        list[str] | None,
        typer.Argument(
            help="Metric names (see `cclq metrics`); several run on one connection. "
            "A workload folder or trace file among them is ingested first and "
            "its traces are the ones run over."
        ),
    ] = None,
    all_traces: Annotated[bool, typer.Option("--all", help="Run over every trace in the warehouse.")] = False,
    trace: Annotated[
        list[str] | None,
        typer.Option(
            "--trace", "-t", help="Run over this trace (repeatable; a glob pattern such as 'run1_*' takes every match)."
        ),
    ] = None,
    category: Annotated[
        list[str] | None,
        typer.Option(
            "--category",
            "-c",
            help="Every metric of this category (repeatable): step_time, communication, "
            "compute, memory, collectives, inference, hta.",
        ),
    ] = None,
    version: Annotated[
        int | None, typer.Option("--version", "-v", help="Pin a metric version [default: latest].")
    ] = None,
    param: Annotated[
        list[str] | None, typer.Option("--param", "-p", help="KEY=VALUE, overrides the workload card (repeatable).")
    ] = None,
    no_cache: Annotated[
        bool, typer.Option("--no-cache", help="Compute again even if a cached result matches.")
    ] = False,
    warehouse: WarehouseOpt = None,
    fmt: FormatOpt = OutputFormat.table,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="Write to this file instead of stdout; with several metrics, a folder "
            "(existing, or a name without a suffix) gets one file per metric.",
        ),
    ] = None,
    dask: DaskOpt = None,
    allow_partial: AllowPartialOpt = False,
    explain: Annotated[
        bool, typer.Option("--explain", help="Show the metric's header, SQL file and version instead of running it.")
    ] = False,
) -> None:
    """Compute metrics for every selected trace, each in a single DuckDB query.

    One metric prints its rows; several (names, or --category) run on one connection,
    sharing the views they build, and print one long table with a `metric` column and
    each metric's own columns folded into `details` (or one file per metric with -o DIR).
    Results are cached in the warehouse under a key of the metric's file, the views, the
    parameters and the content hash of every input file, so a repeat is read back (without
    starting the query engine) and a changed input or definition is computed again.

    With --dask, results that are not cached are computed on a Dask cluster, one task per
    group of traces, and put together as one query gives them. Example:
    cclq metric collective_busbw --all --dask tcp://head:8786 -w /shared/wh
    """
    from cclq.query.params import check_batch_params, parse_param_args
    from cclq.query.registry import CATEGORIES, did_you_mean, latest_specs, resolve

    if explain:
        if not names:
            raise UsageError("--explain wants metric names")
        for n in names:
            _explain(resolve(n, version))
        return
    from cclq.query.registry import metric_names

    ingest_failed = False
    looked: list[str] = []
    if names and any(n not in metric_names() for n in names):
        names, looked, ingest_failed = first_look(warehouse_at(warehouse), list(names), set(metric_names()))
        trace = [*(trace or []), *looked]
    if all_traces == bool(trace):
        raise UsageError("say which traces: --all, --trace T (repeatable), or a trace folder or file to ingest")
    unknown = sorted(set(category or []) - set(CATEGORIES))
    if unknown:
        raise UsageError(
            f"no category {', '.join(unknown)}",
            hint=did_you_mean(unknown[0], set(CATEGORIES), f"categories: {', '.join(CATEGORIES)}"),
        )
    specs = [resolve(n, version) for n in names or []]
    specs += [s for s in latest_specs() if s.category in (category or []) and s.name not in {x.name for x in specs}]
    if not specs:
        raise UsageError("say which metrics: names, or --category C", hint="`cclq metrics` lists them")
    if version is not None and len(specs) > 1:
        raise UsageError("--version pins one metric; give one name with it")
    params = parse_param_args(param or [])
    wh = warehouse_at(warehouse)
    selection = None if all_traces else _check_traces(wh, list(trace or []))
    if dask is not None:
        from cclq.ingest.dask import parse_cluster

        parse_cluster(dask)  # a bad --dask is a usage error before anything runs
    prepare_output(output, folder=len(specs) > 1 and output is not None and _is_folder_output(output))
    warn_partial(wh, selection, allow_partial)
    if len(specs) == 1:
        _one_metric(wh, root_options(ctx).settings, specs[0], params, selection, no_cache, fmt, output, dask)
    else:
        check_batch_params(specs, params)
        _several_metrics(wh, root_options(ctx).settings, specs, params, selection, no_cache, fmt, output, dask)
    if ingest_failed:
        raise typer.Exit(ExitCode.FAILED)


def _explain(spec: Any) -> None:
    """``cclq metric NAME --explain``: where the metric is defined and what it says of itself."""
    from cclq.query.registry import METRIC_BODIES, registry
    from cclq.query.sqlfiles import modules_for

    versions = sorted(registry()[spec.name])
    header = []
    for line in spec.text.splitlines():
        if not line.startswith("--"):
            break
        header.append(line[2:].strip() if not line.startswith("--   ") else "  " + line[2:].strip())
    bodies = [str(m.path) for m in modules_for(spec.sql) if m.name.startswith(METRIC_BODIES)]
    print(f"{spec.label} (versions: {', '.join(f'v{v}' for v in versions)})")
    print(f"SQL file: {spec.path}")
    for body in bodies:
        print(f"shared body: {body}")
    print("\n".join(header))
    print(f"query: {len(spec.sql.splitlines())} lines after the header; `cclq shell` has every view it reads")


def _check_traces(wh: Warehouse, selection: list[str]) -> list[str]:
    """The trace ids ``--trace`` names: ids, or glob patterns (``'run1_*'``, as ``diff``
    takes them) matched against the warehouse's; an unknown id is a usage error with the
    nearest ids (the same id in another case first)."""
    import fnmatch

    from cclq.store.summary_cache import read_summary

    if not selection:
        return selection
    known = read_summary(wh).trace_ids()
    out: list[str] = []
    for t in selection:
        if t in known:
            out.append(t)
        elif any(c in t for c in "*?["):
            matched = fnmatch.filter(known, t)
            if not matched:
                raise UsageError(f"no trace matches {t!r} in {wh.root}", hint="`cclq traces` lists them")
            out += matched
        else:
            no_trace(wh, t, known)
    return list(dict.fromkeys(out))


def _one_metric(
    wh: Warehouse,
    settings: QuerySettings,
    spec,  # noqa: ANN001
    params: dict[str, str],
    selection: list[str] | None,
    no_cache: bool,
    fmt: OutputFormat,
    output: Path | None,
    dask: str | None,
) -> None:
    from cclq.query.cache import cached_result, cached_rows

    title = f"{spec.label} ({spec.unit})"
    if not no_cache and fmt is not OutputFormat.parquet:
        rows = cached_rows(wh, spec, params, selection)  # a repeat: neither DuckDB nor pyarrow
        if rows is not None:
            from cclq.present.render import write_rows

            write_rows(*rows, fmt, output=output, title=title)
            return
    table = None if no_cache else cached_result(wh, spec, params, selection)  # no DuckDB for a repeat
    if table is None:
        from cclq.query.metrics import run_metric

        with open_session(wh, settings, traces=selection, cache=not no_cache) as session:
            if dask is None:
                from cclq.query.metrics import batch_queries, shared_views

                # as in a batch: the views its query reads several times over (their `-- batch: shared always` line)
                # stored once; collective_busbw on a 127 MB rank 2.3 s -> 0.8 s of query
                with shared_views(session, batch_queries(session, [spec], params)):
                    table = run_metric(session, spec, params)
            else:
                from cclq.cli.progress import CountedProgress
                from cclq.query.dask import run_metric_on_dask

                with CountedProgress(f"{spec.name} on dask: partitions") as bar:
                    table = run_metric_on_dask(session, spec, params, dask, on_partition=bar.update)
    write_table(table, fmt, output=output, title=title)


def _several_metrics(
    wh: Warehouse,
    settings: QuerySettings,
    specs: list,
    params: dict[str, str],
    selection: list[str] | None,
    no_cache: bool,
    fmt: OutputFormat,
    output: Path | None,
    dask: str | None,
) -> None:
    from cclq.cli.progress import StepProgress
    from cclq.present.metric_output import write_long_form
    from cclq.query.metrics import MetricRun, run_metrics

    with (
        open_session(wh, settings, traces=selection, cache=not no_cache) as session,
        StepProgress("metrics", len(specs)) as progress,
    ):

        def done(run: MetricRun) -> None:
            progress.advance(run_label(run))

        if dask is None:  # what the catalog rules out is not run (docs/metrics.md: applicability)
            runs = run_metrics(session, specs, params, on_done=done, plan_first=True, empty_columns=True)
            _add_catalog_rows(runs)
        else:  # the metrics not cached are computed together, one task per trace partition
            from cclq.query.dask import run_metrics_on_dask

            runs = run_metrics_on_dask(session, specs, params, dask, on_done=done)
    failed = [r for r in runs.values() if r.error]
    ok = [r for r in runs.values() if r.table is not None]
    if output is not None and _is_folder_output(output):
        # one file per metric; "table" (the default) writes CSV, as the help says
        file_fmt = OutputFormat.csv if fmt is OutputFormat.table else fmt
        for run in ok:
            write_table(
                run.table,
                file_fmt,
                output=output / f"{run.spec.name}.{file_fmt.value}",
                title=f"{run.spec.label} ({run.spec.unit})",
            )
    else:
        write_long_form(ok, fmt, output)
    exit_if_failed([f"{run.spec.label}: {run.error}" for run in failed])


def _add_catalog_rows(runs: dict) -> None:  # name -> MetricRun
    """A metric the catalog rules out for every trace ran no SQL: its result is one row per
    trace with no value and the catalog's reason (``cclq.query.metrics.catalog_rows``)."""
    from cclq.query.metrics import catalog_rows

    for run in runs.values():
        if run.table is None and run.error is None and run.not_applicable:
            run.table = catalog_rows(run)


def _is_folder_output(output: Path) -> bool:
    """-o with several metrics: a folder (existing, or a name without a suffix)."""
    return output.is_dir() or not output.suffix
