"""cclq on a Dask cluster (``--dask``): the cluster (``--dask`` values, the client, the
worker checks) and files parsed on the workers; metrics on the workers are
``cclq.query.dask``'s.

Dask (``distributed``) is the optional extra ``dask``; nothing imports this module
unless ``--dask`` is given. The cluster changes where work runs, never what it gives,
because everything that decides a result stays in the process that runs cclq:

* **ingest** keeps planning, the rank checks and every commit (``cclq.ingest.run``'s
  committer) in this process. A worker runs ``parse_file`` and nothing else, and hands
  back a ``ParsedFile`` (metadata: kilobytes). Where it writes (``Outbox``):

  - a warehouse on a file system: temp data files under the warehouse's ``tmp/``, which
    must be on storage that every worker sees at the same path (checked before the
    first task); the commit renames them into place;
  - a warehouse on object storage (``s3://``): nothing is shared but the bucket. The
    worker parses into a folder of its own, uploads the data files under their final,
    unique names (``data_path``, as a local ingest names them) and hands back where they
    are (``ParsedFile.placed``); this process commits them (catalog, then the conditional
    ``CURRENT`` swap, ``cclq.store.remote``) without moving a byte of them.

  Inputs: a path every worker sees, or an object: a trace given as ``s3://`` is listed
  (and copied, for planning) here, and each worker reads its files' objects itself,
  only if their ETag is still the one listed (``mirrored_sources``).

  A worker that dies takes its task with it and Dask runs the task again on another
  worker; what the dead attempt wrote is never committed (a snapshot names only the
  files of the result this process took, and names are unique per attempt): ``clean_tmp``
  sweeps a file system's ``tmp/`` at the end, and an object store's garbage collection
  (``collect_remote_garbage``) deletes the unnamed objects once they are older than its
  grace period. A file that was being parsed each time a worker died, twice or more,
  fails alone (``PARSER_DIED``); files that were only queued on a dying worker are run
  again. The markers that tell which were running live where the workers write
  (``tmp/``, or ``tmp/dask-<run>/`` in the bucket).
* **metrics**: this process opens its snapshot and checks the result cache as
  ``run_metric`` always does; a result that is not cached is computed by one task per
  group of traces. Each task opens the same snapshot by its id (this process holds it
  locked, so no ingest can collect it meanwhile) and runs ``run_metric`` over its
  traces; the parts are put together in the order one query gives
  (``combine_results``) and the whole is cached under the whole selection's key.

``--dask local`` (or ``local:N``) starts a ``LocalCluster`` of N worker processes
(default: one per CPU) with one thread each; anything else is a scheduler to join: an
address (``tcp://host:8786``) or a scheduler file (``dask scheduler --scheduler-file``,
what dask-jobqueue and dask-mpi write).
"""

from __future__ import annotations

import hashlib
import logging
import os
import queue
import re
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cclq.errors import CclqError, TraceFileError, UsageError
from cclq.formats.base import ReadOptions
from cclq.ingest.commit import COMMIT_INTERVAL_S
from cclq.ingest.parse import PARSER_DIED, FileTask, ParsedFile
from cclq.ingest.report import Reporter
from cclq.locations import PACKAGE_DIR, sql_root
from cclq.store.objects import ObjectStore, mirrored_sources
from cclq.store.remote import RemoteWarehouse
from cclq.store.warehouse import CURRENT, Warehouse, data_path
from cclq.version import __version__

if TYPE_CHECKING:  # imported for real only when a cluster is used
    from distributed import Client, Future


INSTALL_HINT = "pip install 'cclq[dask]' (in a checkout: pip install -e '.[dask]')"
# Deaths of workers that a task may be running at before the scheduler gives up on it
# (Dask's own default is 3). A cluster cclq starts gives up after two, as ``--jobs``
# does; a cluster it joins keeps its own setting.
LOCAL_ALLOWED_FAILURES = 1
# A file that Dask gave up on (KilledWorker) but that was not running at two deaths
# was a bystander (queued on the dying workers): it is submitted again, this often.
MAX_RESUBMITS = 3


