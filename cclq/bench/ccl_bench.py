"""cclq against CCL-Bench's own tools, in one run, on folders both read.

``cclq bench --no-ingest --no-metrics --ccl-bench CHECKOUT``: a CCL-Bench checkout (its
``tools/``, ``website/`` and ``index.html``; HEAD 1d257f0 when last measured) and a Python
that runs its tools (``--ccl-bench-python``: pandas, numpy, PyYAML, matplotlib, and cclq
installed into it, as docs/ccl-bench.md step 1 says). Cases, each on a fresh copy of the
checkout's website and a fresh warehouse, one after the other:

* ``generate_data.py``, CCL-Bench's tools: its website generator as it is (a 32-thread pool
  of ``python tools/main.py`` processes, one per (folder, metric));
* ``generate_data.py``, through the shim: the same generator after ``cclq ccl-bench shim``
  (``python -m cclq.main`` per value, the warm daemon), a fresh warehouse; then again (the
  repeat, every later run of the generator);
* ``cclq board --config``: the same config in one process, into the website folder (only
  ``benchmark_data.json`` and ``data.js``: the folder is not cclq's);
* the loop of docs/ccl-bench.md: one call after the other, 3 metrics per folder, CCL-Bench's
  ``tools/main.py`` and ``python -m cclq.main`` (first loop on a fresh warehouse, and repeat).

The folders are ``prepare_folders``'s: workloads of ``../shared/traces`` and the bundled
``trace_collection`` laid out so that CCL-Bench's tools read them (JSON decompressed; a card
naming the trace types where there is none). The answers are compared: the shim's and the
board's ``benchmark_data.json`` cell for cell, and how many cells equal CCL-Bench's. Each
row has the 1-minute load average before and after it (2 cores shared: state it with the
figure).
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from cclq.bench.hta import DEFAULT_SHARED_TRACES
from cclq.errors import UsageError
from cclq.locations import PACKAGE_DIR

# Workloads both tools read: Kineto ranks (kineto_trace_N, rank samples, inference), an
# execution-trace pair, two Nsight exports far apart, a JAX host profile.
SHARED_FOLDERS = (
    "dlrm_param_8xV100",
    "hta_trace_filter_2rank",
    "tracelens_mi300_resnet_ddp",
    "tracelens_b200_vllm_tp8",
    "nsys_pipit_hpc",
    "xla_jax_cpu_4dev",
)
BUNDLED = PACKAGE_DIR.parent / "trace_collection" / "synthetic_mlp_dp4"
_CLI = "from cclq.cli.app import main; main()"
LOOP_METRICS = ("avg_step_time", "communication_fraction", "total_kernel_time")
# a card for a folder that has none, by what it holds (CCL-Bench's "auto" needs trace types)
_NSYS_CARD = "workload:\n  model:\n    phase: inference\nmetric_source:\n  traces: [nsys]\n"


def prepare_folders(out: Path, shared: Path = DEFAULT_SHARED_TRACES) -> list[Path]:
    """Copies of the workloads that CCL-Bench's tools read: ``.json.gz`` decompressed, and a
    card naming the trace types where there is none. Missing sources are left out."""
    sources = [BUNDLED, *(shared / name for name in SHARED_FOLDERS)]
    folders = []
    for src in sources:
        if not src.is_dir():
            continue
        dst = out / src.name
        dst.mkdir(parents=True, exist_ok=True)
        for f in sorted(src.iterdir()):
            if f.name.endswith(".json.gz"):
                with gzip.open(f) as i, open(dst / f.name[: -len(".gz")], "wb") as o:
                    shutil.copyfileobj(i, o)
            elif f.is_file():
                shutil.copy(f, dst / f.name)
        if not any(dst.glob("*.yaml")) and any(dst.glob("*.sqlite")):
            (dst / "workload_card.yaml").write_text(_NSYS_CARD)
        folders.append(dst)
    return folders


def _load() -> float:
    return os.getloadavg()[0]


def _website(checkout: Path, where: Path, folders: list[Path]) -> Path:
    """A copy of the checkout's tools/, website/ and index.html with a config naming the
    folders ("auto", required_update), CCL-Bench's own metric_info."""
    where.mkdir(parents=True)
    for name in ("tools", "website"):
        shutil.copytree(checkout / name, where / name)
    shutil.copy(checkout / "index.html", where / "index.html")
    config = json.loads((checkout / "website" / "benchmark_config.json").read_text())
    config["pairs"] = [{"trace": str(f), "metrics": "auto", "required_update": True} for f in folders]
    (where / "website" / "benchmark_config.json").write_text(json.dumps(config, indent=2))
    (where / "website" / "benchmark_data.json").unlink(missing_ok=True)
    return where


def _timed(cmd: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, int]:
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start, proc.returncode


def _cells(path: Path) -> list[dict[str, Any]]:
    return [row["metrics"] for row in json.loads(path.read_text())["rows"]]


