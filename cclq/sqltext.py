"""The one place where text from outside (paths, trace ids, settings) becomes SQL text.

Nothing that comes from a file, a path or the command line is spliced into SQL any
other way: a value is bound as a parameter where DuckDB allows it, else quoted here.
"""

from __future__ import annotations

import glob
from pathlib import Path


def quote_literal(text: str) -> str:
    """A single-quoted SQL string literal, quotes doubled."""
    return "'" + text.replace("'", "''") + "'"


def quote_identifier(name: str) -> str:
    """A double-quoted SQL identifier, quotes doubled."""
    return '"' + name.replace('"', '""') + '"'


def path_literal(path: Path | str) -> str:
    """A file path as DuckDB's readers take it: glob characters escaped (a warehouse in
    ``wh/we[ir]d`` must not be read as a pattern), then quoted."""
    return quote_literal(glob.escape(str(path)))
