"""Errors that reach the user as one line, and the exit codes they map to.

Anything the user can cause (a bad file, an unknown metric, a bad query) is a
``CclqError``; the CLI prints ``cclq: error: <message>`` to stderr without a
traceback (``--debug`` shows it). Everything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import json
import os
from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    FAILED = 1  # the job ran, but some input failed (e.g. a bad trace file)
    USAGE = 2  # bad command line, unknown metric, missing warehouse
    QUERY = 3  # the SQL did not run
    INTERRUPTED = 130


class CclqError(Exception):
    """An error the user can act on. ``hint`` is printed on a second line."""

    exit_code = ExitCode.FAILED

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class UsageError(CclqError):
    exit_code = ExitCode.USAGE


class QueryError(CclqError):
    exit_code = ExitCode.QUERY


def show_path(path: str | os.PathLike[str]) -> str:
    """A file name as messages print it: as is when it is plain, else quoted with its
    control characters escaped, so that a newline in a name cannot split an error over
    two lines (or forge a second one)."""
    text = os.fsdecode(path)
    if text.isprintable() and not text.startswith(("'", '"')):
        return text
    return json.dumps(text, ensure_ascii=False)


class TraceFileError(CclqError):
    """One input file cannot be ingested; the rest of the job goes on.

    ``detail`` is a traceback for errors cclq did not foresee (printed with --debug).
    """

    def __init__(self, path: str, problem: str, detail: str | None = None) -> None:
        super().__init__(f"{show_path(path)}: {problem}")
        self.path = path
        self.problem = problem
        self.detail = detail

    def __reduce__(self) -> tuple[type[TraceFileError], tuple[str, str, str | None]]:
        # picklable, so that parser processes can hand errors back
        return (type(self), (self.path, self.problem, self.detail))


class UnsupportedFormat(TraceFileError):
    """A recognised trace format that this version cannot ingest yet (not a failure)."""
