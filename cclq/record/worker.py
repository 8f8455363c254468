"""One rank: ``python -m cclq.record.worker RANK``, configurations read from stdin.

``cclq record`` starts one of these per rank (as torchrun would: one process per
rank) and hands every rank the same configurations one after another, as a line of
JSON each (the spec: the run, the world size, its scratch and trace folders). A
process serves configurations until its stdin ends, so torch, its profiler and a
CUDA context are set up once, not per configuration (that set-up costs seconds per
process); each configuration still gets a process group of its own (the ranks
meet through a file store in its scratch folder) and a profiler session of its own.
The rank's output goes to ``rank<r>.log`` in the configuration's scratch folder.
For each configuration the rank:

1. joins the process group (the implementation's backend; a compute-only run
   joins a gloo group for its barriers and to take the MAX of its times);
2. runs ``num_warmups`` untimed and ``num_iterations`` timed iterations under the
   PyTorch profiler, calling ``prof.step()`` after each, so every iteration is a
   ``ProfilerStep#N`` in the trace; the profiler records the timed iterations only
   (its schedule waits through the warm-ups, with one warm-up step of its own) and
   writes ``kineto_trace_<rank>.json``;
3. times each iteration the way DDLB does: ``cpu_clock`` = perf_counter around
   ``run()`` and a device synchronize (the barrier, when asked for, comes before the
   clock starts, but it is inside the profiler step); ``cuda_event`` = CUDA events
   around ``run()``;
4. takes each iteration's MAX over ranks, and runs one more iteration on the real
   inputs to validate it (outside the profiler);
5. writes its verdict to ``check-<rank>.json``; rank 0 also writes ``result.json``:
   the times and facts about the machine for the workload card;
6. destroys the process group, frees memory and touches ``ready-<rank>``: the launcher
   hands out the next configuration only to ranks that all got this far.

Any exception ends the process with ``error-<rank>.json`` (one line of reason) and
exit status 1; the launcher stops the other ranks, reports the reason and starts
fresh processes for the next configuration.
"""

from __future__ import annotations

import faulthandler
import gc
import json
import os
import platform
import socket
import sys
import time
import traceback
import warnings
from datetime import timedelta
from pathlib import Path
from typing import Any

# before torch: its import warns when NumPy is absent (cclq does not need NumPy), and
# torch 2.1x renames all_gather_into_tensor & co. with a FutureWarning per call
warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
warnings.filterwarnings("ignore", category=FutureWarning)

import torch  # noqa: E402 - this module runs only in the rank processes
import torch.distributed as dist  # noqa: E402
from torch.profiler import ProfilerActivity, profile, schedule  # noqa: E402

from cclq.record import CHECK_FILE, ERROR_FILE, READY_FILE, RESULT_FILE, TRACE_NAME  # noqa: E402
from cclq.record.config import Run  # noqa: E402
from cclq.record.primitives import Primitive, build  # noqa: E402


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def machine_facts(device: torch.device) -> dict[str, Any]:
    """What the workload card says about hardware and libraries (rank 0's view)."""
    facts: dict[str, Any] = {
        "hostname": socket.gethostname(),
        "torch": torch.__version__.split("+")[0],
        "torch_build": torch.__version__,
        "python": platform.python_version(),
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "cuda": torch.version.cuda,
        "gpu_name": None,
        "gpu_count": 0,
        "nccl": None,
    }
    if torch.cuda.is_available():
        facts["gpu_count"] = torch.cuda.device_count()
        facts["gpu_name"] = torch.cuda.get_device_name(device if device.type == "cuda" else 0)
        try:
            version = torch.cuda.nccl.version()  # (2, 21, 5); an int such as 2708 in old torch
            facts["nccl"] = ".".join(map(str, version)) if isinstance(version, tuple) else str(version)
        except Exception:  # noqa: BLE001 - a build without NCCL (torch raises no one type for it)
            facts["nccl"] = None
    return facts


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def run_rank(spec: dict[str, Any], rank: int) -> None:
    run = Run.from_json(spec["run"])
    world_size = int(spec["world_size"])
    scratch = Path(spec["scratch"])
    torch.set_num_threads(int(spec["threads"]))

    device = torch.device("cpu")
    if run.device == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError("device cuda asked for, but CUDA is not available")
        device = torch.device("cuda", rank % torch.cuda.device_count())
        torch.cuda.set_device(device)
    if run.time_measurement_backend == "cuda_event" and device.type != "cuda":
        raise RuntimeError("time_measurement_backend cuda_event needs a CUDA device")

    backend = run.backend or "gloo"
    dist.init_process_group(
        backend,
        init_method=(scratch / "rendezvous").as_uri(),
        rank=rank,
        world_size=world_size,
        timeout=timedelta(seconds=float(spec["timeout_s"])),
        device_id=device if backend == "nccl" else None,
    )
    try:
        prim = build(run, rank, world_size, device)
        _measure(prim, spec, rank, device, scratch)
        del prim
    finally:
        dist.destroy_process_group()


