"""The output formats a command accepts, apart from ``render`` so that the command line
can name them in its options without importing pyarrow (``cclq --help`` stays fast)."""

from __future__ import annotations

from enum import Enum


class OutputFormat(str, Enum):
    table = "table"
    csv = "csv"
    json = "json"
    parquet = "parquet"