def run_ccl_bench_bench(checkout: Path, python: str, folders_dir: Path | None = None) -> list[dict]:
    """The cases of the module docstring, one row each."""
    if not (checkout / "tools" / "main.py").is_file() or not (checkout / "website" / "generate_data.py").is_file():
        raise UsageError(f"{checkout}: not a CCL-Bench checkout (no tools/main.py and website/generate_data.py)")
    probe = subprocess.run([python, "-c", "import cclq, pandas, yaml"], capture_output=True, text=True)
    if probe.returncode:
        raise UsageError(
            f"{python} cannot import cclq, pandas and yaml: {(probe.stderr.strip().splitlines() or [''])[-1]}",
            hint="--ccl-bench-python: CCL-Bench's Python, with cclq installed (docs/ccl-bench.md step 1)",
        )
    scratch = Path(tempfile.mkdtemp(prefix="cclq-vs-ccl-bench-"))
    env = {**os.environ, "TMPDIR": str(scratch)}  # the daemons' sockets: this run's own
    env.pop("CCLQ_WAREHOUSE", None)
    env.pop("CCLQ_DAEMON", None)
    rows: list[dict[str, Any]] = []
    try:
        folders = (
            sorted(p for p in folders_dir.iterdir() if p.is_dir())
            if folders_dir
            else prepare_folders(scratch / "folders")
        )
        calls = 0

        def row(case: str, seconds: float, rc: int, before: float, n: int, **extra: Any) -> None:
            rows.append(
                {
                    "case": case,
                    "calls": n,
                    "seconds": round(seconds, 2),
                    "exit": rc,
                    "load_before": round(before, 2),
                    "load_after": round(_load(), 2),
                    **extra,
                }
            )

        # 1. generate_data.py with CCL-Bench's own tools
        orig = _website(checkout, scratch / "orig", folders)
        before = _load()
        seconds, rc = _timed([python, "website/generate_data.py"], orig, env)
        theirs = _cells(orig / "website" / "benchmark_data.json")
        calls = sum(len(m) for m in theirs)
        row("generate_data.py, CCL-Bench's tools", seconds, rc, before, calls)
        base = seconds

        # 2. generate_data.py through the shim, a fresh warehouse, then the repeat
        shim = _website(checkout, scratch / "shim", folders)
        subprocess.run(
            [python, "-c", _CLI, "ccl-bench", "shim", str(shim), "--force"], env=env, capture_output=True, check=True
        )
        before = _load()
        seconds, rc = _timed([python, "website/generate_data.py"], shim, env)
        via_shim = _cells(shim / "website" / "benchmark_data.json")
        row(
            "generate_data.py through the shim, fresh warehouse",
            seconds,
            rc,
            before,
            calls,
            x_vs_ccl_bench=round(base / seconds, 2),
            cells_equal_to_ccl_bench=_equal(via_shim, theirs),
        )
        (shim / "website" / "benchmark_data.json").unlink()
        before = _load()
        seconds, rc = _timed([python, "website/generate_data.py"], shim, env)
        row(
            "generate_data.py through the shim, repeat",
            seconds,
            rc,
            before,
            calls,
            x_vs_ccl_bench=round(base / seconds, 2),
        )
        _stop(python, shim / ".cclq" / "warehouse", env)

        # 3. cclq board --config, one process, fresh warehouse, into the website folder
        board = _website(checkout, scratch / "board", folders)
        before = _load()
        seconds, rc = _timed(
            [
                python,
                "-c",
                _CLI,
                "board",
                "website",
                "-q",
                "--allow-partial",
                "--config",
                "website/benchmark_config.json",
                "-w",
                str(scratch / "board_wh"),
            ],
            board,
            env,
        )
        mine = _cells(board / "website" / "benchmark_data.json")
        row(
            "cclq board --config, fresh warehouse",
            seconds,
            rc,
            before,
            calls,
            x_vs_ccl_bench=round(base / seconds, 2),
            cells_equal_to_shim=_equal(mine, via_shim),
            cells_equal_to_ccl_bench=_equal(mine, theirs),
        )

        # 4. the loop, one call after the other (docs/ccl-bench.md's table)
        n = len(folders) * len(LOOP_METRICS)
        before = _load()
        seconds = _loop([python, str(orig / "tools" / "main.py")], folders, orig, env)
        row("loop: CCL-Bench's tools/main.py", seconds, 0, before, n)
        loop_base = seconds
        wh = scratch / "loop_wh"
        for label in ("first loop, fresh warehouse", "repeat"):
            before = _load()
            seconds = _loop([python, "-m", "cclq.main", "--warehouse", str(wh)], folders, scratch, env)
            row(
                f"loop: python -m cclq.main, {label}",
                seconds,
                0,
                before,
                n,
                x_vs_ccl_bench=round(loop_base / seconds, 2),
            )
        _stop(python, wh, env)
        keys = list(dict.fromkeys(k for r in rows for k in r))  # every row every column (a table)
        return [{k: r.get(k) for k in keys} for r in rows]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _equal(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> str:
    same = sum(1 for x, y in zip(a, b) for k in x if k in y and x[k] == y[k])
    return f"{same}/{sum(len(x) for x in a)}"


def _loop(cmd: list[str], folders: list[Path], cwd: Path, env: dict[str, str]) -> float:
    start = time.perf_counter()
    for folder in folders:
        for metric in LOOP_METRICS:
            subprocess.run(
                [*cmd, "--trace", str(folder), "--metric", metric],
                cwd=cwd,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
    return time.perf_counter() - start


def _stop(python: str, wh: Path, env: dict[str, str]) -> None:
    subprocess.run(
        [python, "-m", "cclq.compat.daemon_process", "--stop", "--warehouse", str(wh)], env=env, capture_output=True
    )
