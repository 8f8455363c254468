"""The output formats a command accepts, apart from ``render`` so that the command line
can name them in its options without importing pyarrow (``cclq --help`` stays fast); and
the writers of text that need no pyarrow: a text to stdout or a file, aligned lines (the
`cclq metrics` listing), rows as JSON (several metrics' long form)."""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import Enum
from pathlib import Path
from typing import Any, TextIO


class OutputFormat(str, Enum):
    table = "table"
    csv = "csv"
    json = "json"
    parquet = "parquet"


def write_text(text: str, output: Path | None) -> None:
    """``text`` to the file ``output`` (UTF-8), or to stdout."""
    if output is not None:
        output.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)


@contextmanager
def text_output(output: Path | None) -> Iterator[TextIO]:
    """The file ``output`` opened for writing as UTF-8 (closed after), or stdout (left open)."""
    if output is None:
        yield sys.stdout
        return
    with open(output, "w", encoding="utf-8") as out:
        yield out


def write_lines(rows: list[tuple[str, ...]], output: Path | None) -> None:
    """Aligned columns, one line per row, the last column cut to the terminal's width
    (120 when not a terminal) with an ellipsis: a listing that fits on one screen line each."""
    width = shutil.get_terminal_size((120, 24)).columns if output is None else 200
    sizes = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    lines = []
    for r in rows:
        head = "  ".join(c.ljust(n) for c, n in zip(r[:-1], sizes))
        room = max(width - len(head) - 2, 20)
        tail = r[-1] if len(r[-1]) <= room else r[-1][: room - 1].rstrip() + "…"
        lines.append(f"{head}  {tail}".rstrip())
    write_text("\n".join(lines) + "\n", output)


def finite(v: Any) -> Any:  # noqa: ANN401
    """JSON has no NaN or infinity: null, at any depth."""
    if isinstance(v, float) and (v != v or v in (float("inf"), float("-inf"))):
        return None
    if isinstance(v, dict):
        return {k: finite(x) for k, x in v.items()}
    if isinstance(v, list):
        return [finite(x) for x in v]
    return v


def json_text(data: Any, default: Callable[[Any], Any] = str) -> str:  # noqa: ANN401
    """``data`` as indented JSON, a line: NaN and infinity as null, what JSON has no type
    for (dates, paths) through ``default``. orjson's encoder: the stdlib's, which indents
    in Python, took 4.1 s of a 33 s report on a 1 GB rank (18 MB of JSON); orjson 0.1 s.
    The stdlib's where orjson refuses a value (an integer beyond 64 bits)."""
    import orjson

    options = orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS | orjson.OPT_PASSTHROUGH_DATETIME
    try:
        return orjson.dumps(data, default=default, option=options).decode() + "\n"
    except orjson.JSONEncodeError:
        return json.dumps(finite(data), default=default, indent=2) + "\n"


def dump_json(rows: list[dict], output: Path | None) -> None:
    """``rows`` as indented JSON (NaN and infinity as null, other values as text)."""
    write_text(json_text(rows), output)
