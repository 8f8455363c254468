"""pandas frames in the shapes HTA 0.5.0 returns them: its index, column levels and dtypes.

``cclq.TraceAnalysis`` answers as HTA does, so that an HTA script runs after changing its
import line; its results are pandas objects, and pandas is not a dependency of cclq: it
comes with the ``hta`` extra (``pip install 'cclq[hta]'``), imported here when a method
first needs it (``pandas()``).

HTA's integer columns carry the dtype ``pd.to_numeric(..., downcast="integer")`` gave them
when it parsed a rank's file (the smallest of int8 / int16 / int32 / int64 that holds the
column's values over the rows it loaded): ``int_dtype`` is that rule, applied to the same
rows' minimum and maximum (``RankDtypes``).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import pyarrow as pa

from cclq.errors import UsageError

EXTRA_HINT = "pip install 'cclq[hta]' (pandas and plotly, as HTA uses them)"


class MissingExtra(UsageError, ImportError):
    """An optional package of the ``hta`` extra is not installed (an ImportError too, as
    HTA's own missing imports are)."""


def pandas() -> ModuleType:
    """pandas, or a clear error naming the extra that brings it."""
    try:
        import pandas as pd
    except ImportError as e:
        raise MissingExtra(
            f"cclq.TraceAnalysis returns pandas DataFrames, as HTA does, and pandas is not installed ({e})",
            hint=EXTRA_HINT,
        ) from e
    return pd


def plotly_express() -> ModuleType:
    """plotly.express, or a clear error naming the extra (HTA's figures: visualize=True)."""
    return _plotly("plotly.express")


def plotly_graph_objects() -> ModuleType:
    """plotly.graph_objects, for a figure that needs no plotly.express: importing that
    (~0.2 s, its docstrings are built on import) was most of the ATen delays' analysis
    on a small trace, which draws a table whatever ``visualize`` says, as HTA's does."""
    return _plotly("plotly.graph_objects")


def _plotly(module: str) -> ModuleType:
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise MissingExtra(
            f"visualize=True draws HTA's figures with plotly, which is not installed ({e}); "
            "pass visualize=False for the tables alone",
            hint=EXTRA_HINT,
        ) from e


_INT_RANGES = (("int8", 2**7), ("int16", 2**15), ("int32", 2**31))


def int_dtype(low: int | None, high: int | None) -> str:
    """The dtype pandas' ``to_numeric(downcast="integer")`` gives a column of int64 values
    between ``low`` and ``high`` (None: an empty column, which stays int64... as pandas
    leaves it; HTA never downcasts an empty file)."""
    if low is None or high is None:
        return "int8"
    for name, bound in _INT_RANGES:
        if -bound <= low and high < bound:
            return name
    return "int64"


@dataclass(frozen=True)
class RankDtypes:
    """The dtypes of one rank's columns in HTA's trace frame (see the module docstring)."""

    index: str
    stream: str
    correlation: str
    index_correlation: str
    iteration: str  # float64 where some row's iteration is NaN (a ROCm row on stream 0)

    @staticmethod
    def of(row: dict[str, Any]) -> RankDtypes:
        return RankDtypes(
            index=int_dtype(row["index_min"], row["index_max"]),
            stream=int_dtype(row["stream_min"], row["stream_max"]),
            correlation=int_dtype(row["correlation_min"], row["correlation_max"]),
            index_correlation=int_dtype(row["index_correlation_min"], row["index_correlation_max"]),
            iteration="float64" if row["iteration_nan"] else int_dtype(-1, row["iteration_max"]),
        )


def frame(
    table: pa.Table | dict[str, Any],
    dtypes: dict[str, str] | None = None,
    index: str | list[str] | None = None,
    columns: list[str] | None = None,
) -> Any:
    """A pandas DataFrame of ``table`` (an Arrow table or a dict of columns) with pandas'
    own dtypes (text as the installed pandas holds it, not Arrow-backed), ``dtypes``
    applied, ``index`` set, ``columns`` in that order."""
    pd = pandas()
    if isinstance(table, pa.Table):
        data = {name: table.column(name).to_pylist() for name in table.column_names}
    else:
        data = dict(table)
    out = pd.DataFrame(data, columns=columns or list(data))
    for name, dtype in (dtypes or {}).items():
        if name in out.columns:
            out[name] = out[name].astype(dtype)
    if index is not None:
        out = out.set_index(index)
    return out


def describe_frame(rows: pa.Table, keys: list[str], value: str, key_dtypes: dict[str, str]) -> Any:
    """HTA's ``groupby(keys)[[value]].describe()``: the keys as the index, the columns
    (value, count) ... (value, max), all float64, from rows with those statistics
    (count, mean, std, min, p25, p50, p75, max) computed in SQL."""
    pd = pandas()
    stats = ("count", "mean", "std", "min", "p25", "p50", "p75", "max")
    labels = ("count", "mean", "std", "min", "25%", "50%", "75%", "max")
    data = {name: rows.column(name).to_pylist() for name in (*keys, *stats)}
    index = pd.MultiIndex.from_arrays(
        [pd.array(data[k], dtype=key_dtypes.get(k)) if key_dtypes.get(k) else data[k] for k in keys], names=keys
    )
    columns = pd.MultiIndex.from_tuples([(value, label) for label in labels])
    values = {(value, label): pd.array(data[s], dtype="float64") for s, label in zip(stats, labels)}
    return pd.DataFrame(values, index=index, columns=columns)


def flatten_column_names(df: Any) -> None:
    """HTA's utils.flatten_column_names: a frame's MultiIndex column labels joined by "_"
    (trailing "_" dropped), in place; other frames are left as they are."""
    pd = pandas()
    if isinstance(df.columns, pd.MultiIndex):
        df.columns = ["_".join(col).rstrip("_") for col in df.columns]
