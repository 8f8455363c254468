"""``cclq record``: distributed primitives run under the PyTorch profiler, one workload
folder per configuration (``cclq.record``; torch imported only when it runs)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from cclq.cli.common import FormatOpt, write_table
from cclq.errors import ExitCode, UsageError
from cclq.present.output import OutputFormat

commands = typer.Typer()


@commands.command(epilog="Example: cclq record ddlb_config.json -o runs --nproc 2 && cclq ingest runs")
def record(
    config: Annotated[
        Path, typer.Argument(help="DDLB's config.json (its `benchmark` object), or cclq's extension of it.")
    ],
    out_dir: Annotated[
        Path, typer.Option("--output", "-o", help="Folder to put one workload folder per configuration in.")
    ],
    nproc: Annotated[
        int, typer.Option("--nproc", "-n", min=1, help="World size: rank processes per configuration.")
    ] = 2,
    timeout: Annotated[
        float, typer.Option("--timeout", min=1, help="Seconds one configuration may take before its ranks are stopped.")
    ] = 600,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """Run distributed primitives under the PyTorch profiler: one workload folder per configuration.

    Every list in the config (sizes, dtype, implementation options) expands to the
    cartesian product. Each configuration leaves a Kineto trace per rank
    (kineto_trace_<rank>.json, ProfilerStep per timed iteration), DDLB's results CSV
    (ddlb_results.csv; OUT_DIR/ddlb_results.csv gathers them all) and a filled
    workload_card.yaml, so `cclq ingest OUT_DIR` takes it whole. A configuration that
    cannot run here (unsupported backend, out of memory) is reported with its reason
    and the others go on; the exit status is then 1. Needs PyTorch: pip install -e '.[record]'.
    """
    from cclq.cli.record_progress import RecordProgress, summary_table
    from cclq.record.runner import record as run_record

    if not config.is_file():
        raise UsageError(f"{config}: no such file")
    outcomes = run_record(config, out_dir, nproc, timeout_s=timeout, reporter=RecordProgress(enabled=not quiet))
    table = summary_table(outcomes)
    if fmt is OutputFormat.table:  # the workload name already says implementation, sizes and dtype
        table = table.select(["workload", "status", "mean_time_ms", "std_time_ms", "tflops", "valid", "reason"])
    write_table(table, fmt, title=f"cclq record -> {out_dir}")
    if any(o.status == "failed" for o in outcomes):
        raise typer.Exit(ExitCode.FAILED)
