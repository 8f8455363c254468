"""A metric's rows come in one total order, so that a result is the same bytes each time
and results computed over parts of the traces (``--dask``) combine into exactly the
result of one query over all of them (``combine_results``). No Dask needed here."""

from __future__ import annotations

import math

import pyarrow as pa
import pytest
from helpers.presentation_traces import two_rank_run
from helpers.warehouse import run_ingest

from cclq.query.metrics import combine_results, run_metric
from cclq.query.registry import resolve
from cclq.query.session import connect

pytestmark = pytest.mark.slow  # (CONTRIBUTING.md: over ~2 s each)

# one with several rows per trace and no rank (ties on trace), one per rank, one per step
METRICS = ["hta_kernel_type_breakdown", "total_kernel_time", "coll_call_num"]


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory):
    from cclq.store.warehouse import Warehouse
    from cclq.synth.kineto import generate_workload

    root = tmp_path_factory.mktemp("runs")
    two_rank_run(root / "run_a")
    two_rank_run(root / "run_b", gemm_us=150, extra_kernel="softmax_kernel", allreduce=False)
    generate_workload(root / "dp2", ranks=2, steps=2, layers=2, seed=3)
    wh = Warehouse(tmp_path_factory.mktemp("wh") / "wh")
    run_ingest([root], wh)
    return wh


def _run(wh, name: str, traces: list[str] | None = None) -> pa.Table:
    con = connect(wh, traces=traces)
    try:
        return run_metric(con, resolve(name))
    finally:
        con.close()


def _sort_key(row: dict, columns: list[str]) -> tuple:
    """The documented order in plain Python: trace, rank, step, the detail columns,
    value, reason; NULLs last in each."""
    first, last = ["trace", "rank", "step"], ["value", "reason"]
    order = first + [c for c in columns if c not in first + last + ["unit"]] + last
    return tuple((row[c] is None, row[c] if row[c] is not None else 0) for c in order)


@pytest.mark.parametrize("name", METRICS)
def test_rows_come_in_one_total_order(warehouse, name):
    table = _run(warehouse, name)
    rows = table.to_pylist()
    assert len({r["trace"] for r in rows}) == 3
    assert len(rows) > 3  # several rows per trace: the order among them is what is tested
    assert rows == sorted(rows, key=lambda r: _sort_key(r, table.column_names))


def test_ties_on_trace_are_ordered_by_the_detail_columns(warehouse):
    rows = _run(warehouse, "hta_kernel_type_breakdown", ["run_a"]).to_pylist()
    labels = [r["kernel_type"] for r in rows]
    assert labels == sorted(labels) and len(labels) >= 2


@pytest.mark.parametrize("name", METRICS)
def test_parts_combine_into_the_result_of_one_query(warehouse, name):
    whole = _run(warehouse, name)
    # each trace alone, handed over in the wrong order, plus a part of two traces
    parts = [_run(warehouse, name, ["run_b"]), _run(warehouse, name, ["dp2"]), _run(warehouse, name, ["run_a"])]
    assert combine_results(parts).equals(whole)
    assert combine_results([_run(warehouse, name, ["run_b", "dp2"]), _run(warehouse, name, ["run_a"])]).equals(whole)
    assert combine_results(parts).schema.equals(whole.schema, check_metadata=True)


def test_combining_sorts_nulls_and_nans_as_duckdb_does():
    """The order is DuckDB's (NULLs last, NaN after every number), not a second
    implementation of it; the values stay the bytes they were."""
    schema = pa.schema(
        [
            ("trace", pa.string()),
            ("rank", pa.int32()),
            ("step", pa.int64()),
            ("value", pa.float64()),
            ("unit", pa.string()),
            ("reason", pa.string()),
        ]
    )
    a = pa.Table.from_pylist(
        [
            {"trace": "b", "rank": None, "step": None, "value": math.nan, "unit": "s", "reason": None},
            {"trace": "b", "rank": None, "step": None, "value": None, "unit": "s", "reason": "x"},
        ],
        schema=schema,
    )
    b = pa.Table.from_pylist(
        [
            {"trace": "b", "rank": None, "step": None, "value": -0.5, "unit": "s", "reason": None},
            {"trace": "a", "rank": 1, "step": None, "value": 2.0, "unit": "s", "reason": None},
            {"trace": "a", "rank": 0, "step": 3, "value": 1.0, "unit": "s", "reason": None},
        ],
        schema=schema,
    )
    rows = combine_results([a, b]).to_pylist()
    assert [(r["trace"], r["rank"], r["step"]) for r in rows] == [
        ("a", 0, 3),
        ("a", 1, None),
        ("b", None, None),
        ("b", None, None),
        ("b", None, None),
    ]
    values = [r["value"] for r in rows[2:]]
    assert values[0] == -0.5 and math.isnan(values[1]) and values[2] is None
