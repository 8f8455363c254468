"""Reading one Chrome-JSON trace file with the reader the user chose.

``read_trace_file`` opens the file (``Source``) the way each reader needs it and
returns the reader's ``ReadResult`` and the file's content hash. The fast reader may
give a file up (``FallbackToIjson``); the caller then discards what it wrote and
reads the file again with ``options.for_fallback()``, noting why in the file's
``ingest_stats`` (``fallback_note``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import ijson
import msgspec

from cclq.formats import base
from cclq.formats.chrome import READER_FAST, READER_IJSON, READERS, BatchSink, ReadResult, bounds_check_for, \
    read_chrome_json
from cclq.formats.chrome_fast import FallbackToIjson, ReadSequentially, read_chrome_json_fast
from cclq.formats.detect import Detected
from cclq.formats.limits import DEFAULT_LIMITS, ReadLimits
from cclq.formats.source import ProgressFn, Source

__all__ = ["ReadOptions", "ReadAgain", "read_trace_file", "parser_name", "READERS"]


@dataclass(frozen=True)
class ReadOptions:
    """How to read trace files: which reader, within which bounds."""

    reader: str = READER_FAST
    limits: ReadLimits = field(default_factory=lambda: DEFAULT_LIMITS)
    helpers: int = 0  # processes that build one file's chunks besides the reading one (fast reader)

    def __post_init__(self) -> None:
        if self.reader not in READERS:
            raise ValueError(f"unknown reader {self.reader!r} (one of {', '.join(READERS)})")

    def for_fallback(self) -> ReadOptions:
        return replace(self, reader=READER_IJSON, helpers=0)


class ReadAgain(base.ReadAgain):
    """The file has to be read again from the start with ``options`` (what was written
    for it so far is to be discarded); ``note`` goes to its ``ingest_stats``."""

    def __init__(self, options: ReadOptions, note: str) -> None:
        super().__init__(note)
        self.options = options
        self.note = note


def read_trace_file(path: str, detected: Detected, file_id: str, sink: BatchSink, options: ReadOptions,
                    progress: ProgressFn | None = None, metadata: dict[str, Any] | None = None
                    ) -> tuple[ReadResult, str]:
    """(what the reader found, the content hash of the file); ``ReadAgain`` when the fast
    reader gives the file up (to ijson) or its helpers do (to one process). ``metadata``:
    the file's top-level keys (``chrome.file_metadata``), when the caller has them."""
    limits = options.limits
    if options.reader == READER_FAST:
        with Source(path, progress, limits) as source:
            try:
                result = read_chrome_json_fast(source, detected, file_id, sink, limits=limits,
                                               helpers=options.helpers, metadata=metadata)
            except FallbackToIjson as e:
                raise ReadAgain(options.for_fallback(), fallback_note(e)) from None
            except ReadSequentially as e:
                raise ReadAgain(replace(options, helpers=0),
                                f"read again in one process: the helpers gave it up ({e.reason})") from None
            return result, source.finish_hash()
    with Source(path, progress, limits, check=bounds_check_for(path, detected, limits)) as source:
        result = read_chrome_json(source, detected, file_id, sink, limits=limits, metadata=metadata)
        return result, source.finish_hash()


def fallback_note(fallback: FallbackToIjson) -> str:
    """The ``ingest_stats`` note for a file the fast reader handed to ijson."""
    return f"read with ijson: the fast reader gave it up ({fallback.reason})"


def parser_name(result: ReadResult) -> str:
    """What ``files.parser`` records: the reader and the library doing the parse."""
    if result.reader == READER_FAST:
        return f"chrome_json/fast-msgspec-{msgspec.__version__}"
    return f"chrome_json/ijson-{ijson.backend}"
