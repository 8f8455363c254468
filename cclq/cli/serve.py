"""``cclq serve``: the board served with CCL-Bench's upload API (``cclq.present.serve``)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from cclq.cli.common import WarehouseOpt, warehouse_at
from cclq.errors import UsageError
from cclq.formats.limits import MIB

commands = typer.Typer()


@commands.command(epilog="Example: cclq serve --port 8000   (then open http://127.0.0.1:8000/)")
def serve(
    data_dir: Annotated[
        Path,
        typer.Option(
            "--data",
            help="Folder for upload jobs (uploads/<id>/) and, unless --board says otherwise, the board (board/).",
        ),
    ] = Path(".cclq/serve"),
    host: Annotated[
        str, typer.Option("--host", help="Address to bind; 127.0.0.1 keeps it on this machine.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", "-p", min=0, max=65535, help="Port to listen on.")] = 8000,
    board_dir: Annotated[Path | None, typer.Option("--board", help="The board's folder [default: DATA/board].")] = None,
    site_dir: Annotated[
        Path | None,
        typer.Option(
            "--site",
            help="Serve this static site as it is instead of cclq's board (a "
            "CCL-Bench checkout: its index.html's upload form works as is).",
        ),
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            help="CCL-Bench's benchmark_config.json: an upload gets its "
            "metric_info metrics (`auto` by the card's trace types).",
        ),
    ] = None,
    token: Annotated[
        str | None,
        typer.Option(
            "--token",
            envvar="CCLQ_SERVE_TOKEN",
            show_default=False,
            help="Uploads need `Authorization: Bearer TOKEN` [env: CCLQ_SERVE_TOKEN].",
        ),
    ] = None,
    max_upload_mb: Annotated[int, typer.Option("--max-upload-mb", min=1, help="Largest upload (request body).")] = 1024,
    max_unpacked_mb: Annotated[
        int, typer.Option("--max-unpacked-mb", min=1, help="Most an upload may unpack to.")
    ] = 8192,
    max_files: Annotated[int, typer.Option("--max-files", min=1, help="Most files an upload may unpack to.")] = 20000,
    jobs: Annotated[int, typer.Option("--jobs", "-j", min=1, max=64, help="Upload jobs run at once.")] = 1,
    queue_size: Annotated[int, typer.Option("--queue", min=1, help="Jobs that may wait; more are refused (503).")] = 64,
    job_timeout: Annotated[
        float,
        typer.Option(
            "--job-timeout", min=1, help="Seconds one job may run in its process before it is stopped (and fails)."
        ),
    ] = 3600,
    job_memory_mb: Annotated[
        int | None,
        typer.Option(
            "--job-memory-mb",
            min=256,
            help="Address space of a job's process (MB); over it the job fails, not the server [default: no limit].",
        ),
    ] = None,
    allow_host: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-host",
            help="Another name this server is reached by (a request "
            "whose Host names neither it nor --host is refused; "
            "repeatable).",
        ),
    ] = None,
    header_timeout: Annotated[
        float, typer.Option("--header-timeout", min=0.1, help="Seconds a connection has to send a request's headers.")
    ] = 10.0,
    body_timeout: Annotated[
        float, typer.Option("--body-timeout", min=0.1, help="Seconds an upload may go without sending a byte.")
    ] = 60.0,
    max_connections: Annotated[
        int, typer.Option("--max-connections", min=1, help="Open connections at once; more are answered 503.")
    ] = 128,
    keep_uploads_hours: Annotated[
        float,
        typer.Option(
            "--keep-uploads-hours",
            min=0.0,
            help="Hours a finished job's folder (the upload, its "
            "results.json) is kept; then it is removed (the "
            "workload stays on the board).",
        ),
    ] = 168.0,
    warehouse: WarehouseOpt = None,
) -> None:
    """Serve the board with CCL-Bench's upload API: POST /api/upload (a zip/tar/tar.gz/.gz of a
    trace folder), GET /api/results/<id> (results.json), GET /health.

    An upload is unpacked safely (no paths out of its folder, no links, bounded size, file
    count and inflation), its card checked, then a job queue ingests it, computes the metrics
    and rebuilds the board. Needs the extra: pip install 'cclq[serve]'."""
    try:
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        raise UsageError("cclq serve needs Starlette and uvicorn", hint="pip install 'cclq[serve]'") from None
    from cclq.present.serve.app import ServeSettings
    from cclq.present.serve.app import serve as run_server
    from cclq.present.serve.archive import Limits

    if host not in ("127.0.0.1", "localhost", "::1") and not token:
        print(f"cclq: warning: serving on {host} without a token: anyone who reaches it can upload", file=sys.stderr)
    settings = ServeSettings(
        data_dir=data_dir,
        warehouse=warehouse_at(warehouse),
        board_dir=board_dir or data_dir / "board",
        config_path=config,
        token=token,
        site_dir=site_dir,
        limits=Limits(max_upload_bytes=max_upload_mb * MIB, max_total_bytes=max_unpacked_mb * MIB, max_files=max_files),
        workers=jobs,
        queue_size=queue_size,
        job_timeout=job_timeout,
        job_memory_mb=job_memory_mb,
        listen_host=host,
        allow_hosts=tuple(allow_host or ()),
        header_timeout=header_timeout,
        body_timeout=body_timeout,
        max_connections=max_connections,
        keep_uploads_hours=keep_uploads_hours,
    )
    print(
        f"cclq serve: http://{host}:{port}/  (uploads in {data_dir / 'uploads'}, warehouse "
        f"{settings.warehouse.root}; Ctrl-C stops)",
        file=sys.stderr,
    )
    if token:
        print(
            f"cclq serve: uploads need the token; a browser signs in once at http://{host}:{port}/_serve/login "
            "(then the site's own upload form, CCL-Bench's included, works as it is)",
            file=sys.stderr,
        )
    run_server(settings, host, port)
