"""``cclq bench``: the readers and ingest against the raw ijson parse of the same bytes.

For each input the benchmark measures, in one run:

* ``raw``: iterating ``ijson.items(f, "traceEvents.item")`` over the file and doing
  nothing else (the C backend, decompression included). This is the floor that an
  event-by-event JSON ingester can reach, so everything else is reported as a ratio of it.
* ``fast reader`` and ``ijson reader``: each reader (``cclq.formats.chrome.reader``) turning the
  files into Arrow record batches in this process, nothing written (the reader alone).
* ``scan``: the structural scan alone (``jsonscan.StructureScanner``), the bounds check
  that the ijson reader runs on every byte (on its read-ahead thread) and the fast reader
  only where its decoder's types do not already prove the bounds.
* ``ingest``: ``cclq ingest`` of the same files in a child process, timed wall-clock
  (process start-up included), once with one parser (``--jobs 1``) and once with two
  (``--jobs 2``: files parsed in parallel; one file alone has its chunks built by two
  helper processes), with the peak RSS of each from ``wait4``.

The metric part runs one metric over N copies of a generated 8-rank trace four ways:
one query over every trace on one connection (what ``cclq metric --all`` does), a loop
that connects and runs the metric trace by trace in the same process (the cheapest a
per-trace script can be), and the same two as ``cclq`` processes (``--all`` once, and
``--trace T`` once per trace, as CCL-Bench runs one script per trace), with start-up.

Rates are MB of uncompressed JSON per second. Inputs are synthetic Kineto traces made by
``cclq.synth.kineto`` (sizes chosen on the command line as ``MB`` or ``MBxRANKS``, generated
once into ``--workdir`` and reused) and, if present, ``../shared/perf-traces``.
"""

from __future__ import annotations

import gc
import gzip
import io
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import ijson

if TYPE_CHECKING:
    import pyarrow
    from _typeshed import FileDescriptorLike  # a stub-only module: what os.fsync takes


@dataclass
class BenchRow:
    input: str
    files: int
    events: int
    json_mb: float
    raw_ijson_mb_s: float  # one process, parse only
    fast_reader_mb_s: float  # the fast reader to record batches, this process, nothing written
    fast_vs_raw: float
    ijson_reader_mb_s: float  # the reference reader, the same way
    ijson_reader_vs_raw: float
    scan_mb_s: float  # the structural scan (bounds check) alone
    ingest_j1_mb_s: float  # cclq ingest --jobs 1 (one parser process)
    j1_vs_raw: float
    ingest_j2_mb_s: float  # cclq ingest --jobs 2 (both cores of the reference machine)
    j2_vs_raw: float
    peak_rss_j1_mb: float  # peak RSS of the --jobs 1 ingest process
    peak_rss_j2_mb: float  # the largest of the --jobs 2 ingest process and its children


def _open(path: Path) -> io.BufferedIOBase:
    with open(path, "rb") as f:
        gz = f.read(2) == b"\x1f\x8b"
    return gzip.open(path, "rb") if gz else open(path, "rb")


def json_bytes(path: Path) -> int:
    """Uncompressed size of a trace file."""
    with open(path, "rb") as f:
        if f.read(2) != b"\x1f\x8b":
            return path.stat().st_size
    n = 0
    with gzip.open(path, "rb") as g:
        while chunk := g.read(1 << 22):
            n += len(chunk)
    return n


def raw_ijson_seconds(files: list[Path]) -> tuple[float, int]:
    """Seconds to iterate every event with ijson and nothing else; events seen."""
    events = 0
    start = time.perf_counter()
    for path in files:
        with _open(path) as f:
            head = f.read(1)
            f.seek(0)
            prefix = "item" if head == b"[" else "traceEvents.item"
            for _ in ijson.items(f, prefix):
                events += 1
    return time.perf_counter() - start, events


def reader_seconds(files: list[Path], reader: str) -> float:
    """Seconds for ``reader`` to turn every file into record batches (discarded)."""
    from cclq.formats.base import ReadAgain, ReadOptions
    from cclq.formats.chrome.reader import read_trace_file
    from cclq.formats.detect import detect

    def discard(batch: object) -> None:
        return None

    gc.collect()
    start = time.perf_counter()
    for path in files:
        options = ReadOptions(reader=reader)
        while True:
            try:
                read_trace_file(str(path), detect(str(path)), "bench", discard, options)
                break
            except ReadAgain as e:  # as ingest does: the file is read again
                options = e.options
    return time.perf_counter() - start


