"""Errors that reach the user as one line, and the exit codes they map to.

Anything the user can cause (a bad file, an unknown metric, a bad query) is a
``CclqError``; the CLI prints ``cclq: error: <message>`` to stderr without a
traceback (``--debug`` shows it). Everything else is a bug and keeps its traceback.
"""

from __future__ import annotations

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


class TraceFileError(CclqError):
    """One input file cannot be ingested; the rest of the job goes on."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem

    def __reduce__(self):  # type: ignore[no-untyped-def]
        # picklable, so that parser processes can hand errors back
        return (type(self), (self.path, self.problem))


class UnsupportedFormat(TraceFileError):
    """A recognised trace format that this version cannot ingest yet (not a failure)."""