# ---------------------------------------------------------------------- cluster
@dataclass(frozen=True)
class ClusterSpec:
    """What ``--dask`` names: a local cluster to start, or a scheduler to join."""

    text: str
    local_workers: int | None = None  # local[:N]
    address: str | None = None  # tcp://host:8786, host:8786, ...
    scheduler_file: str | None = None

    def __str__(self) -> str:
        return self.text


_ADDRESS = re.compile(r"[a-z][a-z0-9+.-]*://\S+|[^\s/:]+:\d+")


def parse_cluster(text: str) -> ClusterSpec:
    """``local``, ``local:N``, a scheduler address or a scheduler file; anything else is
    a usage error. Also checks that Dask is installed, so a run fails before it starts."""
    spec = text.strip()
    if spec == "local" or spec.startswith("local:"):
        count = spec.partition(":")[2]
        if not count:
            workers = os.cpu_count() or 1
        elif count.isdigit() and int(count) >= 1:
            workers = int(count)
        else:
            raise UsageError(f"--dask {text}: local:N wants a number of worker processes, 1 or more")
        cluster = ClusterSpec(text, local_workers=workers)
    elif _ADDRESS.fullmatch(spec):
        cluster = ClusterSpec(text, address=spec)
    elif Path(spec).expanduser().is_file():
        cluster = ClusterSpec(text, scheduler_file=str(Path(spec).expanduser()))
    else:
        raise UsageError(
            f"--dask {text}: not local[:N], a scheduler address (tcp://host:8786) or an existing scheduler file"
        )
    require_distributed()
    return cluster


def require_distributed() -> None:
    try:
        import distributed  # noqa: F401  (only whether it is installed)
    except ImportError as e:
        raise UsageError(
            f"--dask needs Dask's distributed scheduler, which is not installed ({e})", hint=INSTALL_HINT
        ) from e


@contextmanager
def dask_client(cluster: ClusterSpec) -> Iterator[Client]:
    """A client of the cluster; a local cluster lives as long as the block."""
    import dask
    from distributed import Client, LocalCluster

    if cluster.local_workers is not None:
        try:
            with dask.config.set({"distributed.scheduler.allowed-failures": LOCAL_ALLOWED_FAILURES}):
                # no dashboard; the scheduler's HTTP server (health checks) on any free port,
                # not 8787, which a second cclq or a user's own cluster may hold
                local = LocalCluster(
                    n_workers=cluster.local_workers,
                    threads_per_worker=1,
                    processes=True,
                    dashboard_address=None,
                    scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
                    silence_logs=logging.CRITICAL,
                )
        except Exception as e:
            raise CclqError(f"--dask {cluster}: could not start a local Dask cluster: {type(e).__name__}: {e}") from e
        with local, Client(local) as client:
            yield client
        return
    try:
        if cluster.scheduler_file is not None:
            client = Client(scheduler_file=cluster.scheduler_file)
        else:
            client = Client(cluster.address)
    except (OSError, TimeoutError, ValueError) as e:
        raise UsageError(
            f"--dask {cluster}: cannot reach the Dask scheduler: {e}",
            hint="start it first (dask scheduler, or a dask-jobqueue cluster), and pass its address or scheduler file",
        ) from e
    with client:
        _wait_for_a_worker(client, cluster)
        yield client


def _wait_for_a_worker(client: Client, cluster: ClusterSpec) -> None:
    """Tasks sent to a scheduler without workers would wait silently (a batch job that
    has not started yet): say so once, then wait."""
    if client.scheduler_info(n_workers=1).get("workers"):
        return
    print(f"cclq: note: waiting for a Dask worker to join {cluster} (Ctrl-C stops)", file=sys.stderr)
    client.wait_for_workers(1)


