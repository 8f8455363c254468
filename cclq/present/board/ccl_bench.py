"""``cclq board OUT --config benchmark_config.json``: CCL-Bench's website data from its config.

What ``website/generate_data.py`` writes when its ``tools/main.py`` is cclq's shim, in one
process: the same ``benchmark_data.json`` and ``data.js``, cell for cell
(``tests/present/test_board_config.py`` builds both from one config). The steps:

1. every pair's folder is planned as ``python -m cclq.main --trace DIR`` plans it (one
   workload; a folder that holds several runs answers for the run CCL-Bench's tools read,
   ``Workload.answer_trace``), and all of them are ingested at once, into a warehouse that
   may not exist yet (unchanged files are skipped);
2. each row's ``metadata``, and the ``auto`` choice of metrics, come from the folder's card
   as ``generate_data.py`` reads it (``config.card_document``, ``ccl_bench_metadata``);
3. the metrics to compute run as one batch over every trace that needs one of them
   (``run_metrics``), and each value is what ``python -m cclq.main`` prints for it: the
   metric's summary in the unit CCL-Bench's tool prints (``MetricSpec.ccl_bench_value``),
   6 significant digits, ``null`` where there is none (cclq's reason in ``reasons``);
4. only ``benchmark_data.json`` and ``data.js`` go into a folder cclq's board was not built
   in (CCL-Bench's ``website/``), unless ``pages`` asks for cclq's site there too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from cclq.errors import CclqError
from cclq.ingest.plan import Workload, plan_inputs, rename_workload
from cclq.ingest.report import IngestReport, Reporter
from cclq.present.board.build import BoardResult, build_board, is_board_folder, write_data_files
from cclq.present.board.config import (
    PairPlan,
    cached_values,
    card_document,
    ccl_bench_metadata,
    load_board_config,
    plan_pair,
    six_digits,
    stale_metrics,
)
from cclq.query.metrics import MetricRun, run_metrics, summarize_rows
from cclq.query.registry import registry, resolve
from cclq.query.session import QuerySettings, connect
from cclq.store.warehouse import Warehouse


@dataclass
class ConfigBoardResult:
    board: BoardResult | None  # cclq's site, when its pages were written too
    pairs: int = 0
    computed: int = 0  # (pair, metric) values computed
    reused: int = 0  # values taken from the benchmark_data.json already in OUT
    problems: list[str] = field(default_factory=list)  # one line each: a pair or metric that failed
    notes: list[str] = field(default_factory=list)  # one line each: which run a folder of several answers for
    ingest: IngestReport | None = None  # the ingest of the pairs' folders
    traces: list[str] = field(default_factory=list)  # the trace each pair answers for, ingested in this build


def _plan_folders(cfg_pairs: list[Any], wh: Warehouse, problems: list[str]) -> dict[int, Workload | None]:
    """Each pair's workload, as ``python -m cclq.main --trace`` plans its folder; None
    (with the problem said) for a path that is not there or holds several workloads."""
    planned: dict[int, Workload | None] = {}
    for i, pair in enumerate(cfg_pairs):
        try:
            workloads = [w for w in plan_inputs([Path(pair.trace).expanduser()], wh.root) if not w.failure]
        except CclqError as e:
            problems.append(f"{pair.trace}: {e.message}")
            planned[i] = None
            continue
        if len(workloads) != 1:
            problems.append(f"{pair.trace}: holds {len(workloads)} workloads; a pair names one workload folder")
            planned[i] = None
            continue
        planned[i] = workloads[0]
    return planned


def _ingest_all(workloads: list[Workload], wh: Warehouse, reporter: Reporter | None) -> IngestReport | None:
    """One ingest of every pair's folder (several when two folders of one name come from
    different parents: each gets its own trace id, as ``python -m cclq.main`` gives it)."""
    from cclq.ingest.run import ingest

    roots = list(dict.fromkeys(w.root for w in workloads))
    merged: IngestReport | None = None
    while roots:
        names: set[str] = set()
        batch: list[Path] = []
        rest: list[Path] = []
        for root in roots:
            (batch if root.name not in names else rest).append(root)
            names.add(root.name)
        report = ingest(batch, wh, reporter=reporter, distinct_ids=True)
        if merged is None:
            merged = report
        else:
            merged.outcomes += report.outcomes
            merged.warnings += report.warnings
            merged.traces.update(report.traces)
        roots = rest
    return merged


def build_from_config(
    wh: Warehouse,
    out_dir: Path,
    config_path: Path,
    params: dict[str, str] | None = None,
    use_cache: bool = True,
    on_start: Callable[[int, int], None] | None = None,
    on_metric: Callable[[MetricRun], None] | None = None,
    settings: QuerySettings | None = None,
    pages: bool | None = None,
    reporter: Reporter | None = None,
) -> ConfigBoardResult:
    """Writes ``out_dir/benchmark_data.json`` and ``data.js`` for the config (module
    docstring), and cclq's site beside them when ``pages`` (None: when ``out_dir`` is a
    folder cclq's board may write into, ``is_board_folder``). ``on_start(traces, metrics)``
    and ``on_metric`` follow the computation (progress bars), ``reporter`` the ingest."""
    params = params or {}
    cfg = load_board_config(config_path)
    pages = is_board_folder(out_dir) if pages is None else pages
    problems: list[str] = []
    result = ConfigBoardResult(None, pairs=len(cfg.pairs))
    planned = _plan_folders(cfg.pairs, wh, problems)
    report = (
        _ingest_all([w for w in planned.values() if w is not None], wh, reporter) if any(planned.values()) else None
    )
    result.ingest = report
    if report is not None:
        problems += [o.message for o in report.failed]
    held = (
        {row["path"] for row in wh.read_state().files.values()}
        if wh.exists() and report is not None and report.failed
        else set()
    )
    stale_pairs: set[int] = set()  # pairs whose folder failed to ingest where the warehouse holds older data
    ids: dict[int, str | None] = {}
    for i, w in planned.items():
        trace = report.traces.get(str(w.root)) if report is not None and w is not None else None
        if report is None or w is None or trace is None:
            ids[i] = None
            continue
        if trace != w.trace:
            rename_workload(w, trace)
        ids[i] = w.answer_trace()
        if any(o.trace in w.traces or o.path == str(w.root) for o in report.stale(held)):
            stale_pairs.add(i)
        note = w.runs_note()
        if note is not None and note not in result.notes:
            result.notes.append(note)
    known: set[str] = set()
    if wh.exists():
        with wh.open_snapshot() as snapshot:
            known = set(snapshot.trace_ids())
    cache = cached_values(out_dir / "benchmark_data.json")
    stale = stale_metrics(cfg.metric_info)
    plans: list[PairPlan] = []
    metadata: list[dict[str, Any]] = []
    for i, pair in enumerate(cfg.pairs):
        doc = card_document(Path(pair.trace).expanduser())
        meta = ccl_bench_metadata(pair.trace, doc)
        metadata.append(meta)
        trace_id = ids[i] if ids[i] in known else None
        types = meta.get("trace_types") or []
        plans.append(
            plan_pair(
                pair,
                trace_id,
                list(types) if isinstance(types, list) else [],
                meta.get("phase") or None,
                cfg.metric_info,
                stale,
                cache,
            )
        )
    result.traces = sorted({p.trace_id for p in plans if p.trace_id is not None})
    values = _compute(wh, plans, params, use_cache, settings, on_start, on_metric, problems)
    rows_out = []
    all_metrics: set[str] = set()
    for i, (p, meta) in enumerate(zip(plans, metadata)):
        metrics: dict[str, float | None] = {}
        reasons: dict[str, str] = {}
        reason: str | None
        for m in p.metrics:
            all_metrics.add(m)
            if m in p.cached:
                metrics[m] = p.cached[m]
                result.reused += 1
                continue
            if p.trace_id is None:
                value, reason = None, "the trace folder was not ingested"
            elif i in stale_pairs:  # as python -m cclq.main: no old number passed off as current
                value, reason = (
                    None,
                    "files of the folder failed to ingest (see the errors) and the warehouse "
                    "holds an older version of them",
                )
            else:
                value, reason = values.get((p.trace_id, m), (None, "not computed"))
                result.computed += 1
            metrics[m] = six_digits(value)
            if metrics[m] is None:
                reasons[m] = reason or "no value"
        if p.note:
            problems.append(f"{p.pair.trace}: {p.note}")
        rows_out.append({"trace": p.pair.trace, "metadata": meta, "metrics": metrics, "reasons": reasons})
    if pages:
        result.board = (
            build_board(wh, out_dir, params, use_cache=use_cache, settings=settings, pages=True)
            if wh.exists()
            else None
        )
    bench = {
        "generated_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "all_metrics": sorted(all_metrics),
        "metric_categories": cfg.metric_categories,
        "metric_info": cfg.metric_info,
        "rows": rows_out,
    }
    write_data_files(out_dir, bench, "cclq board --config")
    result.problems = problems
    return result


def _compute(
    wh: Warehouse,
    plans: list[PairPlan],
    params: dict[str, str],
    use_cache: bool,
    settings: QuerySettings | None,
    on_start: Callable[[int, int], None] | None,
    on_metric: Callable[[MetricRun], None] | None,
    problems: list[str],
) -> dict[tuple[str, str], tuple[float | None, str | None]]:
    """(trace, metric) -> (value as written, reason) for every value the plans compute:
    the metrics as one batch over the traces that need any of them."""
    wanted: dict[str, set[str]] = {}
    for p in plans:
        if p.trace_id is not None:
            for m in p.to_compute:
                wanted.setdefault(m, set()).add(p.trace_id)
    values: dict[tuple[str, str], tuple[float | None, str | None]] = {}
    for name in sorted(n for n in wanted if n not in registry()):
        problems.append(f"metric {name}: unknown to cclq (`cclq metrics` lists them)")
        for t in wanted.pop(name):
            values[(t, name)] = (None, f"unknown metric {name}")
    if not wanted:
        return values
    specs = [resolve(name) for name in sorted(wanted)]
    traces = sorted(set().union(*wanted.values()))
    if on_start is not None:
        on_start(len(traces), len(specs))
    con = connect(wh, traces=traces, settings=settings, cache=use_cache)
    try:
        runs = run_metrics(con, specs, params, on_done=on_metric, plan_first=True)
    finally:
        con.close()
    for spec in specs:
        run = runs[spec.name]
        if run.error:
            problems.append(f"metric {spec.name}: {run.error}")
        rows_of: dict[str, list[dict[str, Any]]] = {}
        if run.table is not None:
            for row in run.table.to_pylist():
                rows_of.setdefault(row["trace"], []).append(row)
        for t in wanted[spec.name]:
            if run.error:
                values[(t, spec.name)] = (None, "the metric failed")
            elif t in run.not_applicable and t not in rows_of:
                values[(t, spec.name)] = (None, run.not_applicable[t])
            else:
                value, reason = summarize_rows(spec, rows_of.get(t, []))
                values[(t, spec.name)] = (spec.ccl_bench_value(value), reason)
    return values
