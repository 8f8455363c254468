"""The child process that runs a batch of ``cclq serve``'s upload jobs
(``python -m cclq.present.serve.worker SPEC.json``; started by ``JobQueue``).

It ingests the batch's jobs one after another, then computes their metrics in one batch
(each job alone if that fails), each job settled in its own ``job.json`` (the server
reads nothing else from it): "processing" with a phase (ingest, metrics; ``shared``
while computed with others) and the time it began, which is how the server tells which
job a crash or a hang belongs to (a crash in the shared step: each of its jobs runs
again alone); "error" with the reason when a job fails; "computed" once its
results.json is written.
Then the board is brought up to date once for the batch (``SPEC.board`` says since
when, for the server's timeout) and the computed jobs become "done". Without
PR_SET_PDEATHSIG (not Linux) it stops at the next job if the server is gone.
"""

from __future__ import annotations

import fcntl
import os
import sys
import time
import traceback
from collections.abc import Callable
from functools import partial
from pathlib import Path

from cclq.errors import CclqError
from cclq.present.serve.jobs import (
    Job,
    JobSettings,
    child_setup,
    compute_results,
    ingest_job,
    read_json,
    update_board,
    write_json,
)
from cclq.store.warehouse import Warehouse


def main(argv: list[str]) -> int:
    spec_path = Path(argv[0])
    spec = read_json(spec_path)
    if not isinstance(spec, dict):
        print(f"cclq serve worker: {spec_path}: cannot read the batch", file=sys.stderr)
        return 2
    if not child_setup(int(spec.get("server_pid") or os.getppid()), spec.get("memory_mb")):
        return 1  # the server is gone already
    settings = JobSettings(
        Warehouse(Path(spec["warehouse"])),
        Path(spec["board_dir"]) if spec.get("board_dir") else None,
        Path(spec["config_path"]) if spec.get("config_path") else None,
    )
    parent = os.getppid()
    ingested: list[Job] = []
    for folder in spec["jobs"]:
        if os.getppid() != parent:
            return 1  # the server is gone: the jobs left queued run when it starts again
        job = Job.load(Path(folder))
        if job is None or job.status != "queued":
            continue
        job.status, job.phase, job.started, job.pid = "processing", "ingest", time.time(), os.getpid()
        job.save()
        if _attempt(job, partial(ingest_job, job, settings)):
            ingested.append(job)
    computed: list[Job] = []
    if len(ingested) > 1:  # one batch of metrics for them all; if it fails, each alone
        started = time.time()
        for job in ingested:
            job.phase, job.started, job.shared = "metrics", started, True
            job.save()
        try:
            compute_results(ingested, settings)
            computed = ingested
        except Exception:  # noqa: BLE001 - each job again on its own, which says why
            pass
        for job in ingested:
            job.shared = False
    for job in ingested:
        if job in computed:
            job.phase = "computed"
            job.save()
            continue
        job.phase, job.started = "metrics", time.time()
        job.save()
        if _attempt(job, partial(compute_results, [job], settings)):
            job.phase = "computed"
            job.save()
            computed.append(job)
    line = ""
    if computed and settings.board_dir is not None:
        for job in computed:
            job.phase = "board"
            job.save()
        write_json(spec_path.with_suffix(".board"), {"started": time.time()})
        with open(spec_path.parent / ".board.lock", "a+b") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # another worker's batch may be updating it
            try:
                line = update_board(settings)
            except CclqError as e:
                line = f"the board update failed: {e.message}; the next job brings it up to date"
            except Exception as e:  # noqa: BLE001 - the jobs' results stand; the log says what failed
                line = f"the board update failed: {type(e).__name__}: {e}; the next job brings it up to date"
    for job in computed:
        job.status, job.phase, job.pid = "done", None, None
        if line:
            job.log.append(line)
        job.save()
    return 0


def _attempt(job: Job, step: Callable[[], None]) -> bool:
    """Runs one step of a job; a failure settles the job as an error with its reason."""
    try:
        step()
        return True
    except CclqError as e:
        job.status, job.error, job.phase = "error", e.message, None
    except Exception as e:  # noqa: BLE001 - one bad job fails alone; it says why
        job.status, job.error, job.phase = "error", f"{type(e).__name__}: {e}", None
        job.log.append(traceback.format_exc(limit=5))
    job.save()
    return False


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
