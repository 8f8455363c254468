"""cclq on a Dask cluster of separate processes that share nothing but the S3 endpoint:
a ``dask scheduler`` and two ``dask worker`` processes, each worker in its own temporary
working directory with its own read-through cache. ``cclq ingest s3://... -w s3://...
--dask`` (the workers read the input objects and write the data files to the bucket, the
client commits) and ``cclq metric --dask`` over an ``s3://`` warehouse, each with one
worker killed (SIGKILL) while it works; the results equal a run without Dask.

Skips cleanly without the ``dask``, ``s3`` and ``s3-test`` extras."""

from __future__ import annotations

import csv
import io
import json
import math
import os
import shutil
import signal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.helpers.cache import own_cache
from tests.helpers.rows import close
from tests.helpers.s3 import make_bucket, moto_server, run_cclq, s3_env, start_cclq, upload_tree
from tests.helpers.warehouse import warehouse_content

pytestmark = pytest.mark.slow  # (CONTRIBUTING.md: over ~2 s each)

REPO = Path(__file__).resolve().parents[2]
SHARED_TRACES = Path(os.environ.get("CCLQ_SHARED", REPO.parent / "shared")) / "traces"
TRACES = ["hta_trace_filter_2rank", "hta_alexnet", "hta_nccl_data"]
# for the ingest: more files (9), so that a worker is caught mid-task
INGEST_TRACES = [*TRACES, "hta_ns_resolution", "tracelens_mi300_resnet_ddp", "kineto_legacy_resnet50"]
METRICS = ["communication_overlap_ratio", "hta_kernel_breakdown"]


def _cell(text: str) -> object:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _assert_same_csv(a: str, b: str) -> None:
    rows_a, rows_b = list(csv.reader(io.StringIO(a))), list(csv.reader(io.StringIO(b)))
    assert len(rows_a) == len(rows_b)
    for ra, rb in zip(rows_a, rows_b):
        assert len(ra) == len(rb) and all(close(_cell(x), _cell(y)) for x, y in zip(ra, rb)), (ra, rb)


def _traces_here(tmp_path: Path, names: list[str]) -> Path:
    """A local copy of these shared traces (skips without the extras or ../shared)."""
    pytest.importorskip("distributed")
    pytest.importorskip("s3fs")
    pytest.importorskip("moto.server")
    if not SHARED_TRACES.is_dir():
        pytest.skip(f"real traces not available ({SHARED_TRACES} is absent)")
    local = tmp_path / "traces"
    for name in names:
        shutil.copytree(SHARED_TRACES / name, local / name)
    return local


def test_metric_on_dask_workers_that_share_only_the_bucket(tmp_path: Path) -> None:
    local = _traces_here(tmp_path, TRACES)
    from tests.helpers.dask_cluster import dask_processes

    with moto_server(tmp_path / "moto.log") as endpoint:
        make_bucket(endpoint, "dask-wh")
        url = "s3://dask-wh/wh"
        env = {
            **os.environ,
            **s3_env(endpoint, tmp_path / "client-cache"),
            "CCLQ_CACHE_DIR": own_cache(tmp_path / "client-user-cache"),
        }
        r = run_cclq("ingest", str(local), "-w", url, "-j", "1", "-q", env=env)
        assert r.returncode == 0, r.stderr

        def own_folders(home: Path) -> dict[str, str]:  # its own cache, and nothing else shared
            return {"CCLQ_REMOTE_CACHE": str(home / "cache"), "CCLQ_CACHE_DIR": own_cache(home / "user-cache")}

        with dask_processes(tmp_path / "cluster", env, workers=2, worker_env=own_folders) as cluster:
            args = ["metric", *METRICS, "--all", "--allow-partial", "--no-cache", "-f", "csv", "-w", url]
            job = start_cclq(*args, "--dask", cluster.address, env=env)
            # the worker that started fetching: mid-task
            killed = cluster.kill_worker_when(job, lambda home: any((home / "cache").rglob("*.parquet")))
            out, err = job.communicate(timeout=600)
            assert job.returncode == 0, err + cluster.log_tail()
            plain = run_cclq(*args, env=env)
            assert plain.returncode == 0, plain.stderr
            assert out.count("\n") > len(TRACES)
            _assert_same_csv(out, plain.stdout)
            assert killed is not None, "no worker fetched anything"
            assert cluster.workers[killed].returncode == -signal.SIGKILL
            # the other worker fetched its own copy: nothing was shared but the bucket
            assert any((cluster.homes[1 - killed] / "cache").rglob("*.parquet"))


def _assert_same_table(name: str, mine: pa.Table, local: pa.Table) -> None:
    """Arrow-equal: the same schema, rows in the same order, every column but the DOUBLE
    ones byte for byte; those to 1e-12 relative (the order DuckDB adds floats up in:
    docs/dask.md lists the metrics where the last bits were measured to move)."""
    assert mine.schema == local.schema, name
    assert mine.num_rows == local.num_rows, name
    for field in local.schema:
        a, b = mine.column(field.name), local.column(field.name)
        if pa.types.is_floating(field.type):
            a_list, b_list = a.to_pylist(), b.to_pylist()
            assert all(
                x == y or (x is not None and y is not None and math.isclose(x, y, rel_tol=1e-12))
                for x, y in zip(a_list, b_list)
            ), (name, field.name)
        else:
            assert a.equals(b), (name, field.name)


