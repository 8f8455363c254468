"""An S3-compatible server for tests: moto's server mode, started as a separate process
on a free loopback port and stopped after (the ``s3-test`` extra; tests skip without it)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def s3_env(endpoint: str, cache: Path) -> dict[str, str]:
    """What a cclq process needs to use the server: the standard AWS variables (fake
    credentials: moto accepts any) and a read-through cache of its own."""
    return {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing-secret",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": endpoint,
        "CCLQ_REMOTE_CACHE": str(cache),
    }


@contextmanager
def moto_server(log: Path) -> Iterator[str]:
    """Starts ``python -m moto.server`` and yields its endpoint URL."""
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "AWS_ENDPOINT_URL": ""},
        )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(endpoint + "/moto-api/", timeout=2).read()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"moto server did not start: {log.read_text()[-2000:]}") from None
                time.sleep(0.2)
        yield endpoint
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def make_bucket(endpoint: str, bucket: str) -> None:
    """Creates a bucket through a plain HTTP PUT (path style), as any S3 client does."""
    req = urllib.request.Request(f"{endpoint}/{bucket}", method="PUT")
    urllib.request.urlopen(req, timeout=10).read()


def upload_tree(endpoint: str, local: Path, url: str) -> None:
    """Uploads a folder to ``s3://bucket/prefix`` (through s3fs, with the server's env)."""
    import s3fs

    fs = s3fs.S3FileSystem(
        skip_instance_cache=True,
        use_listings_cache=False,
        endpoint_url=endpoint,
        key="testing",
        secret="testing-secret",
    )
    base = url.split("://", 1)[1].rstrip("/")
    files = [p for p in sorted(local.rglob("*")) if p.is_file()]
    fs.put([str(p) for p in files], [f"{base}/{p.relative_to(local).as_posix()}" for p in files])


def run_cclq(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """The real ``cclq`` entry point in a subprocess, with ``env`` added."""
    return subprocess.run(
        [sys.executable, "-c", "from cclq.cli.app import main; main()", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        cwd=cwd,
        timeout=timeout,
    )


def start_cclq(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.Popen[str]:
    """``run_cclq`` started, not waited for."""
    return subprocess.Popen(
        [sys.executable, "-c", "from cclq.cli.app import main; main()", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
        cwd=cwd,
    )
