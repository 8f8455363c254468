"""The Chrome-JSON reader of the format registry: which of the two JSON readers reads a
file, and the fallback from one to the other.

``ChromeReader.read`` opens the file (``Source``) the way each reader needs it. The
fast reader (``fast_reader``: the C parser, msgspec) may give a file up
(``FallbackToIjson``), or its parser threads may (``ReadSequentially``); ``read`` then
raises the interface's typed ``ReadAgain`` naming the options of the next attempt (the
ijson reference, ``ijson_reader``, or one thread), and the caller discards what was written and reads
again with them, noting why in the file's ``ingest_stats``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import ijson
import msgspec

from cclq.formats.base import (
    READER_COMPILED,
    READER_IJSON,
    BatchSink,
    Detected,
    Prepared,
    ProgressFn,
    ReadAgain,
    ReadOptions,
    ReadResult,
)
from cclq.formats.chrome import compiled
from cclq.formats.chrome.fast_reader import (
    FallbackToIjson,
    ReadSequentially,
    read_chrome_json_fast,
)
from cclq.formats.chrome.ijson_reader import (
    bounds_check_for,
    file_metadata,
    is_int32,
    read_chrome_json,
)
from cclq.formats.limits import DEFAULT_LIMITS
from cclq.formats.source import Source, read_tail


def read_trace_file(
    path: str,
    detected: Detected,
    file_id: str,
    sink: BatchSink,
    options: ReadOptions,
    progress: ProgressFn | None = None,
    metadata: dict[str, Any] | None = None,
) -> tuple[ReadResult, str]:
    """(what the reader found, the content hash of the file); ``ReadAgain`` when the fast
    reader gives the file up (to ijson) or its threads do (to one thread). ``metadata``:
    the file's top-level keys (``chrome.file_metadata``), when the caller has them."""
    limits = options.limits
    if options.reader != READER_IJSON:
        with Source(path, progress, limits) as source:
            try:
                result = read_chrome_json_fast(
                    source,
                    detected,
                    file_id,
                    sink,
                    limits=limits,
                    threads=options.threads,
                    metadata=metadata,
                    use_compiled=uses_compiled(options),
                )
                result.reader = options.reader
            except FallbackToIjson as e:
                raise ReadAgain(options.for_fallback(), fallback_note(e)) from None
            except ReadSequentially as e:
                raise ReadAgain(
                    replace(options, threads=0), f"read again in one thread: the threads gave it up ({e.reason})"
                ) from None
            return result, source.finish_hash()
    with Source(path, progress, limits, check=bounds_check_for(path, detected, limits)) as source:
        result = read_chrome_json(source, detected, file_id, sink, limits=limits, metadata=metadata)
        return result, source.finish_hash()


def fallback_note(fallback: FallbackToIjson) -> str:
    """The ``ingest_stats`` note for a file the fast reader handed to ijson."""
    return f"read with ijson: the fast reader gave it up ({fallback.reason})"


def uses_compiled(options: ReadOptions) -> bool:
    """Whether a read with ``options`` gives its chunks to the C parser first."""
    return options.reader == READER_COMPILED and compiled.AVAILABLE


def parser_name(result: ReadResult, options: ReadOptions) -> str:
    """What ``files.parser`` records: the reader and the library doing the parse."""
    if result.reader == READER_IJSON:
        return f"chrome_json/ijson-{ijson.backend}"
    if uses_compiled(options):
        return f"chrome_json/fast-compiled+msgspec-{msgspec.__version__}"
    return f"chrome_json/fast-msgspec-{msgspec.__version__}"


class ChromeReader:
    """Kineto, generic Chrome, xprof trace-viewer JSON and Horovod timelines (``detect``
    kind ``chrome_json``), read by the reader ``options`` names: the fast one (the C
    parser where built, else msgspec), msgspec alone, or the ijson reference
    (``cclq.formats.chrome.reader``)."""

    name = f"chrome_json/ijson-{ijson.backend}"  # files.parser is the reader that did it (result.parser)
    tables = ("events",)

    def __init__(self, options: ReadOptions | None = None) -> None:
        self.options = options

    def prepare(self, path: str, detected: Detected) -> Prepared:
        limits = self.options.limits if self.options is not None else DEFAULT_LIMITS
        meta = file_metadata(path, detected, limits)
        options = self.options
        if detected.flavor == "horovod" and not read_tail(path, 64, limits=limits).rstrip().endswith(b"]"):
            # Horovod <= 0.20 never closes its array: the reference reader keeps every
            # complete event of it (the fast one wants a whole array)
            options = ReadOptions(reader=READER_IJSON, limits=limits)
        prepared = Prepared(metadata={"top_level": meta}, options=options)
        info = meta.get("distributedInfo")
        if isinstance(info, dict):
            if is_int32(info.get("rank")) and info["rank"] >= 0:
                prepared.rank, prepared.rank_source = info["rank"], "distributedInfo"
            if is_int32(info.get("world_size")):
                prepared.world_size = info["world_size"]
        return prepared

    def read(
        self,
        path: str,
        detected: Detected,
        prepared: Prepared,
        file_id: str,
        sinks: dict[str, BatchSink],
        progress: ProgressFn | None,
    ) -> ReadResult:
        options = prepared.options or ReadOptions()
        result, digest = read_trace_file(
            path, detected, file_id, sinks["events"], options, progress, metadata=prepared.metadata["top_level"]
        )
        result.content_hash = digest
        result.parser = parser_name(result, options)
        return result
