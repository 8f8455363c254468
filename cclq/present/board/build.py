"""``cclq board OUT_DIR``: build the static site, recomputing only what changed.

The site is plain files that open from the file system or any static server::

    OUT_DIR/index.html              the leaderboard (rows in the page, sorted and filtered in it)
    OUT_DIR/w/<workload>.html       one page per workload: card, plots, every metric computed
    OUT_DIR/assets/board.{css,js}   the stylesheet and the sort/filter script
    OUT_DIR/benchmark_data.json     CCL-Bench's website data (``website/generate_data.py``'s keys)
    OUT_DIR/data.js                 the same as ``const BENCHMARK_DATA = ...`` (CCL-Bench's index.html)
    OUT_DIR/data/<workload>.json    each workload's numbers and plot data, with its fingerprint

Incremental: a workload's fingerprint covers everything its numbers depend on (its
files' content hashes and ingest version, its card, the metric definitions, the views,
the parameters, the cclq version). A rebuild reuses ``data/<workload>.json`` when the
fingerprint matches, and computes the others in one connection restricted to them (each
metric one query over all of them, through the metric result cache), so adding one trace
to a board of 500 computes one trace. Every file is written to a temporary name and
renamed into place: an interrupted build leaves the previous site readable.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import multiprocessing
import os
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from cclq.errors import UsageError, show_path
from cclq.present.board.pages import (
    ASSETS,
    MetricColumn,
    asset_text,
    index_page,
    metric_lookup,
    quarter_tints,
    workload_page,
)
from cclq.present.report import (
    FIGURE_METRICS,
    REPORT_VERSION,
    collect_reports,
    report_dict,
)
from cclq.query.metrics import MetricRun
from cclq.query.registry import LEADERBOARD_CATEGORIES, MetricSpec, latest_specs
from cclq.query.session import QuerySettings, connect
from cclq.query.sqlfiles import view_modules
from cclq.store.warehouse import Warehouse
from cclq.version import __version__

BOARD_VERSION = 1  # of the stored data layout; a new layout recomputes every workload
# Short descriptions of CCL-Bench's website categories (its benchmark_config.json has its own).
CATEGORY_DESCRIPTIONS = {
    "model_execution": "Step time and throughput of the model",
    "gpu_efficiency": "How busy and how well used the accelerators are",
    "memory": "Memory bandwidth and transfers",
    "communication": "Collective communication time, share and overlap",
}
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
_SAFE_SLUG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*")  # what ``slug`` makes: never a path
# Written into a folder cclq's site was built in: cclq may write its pages there again.
BOARD_MARKER = ".cclq-board"
BOARD_MARKER_TEXT = "a cclq board: `cclq board` writes index.html, assets/, w/ and data/ in this folder\n"
DATA_FILES = ("benchmark_data.json", "data.js")  # CCL-Bench's website data: written into any folder


def check_out_dir(out_dir: Path) -> None:
    """OUT before any work is done: a folder (made here if it is not there yet) cclq can
    write into. A file, or a folder that cannot be made or written, is a usage error now,
    not after the metrics are computed."""
    if out_dir.exists() and not out_dir.is_dir():
        raise UsageError(
            f"{show_path(out_dir)} is a file: `cclq board` writes a folder (benchmark_data.json, "
            "data.js and the site's pages)",
            hint="give a folder, e.g. `cclq board site/`",
        )
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"{show_path(out_dir)}: cannot create the folder: {e.strerror or e}") from None
    if not os.access(out_dir, os.W_OK | os.X_OK):
        raise UsageError(f"{show_path(out_dir)}: cannot write into the folder (permission denied)")


def is_board_folder(out_dir: Path) -> bool:
    """Whether cclq's site (index.html, assets/, w/, data/) may go into ``out_dir``: a
    folder not there yet, an empty one, or one a board was built in (its marker, or,
    from before the marker, cclq's assets/board.js beside an index.html). Into any other
    folder (CCL-Bench's ``website/``) only ``DATA_FILES`` go, unless asked (``--pages``)."""
    try:
        if not out_dir.is_dir() or not any(out_dir.iterdir()):
            return True
    except OSError:
        return False
    return (out_dir / BOARD_MARKER).is_file() or (
        (out_dir / "assets" / "board.js").is_file() and (out_dir / "index.html").is_file()
    )


def write_data_files(out_dir: Path, bench: dict[str, Any], generator: str) -> None:
    """``benchmark_data.json`` and ``data.js`` as CCL-Bench's ``generate_data.py`` writes them."""
    _write(out_dir / "benchmark_data.json", json.dumps(bench, indent=1))
    _write(
        out_dir / "data.js",
        f"// generated by {generator}: CCL-Bench's website data\n"
        f"const BENCHMARK_DATA = {json.dumps(bench, indent=1)};\n",
    )


@dataclass
class BoardResult:
    out_dir: Path
    workloads: int
    computed: list[str] = field(default_factory=list)  # traces whose metrics were computed
    reused: int = 0  # traces whose stored data was still valid
    removed: int = 0  # pages of traces no longer in the warehouse
    metrics: int = 0
    seconds: float = 0.0
    failed: list[str] = field(default_factory=list)  # "metric: error" of each metric whose SQL failed
    pages: bool = True  # the site's pages were written (else only DATA_FILES)


def board_specs(all_metrics: bool = False) -> list[MetricSpec]:
    """The leaderboard metrics (a ``leaderboard`` header) and those the plots need; all
    metrics with ``all_metrics`` (workload pages then list every one)."""
    specs = latest_specs()
    if all_metrics:
        return specs
    return [s for s in specs if s.leaderboard or s.name in FIGURE_METRICS]


def leaderboard_columns(specs: list[MetricSpec]) -> list[MetricColumn]:
    order = list(LEADERBOARD_CATEGORIES)
    chosen = sorted(
        ((s, cat) for s in specs if (cat := s.leaderboard)), key=lambda sc: (order.index(sc[1]), sc[0].name)
    )
    return [MetricColumn(s.name, s.unit, s.polarity, cat, s.description, s.leaderboard_headline) for s, cat in chosen]


def slug(trace: str) -> str:
    """A file name for a trace's page: the id itself when it is safe, else a cleaned id
    plus a hash (two ids never share a page)."""
    clean = _UNSAFE.sub("_", trace)
    if clean.startswith("."):
        clean = "_" + clean
    if clean != trace or not clean:
        clean += "-" + hashlib.blake2b(trace.encode(), digest_size=4).hexdigest()
    return clean


def standing(workloads: list[dict[str, Any]], columns: list[MetricColumn]) -> dict[str, dict[str, tuple[int, int]]]:
    """trace -> metric -> (place, workloads with a value), best first by the metric's
    polarity; ties share the better place. Metrics without a polarity get none."""
    out: dict[str, dict[str, tuple[int, int]]] = {}
    for col in columns:
        if col.polarity not in ("higher", "lower"):
            continue
        values = [
            (w["trace"], e["value"])
            for w in workloads
            for g in w["categories"]
            for e in g["metrics"]
            if e["metric"] == col.name and col.ranked(e["value"])
        ]
        ordered = sorted(v for _, v in values)
        for trace, v in values:
            better = (
                len(ordered) - bisect.bisect_right(ordered, v)
                if col.polarity == "higher"
                else bisect.bisect_left(ordered, v)
            )
            out.setdefault(trace, {})[col.name] = (better + 1, len(values))
    return out


def _fingerprints(con: Any, specs: list[MetricSpec], params: dict[str, str]) -> dict[str, str]:
    """trace -> a key of everything its board data depends on."""
    base = hashlib.blake2b(digest_size=16)
    for part in (
        __version__,
        str(BOARD_VERSION),
        str(REPORT_VERSION),
        json.dumps(params, sort_keys=True),
        *(s.text for s in specs),
        *(m.sql for m in view_modules()),
    ):
        base.update(part.encode())
        base.update(b"\0")
    files: dict[str, list[tuple]] = {}
    for row in con.execute(
        "SELECT trace, rank, file_id, content_hash, ingest_version FROM files ORDER BY ALL"
    ).fetchall():
        files.setdefault(row[0], []).append(row[1:])
    cards = dict(con.execute("SELECT trace, card_json FROM cards").fetchall())
    out = {}
    for trace, rows in files.items():
        h = base.copy()
        h.update(repr((trace, rows, cards.get(trace))).encode())
        out[trace] = h.hexdigest()
    return out


def _write(path: Path, text: str) -> None:
    """Atomic: a reader sees the old file or the new one, never half of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError as e:  # a full disk: name the file (write() does not), leave no half file
        tmp.unlink(missing_ok=True)
        raise OSError(e.errno, e.strerror, str(path)) from e


STAGING_PREFIX = ".cclq-staging-"


def _stale_staging(out_dir: Path) -> None:
    """Staging folders a killed build left (its process is gone)."""
    import shutil

    for p in out_dir.glob(STAGING_PREFIX + "*"):
        pid = p.name[len(STAGING_PREFIX) :]
        if not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)
            continue  # a build running now
        except ProcessLookupError:
            shutil.rmtree(p, ignore_errors=True)
        except PermissionError:
            continue


@contextmanager
def staged(out_dir: Path) -> Iterator[Path]:
    """A folder to write the build's files into (inside ``out_dir``: the same file system,
    so moving them in is a rename), moved into ``out_dir`` only when every file was
    written: a build that fails (a full disk) leaves the board as it was, not part of the
    new one. The move renames files (no data is written), each atomically, in an order
    that puts a page in before anything links to it: data/ and w/ first, index.html last."""
    import shutil

    out_dir.mkdir(parents=True, exist_ok=True)
    _stale_staging(out_dir)
    stage = out_dir / f"{STAGING_PREFIX}{os.getpid()}"
    shutil.rmtree(stage, ignore_errors=True)
    stage.mkdir()
    try:
        yield stage
        files = sorted(
            (p for p in stage.rglob("*") if p.is_file()),
            key=lambda p: (p.parent == stage, p.name == "index.html", str(p)),
        )
        for path in files:
            target = out_dir / path.relative_to(stage)
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(path, target)
    finally:
        shutil.rmtree(stage, ignore_errors=True)


# From this many workloads on, their pages are written by forked processes
PARALLEL_PAGES = 64


@contextmanager
def pages_written(
    out_dir: Path, pages: list[tuple[dict[str, Any], dict[str, tuple[int, int]]]], columns: list[MetricColumn]
) -> Iterator[None]:
    """One page per (workload data, its standing), written by the end of the block.
    Rendering them is pure Python (3.9 s of a 500-workload board, after the queries):
    from PARALLEL_PAGES workloads on, one forked process per CPU (at most 4) writes a
    share of them while the block runs (the board's summary files). The query session
    is closed by then, so no DuckDB thread is forked; where fork does not exist, one
    process writes them all first."""
    procs = min(os.cpu_count() or 1, 4)
    if len(pages) < PARALLEL_PAGES or procs < 2 or "fork" not in multiprocessing.get_all_start_methods():
        _write_page_share(out_dir, pages, columns)
        yield
        return
    # the forked processes inherit the pages: only their share's number is sent (pickling
    # the workloads' data to them took longer than rendering a share)
    global _TO_WRITE
    _TO_WRITE = (out_dir, pages, columns)
    try:
        with multiprocessing.get_context("fork").Pool(procs) as pool:
            shares = pool.starmap_async(_write_inherited_share, [(i, procs) for i in range(procs)])
            yield
            shares.get()
    finally:
        _TO_WRITE = None


_TO_WRITE: tuple[Path, list[tuple[dict[str, Any], dict[str, tuple[int, int]]]], list[MetricColumn]] | None = None


def _write_inherited_share(share: int, shares: int) -> None:
    """In a forked process of pages_written: every ``shares``-th page from ``share`` on."""
    assert _TO_WRITE is not None
    out_dir, pages, columns = _TO_WRITE
    _write_page_share(out_dir, pages[share::shares], columns)


def _write_page_share(
    out_dir: Path, pages: list[tuple[dict[str, Any], dict[str, tuple[int, int]]]], columns: list[MetricColumn]
) -> None:
    for data, place in pages:
        _write(out_dir / "w" / f"{data['slug']}.html", workload_page(data, columns=columns, standing=place))


def _stored(out_dir: Path) -> dict[str, dict[str, Any]]:
    """trace -> stored workload data (unreadable files are ignored: they get recomputed)."""
    out: dict[str, dict[str, Any]] = {}
    for path in sorted((out_dir / "data").glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            out[data["trace"]] = data
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return out


def _has_failed_metric(data: dict[str, Any]) -> bool:
    return any(e.get("failed") for g in data.get("categories", []) for e in g["metrics"])


# a threshold no value reaches: every value of a column with no best or worst is in
# the middle band of CCL-Bench's page (its pill colours need thresholds)
_NO_BAND = 1e308


def _ccl_bench_trace_type(fmt: str) -> str | None:
    fmt = fmt.lower()
    if "nsys" in fmt:
        return "nsys"
    if "xla" in fmt or "xplane" in fmt or "xprof" in fmt:
        return "json_tpu"
    if "kineto" in fmt or "chrome" in fmt or "json" in fmt:
        return "json"
    return None


def _display(spec: MetricSpec) -> tuple[str, float]:
    """(unit as CCL-Bench writes it, factor from cclq's value to it): the unit its tool of
    that name prints (the header's ``ccl_bench_unit``: ``%``, or ``ratio`` where CCL-Bench
    writes a ratio, as for load_imbalance_ratio >= 1), else cclq's own 0..1 fraction as
    percent, as CCL-Bench's data writes fractions."""
    if spec.ccl_bench_unit is not None:
        return spec.shown_unit, spec.ccl_bench_scale
    if spec.unit == "ratio":
        return "%", 100.0
    return spec.unit, 1.0


def _thresholds(
    col: MetricColumn, scale: float, workloads: list[dict[str, Any]], tints: dict[tuple[str, str], str]
) -> dict[str, float]:
    """CCL-Bench's page colours a pill by ``thresholds`` (higher is better: >= high best,
    >= mid middle, else worst; lower is better: <= mid best, <= high middle, else worst).
    These are cut where cclq's page cuts its best and worst quarters, so both pages mark
    the same cells best and worst (a column without a polarity, or with fewer than four
    ranked values, has neither: every value in the middle band)."""
    good: list[float] = []
    fair: list[float] = []  # not in the worst quarter
    for w in workloads:
        e = metric_lookup(w).get(col.name)
        if e is None or not col.ranked(e["value"]):
            continue
        v = float(f"{e['value'] * scale:.6g}")
        tint = tints.get((w["trace"], col.name))
        if tint == "q-good":
            good.append(v)
        if tint != "q-poor":
            fair.append(v)
    if col.polarity == "lower":
        return {"high": max(fair, default=-_NO_BAND), "mid": max(good, default=-_NO_BAND)}
    if col.polarity == "higher":
        return {"high": min(good, default=_NO_BAND), "mid": min(fair, default=_NO_BAND)}
    return {"high": _NO_BAND, "mid": -_NO_BAND}


def benchmark_data(workloads: list[dict[str, Any]], specs: list[MetricSpec], generated_at: str) -> dict[str, Any]:
    """CCL-Bench's ``website/benchmark_data.json``: generated_at, all_metrics,
    metric_categories, metric_info, and one row per workload (card metadata, metrics).
    Values have 6 significant digits and ``null`` when a metric does not apply, as its
    ``generate_data.py`` stores them; ``reasons`` (extra) says why. CCL-Bench's page
    (its index.html, ``metricPill`` and the column sort) reads ``unit``, ``thresholds``
    and ``higher_is_better`` from metric_info, and takes a missing one for 50/25 and
    higher is better: every metric has all three here, in CCL-Bench's units (cclq's
    fractions as percent), with thresholds where cclq's page draws its quarters, so
    the two pages mark the same cells best and worst. A value cclq does not rank (0 in
    a communication column: no communication) is null with the reason, which that page
    shows as N/A and sorts last, as cclq's does."""
    board = [s for s in specs if s.leaderboard]
    columns = {c.name: c for c in leaderboard_columns(board)}
    tints = quarter_tints(workloads, list(columns.values()))
    info = {}
    for s in board:
        unit, scale = _display(s)
        col = columns[s.name]
        # CCL-Bench's metric_info lists trace_types per metric (the header's
        # ccl_bench_trace_types); cclq-only metrics get the formats they have a value for
        types = list(s.ccl_bench_trace_types) or sorted(
            {
                t
                for w in workloads
                if (e := metric_lookup(w).get(s.name)) is not None
                and e["value"] is not None
                and (t := _ccl_bench_trace_type(str(w.get("info", {}).get("format") or "")))
            }
        )
        info[s.name] = {
            "label": f"{s.name} ({unit})",
            "description": s.description,
            "unit": unit,
            # no polarity: none is better, and the thresholds put every value in the middle
            "higher_is_better": {"higher": True, "lower": False}.get(s.polarity),
            "category": s.leaderboard,
            "trace_types": types,
            "thresholds": _thresholds(col, scale, workloads, tints),
            "version": s.version,
            "summary": s.summary,
            "cclq_unit": s.unit,
            "scale": scale,
        }
    rows = []
    for w in workloads:
        entries = metric_lookup(w)
        metrics: dict[str, float | None] = {}
        reasons: dict[str, str] = {}
        for s in board:
            e = entries.get(s.name)
            value = None if e is None else e["value"]
            if value is not None and not columns[s.name].ranked(value):
                reasons[s.name] = "no communication in this trace (0): not ranked"
                value, e = None, None
            metrics[s.name] = None if value is None else float(f"{value * info[s.name]['scale']:.6g}")
            if value is None and s.name not in reasons:
                reasons[s.name] = "not computed" if e is None else (e["reason"] or "no value")
        rows.append({"trace": w["trace"], "metadata": w["metadata"], "metrics": metrics, "reasons": reasons})
    return {
        "generated_at": generated_at,
        "all_metrics": sorted(info),
        "metric_categories": [
            {"id": k, "label": v, "description": CATEGORY_DESCRIPTIONS.get(k, "")}
            for k, v in LEADERBOARD_CATEGORIES.items()
        ],
        "metric_info": info,
        "rows": rows,
    }


def build_board(
    wh: Warehouse,
    out_dir: Path,
    params: dict[str, str] | None = None,
    all_metrics: bool = False,
    use_cache: bool = True,
    force: bool = False,
    on_metric: Callable[[MetricRun], None] | None = None,
    on_start: Callable[[int, int], None] | None = None,
    settings: QuerySettings | None = None,
    on_shared: Callable[[list[str]], None] | None = None,
    pages: bool = True,
) -> BoardResult:
    """Builds (or brings up to date) the site in ``out_dir``.

    ``on_start(traces_to_compute, metrics)`` is called before computing, ``on_metric``
    after each metric (progress bars). ``force`` recomputes every workload. ``pages``:
    write the site's pages (and the data they are rebuilt from; ``cclq board`` asks for
    them where ``is_board_folder``); without them only ``DATA_FILES`` are written, and
    nothing is kept for the next build to reuse but the metric result cache.
    """
    start = time.perf_counter()
    result_box: list[BoardResult] = []
    with staged(out_dir) as stage:
        gone = _build_into(
            stage,
            wh,
            out_dir,
            params,
            all_metrics,
            use_cache,
            force,
            on_metric,
            on_start,
            settings,
            on_shared,
            pages,
            result_box,
        )
    # after the new files are in: a workload that left the warehouse loses its page and
    # data (only files this board wrote, known by their stored data, are ever removed)
    for slug_gone in gone:
        for path in (out_dir / "w" / f"{slug_gone}.html", out_dir / "data" / f"{slug_gone}.json"):
            path.unlink(missing_ok=True)
    result = result_box[0]
    result.seconds = time.perf_counter() - start
    return result


def _build_into(
    stage: Path,
    wh: Warehouse,
    out_dir: Path,
    params: dict[str, str] | None,
    all_metrics: bool,
    use_cache: bool,
    force: bool,
    on_metric: Callable[[MetricRun], None] | None,
    on_start: Callable[[int, int], None] | None,
    settings: QuerySettings | None,
    on_shared: Callable[[list[str]], None] | None,
    pages: bool,
    result_box: list[BoardResult],
) -> list[str]:
    """build_board's work: reads the stored data from ``out_dir``, writes into ``stage``;
    returns the slugs whose files are to go."""
    params = params or {}
    specs = board_specs(all_metrics)
    wh.require()
    con = connect(wh, settings=settings, cache=use_cache)
    try:
        fingerprints = _fingerprints(con, specs, params)
        stored = _stored(out_dir) if pages else {}
    except BaseException:
        con.close()
        raise
    keep = {
        t: d
        for t, d in stored.items()
        if not force and d.get("fingerprint") == fingerprints.get(t) and not _has_failed_metric(d)
    }
    todo = sorted(t for t in fingerprints if t not in keep)
    result = BoardResult(out_dir, len(fingerprints), todo, len(keep), metrics=len(specs), pages=pages)
    result_box.append(result)
    if on_start is not None:
        on_start(len(todo), len(specs))
    fresh: dict[str, dict[str, Any]] = {}
    if todo and len(todo) < len(fingerprints):  # a session over the changed workloads only
        con.close()
        con = connect(wh, traces=todo, settings=settings, cache=use_cache)
    if not todo:
        con.close()
    else:  # every workload: the session that computed the fingerprints (0.1 s less)
        try:
            reports = collect_reports(con, specs, params, on_metric, on_shared)
        except BaseException:
            con.close()
            raise
        result.failed = sorted(
            {f"{o.spec.name}: {o.reason}" for report in reports.values() for o in report.outcomes.values() if o.failed}
        )
        # DuckDB gives the session's memory back without Python's lock (0.5 s after a
        # 500-workload board): meanwhile the data files are written; the pages are
        # forked after it (pages_written)
        closing = threading.Thread(target=con.close, name="cclq-close-session")
        closing.start()
        try:
            for trace, report in reports.items():
                data = report_dict(report, rows=False)
                data.update(fingerprint=fingerprints[trace], slug=slug(trace), board_version=BOARD_VERSION)
                fresh[trace] = data
                if pages:
                    _write(stage / "data" / f"{data['slug']}.json", json.dumps(data, default=str))
        finally:
            closing.join()
    workloads = [fresh.get(t) or keep[t] for t in sorted(fingerprints)]
    if not pages:
        generated_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
        write_data_files(stage, benchmark_data(workloads, specs, generated_at), "cclq board")
        return []
    _write(stage / BOARD_MARKER, BOARD_MARKER_TEXT)
    for name in ASSETS:
        _write(stage / "assets" / name, asset_text(name))
    columns = leaderboard_columns(specs)
    standings = standing(workloads, columns)
    with pages_written(stage, [(data, standings.get(data["trace"], {})) for data in workloads], columns):
        # a workload of an earlier build that left the warehouse: its page and data go
        # once the new files are in (build_board)
        live = {d["slug"] for d in workloads}
        earlier = {d.get("slug") for d in stored.values()}
        gone = sorted({g for g in earlier if isinstance(g, str) and _SAFE_SLUG.fullmatch(g)} - live)
        result.removed = len(gone)
        generated_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
        write_data_files(stage, benchmark_data(workloads, specs, generated_at), "cclq board")
        _write(stage / "index.html", index_page(workloads, columns, generated_at, str(wh.root)))
    return gone


def metric_info(specs: list[MetricSpec], trace_types: list[str]) -> dict[str, dict[str, Any]]:
    """CCL-Bench's metric_info entries for cclq's leaderboard metrics (what
    ``cclq board --write-config`` writes)."""
    return {
        s.name: {
            "label": f"{s.name} ({s.unit})",
            "description": s.description,
            "unit": s.unit,
            "higher_is_better": {"higher": True, "lower": False}.get(s.polarity),
            "category": s.leaderboard,
            "trace_types": list(trace_types),
            "required_update": False,
        }
        for s in specs
        if s.leaderboard
    }


def category_list() -> list[dict[str, str]]:
    return [
        {"id": k, "label": v, "description": CATEGORY_DESCRIPTIONS.get(k, "")}
        for k, v in LEADERBOARD_CATEGORIES.items()
    ]


def write_config(wh: Warehouse, path: Path) -> int:
    """Writes a benchmark_config.json naming every workload of the warehouse (its source
    folder, "auto"); returns the number of pairs."""
    from cclq.present.board.config import CCLQ_TRACE_TYPES, config_for, workload_folder

    wh.require()
    con = connect(wh)
    try:
        paths: dict[str, list[str]] = {}
        for trace, p in con.execute("SELECT trace, path FROM files ORDER BY trace, path").fetchall():
            paths.setdefault(trace, []).append(p)
    finally:
        con.close()
    folders = {t: workload_folder(ps) for t, ps in paths.items()}
    doc = config_for(folders, metric_info(board_specs(), CCLQ_TRACE_TYPES), category_list())
    _write(path, json.dumps(doc, indent=2) + "\n")
    return len(folders)
