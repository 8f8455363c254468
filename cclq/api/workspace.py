"""cclq from Python, for notebooks: ``cclq.open()`` and the objects it returns.

A ``Workspace`` is a warehouse opened for analysis. Its methods return polars
DataFrames (``.to_pandas()`` where pandas is installed) and report/diff objects that
display in Jupyter (``_repr_html_``: the same page and SVG figures as ``cclq report -f
html``) and can be saved. Each call opens a query ``Session`` on the current snapshot and
closes it, so a notebook sees what the last ingest committed, and results go through the
same cache as ``cclq metric``.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from cclq.errors import UsageError
from cclq.ingest.report import IngestReport
from cclq.ingest.run import ingest
from cclq.query.metrics import run_metric, run_metrics
from cclq.query.params import check_batch_params
from cclq.query.registry import MetricSpec, latest_specs, resolve
from cclq.query.session import Session
from cclq.query.settings import QuerySettings
from cclq.store.objects import local_inputs
from cclq.store.remote import open_warehouse
from cclq.store.warehouse import Warehouse

# polars and the report / diff / board modules are imported by the methods that use them:
# cclq.TraceAnalysis (HTA's API, pandas) holds a Workspace and needs none of them, and
# they were 0.5 s of its start-up.
if TYPE_CHECKING:
    import polars as pl

    from cclq.present.diff import DiffResult


def open(
    path: str | Path | None = None,
    *,
    memory_limit: str | None = None,  # noqa: A001 (cclq.open reads well)
    spill_dir: str | Path | None = None,
    cache: bool = True,
) -> Workspace:
    """The warehouse at ``path`` (default: ``$CCLQ_WAREHOUSE``, else ``./.cclq/warehouse``),
    opened for analysis. ``memory_limit`` / ``spill_dir`` as the CLI's options take them."""
    settings = QuerySettings(memory_limit, Path(spill_dir) if spill_dir else None)
    settings.duckdb_memory_limit()  # a bad limit fails here, not in the first query
    return Workspace(open_warehouse(None if path is None else str(path)), settings, cache)


@dataclass
class Workspace:
    """A warehouse opened for analysis from Python (see ``cclq.open``)."""

    warehouse: Warehouse
    settings: QuerySettings = field(default_factory=QuerySettings)
    cache: bool = True

    def _session(self, traces: Sequence[str] | None = None, comments: bool = False) -> Session:
        self.warehouse.require()
        return Session(self.warehouse, traces=traces, settings=self.settings, comments=comments, cache=self.cache)

    def ingest(self, *paths: str | Path, jobs: int | None = None) -> IngestReport:
        """Ingests workload folders or trace files (as ``cclq ingest``); unchanged files are skipped."""
        return ingest(local_inputs(paths), self.warehouse, jobs=jobs)

    def traces(self) -> pl.DataFrame:
        """One row per trace: format, world size, ranks, span, card fields (``cclq traces``)."""
        with self._session(comments=True) as s:
            return _frame(s.arrow("SELECT * FROM traces ORDER BY trace"))

    def metric(
        self, name: str, traces: str | Sequence[str] | None = None, version: int | None = None, **params: Any
    ) -> pl.DataFrame:
        """One metric's rows over every trace (or ``traces``: ids or glob patterns), as
        ``cclq metric NAME``; keyword arguments are its parameters."""
        spec = resolve(name, version)
        with self._session(self._select(traces)) as s:
            return _frame(run_metric(s, spec, _params(params)))

    def metrics(
        self, names: Iterable[str] | None = None, traces: str | Sequence[str] | None = None, **params: Any
    ) -> pl.DataFrame:
        """Several metrics (default: all) in one session, long form: a ``metric`` column, the
        common columns, and each metric's own columns in the ``details`` struct."""
        import polars as pl

        specs = [resolve(n) for n in names] if names is not None else latest_specs()
        given = _params(params)
        check_batch_params(specs, given)
        with self._session(self._select(traces)) as s:
            runs = run_metrics(s, specs, given)
        frames = []
        for spec in specs:
            run = runs[spec.name]
            if run.table is None:
                raise UsageError(f"{spec.label}: {run.error}")
            frames.append(_long(spec, run.table))
        return pl.concat(frames, how="diagonal_relaxed") if frames else pl.DataFrame()

    def sql(self, query: str, read_only: bool = True) -> pl.DataFrame:
        """Ad-hoc SQL over the views, read-only unless ``read_only=False`` (as ``cclq sql``)."""
        with self._session(comments=True) as s:
            return _frame(s.run_user_query(query, read_only=read_only))

    def report(self, trace: str) -> Report:
        """Every metric of one trace, grouped, with its figures (``cclq report``)."""
        from cclq.present.report import collect_reports, report_dict

        specs = latest_specs()
        with self._session([self._one(trace)]) as s:
            reports = collect_reports(s, specs)
        return Report(report_dict(reports[trace], rows=True))

    def diff(self, a: str, b: str, rank: int | None = None) -> Diff:
        """Side A against side B (trace ids, comma lists or globs), as ``cclq diff``."""
        from cclq.present.diff import diff as run_diff
        from cclq.present.diff import resolve_side

        known = self._known()
        side_a, side_b = resolve_side(a, known), resolve_side(b, known)
        with self._session(side_a + side_b) as s:
            return Diff(run_diff(s, latest_specs(), side_a, side_b, rank=rank))

    # -- helpers ----------------------------------------------------------------
    def _known(self) -> list[str]:
        self.warehouse.require()
        with self.warehouse.open_snapshot() as snapshot:
            return snapshot.trace_ids()

    def _select(self, traces: str | Sequence[str] | None) -> list[str] | None:
        if traces is None:
            return None
        from cclq.present.diff import resolve_side

        wanted = [traces] if isinstance(traces, str) else list(traces)
        known = self._known()
        return sorted({t for w in wanted for t in resolve_side(w, known)})

    def _one(self, trace: str) -> str:
        if trace not in self._known():
            raise UsageError(f"no trace {trace!r} in {self.warehouse.root}", hint="Workspace.traces() lists them")
        return trace


