"""`cclq metric --dask` over an ``s3://`` warehouse, on a Dask cluster of separate
processes that share nothing but the S3 endpoint: a scheduler and two workers, each worker
in its own temporary working directory with its own read-through cache. One worker is
killed (SIGKILL) while it works; the result equals a run without Dask.

Skips cleanly without the ``dask``, ``s3`` and ``s3-test`` extras."""

from __future__ import annotations

import csv
import io
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.s3 import free_port, make_bucket, moto_server, run_cclq, s3_env, start_cclq

pytestmark = pytest.mark.slow  # (CONTRIBUTING.md: over ~2 s each)

REPO = Path(__file__).resolve().parents[2]
SHARED_TRACES = Path(os.environ.get("CCLQ_SHARED", REPO.parent / "shared")) / "traces"
TRACES = ["hta_trace_filter_2rank", "hta_alexnet", "hta_nccl_data"]
METRICS = ["communication_overlap_ratio", "hta_kernel_breakdown"]


def _start(args: list[str], cwd: Path, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "wb") as out:
        return subprocess.Popen([sys.executable, "-m", *args], cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)


def _close(a: object, b: object) -> bool:
    """Equal, floats to 1e-12 relative: DuckDB sums in the order its threads finish, so a
    sum's last bits may differ between two runs (docs/dask.md names the metrics)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, (int, float)) and isinstance(b, (int, float)) and math.isclose(a, b, rel_tol=1e-12)
    return a == b


def _cell(text: str) -> object:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _assert_same_csv(a: str, b: str) -> None:
    rows_a, rows_b = list(csv.reader(io.StringIO(a))), list(csv.reader(io.StringIO(b)))
    assert len(rows_a) == len(rows_b)
    for ra, rb in zip(rows_a, rows_b):
        assert len(ra) == len(rb) and all(_close(_cell(x), _cell(y)) for x, y in zip(ra, rb)), (ra, rb)


def _wait_for_workers(address: str, n: int, env: dict[str, str]) -> None:
    from distributed import Client

    with Client(address, timeout=60) as client:
        client.wait_for_workers(n, timeout=120)


def test_metric_on_dask_workers_that_share_only_the_bucket(tmp_path: Path) -> None:
    pytest.importorskip("distributed")
    pytest.importorskip("s3fs")
    pytest.importorskip("moto.server")
    if not SHARED_TRACES.is_dir():
        pytest.skip(f"real traces not available ({SHARED_TRACES} is absent)")
    local = tmp_path / "traces"
    for name in TRACES:
        shutil.copytree(SHARED_TRACES / name, local / name)
    procs: list[subprocess.Popen[bytes]] = []
    with moto_server(tmp_path / "moto.log") as endpoint:
        make_bucket(endpoint, "dask-wh")
        url = "s3://dask-wh/wh"
        env = {
            **os.environ,
            **s3_env(endpoint, tmp_path / "client-cache"),
            "CCLQ_CACHE_DIR": str(tmp_path / "client-user-cache"),
        }
        r = run_cclq("ingest", str(local), "-w", url, "-j", "1", "-q", env=env)
        assert r.returncode == 0, r.stderr
        try:
            port = free_port()
            address = f"tcp://127.0.0.1:{port}"
            sched_dir = tmp_path / "scheduler"
            sched_dir.mkdir()
            procs.append(
                _start(
                    ["distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
                    sched_dir,
                    env,
                    tmp_path / "scheduler.log",
                )
            )
            caches = []
            for i in range(2):
                home = tmp_path / f"worker-{i}"  # its own folder, cache and nothing else shared
                home.mkdir()
                caches.append(home / "cache")
                wenv = {
                    **env,
                    "CCLQ_REMOTE_CACHE": str(home / "cache"),
                    "CCLQ_CACHE_DIR": str(home / "user-cache"),
                    "TMPDIR": str(home),
                }
                procs.append(
                    _start(
                        [
                            "distributed.cli.dask_worker",
                            address,
                            "--nthreads",
                            "1",
                            "--no-nanny",
                            "--no-dashboard",
                            "--local-directory",
                            str(home),
                        ],
                        home,
                        wenv,
                        tmp_path / f"worker-{i}.log",
                    )
                )
            _wait_for_workers(address, 2, env)
            args = ["metric", *METRICS, "--all", "--allow-partial", "--no-cache", "-f", "csv", "-w", url]
            job = start_cclq(*args, "--dask", address, env=env)
            killed = None
            while job.poll() is None and killed is None:  # the worker that started fetching: mid-task
                for i, cache in enumerate(caches):
                    if any(cache.rglob("*.parquet")) and killed is None:
                        procs[1 + i].send_signal(signal.SIGKILL)
                        killed = i
                time.sleep(0.02)
            out, err = job.communicate(timeout=600)
            assert job.returncode == 0, err
            plain = run_cclq(*args, env=env)
            assert plain.returncode == 0, plain.stderr
            assert out.count("\n") > len(TRACES)
            _assert_same_csv(out, plain.stdout)
            assert killed is not None, "no worker fetched anything"
            assert procs[1 + killed].wait(timeout=10) == -signal.SIGKILL
            # the other worker fetched its own copy: nothing was shared but the bucket
            assert any(caches[1 - killed].rglob("*.parquet"))
        finally:
            for p in procs:
                if p.poll() is None:
                    p.terminate()
            for p in procs:
                try:
                    p.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
