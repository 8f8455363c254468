"""The upload jobs of ``cclq serve``: a queue, a fixed number of workers, and each
job's state in its own folder (``job.json``, written atomically), so a restarted server
still answers for it.

Each job runs in a child process (``python -m cclq.present.serve.worker``), never in
the server's: a crash (a segfault in a reader), an out-of-memory kill or a hang (the job
timeout) fails that job with its reason and the server goes on serving. The jobs waiting
when a worker is free go to one child together (a batch): one interpreter start and
one board update for them all, each job still committed, computed and answered on its
own; a job that brings its child down is failed alone and the batch's other jobs run
again in a new child. The child dies with the server (``PR_SET_PDEATHSIG`` on Linux).

A job ingests its workload folder into the server's warehouse (ingest takes the
warehouse's own lock: two children never commit at once), computes the workload's
metrics (CCL-Bench's process_upload runs every metric of its website config; here the
config's, or cclq's leaderboard metrics) over that workload alone, writes
``results.json`` in CCL-Bench's shape (``{"metrics": {name: value | null},
"metric_info": {...}}``, plus cclq's ``reasons``) and, once per batch, brings the board
up to date (only the workloads that changed are computed). A failed job changes nothing
that was there before: ingest commits a workload whole or not at all, and the board is
built in a new folder and swapped in.

On start (``JobQueue.recover``) the jobs a stopped server left are settled: "queued"
ones run, "processing" ones become errors ("the server stopped during this job; upload
again": what it committed, if anything, stays, and a new upload replaces it).
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from cclq.errors import CclqError
from cclq.store.warehouse import Warehouse

STOPPED = "the server stopped during this job; upload again"
FINAL = ("done", "error")


def write_json(path: Path, doc: Any) -> None:
    """Atomic: a reader sees the old file or the new one."""
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}.{threading.get_ident()}")
    tmp.write_text(json.dumps(doc, indent=1, default=str), encoding="utf-8")
    os.replace(tmp, path)


def read_json(path: Path) -> Any:
    """The document, or None if it is not there or cannot be read."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@dataclass
class Job:
    upload_id: str
    folder: Path  # the job folder: job.json, results.json, trace/<workload>/
    workload: Path  # the unpacked workload folder
    status: str = "queued"
    error: str | None = None
    log: list[str] = field(default_factory=list)
    submitted: str = field(default_factory=now)
    phase: str | None = None  # while processing: ingest, metrics, computed (waiting for the board), board
    started: float | None = None  # time.time() the job (or its phase) started in its process
    pid: int | None = None  # the process running it
    solo: bool = False  # run in a process of its own (its batch's process died while computing it with others)
    shared: bool = False  # its metrics are being computed with other jobs' in one batch
    trace: str | None = None  # once ingested: the trace its metrics are read from
    trace_types: list[str] = field(default_factory=list)
    model_phase: str | None = None

    def save(self) -> None:
        write_json(
            self.folder / "job.json",
            {
                "upload_id": self.upload_id,
                "status": self.status,
                "error": self.error,
                "log": self.log,
                "submitted": self.submitted,
                "workload": self.workload.name,
                "phase": self.phase,
                "started": self.started,
                "pid": self.pid,
                "solo": self.solo,
                "shared": self.shared,
            },
        )

    @classmethod
    def load(cls, folder: Path) -> Job | None:
        doc = read_json(folder / "job.json")
        if not isinstance(doc, dict) or not isinstance(doc.get("workload"), str) or "/" in doc["workload"]:
            return None
        return cls(
            doc.get("upload_id") or folder.name,
            folder,
            folder / "trace" / doc["workload"],
            doc.get("status") or "queued",
            doc.get("error"),
            list(doc.get("log") or []),
            doc.get("submitted") or now(),
            doc.get("phase"),
            doc.get("started"),
            doc.get("pid"),
            bool(doc.get("solo")),
            bool(doc.get("shared")),
        )


