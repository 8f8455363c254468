"""Warehouses and traces on object storage (``s3://``), against a real S3-compatible
server the tests start (moto's server mode, a separate process on a free loopback port).

Each test skips cleanly without the ``s3`` and ``s3-test`` extras (s3fs, moto[server])."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.cache import own_cache
from tests.helpers.s3 import make_bucket, moto_server, run_cclq, s3_env, start_cclq, upload_tree

pytestmark = pytest.mark.slow  # (CONTRIBUTING.md: over ~2 s each)

REPO = Path(__file__).resolve().parents[2]
SHARED_TRACES = Path(os.environ.get("CCLQ_SHARED", REPO.parent / "shared")) / "traces"
# small real traces of three kinds: 2 ranks with collectives, 1 rank, NCCL data
TRACES = ["hta_trace_filter_2rank", "hta_alexnet", "hta_nccl_data"]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    pytest.importorskip("s3fs")
    pytest.importorskip("moto.server")
    with moto_server(tmp_path_factory.mktemp("moto") / "moto.log") as endpoint:
        yield endpoint


_buckets = iter(range(10_000))


@pytest.fixture
def s3(server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """A fresh bucket and the environment of a cclq process using it (set here too, for
    in-process calls); ``env["BUCKET"]`` names it."""
    bucket = f"test-{os.getpid()}-{next(_buckets)}"
    make_bucket(server, bucket)
    env = s3_env(server, tmp_path / "cache")
    env["CCLQ_CACHE_DIR"] = own_cache(tmp_path / "user-cache")
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    return {**env, "BUCKET": bucket}


def _shared() -> Path:
    if not SHARED_TRACES.is_dir():
        pytest.skip(f"real traces not available ({SHARED_TRACES} is absent)")
    return SHARED_TRACES


def _local_copy(tmp_path: Path, names: list[str]) -> Path:
    """The traces in one local folder (what the S3 prefix holds too)."""
    import shutil

    root = tmp_path / "traces"
    for name in names:
        shutil.copytree(_shared() / name, root / name)
    return root


def _cli_env(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k != "BUCKET"}


# --------------------------------------------------------------- URLs cclq cannot serve
def test_unknown_scheme_is_a_usage_error_and_makes_no_folder(tmp_path: Path) -> None:
    for args in (
        ["traces", "-w", "gs://bucket/wh"],
        ["ingest", "gs://bucket/traces", "-w", str(tmp_path / "w")],
        ["ingest", str(tmp_path), "-w", "az://c/wh"],
    ):
        r = run_cclq(*args, cwd=tmp_path)
        assert r.returncode == 2, r.stderr
        lines = [x for x in r.stderr.splitlines() if x.startswith("cclq: error:")]
        assert len(lines) == 1 and "://" in lines[0] and "cannot read or write" in lines[0], r.stderr
        assert not any(p.name.endswith(":") for p in tmp_path.iterdir()), list(tmp_path.iterdir())


def test_s3_without_s3fs_names_the_extra_and_makes_no_folder(tmp_path: Path) -> None:
    """Before the fix, ``-w s3://wh/cclq`` made ./s3:/wh/cclq and ``ingest s3://b/t``
    looked for ./s3:/b/t; now both say what to install."""
    blocker = tmp_path / "block"
    blocker.mkdir()
    # as if not installed: `import s3fs` fails and importlib.util.find_spec finds nothing
    (blocker / "sitecustomize.py").write_text("import sys\nsys.modules['s3fs'] = None\n")
    env = {"PYTHONPATH": f"{blocker}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    work = tmp_path / "cwd"
    work.mkdir()
    for args in (
        ["traces", "-w", "s3://wh/cclq"],
        ["ingest", "s3://bucket/traces", "-w", "s3://wh/cclq"],
        ["metric", "total_kernel_time", "--all", "-w", "s3://wh/cclq"],
    ):
        r = run_cclq(*args, env=env, cwd=work)
        assert r.returncode == 2, r.stderr
        assert "pip install 'cclq[s3]'" in r.stderr, r.stderr
        assert len([x for x in r.stderr.splitlines() if x.startswith("cclq: error:")]) == 1, r.stderr
        assert list(work.iterdir()) == [], list(work.rglob("*"))


def test_a_url_where_a_folder_is_needed_is_refused() -> None:
    from cclq.errors import UsageError
    from cclq.locations import warehouse_path

    with pytest.raises(UsageError, match="a URL where a local warehouse folder is needed"):
        warehouse_path("s3://bucket/wh")


# ------------------------------------------------------- the same as a local warehouse
def _sorted_frame(df):  # noqa: ANN001, ANN202 - polars
    return df.sort(df.columns) if df.height else df


def test_s3_warehouse_equals_a_local_one(s3: dict[str, str], tmp_path: Path) -> None:
    """Ingest from S3 into S3 gives the local ingest's tables, and every metric, a report
    and a diff over it are the local ones."""
    import cclq

    local = _local_copy(tmp_path, TRACES)
    bucket = s3["BUCKET"]
    upload_tree(s3["AWS_ENDPOINT_URL"], local, f"s3://{bucket}/traces")
    url = f"s3://{bucket}/wh"
    r = run_cclq("ingest", f"s3://{bucket}/traces", "-w", url, "-j", "1", "-q", env=_cli_env(s3))
    assert r.returncode == 0, r.stderr
    r = run_cclq("ingest", str(local), "-w", str(tmp_path / "wh"), "-j", "1", "-q", env=_cli_env(s3))
    assert r.returncode == 0, r.stderr

    remote, here = cclq.open(url), cclq.open(tmp_path / "wh")
    assert sorted(remote.traces()["trace"].to_list()) == sorted(TRACES)
    for table in ("events", "kernels", "collectives"):
        q = f"SELECT * EXCLUDE (file_id) FROM {table}" if table == "events" else f"SELECT * FROM {table}"
        a, b = _sorted_frame(remote.sql(q)), _sorted_frame(here.sql(q))
        assert a.height > 0 or table != "events"
        assert a.equals(b), table
    cols = "trace, rank, size_bytes, format, parser, events_read, events_written, events_dropped, drop_reasons"
    files = f"SELECT {cols} FROM files ORDER BY ALL"
    assert remote.sql(files).equals(here.sql(files))
    a, b = remote.metrics(), here.metrics()
    assert a.height > 50
    assert _sorted_frame(a.drop("details")).equals(_sorted_frame(b.drop("details")))
    assert (
        a.sort(["metric", "trace", "rank"], nulls_last=True)["details"].to_list()
        == b.sort(["metric", "trace", "rank"], nulls_last=True)["details"].to_list()
    )
    # the CLI's reading commands: the same text as over the local warehouse
    for args in (
        ["report", "hta_alexnet", "-f", "json"],
        ["diff", TRACES[0], TRACES[2], "-f", "csv"],
        ["traces", "-f", "csv"],
        ["sql", "SELECT trace, count(*) AS n FROM kernels GROUP BY ALL ORDER BY 1", "-f", "csv"],
        ["metric", "communication_overlap_ratio", "--all", "--allow-partial", "-f", "csv"],
    ):
        ra = run_cclq(*args, "-w", url, env=_cli_env(s3))
        rb = run_cclq(*args, "-w", str(tmp_path / "wh"), env=_cli_env(s3))
        assert ra.returncode == rb.returncode == 0, (args, ra.stderr, rb.stderr)
        assert ra.stdout == rb.stdout, args
    board = tmp_path / "board"
    r = run_cclq("board", str(board), "-w", url, env=_cli_env(s3))
    assert r.returncode == 0, r.stderr
    assert (board / "index.html").is_file()


def test_a_reader_fetches_only_the_traces_it_queries(s3: dict[str, str], tmp_path: Path) -> None:
    local = _local_copy(tmp_path, TRACES[:2])
    bucket = s3["BUCKET"]
    url = f"s3://{bucket}/wh"
    writer = {**_cli_env(s3), "CCLQ_REMOTE_CACHE": str(tmp_path / "writer-cache")}
    r = run_cclq("ingest", str(local), "-w", url, "-j", "1", "-q", env=writer)
    assert r.returncode == 0, r.stderr
    reader_cache = tmp_path / "reader-cache"
    r = run_cclq(
        "metric",
        "total_kernel_time",
        "-t",
        "hta_alexnet",
        "-w",
        url,
        "-f",
        "csv",
        env={**_cli_env(s3), "CCLQ_REMOTE_CACHE": str(reader_cache)},
    )
    assert r.returncode == 0, r.stderr
    fetched = {p.parent.name for p in reader_cache.rglob("*.parquet") if p.parent.name.startswith("trace=")}
    assert fetched == {"trace=hta_alexnet"}, fetched


def test_a_warm_reader_reads_current_without_importing_s3fs(s3: dict[str, str], tmp_path: Path) -> None:
    """With the data files in the read-through cache, a command reads only ``CURRENT``:
    through botocore alone, since importing s3fs (aiobotocore, aiohttp) cost ~0.5 s of CPU
    on every command (1.49x local warm before). A commit made meanwhile is still seen."""
    local = _local_copy(tmp_path, TRACES[:2])
    url = f"s3://{s3['BUCKET']}/wh"
    writer = {**_cli_env(s3), "CCLQ_REMOTE_CACHE": str(tmp_path / "writer-cache")}
    r = run_cclq("ingest", str(local / TRACES[0]), "-w", url, "-j", "1", "-q", env=writer)
    assert r.returncode == 0, r.stderr
    reader = {**_cli_env(s3), "CCLQ_REMOTE_CACHE": str(tmp_path / "reader-cache")}
    args = ["metric", "total_kernel_time", "--all", "-w", url, "-f", "csv", "--no-cache"]
    cold = run_cclq(*args, env=reader)
    assert cold.returncode == 0, cold.stderr

    def warm() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-X", "importtime", "-c", "from cclq.cli.app import main; main()", *args],
            capture_output=True,
            text=True,
            env={**os.environ, **reader},
            timeout=300,
        )

    again = warm()
    assert again.returncode == 0, again.stderr[-2000:]
    assert again.stdout == cold.stdout
    imported = {
        line.rsplit("|", 1)[-1].strip() for line in again.stderr.splitlines() if line.startswith("import time:")
    }
    assert "botocore" in imported and not {"s3fs", "aiobotocore", "aiohttp"} & imported

    r = run_cclq("ingest", str(local / TRACES[1]), "-w", url, "-j", "1", "-q", env=writer)
    assert r.returncode == 0, r.stderr
    later = warm()  # CURRENT changed: the new catalog and trace are fetched (s3fs now)
    assert later.returncode == 0, later.stderr[-2000:]
    assert TRACES[1] in later.stdout and TRACES[1] not in cold.stdout


# ------------------------------------------------------------------------ re-ingest
def test_reingest_from_s3_skips_unchanged_objects(s3: dict[str, str], tmp_path: Path) -> None:
    local = _local_copy(tmp_path, TRACES[:2])
    bucket = s3["BUCKET"]
    upload_tree(s3["AWS_ENDPOINT_URL"], local, f"s3://{bucket}/traces")
    args = ("ingest", f"s3://{bucket}/traces", "-w", f"s3://{bucket}/wh", "-j", "1")
    first = run_cclq(*args, env=_cli_env(s3))
    assert first.returncode == 0, first.stderr
    copies = {p: p.stat().st_ino for p in (tmp_path / "cache" / "traces").rglob("*.gz")}
    assert len(copies) == 3
    again = run_cclq(*args, env=_cli_env(s3))
    assert again.returncode == 0, again.stderr
    assert "3 unchanged" in again.stderr and "ingested" not in again.stderr.split("3 unchanged")[-1], again.stderr
    assert {p: p.stat().st_ino for p in copies} == copies  # not downloaded again
    # one object replaced: only it is downloaded and ingested again
    changed = local / "hta_alexnet" / next(p.name for p in (local / "hta_alexnet").glob("*.gz"))
    import gzip

    body = gzip.decompress(changed.read_bytes())
    changed.write_bytes(gzip.compress(body, compresslevel=1))
    upload_tree(s3["AWS_ENDPOINT_URL"], local / "hta_alexnet", f"s3://{bucket}/traces/hta_alexnet")
    third = run_cclq(*args, env=_cli_env(s3))
    assert third.returncode == 0, third.stderr
    assert "1 ingested" in third.stderr and "2 unchanged" in third.stderr, third.stderr
    moved = [p for p, ino in copies.items() if p.stat().st_ino != ino]
    assert [p.parent.name for p in moved] == ["hta_alexnet"]
    # nothing secret in what cclq says or writes: its messages, the bucket's objects, the copy
    secret = s3["AWS_SECRET_ACCESS_KEY"].encode()
    assert all(secret.decode() not in r.stderr + r.stdout for r in (first, again, third))
    from cclq.store.objects import ObjectStore

    store = ObjectStore(f"s3://{bucket}/wh")
    keys = list(store.list())
    bodies = {k: tmp_path / "check" / k for k in keys}
    store.download(list(bodies.items()))
    assert keys and not [k for k, p in bodies.items() if secret in p.read_bytes()]
    assert not [p for p in (tmp_path / "cache" / "warehouses").rglob("*") if p.is_file() and secret in p.read_bytes()]


# --------------------------------------------------------------------- two writers
def test_a_writer_that_lost_the_race_is_told_and_loses_nothing(
    s3: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Writer B starts, writer A commits while B parses, B's swap of CURRENT fails its
    If-Match: B is told to run again, A's commit stands, and B's rerun adds its trace."""
    from cclq.ingest.report import SilentReporter
    from cclq.ingest.run import ingest
    from cclq.store.objects import ChangedMeanwhile
    from cclq.store.remote import RemoteWarehouse

    local = _local_copy(tmp_path, TRACES[:2])
    url = f"s3://{s3['BUCKET']}/wh"
    monkeypatch.setenv("CCLQ_REMOTE_CACHE", str(tmp_path / "cache-a"))
    a = RemoteWarehouse(url)
    monkeypatch.setenv("CCLQ_REMOTE_CACHE", str(tmp_path / "cache-b"))
    b = RemoteWarehouse(url)
    ingest([local / TRACES[1]], a, jobs=1)  # the warehouse exists: B's write is an If-Match

    class CommitsAMeanwhile(SilentReporter):
        def finish(self) -> None:  # B has parsed and committed locally; A publishes first
            ingest([local / TRACES[0]], a, jobs=1)

    with pytest.raises(ChangedMeanwhile, match="the warehouse changed meanwhile: run again"):
        ingest([local / TRACES[1], local / TRACES[0]], b, jobs=1, force=True, reporter=CommitsAMeanwhile())
    import cclq

    assert sorted(cclq.open(url).traces()["trace"].to_list()) == sorted(TRACES[:2])
    report = ingest([local / TRACES[1]], b, jobs=1, force=True)  # run again: it wins now
    assert not report.failed
    assert sorted(cclq.open(url).traces()["trace"].to_list()) == sorted(TRACES[:2])


