"""Worker processes that never outlive the process that forked them.

Ingest parses and compaction re-encodes in forked processes while the parent holds the
warehouse lock. A worker must never outlive a killed parent while holding that lock, or
the next ingest waits forever: these helpers close the worker's copy of the lock's
descriptor and ask Linux to end the worker when its parent dies.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


def init_worker_process(lock_fd: int | None, parent_pid: int) -> None:
    """Runs first in every forked worker.

    The fork copied the descriptor that holds the lock, and a flock lasts until the last
    descriptor of its open file description is closed: closing this copy (never
    ``flock(LOCK_UN)``, which would unlock the parent too) leaves the lock to the parent
    alone. The worker is also sent SIGTERM when its parent dies, so no orphan keeps working.
    """
    if lock_fd is not None:
        try:
            os.close(lock_fd)
        except OSError:
            pass
    die_with_parent(parent_pid)


def die_with_parent(parent_pid: int) -> None:
    """Linux only: SIGTERM this process when the thread that forked it exits.

    The pools fork their workers from the thread running the job (ProcessPoolExecutor
    with fork starts every worker in ``submit``), which lives as long as the job.
    """
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
    except (OSError, AttributeError):  # no libc prctl: the closed lock fd still protects
        return
    if os.getppid() != parent_pid:  # the parent died before the request was made
        os._exit(1)