def worker_threads(client: Client) -> int:
    workers = client.scheduler_info(n_workers=-1).get("workers", {})
    return max(1, sum(w.get("nthreads", 1) for w in workers.values()))


@lru_cache(maxsize=1)
def code_content_digest() -> str:
    """A digest of this cclq's Python and SQL files: a worker that runs other code (an
    older install on the cluster) would parse or compute differently."""
    h = hashlib.blake2b(__version__.encode(), digest_size=12)
    for root, pattern in ((PACKAGE_DIR, "*.py"), (sql_root(), "*.sql")):
        for path in sorted(root.rglob(pattern)):
            h.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def _file_signature(path: str) -> str | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return f"{st.st_size}:{st.st_mtime_ns}"


def _worker_view(probe: str, writable: str | None) -> dict[str, Any]:
    """Runs on every worker (``Client.run``): what it sees of the warehouse, its code."""
    return {
        "fingerprint": code_content_digest(),
        "probe": _file_signature(probe),
        "writable": writable is None or os.access(writable, os.W_OK),
    }


def check_workers(client: Client, warehouse: Path | str, probe: Path | None, writable: Path | None = None) -> None:
    """Every worker runs this cclq and sees ``probe``, a file of the warehouse, as this
    process does (size and modification time agree), so the warehouse is on shared
    storage at the same path; ``writable`` must be writable there. A usage error names
    the first worker that does not. ``probe`` None: the code alone is checked (a
    warehouse on object storage, which each worker reads through its own copy)."""
    want = _file_signature(str(probe)) if probe is not None else None
    views = client.run(_worker_view, "" if probe is None else str(probe), None if writable is None else str(writable))
    for address, view in sorted(views.items()):
        if view["fingerprint"] != code_content_digest():
            raise UsageError(
                f"Dask worker {address} runs a different cclq than this process (cclq {__version__} here)",
                hint="install the same cclq (and sql/ files) in the workers' environment",
            )
        if probe is not None and view["probe"] != want:
            raise UsageError(
                f"Dask worker {address} does not see the warehouse at {warehouse} as this process does",
                hint="put the warehouse on storage that every worker mounts at the same path",
            )
        if not view["writable"]:
            raise UsageError(
                f"Dask worker {address} cannot write to {writable}",
                hint="the workers write parsed data to the warehouse's tmp/ folder",
            )


@lru_cache(maxsize=8)
def _store(url: str) -> ObjectStore:
    """One client per URL in a worker process (its connections are reused)."""
    return ObjectStore(url)


def _reach(url: str) -> str | None:
    """Runs on every worker: None if it can read the warehouse's object storage, else
    why not (S3's message: the URL and the error code, never a credential)."""
    try:
        _store(url).read(CURRENT)
    except Exception as e:  # noqa: BLE001 - any reason is reported, one line
        return str(e).splitlines()[0] if str(e) else type(e).__name__
    return None


def check_store(client: Client, url: str) -> None:
    """Every worker reaches the object storage at ``url`` with its own configuration (the
    standard AWS environment: credentials are never sent with the tasks)."""
    for address, problem in sorted(client.run(_reach, url).items()):
        if problem is not None:
            raise UsageError(
                f"Dask worker {address} cannot read {url}: {problem}",
                hint="give the workers the AWS configuration this process has (AWS_* variables, "
                "a profile, AWS_ENDPOINT_URL for an S3-compatible server)",
            )


def this_worker() -> str:
    try:
        from distributed import get_worker

        return get_worker().address
    except (ImportError, ValueError):
        return "?"