def scan_seconds(files: list[Path]) -> float:
    """Seconds for the structural scan (the bounds check) over every file's text."""
    from cclq.formats.chrome.jsonscan import StructureScanner
    from cclq.formats.limits import DEFAULT_LIMITS

    total = 0.0
    for path in files:
        with _open(path) as f:
            scanner = StructureScanner(DEFAULT_LIMITS, 3)
            start = time.perf_counter()
            while block := f.read(1 << 20):
                scanner.feed(block)
            total += time.perf_counter() - start
    return total


def ingest_child(inputs: list[Path], warehouse: Path, jobs: int = 1, reader: str = "fast") -> tuple[float, float]:
    """Runs ``cclq ingest`` in a child process: (wall seconds, peak RSS in MB).

    The peak RSS is ``wait4``'s: the largest of the child and of any process it waited
    for (its parser processes), not a sum.
    """
    cmd = [
        sys.executable,
        "-c",
        "from cclq.cli.app import main; main()",
        "ingest",
        *map(str, inputs),
        "--warehouse",
        str(warehouse),
        "--jobs",
        str(jobs),
        "--quiet",
        "--force",
        "--reader",
        reader,
    ]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    err = proc.stderr.read().decode() if proc.stderr else ""
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"ingest failed during the benchmark: {err.strip()}")
    return seconds, usage.ru_maxrss / 1024  # ru_maxrss is KiB on Linux


