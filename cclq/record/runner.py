"""Runs every configuration of a config: one process per rank, one workload folder each.

The runner starts ``--nproc`` rank processes (``python -m cclq.record.worker RANK``,
one per rank as torchrun does) and hands them the configurations one after another:
each gets a scratch folder (``OUT_DIR/.record-<name>``, hidden, so ``cclq ingest``
passes it by) where its ranks meet through a file store and leave their traces,
verdicts and logs. When every rank has written its results, the runner adds the
results CSV, the workload card and ``record.yaml`` to the traces and renames the
folder into place (replacing an earlier recording of the same configuration); the
output folder's ``ddlb_results.csv`` is rebuilt from every workload in it at the end.
When a rank fails, times out or dies, the configuration is reported with the first
failing rank's reason, its logs are kept under ``OUT_DIR/.record-failed/<name>/``,
the ranks are stopped (the others may wait in a collective forever) and fresh ones
take the next configuration. Nothing half-written is left where ingest would read it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

import yaml

from cclq.errors import UsageError
from cclq.record import CHECK_FILE, ERROR_FILE, READY_FILE, RESULT_FILE, results
from cclq.record.card import build_card, write_card
from cclq.record.config import Run, expand, load_config, workload_name
from cclq.version import __version__

RECORD_FILE = "record.yaml"
FAILED_DIR = ".record-failed"
INSTALL_HINT = "pip install -e '.[record]' (or: pip install torch)"
# A rank that fails first leaves the others waiting in a collective; they get this
# long to notice and fail on their own (a clearer log) before they are stopped.
_GRACE_S = 3.0


@dataclass
class ConfigOutcome:
    """What became of one configuration."""

    run: Run
    name: str
    status: str  # "recorded" | "failed"
    folder: Path | None = None
    row: dict[str, Any] | None = None
    reason: str | None = None  # failed: why; recorded but invalid: what the validation found
    seconds: float = 0.0


class RecordReporter(Protocol):
    def start(self, total: int) -> None: ...
    def run_started(self, name: str) -> None: ...
    def run_done(self, outcome: ConfigOutcome) -> None: ...
    def finish(self) -> None: ...


class _Silent:
    def start(self, total: int) -> None: ...
    def run_started(self, name: str) -> None: ...
    def run_done(self, outcome: ConfigOutcome) -> None: ...
    def finish(self) -> None: ...


def require_torch() -> None:
    """Imports torch, or says how to install it."""
    if importlib.util.find_spec("torch") is None:
        raise UsageError("cclq record needs PyTorch, which is not installed", hint=INSTALL_HINT)
    with warnings.catch_warnings():
        # torch warns at import when NumPy is absent; cclq does not need NumPy
        warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
        import torch  # noqa: F401


def _loopback_interface() -> str | None:
    try:
        names = [name for _, name in socket.if_nameindex()]
    except OSError:
        return None
    return next((n for n in names if n.startswith("lo")), None)


def machine_problem(run: Run, world_size: int) -> str | None:
    """Why this machine cannot run the configuration (checked before starting ranks)."""
    import torch
    import torch.distributed as dist

    cuda = torch.cuda.is_available()
    backend = run.backend
    if backend is not None:
        available = {
            "gloo": dist.is_gloo_available,
            "nccl": dist.is_nccl_available,
            "mpi": dist.is_mpi_available,
            "ucc": getattr(dist, "is_ucc_available", lambda: False),
        }
        if backend == "nccl" and not cuda:
            return "backend nccl needs CUDA, and CUDA is not available here"
        if not available[backend]():
            return f"backend {backend} is not available in this PyTorch build"
        if backend == "nccl" and torch.cuda.device_count() < world_size:
            return f"backend nccl needs one GPU per rank: {world_size} ranks, {torch.cuda.device_count()} GPUs"
    if run.device == "cuda" and not cuda:
        return "device cuda asked for, but CUDA is not available here"
    if run.time_measurement_backend == "cuda_event" and run.device != "cuda":
        return "time_measurement_backend cuda_event needs device cuda"
    return None


def record(
    config: Path, out_dir: Path, nproc: int, timeout_s: float = 600.0, reporter: RecordReporter | None = None
) -> list[ConfigOutcome]:
    """Records every configuration of ``config`` into ``out_dir``; never raises for a
    configuration that fails (its ConfigOutcome says why)."""
    require_torch()
    import torch

    if nproc < 1:
        raise UsageError("--nproc must be at least 1")
    runs = expand(config, nproc, cuda=torch.cuda.is_available())
    out_dir.mkdir(parents=True, exist_ok=True)
    reporter = reporter or _Silent()
    names = _unique_names(runs, nproc)
    outcomes: list[ConfigOutcome] = []
    ranks: RankProcesses | None = None
    reporter.start(len(runs))
    finished = False
    try:
        for run, name in zip(runs, names):
            reporter.run_started(name)
            problem = run.problem or machine_problem(run, nproc)
            if problem:
                outcome = ConfigOutcome(run, name, "failed", reason=problem)
            else:
                if ranks is None:
                    ranks = RankProcesses(nproc, out_dir)
                outcome = _record_one(ranks, run, name, out_dir, timeout_s, config)
                if outcome.status == "failed" or not ranks.healthy:  # they may hang in a collective
                    ranks.stop(kill=True)
                    ranks = None
            outcomes.append(outcome)
            reporter.run_done(outcome)
        finished = True
    finally:
        if ranks is not None:
            ranks.stop(kill=not finished)  # interrupted: stop the ranks now
        results.collect(out_dir)
        reporter.finish()
    csv_path = ddlb_output_csv(config)
    if csv_path is not None:
        results.append_rows(csv_path, [o.row for o in outcomes if o.row is not None])
    return outcomes


def ddlb_output_csv(config: Path) -> Path | None:
    """DDLB's ``output_csv`` (``{timestamp}`` replaced, relative to the working
    directory as DDLB has it), where the run's rows are also appended; None when the
    config names none."""
    target = load_config(config).get("output_csv")
    if not target or not str(target).strip():
        return None
    return Path(str(target).replace("{timestamp}", datetime.now().strftime("%Y%m%d_%H%M%S")))


def _unique_names(runs: list[Run], world_size: int) -> list[str]:
    names: list[str] = []
    seen: dict[str, int] = {}
    for run in runs:
        name = workload_name(run, world_size)
        seen[name] = seen.get(name, 0) + 1
        names.append(name if seen[name] == 1 else f"{name}-{seen[name]}")
    return names


class RankProcesses:
    """``nproc`` rank processes (``python -m cclq.record.worker RANK``) that run the
    configurations written to their stdin, one after another."""

    def __init__(self, nproc: int, out_dir: Path) -> None:
        self.threads = max(1, (os.cpu_count() or 1) // nproc)
        self.healthy = True  # False: a rank died or stalled between configurations
        env = {**os.environ, "OMP_NUM_THREADS": str(self.threads), "PYTHONUNBUFFERED": "1"}
        loopback = _loopback_interface()
        if loopback and "GLOO_SOCKET_IFNAME" not in env:
            env["GLOO_SOCKET_IFNAME"] = loopback  # every rank is on this host
        self.procs: list[subprocess.Popen[bytes]] = []
        # what a rank prints before its first configuration (an import error ...)
        self.boot_logs = [tempfile.TemporaryFile() for _ in range(nproc)]
        for rank in range(nproc):
            self.procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", "cclq.record.worker", str(rank)],
                    stdin=subprocess.PIPE,
                    stdout=self.boot_logs[rank],
                    stderr=subprocess.STDOUT,
                    env=env,
                    cwd=out_dir,
                    start_new_session=True,  # its own process group: stopped with its children
                )
            )

    def submit(self, spec: dict[str, Any]) -> None:
        line = (json.dumps(spec) + "\n").encode()
        for p in self.procs:
            try:
                assert p.stdin is not None
                p.stdin.write(line)
                p.stdin.flush()
            except BrokenPipeError:  # it died; wait() reports it
                pass

    def codes(self) -> list[int | None]:
        return [p.poll() for p in self.procs]

    def stop(self, kill: bool = False) -> None:
        """Ends the processes: closing stdin lets them finish; ``kill`` stops them now."""
        for p in self.procs:
            if p.stdin is not None and not p.stdin.closed:
                try:
                    p.stdin.close()
                except BrokenPipeError:
                    pass
        deadline = time.monotonic() + (0 if kill else 10)
        for p in self.procs:
            try:
                p.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _kill(p)
        for log in self.boot_logs:
            log.close()

    def boot_log_tail(self, rank: int) -> str:
        log = self.boot_logs[rank]
        log.seek(0)
        lines = [ln for ln in log.read().decode(errors="replace").splitlines() if ln.strip()]
        return lines[-1].strip() if lines else "no output"


def _kill(p: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    p.wait()


def _record_one(
    ranks: RankProcesses, run: Run, name: str, out_dir: Path, timeout_s: float, config: Path
) -> ConfigOutcome:
    started = time.monotonic()
    nproc = len(ranks.procs)
    scratch = out_dir / f".record-{name}"
    shutil.rmtree(scratch, ignore_errors=True)
    workload = scratch / name
    workload.mkdir(parents=True)
    spec = {
        "run": run.to_json(),
        "world_size": nproc,
        "scratch": str(scratch.resolve()),
        "trace_dir": str(workload.resolve()),
        "threads": ranks.threads,
        "timeout_s": timeout_s,
    }
    try:
        ranks.submit(spec)
        reason = _wait(ranks, scratch, timeout_s)
        if reason is None:
            _wait_ready(ranks, scratch)
            try:
                outcome = _finish(run, name, scratch, workload, out_dir, nproc, config)
            except OSError as e:  # a full disk, a folder that cannot be replaced
                outcome = ConfigOutcome(
                    run, name, "failed", reason=f"cannot write {e.filename or out_dir}: {e.strerror or e}"
                )
        else:
            outcome = ConfigOutcome(run, name, "failed", reason=reason)
            _keep_logs(scratch, out_dir / FAILED_DIR / name)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    outcome.seconds = time.monotonic() - started
    return outcome


def _wait(ranks: RankProcesses, scratch: Path, timeout_s: float) -> str | None:
    """Waits until every rank has finished the configuration (None) or one failed
    (the reason: the first rank to fail, as the others then fail because of it)."""
    nproc = len(ranks.procs)
    deadline = time.monotonic() + timeout_s
    grace_end: float | None = None
    while True:
        done = all((scratch / CHECK_FILE.format(rank=r)).is_file() for r in range(nproc))
        if done and (scratch / RESULT_FILE).is_file():
            return None
        failed = [r for r, code in enumerate(ranks.codes()) if code is not None]
        if failed:
            if grace_end is None:
                grace_end = time.monotonic() + _GRACE_S
            if len(failed) == nproc or time.monotonic() > grace_end:
                return _failure_reason(ranks, scratch)
        if time.monotonic() > deadline:
            return f"timed out after {timeout_s:g} s (a rank hung; see the logs)"
        time.sleep(0.02)


def _wait_ready(ranks: RankProcesses, scratch: Path, limit_s: float = 60.0) -> None:
    """After a configuration's results are in, waits until every rank has torn it
    down (its process group destroyed). A rank that dies or stalls there leaves the
    results standing, but the processes are not trusted with the next configuration."""
    deadline = time.monotonic() + limit_s
    while not all((scratch / READY_FILE.format(rank=r)).is_file() for r in range(len(ranks.procs))):
        if any(code is not None for code in ranks.codes()) or time.monotonic() > deadline:
            ranks.healthy = False
            return
        time.sleep(0.02)


def _failure_reason(ranks: RankProcesses, scratch: Path) -> str:
    errors = sorted(scratch.glob(ERROR_FILE.format(rank="*")), key=lambda p: p.stat().st_mtime_ns)
    if errors:
        first = json.loads(errors[0].read_text())
        return f"rank {first['rank']}: {first['reason']}"
    for rank, code in enumerate(ranks.codes()):
        if code is not None and code < 0:
            return f"rank {rank} was killed by {signal.Signals(-code).name} (out of memory?)"
        if code is not None:
            log = scratch / f"rank{rank}.log"
            tail = _last_line(log) if log.is_file() else ranks.boot_log_tail(rank)
            return f"rank {rank} exited with status {code}: {tail}"
    return "a rank failed"


def _last_line(log: Path) -> str:
    try:
        lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return "no log"
    return lines[-1].strip() if lines else "no output"


def _keep_logs(scratch: Path, target: Path) -> None:
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True, exist_ok=True)
    for log in scratch.glob("*.log"):
        shutil.copy2(log, target / log.name)


def _finish(
    run: Run, name: str, scratch: Path, workload: Path, out_dir: Path, nproc: int, config: Path
) -> ConfigOutcome:
    """Adds the CSV, the card and record.yaml to the traces; moves the folder into place."""
    result = json.loads((scratch / RESULT_FILE).read_text())
    facts = result["facts"]
    checks = [json.loads((scratch / CHECK_FILE.format(rank=r)).read_text()) for r in range(nproc)]
    invalid = "; ".join(f"rank {c['rank']}: {c['problem']}" for c in checks if c["problem"]) or None
    valid = invalid is None if run.validate else None
    row = results.result_row(run, nproc, result["times_ms"], facts["hostname"], valid)
    results.write_rows(workload / results.RESULTS_FILE, [row])
    write_card(workload, build_card(run, nproc, facts))
    record_doc = {
        "cclq_version": __version__,
        "config": str(config.resolve()),
        "impl_id": run.impl_id,
        "world_size": nproc,
        # this configuration alone, as a config `cclq record` (and DDLB) reads
        "benchmark": {
            "primitive": run.primitive,
            **run.sizes,
            "dtype": run.dtype,
            "validate": run.validate,
            "num_iterations": run.num_iterations,
            "num_warmups": run.num_warmups,
            "time_measurement_backend": run.time_measurement_backend,
            "barrier_at_each_iteration": run.barrier_at_each_iteration,
            "seed": run.seed,
            "implementations": {run.implementation: [run.options]},
        },
        "valid": valid,
        "invalid_reason": invalid,
        "times_ms": result["times_ms"],  # per timed iteration, MAX over ranks
        "machine": facts,
    }
    (workload / RECORD_FILE).write_text(yaml.safe_dump(record_doc, sort_keys=False))
    target = out_dir / name
    if target.exists():
        old = scratch / ".replaced"
        target.rename(old)
    workload.rename(target)
    shutil.rmtree(out_dir / FAILED_DIR / name, ignore_errors=True)
    return ConfigOutcome(run, name, "recorded", folder=target, row=row, reason=invalid)
