"""A cached result's rows kept as JSON (``cclq.query.cache.store_rows``) print exactly as
the Parquet result they were kept from, in every format; values JSON would change are
not kept, and such a result is read from its Parquet file."""

from __future__ import annotations

import io
import json
from datetime import date, datetime, timezone
from decimal import Decimal

import pyarrow as pa
import pytest

from cclq.present.output import OutputFormat
from cclq.present.render import write_rows, write_table
from cclq.query.cache import read_rows, rows_file, store_result

TEXT_FORMATS = (OutputFormat.table, OutputFormat.csv, OutputFormat.json)


def _printed(write, *args) -> dict[OutputFormat, str]:  # noqa: ANN001
    out = {}
    for fmt in TEXT_FORMATS:
        buffer = io.StringIO()
        write(*args, fmt, buffer, None, "metric (unit)")
        out[fmt] = buffer.getvalue()
    return out


def test_kept_rows_print_as_the_table_they_were_kept_from(tmp_path):
    table = pa.table(
        {
            "trace": ["a", "b\x1b]0;title\x07", "=HYPERLINK(1)", "ünïcode", None],
            "rank": pa.array([0, 1, None, 2**40, -3], pa.int64()),
            "value": [1.5e-6, float("nan"), float("inf"), -0.0, 1e300],
            "ratio": pa.array([0.1, 0.2, 0.30000000000000004, None, 2 / 3], pa.float32()),
            "flag": [True, False, None, True, False],
            "bytes": pa.array([Decimal("12345678901234567890"), None, Decimal(0), Decimal(-7), Decimal(1)]),
            "sizes": [[1, 2], [], None, [3], [4, 5, 6]],
            "detail": [{"k": "x", "n": 1.0}, {"k": None, "n": 2.5}, None, {"k": "y", "n": None}, {"k": "", "n": 0.0}],
        }
    )
    cached = tmp_path / "m.v1.key.parquet"
    store_result(table, cached)
    kept = read_rows(cached)
    assert kept is not None
    names, rows = kept
    assert names == table.column_names
    assert repr(rows) == repr(table.to_pylist())  # repr: NaN equals nothing, and types show
    assert _printed(write_rows, names, rows) == _printed(write_table, table)


@pytest.mark.parametrize(
    "column",
    [
        pa.array([date(2026, 1, 2)]),
        pa.array([datetime(2026, 1, 2, tzinfo=timezone.utc)]),
        pa.array([b"\x00\x01"]),
        pa.array([[("k", 1)]], pa.map_(pa.string(), pa.int64())),
        pa.array([[Decimal("1.5")]], pa.list_(pa.decimal128(5, 1))),
    ],
    ids=["date", "timestamp", "binary", "map", "nested decimal"],
)
def test_values_json_would_change_are_not_kept(tmp_path, column):
    cached = tmp_path / "m.v1.key.parquet"
    store_result(pa.table({"trace": ["a"], "x": column}), cached)
    assert cached.exists() and not rows_file(cached).exists()
    assert read_rows(cached) is None


def test_an_unreadable_rows_file_is_not_read(tmp_path):
    cached = tmp_path / "m.v1.key.parquet"
    store_result(pa.table({"trace": ["a"], "value": [1.0]}), cached)
    rows_file(cached).write_text(json.dumps({"columns": ["trace", "value"]}))  # rows missing
    assert read_rows(cached) is None
