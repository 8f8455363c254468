"""The upload jobs of ``cclq serve``: a bounded queue, a fixed number of workers, and
each job's state in its own folder (so a restarted server still answers for it).

A job ingests its workload folder into the server's warehouse, computes the metrics
(CCL-Bench's process_upload runs every metric of its website config; here the
config's, or cclq's leaderboard metrics), writes ``results.json`` in CCL-Bench's shape
(``{"metrics": {name: value | null}, "metric_info": {...}}``, plus cclq's ``reasons``)
and rebuilds the board. Warehouse writes (ingest, board) take one lock: two uploads
never commit at once, and the metrics run outside it. A failed job changes nothing
that was there before: ingest commits a workload whole or not at all, and the board
writes every file atomically.
"""

from __future__ import annotations

import json
import os
import queue
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from cclq.errors import CclqError
from cclq.store.warehouse import Warehouse


def write_json(path: Path, doc: Any) -> None:
    """Atomic: a reader sees the old file or the new one."""
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}.{threading.get_ident()}")
    tmp.write_text(json.dumps(doc, indent=1, default=str), encoding="utf-8")
    os.replace(tmp, path)


@dataclass
class Job:
    upload_id: str
    folder: Path  # the job folder: job.json, results.json, trace/<workload>/
    workload: Path  # the unpacked workload folder
    status: str = "queued"
    error: str | None = None
    log: list[str] = field(default_factory=list)
    submitted: str = field(default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds"))

    def save(self) -> None:
        write_json(self.folder / "job.json", {"upload_id": self.upload_id, "status": self.status,
                                              "error": self.error, "log": self.log, "submitted": self.submitted,
                                              "workload": self.workload.name})


@dataclass
class JobSettings:
    warehouse: Warehouse
    board_dir: Path | None  # None: no board to rebuild (cclq serve --site)
    config_path: Path | None  # CCL-Bench's benchmark_config.json: its metric_info picks the metrics
    workers: int = 1
    queue_size: int = 16


class JobQueue:
    """Bounded: ``submit`` refuses when ``queue_size`` jobs wait (the server answers 503)."""

    def __init__(self, settings: JobSettings, on_done: Callable[[Job], None] | None = None) -> None:
        self.settings = settings
        self.jobs: dict[str, Job] = {}
        self._queue: queue.Queue[Job | None] = queue.Queue(maxsize=settings.queue_size)
        self._lock = threading.Lock()  # guards self.jobs
        self._write_lock = threading.Lock()  # one warehouse writer at a time
        self._on_done = on_done
        self._threads = [threading.Thread(target=self._work, name=f"cclq-serve-job-{i}", daemon=True)
                         for i in range(max(1, settings.workers))]
        for t in self._threads:
            t.start()

    def submit(self, job: Job) -> bool:
        with self._lock:
            self.jobs[job.upload_id] = job
        job.save()
        try:
            self._queue.put_nowait(job)
        except queue.Full:
            with self._lock:
                del self.jobs[job.upload_id]
            return False
        return True

    def get(self, upload_id: str) -> Job | None:
        with self._lock:
            return self.jobs.get(upload_id)

    def close(self) -> None:
        for _ in self._threads:
            self._queue.put(None)
        for t in self._threads:
            t.join(timeout=30)

    def _work(self) -> None:
        while True:
            job = self._queue.get()
            if job is None:
                return
            job.status = "processing"
            job.save()
            try:
                run_job(job, self.settings, self._write_lock)
                job.status = "done"
            except CclqError as e:
                job.status, job.error = "error", e.message
            except Exception as e:  # noqa: BLE001 - a worker must outlive one bad job; the job says why
                job.status, job.error = "error", f"{type(e).__name__}: {e}"
                job.log.append(traceback.format_exc(limit=5))
            job.save()
            if self._on_done is not None:
                self._on_done(job)


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


def run_job(job: Job, settings: JobSettings, write_lock: threading.Lock) -> None:
    """Ingest, metrics, results.json, board."""
    from cclq.ingest.plan import plan_inputs, rename_workload
    from cclq.ingest.run import ingest
    from cclq.present.board.build import build_board
    from cclq.present.board.config import six_digits
    from cclq.query.metrics import run_metric, summarize_rows
    from cclq.query.registry import registry, resolve
    from cclq.query.session import connect

    wh = settings.warehouse
    start = time.perf_counter()
    workloads = plan_inputs([job.workload])
    if len(workloads) != 1:
        raise CclqError(f"the upload holds {len(workloads)} workload folders "
                        f"({', '.join(w.trace for w in workloads[:5])}); upload one workload folder a job")
    (workload,) = workloads
    with write_lock:
        report = ingest([job.workload], wh, jobs=1)
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
    trace_types = json.loads(card[0] or "[]") if card else []
    names, info = job_metrics(settings, trace_types, card[1] if card else None)
    metrics: dict[str, float | None] = {}
    reasons: dict[str, str] = {}
    con = connect(wh, traces=[trace], cache=True)
    try:
        for name in names:
            if name not in registry():
                metrics[name], reasons[name] = None, f"unknown metric {name}"
                continue
            spec = resolve(name)
            try:
                value, reason = summarize_rows(spec, run_metric(con, spec, {}).to_pylist())
            except CclqError as e:
                value, reason = None, e.message
            # with CCL-Bench's config, what its process_upload.py gets from tools/main.py
            # through the shim: the unit CCL-Bench's tool prints (percent where it does)
            metrics[name] = six_digits(spec.ccl_bench_value(value) if settings.config_path is not None else value)
            if metrics[name] is None:
                reasons[name] = reason or "no value"
    finally:
        con.close()
    write_json(job.folder / "results.json", {"metrics": metrics, "metric_info": info, "reasons": reasons,
                                             "trace": trace})
    if settings.board_dir is not None:
        with write_lock:
            build_board(wh, settings.board_dir)
    job.log.append(f"{sum(v is not None for v in metrics.values())}/{len(metrics)} metrics computed"
                   + (", board rebuilt" if settings.board_dir is not None else "")
                   + f" ({time.perf_counter() - start:.1f} s)")
