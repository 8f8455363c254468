"""Bounds on what one trace file may cost a reader, and the error that names them.

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
    max_event_bytes: int = 64 * MIB  # one event (one element of a top-level array)
    max_inflate_ratio: float = 200.0  # decompressed / compressed bytes of a gzip file
    inflate_floor_bytes: int = 64 * MIB  # the ratio is only judged past this much output

    def __post_init__(self) -> None:
        if self.max_string_bytes < 1 or self.max_event_bytes < 1 or self.max_depth < 1:
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
    return LimitExceeded(path, f"a JSON string or number longer than {_mib(limits.max_string_bytes)} at {where} "
                               f"{offset} (limit --max-string-mb)")


def too_deep(path: str, offset: int, limits: ReadLimits, compressed: bool) -> LimitExceeded:
    where = "decompressed byte" if compressed else "byte"
    return LimitExceeded(path, f"JSON nested deeper than {limits.max_depth} levels at {where} {offset} "
                               f"(limit --max-depth)")


def event_too_large(path: str, offset: int, limits: ReadLimits, compressed: bool) -> LimitExceeded:
    where = "decompressed byte" if compressed else "byte"
    return LimitExceeded(path, f"an event larger than {_mib(limits.max_event_bytes)} starting at {where} "
                               f"{offset} (limit --max-event-mb)")


def inflates_too_much(path: str, decompressed: int, compressed: int, limits: ReadLimits) -> LimitExceeded:
    return LimitExceeded(path, f"gzip stream expands more than {limits.max_inflate_ratio:g} times "
                               f"({decompressed} bytes from {compressed}; limit --max-inflate-ratio)")
