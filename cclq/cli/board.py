"""``cclq board``: the static leaderboard site, and CCL-Bench's benchmark_data.json
(with ``--config``, as its website's own scripts would write it)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from cclq.cli.common import (
    AllowPartialOpt,
    NoCacheOpt,
    ParamOpt,
    WarehouseOpt,
    exit_if_failed,
    run_label,
    shared_label,
    warehouse_at,
    warn_partial,
)
from cclq.cli.root import root_options

commands = typer.Typer()


@commands.command(
    epilog="Example: cclq board site/ && python -m http.server -d site   (or open site/index.html)\n\n"
    "cclq board website --config website/benchmark_config.json   (CCL-Bench's website data)"
)
def board(
    ctx: typer.Context,
    out_dir: Annotated[Path, typer.Argument(help="Folder to write to (created; updated in place).")],
    param: ParamOpt = None,
    all_metrics: Annotated[
        bool,
        typer.Option(
            "--all-metrics",
            help="Compute every metric for the workload pages, not only the leaderboard's and the plots'.",
        ),
    ] = False,
    force: Annotated[
        bool, typer.Option("--force", help="Recompute every workload, not only the changed ones.")
    ] = False,
    no_cache: NoCacheOpt = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar or summary line.")] = False,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            help="CCL-Bench's website/benchmark_config.json: its pairs "
            "(ingested as needed), `auto` or listed metrics, "
            "required_update; benchmark_data.json follows it.",
        ),
    ] = None,
    pages: Annotated[
        bool | None,
        typer.Option(
            "--pages/--no-pages",
            show_default=False,
            help="Write cclq's site (index.html, assets/, w/, data/) beside "
            "benchmark_data.json and data.js [default: only in a folder that is new, "
            "empty or a cclq board; into any other, such as CCL-Bench's website/, "
            "only those two files].",
        ),
    ] = None,
    write_config: Annotated[
        Path | None,
        typer.Option(
            "--write-config", help='Also write a benchmark_config.json naming every workload of the warehouse ("auto").'
        ),
    ] = None,
    allow_partial: AllowPartialOpt = False,
    warehouse: WarehouseOpt = None,
) -> None:
    """Build the static leaderboard site: one row per workload, a page per workload with plots,
    and benchmark_data.json in CCL-Bench's format. A rebuild recomputes only changed workloads.
    A metric that failed shows as "failed" on the pages, is named on stderr, and the exit
    status is 3 (the site is still written; the next build computes those workloads again).

    With --config, CCL-Bench's website config drives benchmark_data.json / data.js, as its
    generate_data.py would write them through `python -m cclq.main`: its pairs (ingested
    as needed, into a new warehouse too), their metrics (`auto`: the metric_info entries
    whose trace_types meet the card's metric_source.traces) and required_update
    (docs/ccl-bench.md). Exit status 1 if a pair or metric failed (each named on stderr;
    the rest is written)."""
    from cclq.cli.progress import IngestProgress, StepProgress
    from cclq.present.board.build import board_specs, build_board, check_out_dir, is_board_folder
    from cclq.present.board.build import write_config as write_board_config
    from cclq.query.params import check_batch_params, parse_param_args

    params = parse_param_args(param or [])
    check_batch_params(board_specs(all_metrics), params)
    wh = warehouse_at(warehouse)
    if config is not None:
        from cclq.present.board.config import load_board_config

        load_board_config(config)  # a config that cannot be read is a usage error before any work
    pages = is_board_folder(out_dir) if pages is None else pages
    check_out_dir(out_dir)
    bar: list[StepProgress] = []

    def start(traces: int, metrics: int) -> None:
        if traces and not quiet:
            bar.append(StepProgress(f"metrics over {traces} workload(s)", metrics).__enter__())

    if config is not None:
        from cclq.present.board.ccl_bench import build_from_config

        try:
            cresult = build_from_config(
                wh,
                out_dir,
                config,
                params,
                use_cache=not no_cache,
                on_start=start,
                settings=root_options(ctx).settings,
                pages=pages,
                reporter=IngestProgress(enabled=not quiet),
                on_metric=lambda run: bar[0].advance(run.spec.name) if bar else None,
            )
        finally:
            for b in bar:
                b.__exit__(None, None, None)
        written = (
            sorted({o.trace for o in cresult.ingest.outcomes if o.status == "ingested"})
            if cresult.ingest is not None
            else []
        )
        if written:  # as `cclq ingest` says it, once, for the traces this build wrote
            warn_partial(wh, written, allow_partial)
        for line in cresult.notes:
            print(f"cclq: note: {line}", file=sys.stderr)
        for line in cresult.problems:
            print(f"cclq: error: {line}", file=sys.stderr)
        if write_config is not None and wh.exists():
            n = write_board_config(wh, write_config)
            if not quiet:
                print(f"board: wrote {write_config} ({n} pair(s))", file=sys.stderr)
        if not quiet:
            print(
                f"board: {cresult.pairs} pair(s) from {config}: {cresult.computed} value(s) computed, "
                f"{cresult.reused} reused -> {out_dir / 'benchmark_data.json'}, data.js"
                + ("" if pages else _no_pages_note(out_dir)),
                file=sys.stderr,
            )
        if cresult.problems:
            raise typer.Exit(1)
        return
    try:
        result = build_board(
            wh,
            out_dir,
            params,
            all_metrics=all_metrics,
            use_cache=not no_cache,
            force=force or no_cache,
            on_start=start,
            settings=root_options(ctx).settings,
            pages=pages,
            on_metric=lambda run: bar[0].advance(run_label(run)) if bar else None,
            on_shared=lambda names: bar[0].stage(shared_label(names)) if bar else None,
        )
    finally:
        for b in bar:
            b.__exit__(None, None, None)
    if not quiet:
        where = (out_dir / "index.html") if pages else (out_dir / "benchmark_data.json")
        print(
            f"board: {result.workloads} workload(s), {len(result.computed)} computed, {result.reused} unchanged"
            + (f", {result.removed} removed" if result.removed else "")
            + f" -> {where} ({result.seconds:.1f} s)"
            + ("" if pages else _no_pages_note(out_dir)),
            file=sys.stderr,
        )
    if write_config is not None:
        n = write_board_config(wh, write_config)
        if not quiet:
            print(f"board: wrote {write_config} ({n} pair(s))", file=sys.stderr)
    exit_if_failed(result.failed)


def _no_pages_note(out_dir: Path) -> str:
    return (
        f"; only benchmark_data.json and data.js: {out_dir} is not a cclq board (--pages writes cclq's site there too)"
    )