def test_two_concurrent_ingests_one_commits_the_other_is_told(s3: dict[str, str], tmp_path: Path) -> None:
    """Two `cclq ingest` processes (each its own cache: two machines) into one new S3
    warehouse at once: each exits 0 or says in one line to run again; after the reruns
    both traces are there."""
    local = _local_copy(tmp_path, TRACES[:2])
    url = f"s3://{s3['BUCKET']}/wh"
    envs = [{**_cli_env(s3), "CCLQ_REMOTE_CACHE": str(tmp_path / f"cache-{i}")} for i in range(2)]
    procs = [
        start_cclq("ingest", str(local / name), "-w", url, "-j", "1", "-q", env=env)
        for name, env in zip(TRACES[:2], envs)
    ]
    results = [(p.wait(timeout=300), p.stderr.read() if p.stderr else "") for p in procs]
    for (rc, err), name, env in zip(results, TRACES[:2], envs):
        if rc != 0:
            errors = [x for x in err.splitlines() if x.startswith("cclq: error:")]
            assert rc == 1 and errors == [f"cclq: error: {url}: the warehouse changed meanwhile: run again"], err
            r = run_cclq("ingest", str(local / name), "-w", url, "-j", "1", "-q", env=env)
            assert r.returncode == 0, r.stderr
    r = run_cclq("traces", "-f", "csv", "-w", url, env=envs[0])
    assert r.returncode == 0, r.stderr
    assert sorted(line.split(",")[0] for line in r.stdout.splitlines()[1:]) == sorted(TRACES[:2])