def synthetic_workload(workdir: Path, total_mb: int, ranks: int, time_form: str = "relative") -> Path:
    """A ``ranks``-rank generated workload of about ``total_mb`` MB (cached), its times in
    ``time_form`` (``cclq.synth.kineto.TIME_FORMS``)."""
    from cclq.synth.kineto import generate_workload

    suffix = "" if time_form == "relative" else f"_{time_form}"
    folder = workdir / f"synthetic_{total_mb}mb_{ranks}ranks{suffix}"
    marker = folder / ".complete"
    if not marker.exists():
        shutil.rmtree(folder, ignore_errors=True)
        generate_workload(folder, ranks=ranks, target_bytes_per_rank=total_mb * 1_000_000 // ranks, time_form=time_form)
        marker.write_text("ok")
    return folder


def parse_sizes(spec: str, ranks: int) -> list[tuple[int, int, str]]:
    """``"250,1000x1,127x1:epoch"`` -> [(250, ranks, "relative"), (1000, 1, "relative"),
    (127, 1, "epoch")]: MB of JSON, files to spread it over, and the timestamp form
    (``relative``, ``epoch`` or ``subns``: see ``cclq.synth.kineto.TIME_FORMS``)."""
    from cclq.synth.kineto import TIME_FORMS

    out = []
    for part in (p.strip() for p in spec.split(",") if p.strip()):
        size, _, form = part.partition(":")
        form = form or "relative"
        if form not in TIME_FORMS:
            raise ValueError(f"unknown timestamp form {form!r} (one of {', '.join(TIME_FORMS)})")
        mb, _, r = size.partition("x")
        out.append((int(mb), int(r) if r else ranks, form))
    return out


def bench_input(label: str, inputs: list[Path], files: list[Path], scratch: Path, repeats: int = 1) -> BenchRow:
    """One row: raw parse, both readers, the scan, ingest -j1 and -j2, each run ``repeats``
    times, interleaved.

    The best (lowest) time of each is kept: on a shared machine a single run can be off by
    a third either way, and interleaving exposes every case to the same conditions.
    """
    mb = sum(json_bytes(p) for p in files) / 1e6
    wh = scratch / "wh"
    best: dict[str, float] = {}
    rss = {1: 0.0, 2: 0.0}
    events = 0

    def keep(case: str, seconds: float) -> None:
        best[case] = min(best.get(case, seconds), seconds)

    for _ in range(max(repeats, 1)):
        raw_s, events = raw_ijson_seconds(files)
        keep("raw", raw_s)
        keep("fast", reader_seconds(files, "fast"))
        keep("ijson", reader_seconds(files, "ijson"))
        keep("scan", scan_seconds(files))
        for jobs in (1, 2):
            shutil.rmtree(wh, ignore_errors=True)
            seconds, peak = ingest_child(inputs, wh, jobs)
            keep(f"j{jobs}", seconds)
            rss[jobs] = max(rss[jobs], peak)
    shutil.rmtree(wh, ignore_errors=True)

    def rate(case: str) -> float:
        return round(mb / best[case], 1)

    def vs_raw(case: str) -> float:
        return round(best["raw"] / best[case], 2)

    return BenchRow(
        label,
        len(files),
        events,
        round(mb, 1),
        rate("raw"),
        rate("fast"),
        vs_raw("fast"),
        rate("ijson"),
        vs_raw("ijson"),
        rate("scan"),
        rate("j1"),
        vs_raw("j1"),
        rate("j2"),
        vs_raw("j2"),
        round(rss[1], 1),
        round(rss[2], 1),
    )


def run_ingest_bench(
    sizes: list[tuple[int, int, str]] | list[tuple[int, int]] | list[int],
    ranks: int,
    workdir: Path | None,
    perf_traces: Path | None,
    repeats: int = 1,
) -> list[BenchRow]:
    rows: list[BenchRow] = []
    keep = workdir is not None
    workdir = workdir or Path(tempfile.mkdtemp(prefix="cclq-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="cclq-bench-wh-"))
    try:
        for size in sizes:
            parts: tuple[Any, ...] = (
                (tuple(size) + ("relative",))[:3] if isinstance(size, tuple) else (size, ranks, "relative")
            )
            total_mb, n, form = parts
            folder = synthetic_workload(workdir, total_mb, n, form)
            files = sorted(p for p in folder.iterdir() if p.name.startswith("kineto_trace_"))
            label = f"synthetic {total_mb} MB, {n} rank{'s' if n > 1 else ''}" + (
                "" if form == "relative" else f", {form} ts"
            )
            rows.append(bench_input(label, [folder], files, scratch, repeats))
        if perf_traces is not None and perf_traces.is_dir():
            for folder in sorted(p for p in perf_traces.iterdir() if p.is_dir()):
                files = sorted(p for p in folder.iterdir() if p.is_file())
                rows.append(bench_input(folder.name, [folder], files, scratch, repeats))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)
    return rows


def rows_to_table(rows: list[BenchRow]) -> pyarrow.Table:
    import pyarrow as pa

    return pa.Table.from_pylist([asdict(r) for r in rows])


# ---------------------------------------------------------------------- metrics
@dataclass
class MetricBenchRow:
    case: str
    traces: int
    one_query_s: float  # one connection, one query over every trace (in this process)
    loop_s: float  # the same metric trace by trace in this process, a fresh connection each
    speedup: float
    cli_all_s: float  # `cclq metric NAME --all`: one process, start-up included
    cli_loop_s: float  # `cclq metric NAME --trace T` once per trace, as CCL-Bench runs a script per trace
    cli_speedup: float


def clone_traces(wh_root: Path, source: str, targets: list[str]) -> None:
    """Copies an ingested trace under new trace ids, as if the same workload had been
    ingested from other folders: its data files (with the new trace and file ids in
    their rows), catalog rows and card, committed as one snapshot.

    The benchmarks' way to make a warehouse of many workloads from one ingested trace.
    Each copy gets file ids of its own, as an ingest of another folder would (views such
    as HTA's join on the file id, so shared ids would pair every copy with every other).
    """
    import hashlib

    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from cclq.store.warehouse import Warehouse
    from cclq.store.writer import open_data_writer

    wh = Warehouse(wh_root)
    with wh.lock():
        state = wh.read_state()
        rows = [r for r in state.files.values() if r["trace"] == source]
        # data file -> its table; a compacted data file holds several input files' rows
        data_files = sorted({(p["path"], p["table_name"]) for r in rows for p in state.parts[r["file_id"]]})
        moves: list[tuple[Path, str]] = []
        for target in targets:
            new_id = {
                r["file_id"]: hashlib.blake2b(f"{target}/{r['relpath']}".encode(), digest_size=8).hexdigest()
                for r in rows
            }
            new_path: dict[str, str] = {}
            for path, table_name in data_files:
                table = pq.read_table(wh.root / path)
                coded = pc.dictionary_encode(table.column("file_id")).combine_chunks()
                old_ids = coded.dictionary.to_pylist()
                ids = pc.take(pa.array([new_id[f] for f in old_ids], pa.string()), coded.indices)
                table = table.set_column(table.schema.get_field_index("file_id"), "file_id", ids)
                i = table.schema.get_field_index("trace")
                table = table.set_column(i, "trace", pc.fill_null(pa.nulls(table.num_rows, pa.string()), target))
                tmp = wh.tmp_path()
                writer = open_data_writer(tmp, table.schema)
                writer.write_table(table)
                writer.close()
                new_path[path] = wh.new_data_path(table_name, target, new_id[old_ids[0]] if old_ids else "empty")
                moves.append((tmp, new_path[path]))
            for row in rows:
                old, fid = row["file_id"], new_id[row["file_id"]]
                parts = [
                    {**part, "file_id": fid, "trace": target, "path": new_path[part["path"]]}
                    for part in state.parts[old]
                ]
                stats = [{**r, "file_id": fid, "trace": target} for r in state.stats.get(old, [])]
                state.put_file(
                    {**row, "file_id": fid, "trace": target, "path": f"{row['path']}#{target}"}, parts, stats
                )
            if source in state.cards:
                state.cards[target] = {**state.cards[source], "trace": target}
        wh.commit(state, moves)


def _time_one_query(wh_root: Path, metric: str) -> float:
    from cclq.query.metrics import run_metric
    from cclq.query.registry import resolve
    from cclq.query.session import connect
    from cclq.store.warehouse import Warehouse

    start = time.perf_counter()
    spec = resolve(metric)
    con = connect(Warehouse(wh_root))
    run_metric(con, spec)
    con.close()
    return time.perf_counter() - start


def _time_loop(wh_root: Path, metric: str, traces: list[str]) -> float:
    from cclq.query.metrics import run_metric
    from cclq.query.registry import resolve
    from cclq.query.session import connect
    from cclq.store.warehouse import Warehouse

    start = time.perf_counter()
    spec = resolve(metric)
    for t in traces:
        con = connect(Warehouse(wh_root), traces=[t])
        run_metric(con, spec)
        con.close()
    return time.perf_counter() - start


def _cli_metric(wh_root: Path, metric: str, selection: list[str]) -> None:
    cmd = [
        sys.executable,
        "-c",
        "from cclq.cli.app import main; main()",
        "metric",
        metric,
        *selection,
        "--no-cache",
        "--warehouse",
        str(wh_root),
        "--format",
        "csv",
    ]
    done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"cclq metric failed during the benchmark: {done.stderr.strip()}")


def _time_cli_all(wh_root: Path, metric: str) -> float:
    start = time.perf_counter()
    _cli_metric(wh_root, metric, ["--all"])
    return time.perf_counter() - start


def _time_cli_loop(wh_root: Path, metric: str, traces: list[str]) -> float:
    start = time.perf_counter()
    for t in traces:
        _cli_metric(wh_root, metric, ["--trace", t])
    return time.perf_counter() - start


def run_metric_bench(
    copies: list[int], metric: str, shared_traces: Path | None, repeats: int = 2
) -> tuple[list[MetricBenchRow], list[dict]]:
    """(scaling rows, per-metric timings over the shared traces)."""
    from cclq.ingest.run import ingest
    from cclq.query.registry import registry
    from cclq.store.warehouse import Warehouse
    from cclq.synth.kineto import generate_workload

    rows: list[MetricBenchRow] = []
    per_metric: list[dict] = []
    scratch = Path(tempfile.mkdtemp(prefix="cclq-bench-metrics-"))
    try:
        if shared_traces is not None and shared_traces.is_dir():
            wh = Warehouse(scratch / "shared")
            start = time.perf_counter()
            ingest([shared_traces], wh, jobs=2)
            ingest_s = time.perf_counter() - start
            from cclq.query.metrics import run_metric
            from cclq.query.session import connect

            con = connect(wh)
            total = 0.0
            for name in sorted(registry()):
                spec = registry()[name][max(registry()[name])]
                t0 = time.perf_counter()
                rows_out = run_metric(con, spec).num_rows
                dt = time.perf_counter() - t0
                total += dt
                per_metric.append({"metric": spec.label, "rows": rows_out, "seconds": round(dt, 3)})
            per_metric.append({"metric": "ALL METRICS (one process)", "rows": None, "seconds": round(total, 3)})
            per_metric.append(
                {"metric": "ingest of the shared traces (-j 2)", "rows": None, "seconds": round(ingest_s, 3)}
            )
        seed = scratch / "seed_in" / "synthetic_8rank"
        generate_workload(seed, ranks=8, steps=5, layers=4, seed=1)
        base = Warehouse(scratch / "base")
        ingest([seed], base, jobs=2)
        for n in copies:
            wh_root = scratch / f"copies_{n}"
            shutil.copytree(base.root, wh_root)
            names = ["synthetic_8rank"] + [f"synthetic_8rank_c{i:03d}" for i in range(1, n)]
            clone_traces(wh_root, "synthetic_8rank", names[1:])
            # interleaved, best of each: the machine's speed drifts between minutes
            best = dict.fromkeys(("one", "loop", "cli_all", "cli_loop"), float("inf"))
            for _ in range(max(repeats, 1)):
                for case, seconds in (
                    ("one", lambda: _time_one_query(wh_root, metric)),  # noqa: B023  called in this iteration
                    ("loop", lambda: _time_loop(wh_root, metric, names)),  # noqa: B023  called in this iteration
                    ("cli_all", lambda: _time_cli_all(wh_root, metric)),  # noqa: B023  called in this iteration
                    ("cli_loop", lambda: _time_cli_loop(wh_root, metric, names)),  # noqa: B023  called in this iteration
                ):
                    best[case] = min(best[case], seconds())
            rows.append(
                MetricBenchRow(
                    f"{metric}, {n} x 8-rank trace",
                    n,
                    round(best["one"], 3),
                    round(best["loop"], 3),
                    round(best["loop"] / best["one"], 1),
                    round(best["cli_all"], 3),
                    round(best["cli_loop"], 3),
                    round(best["cli_loop"] / best["cli_all"], 1),
                )
            )
            shutil.rmtree(wh_root, ignore_errors=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return rows, per_metric


# ------------------------------------------------------------------------ board
def board_warehouse(root: Path, workloads: int) -> Path:
    """A warehouse of ``workloads`` copies of a generated 8-rank trace (the metric
    benchmark's trace), made by ``clone_traces``; returns its root."""
    from cclq.ingest.run import ingest
    from cclq.store.warehouse import Warehouse
    from cclq.synth.kineto import generate_workload

    seed = root / "seed_in" / "synthetic_8rank"
    generate_workload(seed, ranks=8, steps=5, layers=4, seed=1)
    wh = Warehouse(root / "wh")
    ingest([seed], wh, jobs=2)
    clone_traces(wh.root, "synthetic_8rank", [f"synthetic_8rank_c{i:03d}" for i in range(1, workloads)])
    return wh.root


def run_board_bench(workloads: int, repeats: int = 1) -> list[dict]:
    """``cclq board`` over a warehouse of ``workloads`` workloads, four ways:

    * cold: nothing cached, no site: every board metric and plot query over all workloads;
    * cached metrics, new site: the metric results are in the cache, the site is empty
      (what a second site, or a deleted one, costs: results read back, pages written);
    * no change: the site is up to date (fingerprints compared, pages and index rewritten);
    * one card changed: one workload computed again, every page rewritten.
    Each case runs ``repeats`` times and the best time is kept.
    """
    from cclq.cards.load import card_table
    from cclq.present.board.build import build_board
    from cclq.store.warehouse import Warehouse

    scratch = Path(tempfile.mkdtemp(prefix="cclq-bench-board-"))
    rows: list[dict] = []
    try:
        wh = Warehouse(board_warehouse(scratch, workloads))
        site = scratch / "site"

        def timed(case: str, prepare) -> None:  # noqa: ANN001 - a callable run before each repeat
            best, result = float("inf"), None
            for _ in range(max(repeats, 1)):
                prepare()
                start = time.perf_counter()
                result = build_board(wh, site)
                best = min(best, time.perf_counter() - start)
            assert result is not None
            rows.append(
                {
                    "case": case,
                    "workloads": result.workloads,
                    "computed": len(result.computed),
                    "metrics": result.metrics,
                    "seconds": round(best, 2),
                }
            )

        def cold() -> None:
            wh.clear_cache()
            shutil.rmtree(site, ignore_errors=True)

        changed = iter(range(10**6))

        def change_one_card() -> None:
            n = next(changed)
            with wh.lock():
                state = wh.read_state()
                state.cards["synthetic_8rank_c001"] = card_table(
                    "synthetic_8rank_c001", {"description": f"edit {n}"}
                ).to_pylist()[0]
                wh.commit(state)

        timed("cold: no cache, no site", cold)
        timed("cached metrics, new site", lambda: shutil.rmtree(site, ignore_errors=True))
        timed("no change", lambda: None)
        timed("one card changed", change_one_card)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return rows


def run_commit_bench(commits: int, ingest_mb: int = 50, repeats: int = 1) -> list[dict]:
    """What durable commits cost (``cclq.store.warehouse``: fsync of data files, snapshot
    and directories, ``CCLQ_FSYNC=0`` to skip): ``commits`` commits of one small data file
    each, in this process, and ``cclq ingest --force`` of a synthetic 8-rank workload of
    ``ingest_mb`` MB in a child process; each with fsync on and off, best of ``repeats``,
    interleaved. The warehouse is in the system temp folder: the cost is that disk's."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from cclq.store.durable import FSYNC_ENV
    from cclq.store.warehouse import Warehouse

    scratch = Path(tempfile.mkdtemp(prefix="cclq-bench-commit-"))
    best: dict[tuple[str, bool], float] = {}
    fsyncs: dict[tuple[str, bool], tuple[int, float]] = {}
    saved = os.environ.get(FSYNC_ENV)
    try:
        workload = synthetic_workload(scratch / "inputs", ingest_mb, 8)
        small = pa.table({"x": pa.array(range(1000), pa.int64())})
        for _ in range(max(repeats, 1)):
            for durable in (True, False):
                os.environ[FSYNC_ENV] = "1" if durable else "0"
                wh = Warehouse(scratch / f"wh-{durable}")
                shutil.rmtree(wh.root, ignore_errors=True)
                with wh.lock():
                    state = wh.read_state()
                    start = time.perf_counter()
                    for i in range(commits):
                        tmp = wh.tmp_path()
                        pq.write_table(small, tmp)
                        wh.commit(state, [(tmp, wh.new_data_path("events", "bench", f"f{i}"))])
                    seconds = (time.perf_counter() - start) / max(commits, 1)
                key = ("commit", durable)
                if seconds < best.get(key, float("inf")):
                    best[key] = seconds
                    fsyncs[key] = (0, 0.0)  # not counted for the small commits
                seconds, calls, in_fsync = _ingest_counting_fsync(workload, scratch / f"ingest-{durable}")
                key = ("ingest", durable)
                if seconds < best.get(key, float("inf")):
                    best[key] = seconds
                    fsyncs[key] = (calls, in_fsync)
    finally:
        if saved is None:
            os.environ.pop(FSYNC_ENV, None)
        else:
            os.environ[FSYNC_ENV] = saved
        shutil.rmtree(scratch, ignore_errors=True)
    rows = []
    for case, label in (
        ("commit", f"one commit of a small data file (mean of {commits})"),
        ("ingest", f"ingest --jobs 1 --force, synthetic {ingest_mb} MB, 8 ranks (in process)"),
    ):
        on, off = best[(case, True)], best[(case, False)]
        calls, in_fsync = fsyncs[(case, True)]
        rows.append(
            {
                "case": label,
                "fsync_s": round(on, 4),
                "no_fsync_s": round(off, 4),
                "cost_s": round(on - off, 4),
                "cost_pct": round(100 * (on - off) / off, 1),
                # time inside fsync itself: what the difference is, without the machine's noise
                "fsync_calls": calls if case == "ingest" else None,
                "in_fsync_s": round(in_fsync, 4) if case == "ingest" else None,
            }
        )
    return rows


def _ingest_counting_fsync(workload: Path, wh_root: Path) -> tuple[float, int, float]:
    """``ingest(--jobs 1 --force)`` here, timed: (seconds, fsync calls, seconds inside them)."""
    from cclq.ingest.run import ingest
    from cclq.store.warehouse import Warehouse

    real = os.fsync
    spent = [0, 0.0]

    def counted(fd: FileDescriptorLike) -> None:
        start = time.perf_counter()
        real(fd)
        spent[0] += 1
        spent[1] += time.perf_counter() - start

    os.fsync = counted
    try:
        start = time.perf_counter()
        ingest([workload], Warehouse(wh_root), jobs=1, force=True)
        return time.perf_counter() - start, int(spent[0]), spent[1]
    finally:
        os.fsync = real
