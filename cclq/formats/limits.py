"""Bounds on what one input file may cost a reader, and the errors that name them.

One module for every reader (Chrome JSON, execution traces, result files, Nsight Systems
exports), with one ``cclq ingest`` option per bound to raise it:

=====================  ==========================================  =========================
bound                  what it means per reader                    option
=====================  ==========================================  =========================
``max_string_bytes``   a JSON string or number; a CSV cell; a      ``--max-string-mb``
                       SQLite text or blob value (``StringIds``)
``max_depth``          JSON nesting (Chrome JSON, ET)              ``--max-depth``
``max_event_bytes``    one event (JSON), one ET node, one line of  ``--max-event-mb``
                       a results file (a CSV row, a log line)
``max_columns``        columns of a results CSV                    ``--max-columns``
``max_inflate_ratio``  gzip expansion (every reader)               ``--max-inflate-ratio``
``max_sqlite_seconds`` SQLite time reading one nsys export         ``--max-sqlite-seconds``
``max_sqlite_bytes``   SQLite heap (temp store included: it is     ``--max-sqlite-mb``
                       kept in memory) while reading an export
=====================  ==========================================  =========================

A hostile or broken file can make a JSON parser slow or hungry out of all proportion
to its size: ijson (yajl) re-lexes a token from its start on every 64 KB it reads, so
one 100 MB string takes 32 s and memory grows with the square of the nesting depth;
a 3 MB ``.json.gz`` can expand to gigabytes. Every reader enforces the same bounds on
the decompressed bytes *before* a parser sees them (``cclq.formats.chrome.jsonscan``), and a
file that exceeds one fails alone with a message naming the bound and the option that
raises it. The defaults leave a wide margin over every real trace we know of (largest
event 7 KB, longest string 5 KB, depth 8, gzip ratio 29x; see the README).
"""

from __future__ import annotations

from dataclasses import dataclass

from cclq.errors import TraceFileError

MIB = 1 << 20


@dataclass(frozen=True)
class ReadLimits:
    """What one file may contain. Sizes are bytes of decompressed JSON text."""

    max_string_bytes: int = 16 * MIB  # one JSON string, number or literal
    max_depth: int = 64  # nesting of arrays and objects, the top-level value being 1
    # one event (one element of a top-level array), one ET node, one results line. 24 MiB
    # (above the string bound, so that a long string is named as one): ijson's Python objects
    # for a node take ~50 times its text (a 52 MB node: 2.7 GB).
    max_event_bytes: int = 24 * MIB
    max_inflate_ratio: float = 200.0  # decompressed / compressed bytes of a gzip file
    inflate_floor_bytes: int = 64 * MIB  # the ratio is only judged past this much output
    max_columns: int = 4096  # of a results CSV (DDLB writes ~20)
    max_sqlite_seconds: float = 900.0  # SQLite's time on one export (a 4 GB export reads in ~2 min)
    max_sqlite_bytes: int = 1024 * MIB  # SQLite's heap while one export is read

    def __post_init__(self) -> None:
        if (
            self.max_string_bytes < 1
            or self.max_event_bytes < 1
            or self.max_depth < 1
            or self.max_columns < 1
            or self.max_sqlite_seconds <= 0
            or self.max_sqlite_bytes < MIB
        ):
            raise ValueError("limits must be positive")
        if self.max_inflate_ratio <= 1:
            raise ValueError("the inflate ratio limit must be greater than 1")


DEFAULT_LIMITS = ReadLimits()


def _mib(n: int) -> str:
    return f"{n / MIB:g} MiB" if n >= MIB else f"{n} bytes"


class LimitExceeded(TraceFileError):
    """A file exceeds one of the ``ReadLimits``; the message says which and how to raise it."""


def string_too_long(path: str, offset: int, limits: ReadLimits, compressed: bool) -> LimitExceeded:
    where = "decompressed byte" if compressed else "byte"
    return LimitExceeded(
        path,
        f"a JSON string or number longer than {_mib(limits.max_string_bytes)} at {where} "
        f"{offset} (limit --max-string-mb)",
    )


def too_deep(path: str, offset: int, limits: ReadLimits, compressed: bool) -> LimitExceeded:
    where = "decompressed byte" if compressed else "byte"
    return LimitExceeded(
        path, f"JSON nested deeper than {limits.max_depth} levels at {where} {offset} (limit --max-depth)"
    )


def event_too_large(path: str, offset: int, limits: ReadLimits, compressed: bool) -> LimitExceeded:
    where = "decompressed byte" if compressed else "byte"
    return LimitExceeded(
        path, f"an event larger than {_mib(limits.max_event_bytes)} starting at {where} {offset} (limit --max-event-mb)"
    )


def inflates_too_much(path: str, decompressed: int, compressed: int, limits: ReadLimits) -> LimitExceeded:
    return LimitExceeded(
        path,
        f"gzip stream expands more than {limits.max_inflate_ratio:g} times "
        f"({decompressed} bytes from {compressed}; limit --max-inflate-ratio)",
    )


def too_many_columns(path: str, n: int, limits: ReadLimits) -> LimitExceeded:
    return LimitExceeded(path, f"a CSV header of {n} columns, more than {limits.max_columns} (limit --max-columns)")


def cell_too_long(path: str, line: int, limits: ReadLimits) -> LimitExceeded:
    return LimitExceeded(
        path, f"a CSV cell longer than {_mib(limits.max_string_bytes)} on line {line} (limit --max-string-mb)"
    )


def line_too_long(path: str, line: int, limits: ReadLimits) -> LimitExceeded:
    return LimitExceeded(path, f"a line longer than {_mib(limits.max_event_bytes)} (line {line}; limit --max-event-mb)")


def sqlite_value_too_long(path: str, limits: ReadLimits) -> LimitExceeded:
    return LimitExceeded(path, f"a SQLite value longer than {_mib(limits.max_string_bytes)} (limit --max-string-mb)")


def sqlite_too_slow(path: str, limits: ReadLimits) -> LimitExceeded:
    return LimitExceeded(
        path, f"SQLite took more than {limits.max_sqlite_seconds:g} s on this export (limit --max-sqlite-seconds)"
    )


def sqlite_too_hungry(path: str, limits: ReadLimits) -> LimitExceeded:
    return LimitExceeded(
        path,
        f"SQLite needed more than {_mib(limits.max_sqlite_bytes)} of memory for this export (limit --max-sqlite-mb)",
    )


def number_too_long(path: str, offset: int | None = None, compressed: bool = False) -> LimitExceeded:
    where = "" if offset is None else f" at {'decompressed byte' if compressed else 'byte'} {offset}"
    return LimitExceeded(
        path,
        f"an integer of more than {INT_DIGITS} digits{where} (Python converts no longer "
        "one, and no profiler writes one)",
    )


INT_DIGITS = 4300  # sys.get_int_max_str_digits()'s default
