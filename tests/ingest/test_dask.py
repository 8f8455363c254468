"""cclq on a real Dask cluster (a ``LocalCluster`` of two worker processes, one thread
each): ``--dask`` ingest gives the warehouse a local ingest gives, also when a worker is
killed mid-ingest or a file keeps killing workers; metrics computed by trace partitions
on the workers are the tables a local run gives. Skipped without the ``dask`` extra (the
``distributed`` fixture, tests/ingest/conftest.py: nothing here imports dask at collection)."""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path

import pyarrow as pa
import pytest
from helpers.cache import own_cache
from helpers.cli import run_cli
from helpers.presentation_traces import board_workloads
from helpers.traces import write_trace
from helpers.warehouse import warehouse_content

from cclq.errors import TraceFileError, UsageError
from cclq.ingest.dask import _DaskParses, check_workers
from cclq.ingest.parse import PARSER_DIED, FileTask
from cclq.ingest.report import IngestReport
from cclq.ingest.run import ingest
from cclq.query.dask import plan_partitions, run_metric_on_dask, run_metrics_on_dask
from cclq.query.metrics import run_metric, run_metrics
from cclq.query.registry import latest_specs, resolve
from cclq.query.session import connect
from cclq.store.warehouse import Warehouse


# Metric columns whose last bits depend on the order DuckDB adds DOUBLEs up in (an avg or
# sum of floats over rows of several files or devices): two local runs can differ there
# too, with another thread count or even with the same one. They are compared to 1e-12;
# every other column, and the row order, byte for byte.
@pytest.fixture(scope="module")
def cluster(distributed):
    import dask

    # what `--dask local` starts: a task gives up after two worker deaths
    with dask.config.set({"distributed.scheduler.allowed-failures": 1}):
        local = distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
            silence_logs=logging.CRITICAL,
        )
    with local, distributed.Client(local) as client:
        yield local, client


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    """Workloads of several shapes, a file that is not a trace, and two files that state
    no rank (ranked once every other file is staged)."""
    root = board_workloads(tmp_path_factory.mktemp("inputs"))
    (root / "broken").mkdir()
    (root / "broken" / "rank0.json").write_text('{"traceEvents": [{"ph": "X", "name": "cut')
    events = [{"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 1, "ts": 5, "dur": 2}]
    write_trace(root / "rankless" / "first.json", events)
    write_trace(root / "rankless" / "second.json", events * 2)
    return root


@pytest.fixture(scope="module")
def local_wh(inputs, tmp_path_factory) -> tuple[Warehouse, IngestReport]:
    wh = Warehouse(tmp_path_factory.mktemp("local") / "wh")
    return wh, ingest([inputs], wh, jobs=1)


def _outcomes(report: IngestReport) -> list[tuple]:
    return sorted((o.path, o.trace, o.status, o.message, o.rank, o.events, o.dropped) for o in report.outcomes)


def _assert_same_warehouse(wh: Warehouse, local: Warehouse) -> None:
    mine, theirs = warehouse_content(wh), warehouse_content(local)
    for name in theirs:
        assert mine[name].equals(theirs[name]), name
    assert mine["events"].num_rows > 5_000
    assert not any(wh.tmp_dir.iterdir()), "temp files left behind"


# ------------------------------------------------------------------------ ingest
@pytest.mark.slow
def test_ingest_on_the_cluster_gives_the_warehouse_a_local_ingest_gives(cluster, inputs, local_wh, tmp_path):
    local, _client = cluster
    wh = Warehouse(tmp_path / "wh")
    report = ingest([inputs], wh, dask=local.scheduler_address)
    local_wh_, local_report = local_wh
    assert _outcomes(report) == _outcomes(local_report)
    assert [o.path.rsplit("/", 2)[-2] for o in report.failed] == ["broken"]  # fails alone, as locally
    assert sorted(o.rank for o in report.outcomes if o.trace == "rankless") == [0, 1]
    _assert_same_warehouse(wh, local_wh_)
    again = ingest([inputs], wh, dask=local.scheduler_address)  # unchanged: nothing is parsed
    assert {o.status for o in again.outcomes} == {"unchanged", "failed"}


@pytest.fixture
def faults(cluster):
    from helpers.dask_faults import Faults

    faults = Faults(cluster[1])
    yield faults
    faults.remove()


@pytest.mark.slow
def test_a_worker_killed_mid_ingest_loses_nothing(cluster, inputs, local_wh, tmp_path, faults):
    local, _client = cluster
    log = tmp_path / "kills.jsonl"
    faults.install("synthetic_dp8/kineto_trace_3", "once", log)
    wh = Warehouse(tmp_path / "wh")
    report = ingest([inputs], wh, dask=local.scheduler_address)
    kills = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(kills) == 1 and kills[0], "the worker was not killed after writing its temp data"
    local_wh_, local_report = local_wh
    assert _outcomes(report) == _outcomes(local_report)  # the file was parsed again elsewhere
    _assert_same_warehouse(wh, local_wh_)
    assert not any(Path(tmp).exists() for tmp in kills[0])  # the dead attempt's data: swept


@pytest.mark.slow
def test_a_file_that_keeps_killing_workers_fails_alone_and_a_rerun_finishes(
    cluster, inputs, local_wh, tmp_path, faults
):
    local, _client = cluster
    log = tmp_path / "kills.jsonl"
    faults.install("run_b/rank1", "always", log)
    wh = Warehouse(tmp_path / "wh")
    report = ingest([inputs], wh, dask=local.scheduler_address)
    assert len(log.read_text().splitlines()) == 2  # two deaths, then Dask gave up on the task
    failed = {Path(o.path).relative_to(inputs).as_posix(): o.message for o in report.failed}
    assert set(failed) == {"broken/rank0.json", "run_b/rank1.pt.trace.json"}
    assert PARSER_DIED in failed["run_b/rank1.pt.trace.json"]
    assert "2 Dask worker(s) died" in failed["run_b/rank1.pt.trace.json"]
    ingested = [o for o in report.outcomes if o.status == "ingested"]
    assert len(ingested) == len([o for o in local_wh[1].outcomes if o.status == "ingested"]) - 1
    assert not any(wh.tmp_dir.iterdir())
    faults.remove()  # the file is fine now (a bigger worker, say)
    rerun = ingest([inputs], wh, dask=local.scheduler_address)
    assert [o.path for o in rerun.outcomes if o.status == "ingested"] == [
        o.path for o in report.outcomes if o.message == failed["run_b/rank1.pt.trace.json"]
    ]
    _assert_same_warehouse(wh, local_wh[0])


@pytest.mark.slow
def test_shared_file_system_ingest_and_metric_on_dask_worker_processes(inputs, local_wh, tmp_path, distributed):
    """The shared-file-system mode on a real cluster of separate processes: a ``dask
    scheduler`` and two ``dask worker`` processes, each in its own working directory, the
    warehouse a folder they all see. One worker is SIGKILLed while a parse runs (a marker
    in tmp/); the ingest gives the local warehouse, and a metric on the survivor the
    local result."""
    import os

    from helpers.dask_cluster import dask_processes
    from helpers.s3 import start_cclq

    wh = Warehouse(tmp_path / "wh")
    env = {**os.environ, "CCLQ_CACHE_DIR": own_cache(tmp_path / "user-cache")}
    with dask_processes(tmp_path / "cluster", env, workers=2) as cluster:
        job = start_cclq("ingest", str(inputs), "-w", str(wh.root), "-q", "--dask", cluster.address, env=env)
        killed = cluster.kill_worker_when(
            job, lambda _home: wh.tmp_dir.is_dir() and any(wh.tmp_dir.glob("*.running.*"))
        )
        _out, err = job.communicate(timeout=600)
        assert killed is not None, "the ingest ended before a worker could be killed"
        assert job.returncode == 1, err + cluster.log_tail()  # the broken file, as locally
        assert err.count("cclq: error:") == 1 and "broken/rank0.json" in err
        _assert_same_warehouse(wh, local_wh[0])
        con, here = connect(wh), connect(local_wh[0])
        try:
            for name in ("hta_kernel_type_breakdown", "avg_step_time"):
                spec = resolve(name)
                there = run_metric_on_dask(con, spec, {}, cluster.address, partitions=2)
                _assert_same_result(name, there, run_metric(here, spec, {}))
        finally:
            con.close()
            here.close()


class _StubFuture:
    def __init__(self, error: BaseException | None = None) -> None:
        self.error = error

    def result(self):
        if self.error is not None:
            raise self.error
        return "parsed"

    def add_done_callback(self, fn) -> None: ...


class _StubClient:
    def __init__(self) -> None:
        self.submitted: list[str] = []

    def submit(self, fn, path, *args, **kw) -> _StubFuture:
        self.submitted.append(path)
        return _StubFuture()


@pytest.mark.parametrize("markers,resubmits,resubmitted", [(0, 0, True), (1, 0, True), (2, 0, False), (1, 3, False)])
def test_a_file_dask_gave_up_on_fails_only_if_it_was_running_at_two_deaths(
    tmp_path, markers, resubmits, resubmitted, distributed
):
    """Dask gives up on every task assigned to workers that died, queued or running.
    The markers a dying parse leaves in tmp/ tell the culprit (running at two deaths)
    from a bystander (queued there), which is submitted again, a bounded number of times."""
    task = FileTask(tmp_path / "f.json", "t", "f.json", "ab12", 10, 0, None)
    for n in range(markers):
        (tmp_path / f"ab12.running.{n}").touch()
    client = _StubClient()
    parses = _DaskParses(client, [task], tmp_path, reporter=None)  # type: ignore[arg-type]
    parses.resubmits[0] = resubmits
    killed = distributed.KilledWorker("cclq-parse-ab12-0", None, 1)  # type: ignore[arg-type]
    result = parses.outcome(0, _StubFuture(killed))  # type: ignore[arg-type]
    if resubmitted:
        assert result is None and client.submitted == [str(task.path)]
    else:
        assert isinstance(result, TraceFileError) and PARSER_DIED in result.problem and not client.submitted


@pytest.mark.slow
def test_workers_that_run_other_code_or_see_another_warehouse_are_refused(cluster, local_wh, monkeypatch):
    _local, client = cluster
    wh, _report = local_wh
    probe = wh.catalog_dir / wh.current_id() / "files.parquet"
    check_workers(client, wh.root, probe)  # the same code, the same files: fine
    import cclq.ingest.dask as dist

    monkeypatch.setattr(dist, "code_content_digest", lambda: "another cclq")  # this process only
    with pytest.raises(UsageError, match="runs a different cclq"):
        check_workers(client, wh.root, probe)
    monkeypatch.undo()
    monkeypatch.setattr(dist, "_file_signature", lambda path: "what this process sees")
    with pytest.raises(UsageError, match=f"does not see the warehouse at {wh.root}"):
        check_workers(client, wh.root, probe)


# ----------------------------------------------------------------------- metrics
def _assert_same_result(name: str, mine: pa.Table, local: pa.Table) -> None:
    """The same rows in the same order; floating-point columns to 1e-12 relative, since a
    sum over a partition's rows adds in another order than a sum over all of them."""
    assert mine.schema.equals(local.schema) and mine.num_rows == local.num_rows, name
    for column in local.column_names:
        if not pa.types.is_floating(local.schema.field(column).type):
            assert mine[column].equals(local[column]), (name, column)
            continue
        for a, b in zip(mine[column].to_pylist(), local[column].to_pylist()):
            same = (a is None and b is None) or (
                a is not None
                and b is not None
                and (a == b or (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-15))
            )
            assert same, (name, column, a, b)


@pytest.mark.slow
def test_every_metric_by_trace_partitions_on_the_workers_is_the_local_result(cluster, local_wh):
    """Two partitions of the seven traces, one on each worker; each metric's parts are put
    together in the order one query gives."""
    local, _client = cluster
    wh, _report = local_wh
    specs = latest_specs()
    con = connect(wh)
    try:
        here = run_metrics(con, specs)
        done: list[tuple[int, int]] = []
        there = run_metrics_on_dask(
            con, specs, None, local.scheduler_address, partitions=2, on_partition=lambda d, t: done.append((d, t))
        )
    finally:
        con.close()
    assert done == [(0, 2), (1, 2), (2, 2)]
    assert set(there) == set(here)
    for name, run in here.items():
        assert run.error is None and there[name].error is None, name
        _assert_same_result(name, there[name].table, run.table)
    assert len({r for t in (here[s.name].table for s in specs) for r in t.column("trace").to_pylist()}) == 7


@pytest.mark.slow
def test_the_cache_is_keyed_by_the_whole_selection_in_the_client(cluster, local_wh, tmp_path):
    local, _client = cluster
    wh, _report = local_wh
    spec = resolve("hta_kernel_type_breakdown")
    con = connect(wh, cache=True)
    cache = con.cache_dir
    assert cache is not None and not (cache.exists() and list(cache.iterdir()))
    try:
        computed = run_metric_on_dask(con, spec, {}, local.scheduler_address, partitions=2)
        assert len(list(cache.glob("*.parquet"))) == 1  # one result (its rows kept as JSON beside it)
        assert run_metric(con, spec, {}).equals(computed)  # a local run reads the same entry
        # cached: no scheduler is asked (there is none at that address)
        assert run_metric_on_dask(con, spec, {}, "tcp://127.0.0.1:9").equals(computed)
    finally:
        con.close()
    uncached = connect(wh)
    try:
        assert computed.equals(run_metric(uncached, spec, {}))
    finally:
        uncached.close()


@pytest.mark.slow
def test_a_metric_that_fails_on_the_workers_is_a_query_error(cluster, local_wh, tmp_path):
    from dataclasses import replace

    from cclq.errors import QueryError

    local, _client = cluster
    wh, _report = local_wh
    broken = replace(resolve("total_kernel_time"), sql="SELECT trace, 1 / 0 AS value, no_such_column FROM metric_scope")
    con = connect(wh)
    try:
        with pytest.raises(QueryError, match="no_such_column"):
            run_metric_on_dask(con, broken, {}, local.scheduler_address, partitions=2)
    finally:
        con.close()


def test_partitions_are_balanced_by_events():
    events = {"a": 900, "b": 500, "c": 400, "d": 100, "e": 100}
    assert plan_partitions(events, 2, min_events=0) == [["a", "d"], ["b", "c", "e"]]
    assert plan_partitions(events, 10, min_events=0) == [["a"], ["b"], ["c"], ["d"], ["e"]]
    assert plan_partitions(events, 10, min_events=1_000) == [["a", "d"], ["b", "c", "e"]]  # 2000 events: 2 tasks
    assert plan_partitions(events, 10, min_events=10_000) == [["a", "b", "c", "d", "e"]]
    assert plan_partitions({}, 4) == []


# --------------------------------------------------------------------------- cli
@pytest.mark.slow
def test_cli_ingest_and_metric_with_dask(cluster, inputs, local_wh, tmp_path):
    local, _client = cluster
    wh = tmp_path / "wh"
    done = run_cli("ingest", str(inputs), "-w", str(wh), "-q", "--dask", "local:2")
    assert done.returncode == 1, done.stderr  # the broken file, as locally
    assert done.stderr.count("cclq: error:") == 1 and "broken/rank0.json" in done.stderr
    _assert_same_warehouse(Warehouse(wh), local_wh[0])
    for name in ("hta_kernel_type_breakdown", "avg_step_time"):
        here = run_cli("metric", name, "--all", "-w", str(wh), "-f", "csv", "--no-cache")
        there = run_cli(
            "metric", name, "--all", "-w", str(wh), "-f", "csv", "--no-cache", "--dask", local.scheduler_address
        )
        assert there.returncode == 0, there.stderr
        assert there.stdout == here.stdout and here.stdout.count("\n") > 9


@pytest.mark.slow
@pytest.mark.parametrize(
    "spec,problem",
    [
        ("local:0", "local:N wants a number"),
        ("local:two", "local:N wants"),
        ("no-such-scheduler-file", "not local[:N], a scheduler address"),
    ],
)
def test_cli_a_bad_dask_option_is_a_usage_error(tmp_path, spec, problem, distributed):
    write_trace(tmp_path / "w" / "rank0.json", [{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1}])
    done = run_cli("ingest", str(tmp_path / "w"), "-w", str(tmp_path / "wh"), "--dask", spec)
    assert done.returncode == 2 and problem in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "wh").exists()  # refused before anything was done
    both = run_cli("ingest", str(tmp_path / "w"), "-w", str(tmp_path / "wh"), "--dask", "local", "-j", "2")
    assert both.returncode == 2 and "--jobs" in both.stderr


def test_dask_is_imported_only_when_asked_for(tmp_path):
    """Installed or not, a run without --dask never imports it (it costs ~0.5 s)."""
    import subprocess
    import sys

    write_trace(tmp_path / "w" / "rank0.json", [{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1}])
    code = (
        "import sys; from cclq.cli.app import app; from cclq.ingest.run import ingest; "
        "from cclq.query.metrics import run_metric; "
        "from cclq.store.warehouse import Warehouse; "
        f"ingest([{str(tmp_path / 'w')!r}], Warehouse({str(tmp_path / 'wh')!r}), jobs=1); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


class _RunHere:
    """A client whose ``run`` calls the function in this process, as worker "w1"."""

    def run(self, fn, *args):
        return {"tcp://w1:1": fn(*args)}


def test_a_worker_that_cannot_reach_the_bucket_is_refused_in_one_line(monkeypatch, tmp_path):
    """Before any task, each worker reads the warehouse's bucket with its own AWS
    configuration; one that cannot is a usage error naming it and the URL, and no secret."""
    pytest.importorskip("botocore")
    from helpers.s3 import free_port

    import cclq.ingest.dask as dist

    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{free_port()}")  # nobody listens there
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "very-secret-value")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    dist._store.cache_clear()
    try:
        with pytest.raises(UsageError) as caught:
            dist.check_store(_RunHere(), "s3://team-bucket/wh")  # type: ignore[arg-type]
    finally:
        dist._store.cache_clear()
    text = str(caught.value)
    assert "Dask worker tcp://w1:1 cannot read s3://team-bucket/wh" in text and "\n" not in text
    assert "very-secret-value" not in text + (caught.value.hint or "")
