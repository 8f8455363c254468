"""Printing query results: the only module that formats data for the user.

stdout carries data only (a table, or exactly CSV / JSON); notices go to stderr,
so ``cclq sql ... --format csv > out.csv`` is clean.

Text from traces, cards and file names reaches a terminal only through ``cell`` (or
``clean``): never read as Rich markup (a kernel named ``[/x]`` aborted ``cclq diff``,
``[link=URL]`` made a hyperlink), and with control characters shown as escapes
(``\x1b]0;title\x07`` set the terminal's title, ``\x1b[2J`` cleared the screen).
JSON and Parquet output keep the data exactly as it is. CSV does too, except for a text
cell a spreadsheet would run as a formula (``csv_cell``: one that starts with ``=``, ``+``,
``-``, ``@``, a tab or a carriage return, as OWASP's CSV-injection guidance lists them),
which gets a leading ``'``: ``=HYPERLINK(...)`` from a results file or a kernel name is
shown as text when the CSV is opened, never run. Numbers are numbers, never changed
(``-1.5`` stays), and so is a text that is exactly a number (``"-2"``).
"""

from __future__ import annotations

import csv
import json
import math
import re
import sys
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from cclq.errors import UsageError
from cclq.present.output import OutputFormat, json_text

if TYPE_CHECKING:
    import pyarrow as pa

MAX_TABLE_ROWS = 500

# C0 and C1 control characters, DEL, and the bidirectional overrides and isolates that
# reorder what a terminal shows (a name can look like another)
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def clean(text: str) -> str:
    """``text`` with every control character as a visible escape (``\x1b``, ``\n``)."""
    return _CONTROL.sub(
        lambda m: (
            repr(m.group())[1:-1]
            if m.group() in "\n\r\t"
            else f"\\x{ord(m.group()):02x}"
            if ord(m.group()) < 0x100
            else f"\\u{ord(m.group()):04x}"
        ),
        text,
    )


def cell(value: Any, style: str = "") -> Any:
    """A table cell or printed line from data: a Rich ``Text`` (never markup) of the
    cleaned text. A ``Text`` made by the caller is cleaned too."""
    from rich.text import Text

    if isinstance(value, Text):
        return Text(clean(value.plain), style=value.style or style)
    return Text(clean("" if value is None else str(value)), style=style)


def _json_default(o: Any) -> Any:
    if isinstance(o, Decimal):
        return float(o)
    if isinstance(o, (datetime, date)):
        return o.isoformat()
    if isinstance(o, bytes):
        return o.hex()
    return str(o)


def _clean_float(v: Any) -> Any:
    return None if isinstance(v, float) and (math.isnan(v) or math.isinf(v)) else v


def format_number(v: float) -> str:
    """A float as every cclq table prints it: 6 significant digits (report and board
    print with this too, so their numbers equal ``cclq metric``'s to the digit)."""
    if math.isnan(v):
        return "NaN"
    return f"{v:.6g}" if abs(v) < 1e15 else repr(v)


# what a spreadsheet reads as the start of a formula (OWASP, "CSV Injection")
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_PLAIN_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def csv_cell(v: Any) -> Any:
    """A CSV cell: a text that would start a formula gets a leading ``'`` (a spreadsheet
    then shows it as text); other values, numbers and texts that are exactly a number
    (``-2``, ``+1e5``: no formula) as they are."""
    if isinstance(v, str) and v.startswith(_FORMULA_START) and not _PLAIN_NUMBER.fullmatch(v):
        return "'" + v
    return v


def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return format_number(v)
    if isinstance(v, (list, dict)):
        return json.dumps(v, default=_json_default)
    return str(v)


class _LineEnds:
    """Rows written with ``\r\n`` (so that the csv module quotes a cell holding a lone
    ``\r``, which it leaves bare with ``\n`` and a reader then takes for a line end),
    put out with ``\n``: the csv writer writes each row in one call."""

    def __init__(self, out: TextIO) -> None:
        self.out = out

    def write(self, text: str) -> int:
        return self.out.write(text[:-2] + "\n" if text.endswith("\r\n") else text)


def write_table(
    table: pa.Table, fmt: OutputFormat, out: TextIO | None = None, output: Path | None = None, title: str | None = None
) -> None:
    if fmt is OutputFormat.parquet:
        if output is None:
            raise UsageError("--format parquet needs --output FILE")
        import pyarrow.parquet as pq

        pq.write_table(table, output)
        return
    write_rows(table.column_names, table.to_pylist(), fmt, out, output, title)


def write_rows(
    names: list[str],
    rows: list[dict[str, Any]],
    fmt: OutputFormat,
    out: TextIO | None = None,
    output: Path | None = None,
    title: str | None = None,
) -> None:
    """``write_table`` of a table's column names and rows (``Table.to_pylist``'s): the same
    text, without pyarrow (a cached metric's rows, ``cclq.query.cache.cached_rows``)."""
    if fmt is OutputFormat.parquet:
        raise ValueError("Parquet is written from a table: write_table")
    out = out or sys.stdout
    if output is not None:
        with open(output, "w", newline="") as f:
            write_rows(names, rows, fmt, f, None, title)
        return
    if fmt is OutputFormat.csv:
        w = csv.writer(_LineEnds(out), lineterminator="\r\n")
        w.writerow(names)
        for r in rows:
            w.writerow(
                [
                    "" if r[n] is None else csv_cell(_cell(r[n]) if isinstance(r[n], (list, dict)) else r[n])
                    for n in names
                ]
            )
        return
    if fmt is OutputFormat.json:
        out.write(json_text([{n: _clean_float(r[n]) for n in names} for r in rows], default=_json_default))
        return
    _rich_table(names, rows, out, title)


def _rich_table(names: list[str], rows: list[dict[str, Any]], out: TextIO, title: str | None) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title=cell(title) if title else None, show_lines=False, header_style="bold")
    for n in names:
        t.add_column(cell(n), overflow="fold")
    for r in rows[:MAX_TABLE_ROWS]:
        # never read as rich markup ("[pytorch|profiler|execution_trace|thread]",
        # "[enforce fail at ...]"), control characters escaped
        t.add_row(*(cell(_cell(r[n])) for n in names))
    console = Console(file=out, width=None if out.isatty() else 200)
    console.print(t)
    if len(rows) > MAX_TABLE_ROWS:
        print(f"({len(rows)} rows, first {MAX_TABLE_ROWS} shown; use --format csv for all)", file=sys.stderr)