# ---------------------------------------------------------------------- kill -9
def test_kill_9_during_upload_or_commit_leaves_a_whole_snapshot(s3: dict[str, str], tmp_path: Path) -> None:
    """A writer killed at several moments of an ingest into S3: each time ``CURRENT``
    names a snapshot whose every data file is there, and the traces read back whole (the
    previous commit's, or the new one's)."""
    from cclq.store.objects import ObjectStore

    local = _local_copy(tmp_path, TRACES)
    url = f"s3://{s3['BUCKET']}/wh"
    env = _cli_env(s3)
    r = run_cclq("ingest", str(local / TRACES[1]), "-w", url, "-j", "1", "-q", env=env)
    assert r.returncode == 0, r.stderr
    before = run_cclq(
        "sql", "SELECT trace, count(*) FROM events GROUP BY ALL ORDER BY 1", "-f", "csv", "-w", url, env=env
    ).stdout
    store = ObjectStore(url)
    killed = 0
    for delay in (0.3, 0.8, 1.3, 1.8, 2.5, 3.5):
        p = start_cclq(
            "ingest",
            str(local),
            "-w",
            url,
            "-j",
            "1",
            "-q",
            "--force",
            env={**env, "CCLQ_REMOTE_CACHE": str(tmp_path / f"killed-{delay}")},
        )
        time.sleep(delay)
        if p.poll() is None:
            p.send_signal(signal.SIGKILL)
            killed += 1
        p.wait()
        got = store.read("CURRENT")
        assert got is not None
        snap = got[0].decode().strip()
        import pyarrow.parquet as pq

        objects = store.list()
        parts = tmp_path / f"parts-{delay}.parquet"
        store.download([(f"catalog/{snap}/parts.parquet", parts)])
        named = set(pq.read_table(parts).column("path").to_pylist())
        assert named <= set(objects), named - set(objects)
        now = run_cclq(
            "sql",
            "SELECT trace, count(*) FROM events GROUP BY ALL ORDER BY 1",
            "-f",
            "csv",
            "-w",
            url,
            env={**env, "CCLQ_REMOTE_CACHE": str(tmp_path / f"reader-{delay}")},
        )
        assert now.returncode == 0, now.stderr
        assert now.stdout == before or sorted(line.split(",")[0] for line in now.stdout.splitlines()[1:]) == sorted(
            TRACES
        ), now.stdout
    assert killed >= 1