@dataclass
class JobSettings:
    warehouse: Warehouse
    board_dir: Path | None  # None: no board to rebuild (cclq serve --site)
    config_path: Path | None  # CCL-Bench's benchmark_config.json: its metric_info picks the metrics
    workers: int = 1
    queue_size: int = 64
    job_timeout: float = 3600.0  # seconds one job (or a batch's board update) may take
    job_memory_mb: int | None = None  # the address space of a job's process (RLIMIT_AS); None: no limit
    max_batch: int = 32  # jobs one child process runs
    batch_wait: float = 1.0  # seconds a free worker waits for more jobs after one arrives (while they keep coming)


def _died(rc: int) -> str:
    """Why a job's process ended without settling its job, in words."""
    if rc < 0:
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = f"signal {-rc}"
        if -rc == signal.SIGKILL:
            return f"the job's process was killed ({name}: out of memory, or stopped from outside)"
        return f"the job's process crashed ({name})"
    return f"the job's process exited with status {rc} before the job ended"


def child_setup(server_pid: int, memory_mb: int | None) -> bool:
    """First thing in a job's process: die with the server (PR_SET_PDEATHSIG, Linux), and
    the memory bound. Done there, not in a ``preexec_fn`` (the server has threads; code
    between fork and exec must not take their locks). False if the server is already gone."""
    import signal as signals

    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signals.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # not Linux: the worker checks its parent between jobs
    if memory_mb is not None:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (memory_mb << 20, memory_mb << 20))
    return os.getppid() == server_pid


