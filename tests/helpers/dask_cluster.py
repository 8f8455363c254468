"""A Dask cluster of separate processes for tests: ``dask scheduler`` and ``dask worker``
processes (as ``python -m distributed.cli...``) on a free loopback port, each worker in a
working directory of its own, stopped by the test. Imports distributed only inside
functions: the caller skips first (``pytest.importorskip``) when the dask extra is absent."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.helpers.s3 import free_port


@dataclass
class DaskProcesses:
    address: str  # tcp://127.0.0.1:PORT
    scheduler: subprocess.Popen[bytes]
    workers: list[subprocess.Popen[bytes]]
    homes: list[Path]  # each worker's working (and Dask local) directory
    logs: list[Path] = field(default_factory=list)

    def kill_worker_when(self, running: subprocess.Popen[str], busy: Callable[[Path], bool]) -> int | None:
        """While ``running`` runs, SIGKILLs the first worker whose home shows ``busy``
        (mid-task); its index, or None if the command ended before any did."""
        while running.poll() is None:
            for i, home in enumerate(self.homes):
                if self.workers[i].poll() is None and busy(home):
                    self.workers[i].send_signal(signal.SIGKILL)
                    self.workers[i].wait(timeout=10)
                    return i
            time.sleep(0.01)
        return None

    def log_tail(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}" for p in self.logs if p.exists())


def _start(args: list[str], cwd: Path, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "wb") as out:
        return subprocess.Popen([sys.executable, "-m", *args], cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)


@contextmanager
def dask_processes(
    tmp_path: Path, env: dict[str, str], workers: int = 2, worker_env: Callable[[Path], dict[str, str]] | None = None
) -> Iterator[DaskProcesses]:
    """A scheduler and ``workers`` worker processes (one thread each, no nanny: a killed
    worker stays dead), worker i in ``tmp_path/worker-i`` as its cwd, TMPDIR and Dask
    local directory, with ``env`` plus ``worker_env(home)``. All stopped at the end."""
    from distributed import Client

    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    sched_dir = tmp_path / "scheduler"
    sched_dir.mkdir(parents=True)
    logs = [tmp_path / "scheduler.log"]
    procs: list[subprocess.Popen[bytes]] = [
        _start(
            ["distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
            sched_dir,
            env,
            logs[0],
        )
    ]
    homes = []
    try:
        for i in range(workers):
            home = tmp_path / f"worker-{i}"
            home.mkdir()
            homes.append(home)
            wenv = {**env, "TMPDIR": str(home), **(worker_env(home) if worker_env else {})}
            logs.append(tmp_path / f"worker-{i}.log")
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
                    logs[-1],
                )
            )
        with Client(address, timeout=60) as client:
            client.wait_for_workers(workers, timeout=120)
        yield DaskProcesses(address, procs[0], procs[1:], homes, logs)
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                p.terminate()
        for p in procs:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