# ------------------------------------------------------------------------- garbage
def test_garbage_is_collected_after_its_grace_period_only(
    s3: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cclq.ingest.run import ingest
    from cclq.store.objects import ObjectStore
    from cclq.store.remote import RemoteWarehouse, data_file_name

    local = _local_copy(tmp_path, TRACES[:1])
    url = f"s3://{s3['BUCKET']}/wh"
    wh = RemoteWarehouse(url)
    ingest([local], wh, jobs=1)
    store = ObjectStore(url)
    first = {k for k in store.list() if data_file_name(k)}
    # a reader opens the snapshot; a writer replaces every data file of it meanwhile
    reader = RemoteWarehouse(url)
    snapshot = reader.open_snapshot()
    ingest([local], wh, jobs=1, force=True)  # collects with the default grace (an hour)
    assert first <= set(store.list())  # the reader's snapshot was superseded just now: kept
    assert len(snapshot.data_files("events")) > 0  # and the reader still gets its files
    snapshot.close()
    # an orphan a killed writer left: an upload younger than the grace period stays
    orphan = f"events/trace={TRACES[0]}/orphan.0123456789ab.parquet"
    store.put_bytes(orphan, b"not referenced")
    store.put_bytes("notes/readme.txt", b"not cclq's")
    assert wh.collect_remote_garbage() == 0
    assert orphan in store.list()
    monkeypatch.setenv("CCLQ_REMOTE_GC_GRACE_S", "0")
    time.sleep(0.05)
    removed = wh.collect_remote_garbage()
    left = store.list()
    assert orphan not in left and not (first & set(left)) and "notes/readme.txt" in left
    assert removed == len(first) + 1
    assert {k.split("/")[1] for k in left if k.startswith("catalog/")} == {wh.current_id()}
    import cclq

    assert cclq.open(url).traces()["trace"].to_list() == [TRACES[0]]


# ---------------------------------------------------------------- Python entry points
def test_trace_analysis_and_workspace_take_s3_urls(s3: dict[str, str], tmp_path: Path) -> None:
    pytest.importorskip("pandas")
    import cclq

    local = _local_copy(tmp_path, TRACES[:1])
    bucket = s3["BUCKET"]
    upload_tree(s3["AWS_ENDPOINT_URL"], local, f"s3://{bucket}/traces")
    remote = cclq.TraceAnalysis(trace_dir=f"s3://{bucket}/traces/{TRACES[0]}", warehouse=f"s3://{bucket}/wh", jobs=1)
    here = cclq.TraceAnalysis(trace_dir=str(local / TRACES[0]), warehouse=tmp_path / "wh", jobs=1)
    a, b = remote.get_temporal_breakdown(visualize=False), here.get_temporal_breakdown(visualize=False)
    assert a.equals(b)
    assert cclq.open(f"s3://{bucket}/wh").traces()["trace"].to_list() == [TRACES[0]]


def test_dask_ingest_of_s3_traces_into_a_local_warehouse(s3: dict[str, str], tmp_path: Path) -> None:
    """`--dask` with s3:// traces and a local warehouse: the workers fetch the objects
    themselves and write into the shared tmp/; the tables are those of an ingest without
    Dask."""
    pytest.importorskip("distributed")
    local = _local_copy(tmp_path, TRACES)
    bucket = s3["BUCKET"]
    upload_tree(s3["AWS_ENDPOINT_URL"], local, f"s3://{bucket}/traces")
    for wh, extra in (("wh-dask", ["--dask", "local:2"]), ("wh-plain", ["-j", "1"])):
        r = run_cclq("ingest", f"s3://{bucket}/traces", "-w", str(tmp_path / wh), "-q", *extra, env=_cli_env(s3))
        assert r.returncode == 0, r.stderr
    queries = [
        "SELECT trace, rank, count(*), sum(ts_ns), sum(dur_ns), count(DISTINCT name) FROM events "
        "GROUP BY ALL ORDER BY ALL",
        "SELECT * FROM kernels ORDER BY ALL",
        "SELECT * EXCLUDE (ingested_at, ingest_seconds) FROM files ORDER BY ALL",
    ]
    for q in queries:
        a = run_cclq("sql", q, "-f", "csv", "-w", str(tmp_path / "wh-dask"), env=_cli_env(s3))
        b = run_cclq("sql", q, "-f", "csv", "-w", str(tmp_path / "wh-plain"), env=_cli_env(s3))
        assert a.returncode == b.returncode == 0, (a.stderr, b.stderr)
        assert a.stdout == b.stdout and a.stdout.count("\n") > 3, q


def test_dask_running_markers_in_the_bucket(s3: dict[str, str], tmp_path: Path) -> None:
    """Without a shared disk the markers that tell a file that kills Dask workers from a
    bystander are objects under the warehouse's tmp/dask-<run>/: counted per file,
    removed by the parse that ends, all gone at the end of the ingest."""
    from cclq.ingest.dask import Outbox
    from cclq.query.view_catalog import catalog_file
    from cclq.store.objects import ObjectStore

    url = f"s3://{s3['BUCKET']}/wh"
    outbox = Outbox(str(tmp_path), url, "run1")
    first, second = outbox.mark("f1"), outbox.mark("f1")  # two attempts died while parsing f1
    outbox.mark("f2")
    assert (outbox.count("f1"), outbox.count("f2"), outbox.count("f3")) == (2, 1, 0)
    outbox.unmark(second)
    assert outbox.count("f1") == 1 and first != second
    # nothing on this disk (but the compiled views the fixture put in the cache folder)
    assert [p.name for p in tmp_path.iterdir()] == [Path(s3["CCLQ_CACHE_DIR"]).name]
    assert [p.name for p in Path(s3["CCLQ_CACHE_DIR"]).iterdir()] == [catalog_file().name]
    outbox.clear_markers()
    assert ObjectStore(url).list("tmp") == {}


if __name__ == "__main__":  # pragma: no cover
    sys.exit(subprocess.call([sys.executable, "-m", "pytest", __file__, "-x", "-q"]))


def test_ccl_bench_call_and_shell_on_an_s3_warehouse(s3: dict[str, str], tmp_path: Path) -> None:
    """`python -m cclq.main --warehouse s3://...` answers as over a local warehouse (in its
    own process: the daemon serves folders); `cclq shell` opens the local copy."""
    import shutil

    local = _local_copy(tmp_path, TRACES[:1])
    url = f"s3://{s3['BUCKET']}/wh"
    call = [sys.executable, "-m", "cclq.main", "--trace", str(local / TRACES[0]), "--metric", "total_kernel_time"]
    env = {**os.environ, **_cli_env(s3), "CCLQ_DAEMON": "0"}
    a = subprocess.run([*call, "--warehouse", url], capture_output=True, text=True, env=env, timeout=300)
    b = subprocess.run(
        [*call, "--warehouse", str(tmp_path / "wh")], capture_output=True, text=True, env=env, timeout=300
    )
    assert a.returncode == b.returncode == 0, (a.stderr, b.stderr)
    assert a.stdout.splitlines()[-1] == b.stdout.splitlines()[-1] != "nan"
    if shutil.which("duckdb") is None:
        pytest.skip("no duckdb CLI for `cclq shell`")
    r = subprocess.run(
        [sys.executable, "-m", "cclq", "shell", "-w", url],
        input="SELECT count(*) FROM kernels;\n",
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    n = subprocess.run(
        [
            sys.executable,
            "-m",
            "cclq",
            "sql",
            "SELECT count(*) AS n FROM kernels",
            "-f",
            "csv",
            "-w",
            str(tmp_path / "wh"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert n.stdout.splitlines()[-1] in r.stdout


def test_the_read_through_cache_is_bounded_and_safe_to_delete(
    s3: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past $CCLQ_REMOTE_CACHE_MB a reader drops the copies the current snapshot does not
    name (a re-ingest replaced them); deleting the whole cache changes no answer."""
    import shutil

    import cclq
    from cclq.ingest.run import ingest
    from cclq.store.remote import RemoteWarehouse

    local = _local_copy(tmp_path, TRACES[:1])
    url = f"s3://{s3['BUCKET']}/wh"
    monkeypatch.setenv("CCLQ_REMOTE_CACHE", str(tmp_path / "writer"))
    writer = RemoteWarehouse(url)
    ingest([local], writer, jobs=1)
    reader_cache = tmp_path / "reader"
    monkeypatch.setenv("CCLQ_REMOTE_CACHE", str(reader_cache))
    query = "SELECT trace, count(*) AS n, sum(dur_ns) AS d FROM events GROUP BY ALL"
    first = cclq.open(url).sql(query)
    old = sorted(reader_cache.rglob("trace=*/*.parquet"))
    assert old
    ingest([local], writer, jobs=1, force=True)  # every data file replaced by a new one
    monkeypatch.setenv("CCLQ_REMOTE_CACHE_MB", "0")
    assert cclq.open(url).sql(query).equals(first)
    now = sorted(reader_cache.rglob("trace=*/*.parquet"))
    assert now and not set(old) & set(now)  # the superseded copies are gone
    shutil.rmtree(reader_cache)
    assert cclq.open(url).sql(query).equals(first)


def test_one_object_url_is_ingested_as_a_file(s3: dict[str, str], tmp_path: Path) -> None:
    local = _local_copy(tmp_path, TRACES[1:2])
    bucket = s3["BUCKET"]
    upload_tree(s3["AWS_ENDPOINT_URL"], local, f"s3://{bucket}/traces")
    (name,) = [p.name for p in (local / TRACES[1]).glob("*.json.gz")]
    r = run_cclq(
        "ingest",
        f"s3://{bucket}/traces/{TRACES[1]}/{name}",
        "-w",
        str(tmp_path / "wh"),
        "-q",
        "-j",
        "1",
        env=_cli_env(s3),
    )
    assert r.returncode == 0, r.stderr
    r = run_cclq("sql", "SELECT count(*) AS n FROM events", "-f", "csv", "-w", str(tmp_path / "wh"), env=_cli_env(s3))
    here = run_cclq(
        "ingest", str(local / TRACES[1] / name), "-w", str(tmp_path / "wh2"), "-q", "-j", "1", env=_cli_env(s3)
    )
    assert here.returncode == 0, here.stderr
    assert (
        r.stdout
        == run_cclq(
            "sql", "SELECT count(*) AS n FROM events", "-f", "csv", "-w", str(tmp_path / "wh2"), env=_cli_env(s3)
        ).stdout
    )
    assert int(r.stdout.splitlines()[-1]) > 0
