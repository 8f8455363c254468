"""The daemon's handler of ``python -m cclq.main`` calls: work for the calls to come.

CCL-Bench's website generator asks for every (workload folder, metric) of one folder of
workloads (``trace_collection/``), one process per number. Done call by call, each
folder pays an ingest of its own (a parser pool, a commit, a compaction) and each
(folder, metric) a query of its own, which made the first loop over a fresh warehouse
no faster than CCL-Bench's scripts. So the daemon, before answering a call:

* **ingests the call's sibling folders with it**, once per (warehouse, parent folder)
  in the daemon's life: every workload folder beside the asked one, in one ingest (one
  parser pool over all their files, one compaction), since the generator asks for
  them next. Only folders that are one workload each (what the call itself accepts),
  at most ``MAX_SIBLINGS`` of them and ``MAX_SIBLING_BYTES`` of files together (else
  only the asked folder, as before; ``CCLQ_DAEMON_SIBLINGS=0`` in the caller's
  environment turns this and the next point off). A sibling that fails is left out
  silently: its own call ingests it again and reports the error then.
* **computes the asked metric for all of them in one query** when the asked folder's
  result is not in the result cache, and stores each trace's rows as that trace's
  cached result, under the name a call for that trace alone looks up
  (``cclq.query.cache.result_file``). A metric's rows for one trace do not depend on the
  other traces of its query (the same property ``--dask`` relies on to compute by trace
  partitions, ``cclq.query.metrics.combine_results``), so the next folders' calls read
  what they would have computed.

Then the call itself runs as it does without a daemon (``cclq.compat.main.run_here``):
its own ingest (now a no-op check), the cached result, the same output and exit status.
Nothing here can change an answer: any error in this preparation is logged and the call
goes on as if it had not happened. Nothing it does is printed into the call's output.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cclq.query.registry import MetricSpec
    from cclq.store.warehouse import Warehouse

SIBLINGS_ENV = "CCLQ_DAEMON_SIBLINGS"  # 0: only the asked folder, as a call without the daemon
MAX_SIBLINGS = 200
MAX_SIBLING_BYTES = 8 << 30  # 8 GiB of trace files: beyond that a first call would wait too long


class WarmCalls:
    """``run(argv) -> exit status`` for the daemon (``cclq.compat.daemon.serve_calls``),
    with the state it keeps between calls: the traces of each parent folder it ingested."""

    def __init__(self, run_call: Callable[[list[str]], int]) -> None:
        self.run_call = run_call
        # (warehouse, parent folder) -> {workload folder: trace id} of its siblings ingested whole
        self.siblings: dict[tuple[str, str], dict[str, str]] = {}

    def __call__(self, argv: list[str]) -> int:
        log = io.StringIO()
        try:
            with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
                self.prepare(argv)
        except Exception as e:  # noqa: BLE001 - preparation is an optimisation, never the answer
            log.write(f"cclq daemon: preparing {argv} failed: {type(e).__name__}: {e}\n")
        daemon_log = sys.__stderr__  # the daemon's log file, not the caller's stderr
        if log.getvalue() and daemon_log is not None:
            daemon_log.write(log.getvalue())
            daemon_log.flush()
        return self.run_call(argv)

    def prepare(self, argv: list[str]) -> None:
        """Ingests the call's siblings (first call for their parent) and computes the
        asked metric for all of them when the call's own result is not cached."""
        from cclq.compat.main import arg_parser, metric_params
        from cclq.errors import CclqError
        from cclq.store.warehouse import Warehouse, resolve_warehouse

        try:
            args = arg_parser().parse_args(argv)
        except SystemExit:
            return  # the call reports it
        folder = Path(args.trace).expanduser()
        if not folder.is_dir():
            return
        folder = folder.resolve()
        try:
            from cclq.query.registry import resolve

            spec = resolve(args.metric)
            wh = Warehouse(resolve_warehouse(args.warehouse))
        except CclqError:
            return
        key = (str(wh.root), str(folder.parent))
        if os.environ.get(SIBLINGS_ENV, "1").strip().lower() in ("0", "false", "no", "off"):
            return  # the caller's environment (the daemon takes its CCLQ_* names per call)
        if key not in self.siblings:
            self.siblings[key] = ingest_siblings(folder.parent, wh)
        traces = self.siblings[key]
        if str(folder) not in traces:
            return
        compute_for_all(wh, spec, metric_params(spec, args), traces[str(folder)], sorted(set(traces.values())))


def ingest_siblings(parent: Path, wh: Warehouse) -> dict[str, str]:
    """Ingests every workload folder in ``parent`` in one ingest; {folder: the trace a call
    for it answers for} of those that ingested without a failed file (``answer_trace``: a
    folder of several runs answers for one of them). Empty when there are too many or
    they are too big (then each call ingests its own folder)."""
    from cclq.ingest.plan import Workload, plan_inputs, rename_workload
    from cclq.ingest.run import ingest
    from cclq.store.warehouse import ReadOnlyWarehouse

    try:
        folders = sorted(p for p in parent.iterdir() if p.is_dir() and not p.name.startswith("."))
    except OSError:
        return {}
    if len(folders) > MAX_SIBLINGS:
        return {}
    accepted, total = [], 0
    planned: dict[str, Workload] = {}
    for folder in folders:
        try:
            workloads = plan_inputs([folder], wh.root)
        except Exception:  # noqa: BLE001 - a folder the call would refuse is no sibling
            continue
        if len(workloads) != 1 or workloads[0].failure is not None or str(workloads[0].root) != str(folder):
            continue
        for path in workloads[0].files:
            with contextlib.suppress(OSError):
                total += os.stat(path).st_size
        accepted.append(folder)
        planned[str(folder)] = workloads[0]
    if not accepted or total > MAX_SIBLING_BYTES:
        return {}
    try:
        report = ingest(accepted, wh, jobs=None, distinct_ids=True)
    except ReadOnlyWarehouse:
        return {}
    failed = {o.trace for o in report.failed}
    out = {}
    for root, trace in report.traces.items():
        w = planned.get(root)
        if w is None or trace in failed:
            continue
        if trace != w.trace:
            rename_workload(w, trace)
        if not w.traces & failed:
            out[root] = w.answer_trace()
    return out


def compute_for_all(wh: Warehouse, spec: MetricSpec, params: dict[str, str], trace: str, traces: list[str]) -> None:
    """When ``trace``'s result of ``spec`` is not cached: one query over ``traces``, and
    each trace's rows stored as its own cached result (those already cached are kept)."""
    import pyarrow.compute as pc

    from cclq.query.cache import result_file, store_result
    from cclq.query.metrics import run_metric
    from cclq.query.session import QuerySettings, connect

    with wh.open_snapshot() as snapshot:
        paths = {t: result_file(wh.cache_dir, snapshot, [t], spec, params) for t in traces}
        snapshot_id = snapshot.id
    if paths[trace].exists():
        return
    todo = [t for t in traces if not paths[t].exists()]
    con = connect(wh, traces=todo, settings=QuerySettings.from_env(), snapshot_id=snapshot_id)
    try:
        table = run_metric(con, spec, params)
    finally:
        con.close()
    if "trace" not in table.column_names:
        return
    for t in todo:
        store_result(table.filter(pc.equal(table.column("trace"), t)), paths[t])
