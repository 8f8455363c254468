"""`cclq bench`: the command that runs the benchmarks of this folder.

It lives in dev/ with the benchmarks it drives (the CLI only registers it), so the user-facing
layers carry none of the development tooling.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Annotated

import typer

from cclq.errors import UsageError
from cclq.present.output import OutputFormat


def bench(
    sizes: Annotated[
        str,
        typer.Option(
            help="Synthetic trace sizes in MB (all ranks together), comma-separated; "
            "MBxR for R ranks (1000x1: one file of 1 GB); :FORM for its timestamps "
            "(relative, epoch, subns; 127x1:epoch)."
        ),
    ] = "250",
    ranks: Annotated[int, typer.Option(help="Ranks (files) per synthetic trace when a size does not say.")] = 8,
    workdir: Annotated[
        Path | None, typer.Option(help="Keep generated traces here and reuse them [default: a temp dir].")
    ] = None,
    perf_traces: Annotated[
        Path | None, typer.Option("--perf-traces", help="Also benchmark every folder of real traces here.")
    ] = None,
    ingest_part: Annotated[bool, typer.Option("--ingest/--no-ingest", help="Run the ingest benchmark.")] = True,
    metrics_part: Annotated[bool, typer.Option("--metrics/--no-metrics", help="Run the metric benchmark.")] = True,
    traces_dir: Annotated[
        Path | None, typer.Option("--traces", help="Real traces to run every metric over (one process).")
    ] = None,
    copies: Annotated[
        str, typer.Option(help="Copies of an 8-rank trace for the one-query vs loop scaling.")
    ] = "1,10,100",
    metric: Annotated[str, typer.Option(help="Metric for the scaling run.")] = "communication_overlap_ratio",
    hta_python: Annotated[
        str | None,
        typer.Option("--hta-python", help="Python with HolisticTraceAnalysis 0.5.0: compare against HTA."),
    ] = None,
    hta_copies: Annotated[
        int,
        typer.Option(
            "--hta-copies", help="Also compare with HTA on N ranks made of hta_df_index_resolver (8: a 430 MB set)."
        ),
    ] = 0,
    hta_all: Annotated[
        bool,
        typer.Option(
            "--hta-all",
            help="With --hta-python: every analysis of HTA's TraceAnalysis, the same "
            "script through cclq.TraceAnalysis and through HTA, on every shared HTA "
            "trace (and the --hta-copies set): first run and repeat, time, CPU and "
            "peak memory.",
        ),
    ] = False,
    first_run: Annotated[
        bool,
        typer.Option(
            "--first-run",
            help="The first answer on a new trace: `cclq ingest` + `cclq metric "
            "hta_temporal_breakdown --all` + `... hta_comm_comp_overlap --all` "
            "as three processes on a fresh warehouse, against HTA's load and the "
            "same two analyses (--hta-python), on hta_df_index_resolver, "
            "dlrm_param_8xV100 and the --hta-copies set; wall time and peak RSS.",
        ),
    ] = False,
    small_files: Annotated[
        int,
        typer.Option(
            "--small-files",
            min=0,
            help="Also time `cclq ingest` of N copies of dlrm_param_8xV100's "
            "Kineto files (400: 3,200 files), each copy a workload.",
        ),
    ] = 0,
    repeats: Annotated[
        int, typer.Option(help="Runs of each timed case (ingest, one query and loop, HTA); the best is kept.")
    ] = 2,
    board_workloads: Annotated[
        int,
        typer.Option(
            "--board",
            min=0,
            help="Also time `cclq board` over this many workloads (copies of an "
            "8-rank trace): cold, cached metrics, no change, one card changed.",
        ),
    ] = 0,
    scale: Annotated[
        Path | None,
        typer.Option(
            "--scale",
            help="A workload folder: ingest N copies of it and time metrics and "
            "peak RSS at each N (--scale-copies), and under --memory-limit.",
        ),
    ] = None,
    scale_copies: Annotated[str, typer.Option(help="Copies for --scale, comma-separated.")] = "10,100,400",
    main_loop: Annotated[
        Path | None,
        typer.Option(
            "--main-loop",
            help="Folder of workload folders: time CCL-Bench's loop of "
            "`python -m cclq.main` calls, per process and warm.",
        ),
    ] = None,
    ccl_bench: Annotated[
        Path | None,
        typer.Option(
            "--ccl-bench",
            help="A CCL-Bench checkout: time its website generator with its "
            "own tools, through cclq's shim, and `cclq board --config`, "
            "and its call loop, on folders both read (one run).",
        ),
    ] = None,
    ccl_bench_python: Annotated[
        str | None,
        typer.Option(
            "--ccl-bench-python",
            help="With --ccl-bench: the Python that runs CCL-Bench's "
            "tools, with cclq installed into it [default: this one].",
        ),
    ] = None,
    ccl_bench_folders: Annotated[
        Path | None,
        typer.Option(
            "--ccl-bench-folders",
            help="With --ccl-bench: workload folders to use [default: made from ../shared/traces].",
        ),
    ] = None,
    commits: Annotated[
        int,
        typer.Option(
            "--commits",
            min=0,
            help="Also time N durable commits and an ingest with fsync on and "
            "off (CCLQ_FSYNC), on the temp folder's disk.",
        ),
    ] = 0,
    targets: Annotated[
        Path | None,
        typer.Option(
            "--targets",
            help="A folder of workloads (../shared/traces): time the speed "
            "targets (report / metric, board / ingest, the --board N "
            "board cold) and nothing else.",
        ),
    ] = None,
    baseline: Annotated[
        Path | None,
        typer.Option(
            "--baseline",
            help="With --targets: another cclq source tree (an earlier "
            "commit) to time in the same run, before / after.",
        ),
    ] = None,
    large_rank: Annotated[
        str | None,
        typer.Option(
            "--large-rank",
            help="One generated rank at each of these sizes in MB "
            "(32,127,1000): its ingest, then every metric in a "
            "process of its own and `cclq report`, wall, CPU, peak "
            "RSS, cost per event and the ratio to the ingest.",
        ),
    ] = None,
    large_rank_metrics: Annotated[
        str | None,
        typer.Option(
            "--large-rank-metrics",
            help="With --large-rank: only these metrics (comma-separated; 'none' for none) [default: every one].",
        ),
    ] = None,
    large_rank_folders: Annotated[
        str | None,
        typer.Option(
            "--large-rank-folders",
            help="With or instead of --large-rank: these workload folders too (comma-separated; "
            "DIR:x8 makes 8 ranks of DIR's one trace file), in the same table.",
        ),
    ] = None,
    large_rank_board: Annotated[
        bool,
        typer.Option("--large-rank-board", help="With --large-rank: a cold `cclq board` of each input too."),
    ] = False,
    startup: Annotated[
        bool,
        typer.Option(
            "--startup",
            help="Only the start-up guard: the import time of cclq.cli.app and of "
            "each command's modules, `cclq --help` and a cached metric.",
        ),
    ] = False,
    s3: Annotated[
        str | None,
        typer.Option(
            "--s3",
            metavar="URL",
            help="With --traces: an s3://bucket/prefix (endpoint and "
            "credentials from the AWS environment): ingest from "
            "and to it, and a metric over it cold and warm, "
            "against the same over local folders.",
        ),
    ] = None,
    fmt: Annotated[OutputFormat, typer.Option("--format", "-f", help="Output format.")] = OutputFormat.table,
) -> None:
    """Measure the readers and ingest (MB/s, memory) against raw ijson, and metrics: one query vs trace by trace."""
    import pyarrow as pa

    from cclq.present.render import write_table

    if first_run:
        from cclq.bench.first_run import run_first_run_bench

        rows = run_first_run_bench(hta_python, copies=hta_copies, repeats=repeats, workdir=workdir)
        write_table(
            pa.Table.from_pylist(rows),
            fmt,
            title="first answer: cclq's three CLI calls vs HTA 0.5.0's load + the same two analyses",
        )
        return
    if s3 is not None:
        if traces_dir is None:
            raise UsageError("--s3 needs --traces DIR: the traces to put there and ingest")
        from cclq.bench.remote import run_remote_bench

        rows = run_remote_bench(s3, traces_dir, metric=metric, repeats=repeats)
        write_table(pa.Table.from_pylist(rows), fmt, title=f"a warehouse on {s3} against a local one (wall seconds)")
        return
    if small_files:
        from cclq.bench.small_files import run_small_files_bench

        rows = run_small_files_bench(small_files, repeats=repeats, workdir=workdir)
        write_table(pa.Table.from_pylist(rows), fmt, title="thousands of small files")
        if not (ingest_part or metrics_part):
            return
    if startup:
        from cclq.bench.startup import run_startup_bench

        write_table(
            pa.Table.from_pylist(run_startup_bench(repeats=max(repeats, 1))),
            fmt,
            title="start-up: import and command times (best of --repeats)",
        )
        return
    if large_rank or large_rank_folders:
        import sys

        from cclq.bench.large_rank import parse_inputs, run_large_rank_bench

        try:
            inputs = parse_inputs(large_rank or "", large_rank_folders)
        except ValueError as e:
            raise UsageError(
                f"--large-rank takes sizes in MB (MBxRANKS for several ranks), comma-separated: {e}"
            ) from e
        names = None
        if large_rank_metrics:
            names = [n.strip() for n in large_rank_metrics.split(",") if n.strip() and n.strip() != "none"]
        root = workdir or Path(tempfile.mkdtemp(prefix="cclq-bench-large-"))

        def progress(row: dict) -> None:
            print(
                f"{row['input']} {row['case']}: {row['wall_s']} s wall, {row['cpu_s']} s CPU, "
                f"{row['peak_rss_mb']} MB, {row['vs_ingest_wall']}x ingest, "
                f"per event {row['per_event_vs_prev']}x prev, same rows {row['same_rows']} "
                f"(load {open('/proc/loadavg').read().strip()})",
                file=sys.stderr,
                flush=True,
            )

        rows = run_large_rank_bench(inputs, root, names, board=large_rank_board, on_row=progress)
        write_table(pa.Table.from_pylist(rows), fmt, title="one large rank: ingest, every metric, report")
        return
    if targets is not None:
        from cclq.bench.targets import run_target_bench

        rows = run_target_bench(targets, board_workloads=board_workloads, baseline=baseline, repeats=repeats)
        write_table(pa.Table.from_pylist(rows), fmt, title="speed targets: a_s / b_s (wall seconds, cold)")
        return

    from cclq.bench.run import (
        parse_sizes,
        rows_to_table,
        run_ingest_bench,
        run_metric_bench,
    )

    try:
        size_list = parse_sizes(sizes, ranks)
        copy_list = [int(s) for s in copies.split(",") if s.strip()]
    except ValueError as e:
        raise UsageError(f"--sizes takes MB or MBxRANKS, --copies integers, comma-separated: {e}") from e
    if ingest_part:
        bench_rows = run_ingest_bench(size_list, ranks, workdir, perf_traces, repeats)
        write_table(rows_to_table(bench_rows), fmt, title="readers and ingest vs raw ijson (MB of JSON per second)")
    if metrics_part:
        from dataclasses import asdict

        scaling, per_metric = run_metric_bench(copy_list, metric, traces_dir, repeats)
        if per_metric:
            write_table(pa.Table.from_pylist(per_metric), fmt, title=f"every metric over {traces_dir}")
        write_table(
            pa.Table.from_pylist([asdict(r) for r in scaling]),
            fmt,
            title="one query over all traces vs a loop trace by trace (seconds)",
        )
    if commits:
        from cclq.bench.run import run_commit_bench

        write_table(
            pa.Table.from_pylist(run_commit_bench(commits, repeats=repeats)),
            fmt,
            title="durable commits: fsync on and off (seconds)",
        )
    if board_workloads:
        from cclq.bench.run import run_board_bench

        rows = run_board_bench(board_workloads, repeats=repeats)
        write_table(pa.Table.from_pylist(rows), fmt, title=f"cclq board over {board_workloads} workloads (seconds)")
    if scale is not None:
        from cclq.bench.scale import run_scale_bench

        try:
            scale_list = [int(s) for s in scale_copies.split(",") if s.strip()]
        except ValueError as e:
            raise UsageError(f"--scale-copies takes comma-separated integers: {e}") from e
        rows = run_scale_bench(scale, scale_list)
        write_table(pa.Table.from_pylist(rows), fmt, title=f"copies of {scale.name}: seconds and peak RSS")
    if main_loop is not None:
        from cclq.bench.scale import run_main_loop_bench

        rows = run_main_loop_bench(main_loop)
        write_table(pa.Table.from_pylist(rows), fmt, title=f"python -m cclq.main per (folder, metric) over {main_loop}")
    if ccl_bench is not None:
        import sys

        from cclq.bench.ccl_bench import run_ccl_bench_bench

        rows = run_ccl_bench_bench(ccl_bench, ccl_bench_python or sys.executable, ccl_bench_folders)
        write_table(
            pa.Table.from_pylist(rows),
            fmt,
            title=f"CCL-Bench's website generator and call loop: its tools vs cclq ({ccl_bench})",
        )
    if hta_python:
        from cclq.bench.hta import (
            COPIES_SOURCE,
            DEFAULT_SHARED_TRACES,
            rank_copies,
            run_hta_bench,
        )

        copies_folder = None
        if hta_copies:
            (source,) = (DEFAULT_SHARED_TRACES / COPIES_SOURCE).glob("*.json.gz")
            copies_folder = rank_copies(
                source, hta_copies, (workdir or Path(tempfile.gettempdir())) / "cclq-bench-hta-sets"
            )
        if hta_all:
            from cclq.bench.hta import default_folders, run_hta_all_bench

            for folder in [*default_folders(), *([copies_folder] if copies_folder else [])]:
                rows = run_hta_all_bench(folder, hta_python, repeats=repeats)
                write_table(
                    pa.Table.from_pylist(rows),
                    fmt,
                    title=f"every shared analysis: cclq.TraceAnalysis vs HTA 0.5.0 on {folder.name}",
                )
        else:
            rows = run_hta_bench(hta_python=hta_python, repeats=repeats)
            write_table(pa.Table.from_pylist(rows), fmt, title="cclq vs HTA 0.5.0 on the HTA traces")
            if copies_folder:
                rows = run_hta_bench([copies_folder], hta_python=hta_python, repeats=repeats)
                write_table(pa.Table.from_pylist(rows), fmt, title=f"cclq vs HTA 0.5.0 on {copies_folder.name}")