# ------------------------------------------------------------------------ ingest
def parse_on_dask(
    todo: list[FileTask], warehouse: Warehouse, dask: str, reporter: Reporter, options: ReadOptions | None = None
) -> Iterator[tuple[FileTask, ParsedFile | TraceFileError] | None]:
    """``cclq.ingest.run._run_parsers`` on a Dask cluster, with its contract: (task, result)
    in ``todo`` order, and None when ``COMMIT_INTERVAL_S`` passed without one (so that
    the committer can commit meanwhile). A file's bytes count on the progress bar when
    its result arrives. Closing the generator cancels the parses that have not ended.

    Its first item is a None as soon as the workers are checked, before any parse is
    submitted: the caller commits nothing before it (``cclq.ingest.run.ingest``), so an
    ingest refused because a worker cannot see the warehouse leaves it as it was."""
    if not todo:
        return
    cluster = parse_cluster(dask)
    tmp_dir = warehouse.tmp_dir.resolve()
    sources = {str(p): src for p, src in mirrored_sources([t.path for t in todo]).items()}
    with dask_client(cluster) as client:
        if isinstance(warehouse, RemoteWarehouse):
            check_workers(client, warehouse.url, None)
            check_store(client, warehouse.url)
            outbox = Outbox(str(tmp_dir), warehouse.url, uuid.uuid4().hex[:12])
        else:
            probe = tmp_dir / f"dask-probe-{uuid.uuid4().hex}"
            probe.write_text(uuid.uuid4().hex)
            try:
                check_workers(client, warehouse.root.resolve(), probe, writable=tmp_dir)
            finally:
                probe.unlink(missing_ok=True)
            outbox = Outbox(str(tmp_dir))
        yield None  # the workers are checked; nothing submitted yet
        parses = _DaskParses(client, todo, tmp_dir, reporter, options, outbox=outbox, sources=sources)
        try:
            for item in parses.results():
                if item is not None and isinstance(warehouse, RemoteWarehouse) and isinstance(item[1], ParsedFile):
                    warehouse.placed.update(item[1].placed.values())
                yield item
        finally:
            outbox.clear_markers()


@dataclass(frozen=True)
class Outbox:
    """Where the workers of one ingest write: the warehouse's ``tmp/`` on a file system
    they all see (``store_url`` None), or the warehouse's object storage, data files
    under their final names and the running markers under ``tmp/dask-<run>/``."""

    tmp_dir: str
    store_url: str | None = None
    run: str = ""

    @property
    def markers(self) -> ObjectStore:
        return _store(f"{self.store_url}/tmp/dask-{self.run}")

    def mark(self, file_id: str) -> str:
        """Leaves a marker for as long as the file is parsed; its name."""
        name = f"{file_id}.running.{uuid.uuid4().hex[:12]}"
        if self.store_url is None:
            (Path(self.tmp_dir) / name).touch()
        else:
            self.markers.put_bytes(name, b"")
        return name

    def unmark(self, name: str) -> None:
        if self.store_url is None:
            (Path(self.tmp_dir) / name).unlink(missing_ok=True)
        else:
            self.markers.delete([name])

    def count(self, file_id: str) -> int:
        """Markers left for the file: attempts whose worker died while parsing it."""
        if self.store_url is None:
            return len(list(Path(self.tmp_dir).glob(f"{file_id}.running.*")))
        return sum(1 for key in self.markers.list() if key.startswith(f"{file_id}.running."))

    def forget(self, file_id: str) -> None:
        """The file's result arrived: markers of dead attempts go (on object storage,
        all at once at the end: ``clear_markers``)."""
        if self.store_url is None:
            for marker in Path(self.tmp_dir).glob(f"{file_id}.running.*"):
                marker.unlink(missing_ok=True)

    def clear_markers(self) -> None:
        if self.store_url is not None:
            try:
                self.markers.delete(list(self.markers.list()))
            except CclqError:  # left for the garbage collection (``collect_remote_garbage``)
                pass


def _scratch() -> str:
    """A folder of this worker's own: in Dask's local directory of the worker (which
    Dask purges when a dead worker's successor starts), else the system's temp folder."""
    try:
        from distributed import get_worker

        base: str | None = get_worker().local_directory
    except (ImportError, ValueError, AttributeError):
        base = None
    return tempfile.mkdtemp(prefix="cclq-parse-", dir=base)