class JobQueue:
    """``submit`` refuses when ``queue_size`` jobs wait (the server answers 503)."""

    def __init__(self, settings: JobSettings, state_dir: Path | None = None) -> None:
        self.settings = settings
        self.state_dir = state_dir  # where each batch's spec is written (the uploads folder)
        self.jobs: dict[str, Job] = {}
        self._queue: queue.Queue[Job | None] = queue.Queue()
        self._lock = threading.Lock()  # guards self.jobs and self._waiting
        self._waiting = 0
        self._children: set[subprocess.Popen[bytes]] = set()
        self._closing = False
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._work, name=f"cclq-serve-job-{i}", daemon=True)
            for i in range(max(1, settings.workers))
        ]
        for t in self._threads:
            t.start()

    def sweep_every(self, uploads: Path, keep_seconds: float) -> None:
        """Sweeps ``uploads`` now and then every ``keep_seconds``/4 (1 s to 1 h) in a thread."""
        interval = min(max(keep_seconds / 4, 1.0), 3600.0)

        def loop() -> None:
            while not self._closing:
                try:
                    sweep_uploads(uploads, keep_seconds)
                except OSError:
                    pass
                self._stop.wait(interval)

        threading.Thread(target=loop, name="cclq-serve-sweep", daemon=True).start()

    def recover(self, uploads: Path) -> list[Job]:
        """The jobs a stopped server left in ``uploads``: "queued" ones are queued again,
        "processing" ones fail (``STOPPED``). Returns the jobs queued."""
        queued: list[Job] = []
        for spec in uploads.glob(".batch-*"):  # a stopped server's batch specs
            spec.unlink(missing_ok=True)
        for folder in sorted(p for p in uploads.iterdir() if p.is_dir()) if uploads.is_dir() else []:
            job = Job.load(folder)
            if job is None or job.status in FINAL:
                continue
            if job.status == "processing":
                job.status, job.error, job.phase, job.pid = "error", STOPPED, None, None
                job.save()
                continue
            queued.append(job)
        queued.sort(key=lambda j: (j.submitted, j.upload_id))
        for job in queued:
            job.log.append("queued again after a server restart")
            self._enqueue(job)
        return queued

    def submit(self, job: Job) -> bool:
        with self._lock:
            if self._waiting >= self.settings.queue_size:
                return False
        self._enqueue(job)
        return True

    def _enqueue(self, job: Job) -> None:
        with self._lock:
            self.jobs[job.upload_id] = job
            self._waiting += 1
        job.save()
        self._queue.put(job)

    def get(self, upload_id: str) -> Job | None:
        with self._lock:
            return self.jobs.get(upload_id)

    def close(self) -> None:
        self._closing = True
        self._stop.set()
        for child in list(self._children):
            _kill(child)
        for _ in self._threads:
            self._queue.put(None)
        for t in self._threads:
            t.join(timeout=30)

    def _take_batch(self, first: Job) -> list[Job]:
        """``first`` and the jobs that arrive while it is taken: each arrival within
        ``batch_wait`` s of the last one (uploads a client sends one after another) joins,
        for at most 3 ``batch_wait`` in all; the batch then costs one process start and
        one board update."""
        batch = [first]
        with self._lock:
            self._waiting -= 1
        deadline = time.monotonic() + 3 * self.settings.batch_wait
        while len(batch) < self.settings.max_batch:
            wait = min(self.settings.batch_wait, deadline - time.monotonic())
            try:
                job = self._queue.get(timeout=wait) if wait > 0 else self._queue.get_nowait()
            except queue.Empty:
                break
            if job is None:
                self._queue.put(None)  # for this thread's next get: the queue is closing
                break
            batch.append(job)
            with self._lock:
                self._waiting -= 1
        return batch

    def _work(self) -> None:
        while True:
            job = self._queue.get()
            if job is None:
                return
            pending = self._take_batch(job)
            batch = pending
            while pending and not self._closing:
                solo = [j for j in pending if j.solo]
                run = solo[:1] or [j for j in pending if not j.solo]
                rest = [j for j in pending if j not in run]
                pending = self._run_batch(run) + rest
            with self._lock:
                for j in batch:
                    self.jobs.pop(j.upload_id, None)

    def _run_batch(self, batch: list[Job]) -> list[Job]:
        """Runs ``batch`` in a child process; returns the jobs to run again (those the
        child did not start, after a job brought it down), or [] once all are settled."""
        s = self.settings
        spec = {
            "warehouse": str(s.warehouse.root),
            "board_dir": str(s.board_dir) if s.board_dir else None,
            "config_path": str(s.config_path) if s.config_path else None,
            "server_pid": os.getpid(),
            "memory_mb": s.job_memory_mb,
            "jobs": [str(j.folder) for j in batch],
        }
        spec_dir = self.state_dir or batch[0].folder.parent
        spec_path = spec_dir / f".batch-{os.getpid()}-{threading.get_ident()}.json"
        write_json(spec_path, spec)
        log = open(batch[0].folder / "worker.log", "ab")
        try:
            child = subprocess.Popen(
                [sys.executable, "-m", "cclq.present.serve.worker", str(spec_path)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        finally:
            log.close()
        self._children.add(child)
        timed_out: Job | str | None = None
        try:
            while child.poll() is None:
                time.sleep(0.2)
                running = _running(batch, spec_path)
                if running is not None and time.time() - running[1] > s.job_timeout:
                    timed_out = running[0]
                    _kill(child)
                    break
            rc = child.wait()
        finally:
            self._children.discard(child)
            spec_path.unlink(missing_ok=True)
            spec_path.with_suffix(".board").unlink(missing_ok=True)
        return self._settle(batch, rc, timed_out)

    def _settle(self, batch: list[Job], rc: int, timed_out: Job | str | None) -> list[Job]:
        """After the child ended: its jobs as it left them; the one it died in fails with
        the reason, the ones it had not started run again."""
        again: list[Job] = []
        computed: list[Job] = []
        states = [Job.load(j.folder) or j for j in batch]
        if rc != 0 and not self._closing and all(j.status == "queued" for j in states):
            # the process died before it started any job (it could not start, or its
            # memory bound is below what importing cclq takes): running them again
            # would end the same way
            why = _died(rc) + _log_tail(batch[0].folder / "worker.log")
            for job in states:
                job.status, job.error = "error", why
                job.log.append(why)
                job.save()
            return []
        for job in batch:
            now_job = Job.load(job.folder) or job
            if now_job.status in FINAL or self._closing:
                continue
            if now_job.status == "queued":
                again.append(now_job)
            elif now_job.phase == "computed" or (now_job.phase == "board" and timed_out != now_job.upload_id):
                computed.append(now_job)
            elif now_job.shared and not now_job.solo:  # died computing several jobs' metrics: each again, alone
                now_job.status, now_job.phase, now_job.pid, now_job.solo, now_job.shared = (
                    "queued",
                    None,
                    None,
                    True,
                    False,
                )
                now_job.log.append(
                    f"{_died(rc) if timed_out is None else 'the batch ran past the job timeout'}"
                    " while computing this job with others; it runs again alone"
                )
                now_job.save()
                again.append(now_job)
            else:
                reason = (
                    f"the job ran longer than {self.settings.job_timeout:g} s (--job-timeout) and was stopped"
                    if isinstance(timed_out, Job) and timed_out.upload_id == now_job.upload_id
                    else _died(rc)
                )
                now_job.status, now_job.error, now_job.phase, now_job.pid = "error", reason, None, None
                now_job.log.append(reason)
                now_job.save()
        for job in computed:  # their results are in; the board was not brought up to date
            why = "took longer than the job timeout" if timed_out == "board" else _died(rc)
            job.status, job.phase, job.pid = "done", None, None
            job.log.append(f"the board update failed ({why}); the next job brings it up to date")
            job.save()
        return again


def _newest_mtime(folder: Path) -> float:
    newest = folder.stat().st_mtime
    for p in folder.iterdir():
        newest = max(newest, p.lstat().st_mtime)
        if p.name == "incoming" and p.is_dir() and not p.is_symlink():
            newest = max([newest, *(q.lstat().st_mtime for q in p.iterdir())])
    return newest


def sweep_uploads(uploads: Path, keep_seconds: float) -> int:
    """Removes the folders of finished jobs (done or error) last written more than
    ``keep_seconds`` ago: the uploaded files, the unpacked trace, results.json (its
    /api/results answer becomes 404; the workload stays in the warehouse and on the
    board). A folder with no job (an upload cut off, a server stopped mid-upload) goes
    after the same time and at least an hour. Returns how many went."""
    import shutil

    removed = 0
    cutoff = time.time() - keep_seconds
    for folder in sorted(uploads.iterdir()) if uploads.is_dir() else []:
        if not folder.is_dir() or folder.is_symlink() or folder.name.startswith("."):
            continue
        try:
            state = read_json(folder / "job.json")
            if isinstance(state, dict):
                if state.get("status") not in FINAL or (folder / "job.json").stat().st_mtime > cutoff:
                    continue
            elif _newest_mtime(folder) > min(cutoff, time.time() - 3600):
                continue
        except OSError:
            continue
        shutil.rmtree(folder, ignore_errors=True)
        removed += not folder.exists()
    return removed


def _running(batch: list[Job], spec_path: Path) -> tuple[Job | str, float] | None:
    """(the job the child is running, or "board", since when), from what it wrote."""
    board = read_json(spec_path.with_suffix(".board"))
    if isinstance(board, dict) and isinstance(board.get("started"), (int, float)):
        return "board", float(board["started"])
    for job in batch:
        doc = read_json(job.folder / "job.json")
        if (
            isinstance(doc, dict)
            and doc.get("status") == "processing"
            and doc.get("phase") != "computed"
            and isinstance(doc.get("started"), (int, float))
        ):
            return job, float(doc["started"])
    return None


def _log_tail(path: Path) -> str:
    """``: <the last line of the job process's output>``, or nothing."""
    try:
        lines = [ln for ln in path.read_text(encoding="utf-8", errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return f": {lines[-1].strip()[:300]}" if lines else ""


def _kill(child: subprocess.Popen[bytes]) -> None:
    """The child and every process it started (its own session)."""
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def job_metrics(settings: JobSettings, trace_types: list[str], phase: str | None) -> tuple[list[str], dict]:
    """(metric names, metric_info): the config's `auto` choice for the card when there
    is a config (all of its metric_info when the card names no trace types, as
    CCL-Bench's process_upload runs them all), else cclq's leaderboard metrics."""
    from cclq.present.board.build import board_specs, metric_info
    from cclq.present.board.config import CCLQ_TRACE_TYPES, auto_metrics, load_board_config

    if settings.config_path is not None:
        info = load_board_config(settings.config_path).metric_info
        names = auto_metrics(info, trace_types, phase) if trace_types else list(info)
        return names, {m: info[m] for m in names}
    info = metric_info(board_specs(), CCLQ_TRACE_TYPES)
    return list(info), info


def ingest_job(job: Job, settings: JobSettings) -> None:
    """Ingests the job's workload folder (one workload a job); sets ``job.trace`` and its
    card's trace types and phase."""
    from cclq.ingest.plan import plan_inputs, rename_workload
    from cclq.ingest.run import ingest
    from cclq.query.session import connect

    wh = settings.warehouse
    workloads = plan_inputs([job.workload])
    if len(workloads) != 1:
        raise CclqError(
            f"the upload holds {len(workloads)} workload folders "
            f"({', '.join(w.trace for w in workloads[:5])}); upload one workload folder a job"
        )
    (workload,) = workloads
    report = ingest([job.workload], wh, jobs=1)  # takes the warehouse's lock
    if report.traces.get(str(workload.root), workload.trace) != workload.trace:
        rename_workload(workload, report.traces[str(workload.root)])
    trace = workload.answer_trace()  # a folder of several runs: the one CCL-Bench's tools read
    if (note := workload.runs_note()) is not None:
        job.log.append(note)
    failed = [o.message for o in report.failed]
    job.log += [f"ingest: {len(report.outcomes)} file(s), {len(failed)} failed"] + failed
    con = connect(wh)
    try:
        row = con.execute("SELECT count(*) FROM files WHERE trace = ?", [trace]).fetchone()
        present = row[0] if row else 0
        card = con.execute("SELECT trace_types, phase FROM cards WHERE trace = ?", [trace]).fetchone()
    finally:
        con.close()
    if not present:
        raise CclqError("no trace file of the upload could be read: " + ("; ".join(failed) or "no trace files"))
    job.trace = trace
    job.trace_types = json.loads(card[0] or "[]") if card else []
    job.model_phase = card[1] if card else None


def compute_results(jobs: list[Job], settings: JobSettings) -> None:
    """The metrics of the jobs' workloads (each job: its config's choice, or cclq's
    leaderboard metrics), one batch over those workloads alone (shared views, cached
    results: the board's update then reads them from the cache), and each job's
    results.json."""
    from cclq.present.board.config import six_digits
    from cclq.query.metrics import run_metrics
    from cclq.query.outcomes import split_by_trace
    from cclq.query.registry import registry, resolve
    from cclq.query.session import connect

    chosen = {j.upload_id: job_metrics(settings, j.trace_types, j.model_phase) for j in jobs}
    names = sorted({n for ns, _ in chosen.values() for n in ns if n in registry()})
    traces = sorted({j.trace for j in jobs if j.trace is not None})
    con = connect(settings.warehouse, traces=traces, cache=True)
    try:
        outcomes = split_by_trace(run_metrics(con, [resolve(n) for n in names], {}, plan_first=True), traces)
    finally:
        con.close()
    for job in jobs:
        assert job.trace is not None
        job_names, info = chosen[job.upload_id]
        metrics: dict[str, float | None] = {}
        reasons: dict[str, str] = {}
        for name in job_names:
            outcome = outcomes[job.trace].get(name)
            if outcome is None:
                metrics[name], reasons[name] = None, f"unknown metric {name}"
                continue
            # with CCL-Bench's config, what its process_upload.py gets from tools/main.py
            # through the shim: the unit CCL-Bench's tool prints (percent where it does)
            value = outcome.value
            metrics[name] = six_digits(
                outcome.spec.ccl_bench_value(value) if settings.config_path is not None else value
            )
            if metrics[name] is None:
                reasons[name] = outcome.reason or "no value"
        write_json(
            job.folder / "results.json",
            {"metrics": metrics, "metric_info": info, "reasons": reasons, "trace": job.trace},
        )
        job.log.append(
            f"{sum(v is not None for v in metrics.values())}/{len(metrics)} metrics computed"
            + (f" (with {len(jobs) - 1} other upload(s))" if len(jobs) > 1 else "")
        )


def run_job(job: Job, settings: JobSettings) -> None:
    """One job alone: ingest, metrics, results.json (the board: ``update_board``)."""
    ingest_job(job, settings)
    compute_results([job], settings)


def update_board(settings: JobSettings) -> str:
    """Brings the board up to date (the workloads that changed are computed); a line for the log."""
    from cclq.present.board.build import build_board

    if settings.board_dir is None:
        return ""
    result = build_board(settings.warehouse, settings.board_dir)
    return f"board updated: {len(result.computed)} workload(s) computed, {result.reused} kept ({result.seconds:.1f} s)"