def _warehouse_content(target: str) -> dict[str, pa.Table]:
    """``warehouse_content`` of a warehouse's folder or bucket, in this process (the
    environment names the S3 server)."""
    from cclq.store.remote import open_warehouse

    return warehouse_content(open_warehouse(target))


def _data_objects(url: str) -> tuple[set[str], set[str]]:
    """(data objects in the bucket, data files the current snapshot names)."""
    from cclq.store.remote import RemoteWarehouse, data_file_name

    wh = RemoteWarehouse(url)
    named = set(wh._paths(wh.current_id()))
    return {k for k in wh.store.list() if data_file_name(k)}, named


def test_ingest_and_metric_on_dask_workers_that_share_only_the_bucket(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`cclq ingest s3://.../traces -w s3://.../wh --dask tcp://...` with a worker killed
    while it parses: the warehouse a local ingest of the same objects gives (Arrow-equal);
    then `cclq metric --dask` on the surviving worker gives the local metric."""
    local = _traces_here(tmp_path, INGEST_TRACES)
    from tests.helpers.dask_cluster import dask_processes

    with moto_server(tmp_path / "moto.log") as endpoint:
        make_bucket(endpoint, "dask-in")
        upload_tree(endpoint, local, "s3://dask-in/traces")
        url = "s3://dask-in/wh"
        env = {
            **os.environ,
            **s3_env(endpoint, tmp_path / "client-cache"),
            "CCLQ_CACHE_DIR": own_cache(tmp_path / "client-user-cache"),
        }
        for k, v in s3_env(endpoint, tmp_path / "test-cache").items():
            monkeypatch.setenv(k, v)
        # the reference: the same objects ingested by this machine alone, into a local folder
        plain = run_cclq("ingest", "s3://dask-in/traces", "-w", str(tmp_path / "local-wh"), "-j", "1", "-q", env=env)
        assert plain.returncode == 0, plain.stderr

        def own_folders(home: Path) -> dict[str, str]:
            return {"CCLQ_REMOTE_CACHE": str(home / "cache"), "CCLQ_CACHE_DIR": own_cache(home / "user-cache")}

        with dask_processes(tmp_path / "cluster", env, workers=2, worker_env=own_folders) as cluster:
            job = start_cclq("ingest", "s3://dask-in/traces", "-w", url, "-q", "--dask", cluster.address, env=env)
            # mid-task: the worker holds a copy of an input object it is parsing
            killed = cluster.kill_worker_when(job, lambda home: any(home.rglob("cclq-parse-*/input/*")))
            out, err = job.communicate(timeout=600)
            assert job.returncode == 0, err + cluster.log_tail()
            assert killed is not None, "the ingest ended before a worker could be killed"
            assert cluster.workers[killed].returncode == -signal.SIGKILL
            mine, theirs = _warehouse_content(url), _warehouse_content(str(tmp_path / "local-wh"))
            for name in theirs:
                assert mine[name].equals(theirs[name]), name
            assert mine["events"].num_rows > 10_000
            # the workers wrote the data: the client's copy of the warehouse holds no data file
            client_copy = tmp_path / "client-cache" / "warehouses"
            assert not [p for p in client_copy.rglob("trace=*/*.parquet")]
            objects, named = _data_objects(url)
            assert named <= objects
            # what the killed attempt uploaded (if it got so far) is named by no snapshot:
            # the garbage collection takes it, and nothing a snapshot names
            from cclq.store.remote import RemoteWarehouse

            RemoteWarehouse(url).collect_remote_garbage(grace_s=0)
            objects_after, named_after = _data_objects(url)
            assert objects_after == named_after == named
            assert not [k for k in RemoteWarehouse(url).store.list() if k.startswith("tmp/")]  # markers gone

            # a metric on the surviving worker, over the warehouse the workers wrote
            outdir, local_out = tmp_path / "dask-out", tmp_path / "local-out"
            outdir.mkdir()
            local_out.mkdir()
            args = ["metric", *METRICS, "--all", "--allow-partial", "--no-cache", "-f", "parquet"]
            r = run_cclq(*args, "-w", url, "-o", str(outdir), "--dask", cluster.address, env=env)
            assert r.returncode == 0, r.stderr + cluster.log_tail()
            r = run_cclq(*args, "-w", str(tmp_path / "local-wh"), "-o", str(local_out), env=env)
            assert r.returncode == 0, r.stderr
            for name in METRICS:
                a, b = pq.read_table(outdir / f"{name}.parquet"), pq.read_table(local_out / f"{name}.parquet")
                assert a.num_rows > 0
                _assert_same_table(name, a, b)