def parse_task(
    path: str,
    file_id: str,
    tmp_dir: str,
    trace: str,
    fingerprint: str,
    options: ReadOptions | None = None,
    source: tuple[str, str] | None = None,
    outbox: Outbox | None = None,
) -> ParsedFile | TraceFileError:
    """What a worker runs for one file: ``cclq.ingest.parse.parse_file``, with a marker
    for as long as it runs. ``source``: (URL, ETag) of the object the file copies, read
    by the worker itself; ``outbox``: where it writes (``Outbox``; default ``tmp_dir``)."""
    from cclq.ingest import parse

    outbox = outbox or Outbox(tmp_dir)
    if fingerprint != code_content_digest():
        return TraceFileError(
            path,
            f"not parsed: Dask worker {this_worker()} runs a different cclq than "
            "the ingest; install the same cclq on every worker",
        )
    if source is None and not os.path.lexists(path):
        return TraceFileError(
            path,
            f"cannot read on Dask worker {this_worker()}: no such file (inputs must "
            "be on storage that every worker sees at the same path, or on object storage)",
        )
    scratch = _scratch() if source is not None or outbox.store_url is not None else None
    try:
        local = path
        if source is not None:
            assert scratch is not None
            local = os.path.join(scratch, "input", os.path.basename(path))
            bucket, _, key = source[0].split("://", 1)[1].partition("/")
            try:  # one client per bucket, not per object: making one costs ~0.1 s of CPU
                _store(f"s3://{bucket}").fetch(key, Path(local), if_match=source[1])
            except CclqError as e:
                return TraceFileError(path, f"cannot read on Dask worker {this_worker()}: {e.message}")
        out_dir = tmp_dir if outbox.store_url is None else os.path.join(scratch or "", "out")
        os.makedirs(out_dir, exist_ok=True)
        try:
            marker = outbox.mark(file_id)
        except (OSError, CclqError) as e:
            where = outbox.tmp_dir if outbox.store_url is None else outbox.store_url
            return TraceFileError(path, f"Dask worker {this_worker()} cannot write to {where}: {_why(e)}")
        try:
            result = parse.parse_file(local, file_id, out_dir, trace, options or ReadOptions())
            if local != path:  # messages name the input as the client knows it
                result = _renamed(result, local, path)
            if outbox.store_url is not None and isinstance(result, ParsedFile):
                result = _upload(result, path, trace, file_id, outbox.store_url)
        finally:
            try:
                outbox.unmark(marker)
            except CclqError:
                pass  # a marker left behind: this file counts one death more, at worst
        return result
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


def _why(e: BaseException) -> str:
    return str(e.strerror or e) if isinstance(e, OSError) else e.message if isinstance(e, CclqError) else str(e)


def _renamed(result: ParsedFile | TraceFileError, local: str, path: str) -> ParsedFile | TraceFileError:
    """``result`` with the worker's copy's path replaced by the input's."""
    if isinstance(result, TraceFileError):
        return type(result)(path, result.problem.replace(local, path), result.detail)
    result.warnings = [w.replace(local, path) for w in result.warnings]
    return result


def _upload(parsed: ParsedFile, path: str, trace: str, file_id: str, url: str) -> ParsedFile | TraceFileError:
    """The parse's data files uploaded to the warehouse's object storage under fresh
    data-file names; ``parsed.placed`` says which name each got."""
    placed = {tmp: data_path(table, trace, file_id) for table, _rank, tmp, _rows in parsed.parts}
    try:
        _store(url).upload([(Path(tmp), rel) for tmp, rel in placed.items()])
    except CclqError as e:
        return TraceFileError(path, f"Dask worker {this_worker()} could not write its data: {e.message}")
    parsed.placed = placed
    return parsed