def _params(params: dict[str, Any]) -> dict[str, str]:
    return {k: str(v) for k, v in params.items()}


def _frame(table: pa.Table) -> pl.DataFrame:
    import polars as pl

    frame = pl.from_arrow(table)
    assert isinstance(frame, pl.DataFrame)
    return frame


_FIXED = ("trace", "rank", "step", "value", "unit", "reason")


def _long(spec: MetricSpec, table: pa.Table) -> pl.DataFrame:
    """A metric's rows with ``metric``/``version`` first and its own columns in ``details``."""
    import polars as pl

    frame = _frame(table)
    own = [c for c in frame.columns if c not in _FIXED]
    details = pl.struct(own).alias("details") if own else pl.lit(None).alias("details")
    return frame.select(
        pl.lit(spec.name).alias("metric"), pl.lit(spec.version).alias("version"), *[pl.col(c) for c in _FIXED], details
    )


@dataclass
class Report:
    """``Workspace.report``'s result: ``data`` is what ``cclq report -f json`` prints;
    in Jupyter it shows as the HTML report with its figures."""

    data: dict[str, Any]

    def html(self) -> str:
        from cclq.present.board.pages import workload_page

        return workload_page(self.data, standalone=True)

    def _repr_html_(self) -> str:
        return self.html()

    def save(self, path: str | Path) -> Path:
        """Writes the standalone HTML page (``.html``) or the JSON (``.json``)."""
        import json

        target = Path(path)
        text = json.dumps(self.data, indent=1, default=str) if target.suffix == ".json" else self.html()
        target.write_text(text)
        return target

    def metrics(self) -> pl.DataFrame:
        """One row per metric of the report: value, unit, reason."""
        import polars as pl

        rows = [
            {
                "category": group["id"],
                "metric": m.get("metric"),
                "value": m.get("value"),
                "unit": m.get("unit"),
                "reason": m.get("reason"),
            }
            for group in self.data.get("categories", [])
            for m in group["metrics"]
        ]
        return pl.DataFrame(
            rows,
            schema={"category": pl.Utf8, "metric": pl.Utf8, "value": pl.Float64, "unit": pl.Utf8, "reason": pl.Utf8},
        )


@dataclass
class Diff:
    """``Workspace.diff``'s result; shows as tables in Jupyter."""

    result: DiffResult

    def to_frame(self) -> pl.DataFrame:
        """The long table of ``cclq diff -f csv``: a ``part`` column (metric, op_group, op)."""
        import polars as pl

        from cclq.present.diff import long_rows

        return pl.DataFrame(long_rows(self.result), infer_schema_length=None)

    def to_dict(self) -> dict[str, Any]:
        from cclq.present.diff import diff_dict

        return diff_dict(self.result)

    def _repr_html_(self) -> str:
        from cclq.present.diff import long_rows

        rows = long_rows(self.result)
        metrics = [r for r in rows if r.get("part") == "metric"]
        head = "<tr><th>metric</th><th>A</th><th>B</th><th>change</th></tr>"
        body = "".join(
            f"<tr><td>{html.escape(str(r.get('name')))}</td><td>{_num(r.get('a'))}</td><td>{_num(r.get('b'))}</td>"
            f"<td>{_pct(r.get('rel'))}</td></tr>"
            for r in metrics
        )
        sides = (
            f"<p><b>A</b>: {html.escape(', '.join(self.result.a))} &nbsp; "
            f"<b>B</b>: {html.escape(', '.join(self.result.b))}</p>"
        )
        return f"<div class='cclq-diff'>{sides}<table>{head}{body}</table></div>"


def _num(v: Any) -> str:
    return "" if v is None else html.escape(f"{v:.6g}" if isinstance(v, float) else str(v))


def _pct(v: Any) -> str:
    return "" if v is None else f"{v * 100:+.1f} %"
