"""Reading one Chrome-JSON trace file with the reader the user chose.

``read_trace_file`` opens the file (``Source``) the way each reader needs it and
returns the reader's ``ReadResult`` and the file's content hash. The fast reader may
give a file up (``FallbackToIjson``); the caller then discards what it wrote and
reads the file again with ``options.for_fallback()``, noting why in the file's
``ingest_stats`` (``fallback_note``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import ijson
import msgspec

from cclq.formats.chrome import READER_FAST, READER_IJSON, READERS, BatchSink, ReadResult, bounds_check_for, \
    read_chrome_json
from cclq.formats.chrome_fast import FallbackToIjson, read_chrome_json_fast
from cclq.formats.detect import Detected
from cclq.formats.limits import DEFAULT_LIMITS, ReadLimits
from cclq.formats.source import ProgressFn, Source

__all__ = ["ReadOptions", "FallbackToIjson", "read_trace_file", "fallback_note", "parser_name", "READERS"]


@dataclass(frozen=True)
class ReadOptions:
    """How to read trace files: which reader, within which bounds."""

    reader: str = READER_FAST
    limits: ReadLimits = field(default_factory=lambda: DEFAULT_LIMITS)

    def __post_init__(self) -> None:
        if self.reader not in READERS:
            raise ValueError(f"unknown reader {self.reader!r} (one of {', '.join(READERS)})")

    def for_fallback(self) -> ReadOptions:
        return replace(self, reader=READER_IJSON)


def read_trace_file(path: str, detected: Detected, file_id: str, sink: BatchSink, options: ReadOptions,
                    progress: ProgressFn | None = None) -> tuple[ReadResult, str]:
    """(what the reader found, the content hash of the file)."""
    limits = options.limits
    if options.reader == READER_FAST:
        with Source(path, progress, limits) as source:
            result = read_chrome_json_fast(source, detected, file_id, sink, limits=limits)
            return result, source.finish_hash()
    with Source(path, progress, limits, check=bounds_check_for(path, detected, limits)) as source:
        result = read_chrome_json(source, detected, file_id, sink, limits=limits)
        return result, source.finish_hash()


def fallback_note(fallback: FallbackToIjson) -> str:
    """The ``ingest_stats`` note for a file the fast reader handed to ijson."""
    return f"read with ijson: the fast reader gave it up ({fallback.reason})"


def parser_name(result: ReadResult) -> str:
    """What ``files.parser`` records: the reader and the library doing the parse."""
    if result.reader == READER_FAST:
        return f"chrome_json/fast-msgspec-{msgspec.__version__}"
    return f"chrome_json/ijson-{ijson.backend}"