class _DaskParses:
    """The parses of one ingest on a cluster, and their results in task order."""

    def __init__(
        self,
        client: Client,
        todo: list[FileTask],
        tmp_dir: Path,
        reporter: Reporter,
        options: ReadOptions | None = None,
        outbox: Outbox | None = None,
        sources: dict[str, tuple[str, str]] | None = None,
    ) -> None:
        self.client = client
        self.options = options
        self.outbox = outbox or Outbox(str(tmp_dir))
        self.sources = sources or {}
        self.todo = todo
        self.tmp_dir = str(tmp_dir)
        self.reporter = reporter
        self.futures: dict[int, Future] = {}  # by index in todo: the attempt in flight
        self.finished: queue.SimpleQueue[tuple[int, Future]] = queue.SimpleQueue()
        self.resubmits: dict[int, int] = {}

    def submit(self, i: int) -> None:
        task = self.todo[i]
        future = self.client.submit(
            parse_task,
            str(task.path),
            task.file_id,
            self.tmp_dir,
            task.trace,
            code_content_digest(),
            self.options,
            self.sources.get(str(task.path)),
            self.outbox,
            key=f"cclq-parse-{task.file_id}-{uuid.uuid4().hex[:8]}",
            pure=False,
            priority=task.size,  # largest first, so no big file starts last
        )
        self.futures[i] = future
        future.add_done_callback(lambda f, i=i: self.finished.put((i, f)))

    def results(self) -> Iterator[tuple[FileTask, ParsedFile | TraceFileError] | None]:
        for i in range(len(self.todo)):
            self.submit(i)
        ready: dict[int, ParsedFile | TraceFileError] = {}
        next_out = 0
        last_yield = time.monotonic()
        try:
            while next_out < len(self.todo):
                try:
                    i, future = self.finished.get(timeout=max(0.0, last_yield + COMMIT_INTERVAL_S - time.monotonic()))
                except queue.Empty:
                    last_yield = time.monotonic()
                    yield None
                    continue
                if self.futures.get(i) is not future:
                    continue  # an attempt that was replaced
                result = self.outcome(i, future)
                if result is None:
                    continue  # submitted again
                del self.futures[i]
                self.outbox.forget(self.todo[i].file_id)
                self.reporter.advance(self.todo[i].size)
                ready[i] = result
                while next_out in ready:
                    yield self.todo[next_out], ready.pop(next_out)
                    next_out += 1
                    last_yield = time.monotonic()
        finally:  # a stopped run (or an error): no new parses
            pending = [f for f in self.futures.values() if not f.done()]
            if pending:
                self.client.cancel(pending)

    def outcome(self, i: int, future: Future) -> ParsedFile | TraceFileError | None:
        """The file's result; None when it was submitted again."""
        from distributed import KilledWorker

        task = self.todo[i]
        try:
            return future.result()
        except KilledWorker:
            # Dask gives up on a task after a number of worker deaths while it was assigned
            # to them, running or only queued there. The markers left behind tell which.
            died = self.outbox.count(task.file_id)
            if died >= 2 or self.resubmits.get(i, 0) >= MAX_RESUBMITS:
                return TraceFileError(
                    str(task.path), f"{PARSER_DIED}; {max(died, 1)} Dask worker(s) died while parsing it"
                )
            self.resubmits[i] = self.resubmits.get(i, 0) + 1
            self.submit(i)
            return None
        except Exception as e:  # noqa: BLE001 - the task did not run to its end (the scheduler went away, ...)
            return TraceFileError(str(task.path), f"not parsed: {task_failure(e)}")


def task_failure(e: BaseException) -> str:
    """One line for a task that did not run to its end."""
    reason = getattr(e, "reason", None)  # FutureCancelledError: scheduler-connection-lost, ...
    if reason:
        return f"Dask cancelled the task ({reason})"
    first = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"the Dask task failed: {type(e).__name__}" + (f": {first}" if first else "")