def _barrier(device: torch.device) -> None:
    if device.type == "cuda" and dist.get_backend() == "nccl":
        dist.barrier(device_ids=[device.index])
    else:
        dist.barrier()
    _sync(device)


def _measure(prim: Primitive, spec: dict[str, Any], rank: int, device: torch.device, scratch: Path) -> None:
    run = prim.run_spec
    warmups, iterations = run.num_warmups, run.num_iterations
    trace_path = Path(spec["trace_dir"]) / TRACE_NAME.format(rank=rank)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    # wait through the benchmark's warm-ups but the last, which warms the profiler up
    sched = schedule(wait=max(warmups - 1, 0), warmup=min(warmups, 1), active=iterations, repeat=1)
    times_ms: list[float] = []
    events: list[tuple[torch.cuda.Event, torch.cuda.Event]] = []
    with profile(
        activities=activities,
        schedule=sched,
        record_shapes=True,
        on_trace_ready=lambda p: p.export_chrome_trace(str(trace_path)),
    ) as prof:
        for i in range(warmups + iterations):
            if run.barrier_at_each_iteration:
                _barrier(device)
            if run.time_measurement_backend == "cuda_event":
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                prim.run()
                end.record()
                if i >= warmups:
                    events.append((start, end))
            else:
                t0 = time.perf_counter()
                prim.run()
                _sync(device)
                if i >= warmups:
                    times_ms.append((time.perf_counter() - t0) * 1e3)
            prof.step()
    _sync(device)
    if events:
        times_ms = [s.elapsed_time(e) for s, e in events]
    if not trace_path.is_file():
        raise RuntimeError(f"the profiler wrote no trace to {trace_path}")

    # the slowest rank decides each iteration's time (DDLB's all-reduce MAX)
    comm_device = device if dist.get_backend() == "nccl" else torch.device("cpu")
    times = torch.tensor(times_ms, dtype=torch.float64, device=comm_device)
    dist.all_reduce(times, op=dist.ReduceOp.MAX)

    problem: str | None = None
    if run.validate:
        prim.prepare_validation()
        out = prim.run()
        _sync(device)
        problem = prim.check(out)
    # every rank's verdict, for the launcher (all ranks share this host's scratch folder)
    _write_json(scratch / CHECK_FILE.format(rank=rank), {"rank": rank, "problem": problem})
    if rank == 0:
        _write_json(scratch / RESULT_FILE, {"times_ms": times.cpu().tolist(), "facts": machine_facts(device)})


def _write_json(path: Path, doc: dict[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc))
    tmp.replace(path)


def _reason(e: BaseException) -> str:
    """One line: the exception's type and first line; memory exhaustion said plainly."""
    lines = str(e).strip().splitlines()
    text = f"{type(e).__name__}: {lines[0] if lines else ''}".rstrip(": ")
    if isinstance(e, torch.OutOfMemoryError) or "can't allocate memory" in text or "out of memory" in text.lower():
        return "out of memory: " + text
    return text


def _log_to(path: Path) -> None:
    """Sends this process's stdout and stderr (native code's too) to ``path``."""
    sys.stdout.flush()
    sys.stderr.flush()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def main(argv: list[str]) -> int:
    rank = int(argv[0])
    faulthandler.enable()  # a crash in native code still leaves the Python stacks in the log
    for line in sys.stdin:
        if not line.strip():
            continue
        spec = json.loads(line)
        scratch = Path(spec["scratch"])
        _log_to(scratch / f"rank{rank}.log")
        try:
            run_rank(spec, rank)
        except BaseException as e:  # noqa: BLE001 - every failure becomes the rank's reason
            traceback.print_exc()
            _write_json(scratch / ERROR_FILE.format(rank=rank), {"rank": rank, "reason": _reason(e)})
            return 1
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        (scratch / READY_FILE.format(rank=rank)).touch()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
