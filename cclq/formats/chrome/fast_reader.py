"""The fast reader for Chrome trace-event JSON: the same table as the ijson reader
(``ijson_reader.read_chrome_json``), several times faster, in the same bounded memory.

The decompressed text is cut into chunks of about ``chunks.CHUNK_BYTES`` that hold whole
events (``chunks``); each chunk is read by the compiled C parser where it was built
(``compiled``: Arrow column buffers in one pass, no Python object per event), and a chunk
it declines, or every chunk where it was not built, by msgspec (``decode``) and turned
into columns in bulk (``columns``); ``builder`` applies the rules of ``events`` (drops,
B/E pairs) and hands batches to the sink. With ``threads``, one big file's chunks are
parsed by the C parser on that many threads at once (``parallel``).

Anything it cannot take with certainty (invalid JSON, a bound exceeded, a second
``traceEvents`` array, an unreadable head) raises ``FallbackToIjson``: the caller reads
the file again with the reference reader, which gives the same rows or the same error
as it always has, and the file's ``ingest_stats`` say so.
"""

from __future__ import annotations

from typing import Any

from cclq.formats.base import READER_COMPILED, Detected
from cclq.formats.chrome import compiled
from cclq.formats.chrome.builder import Builder
from cclq.formats.chrome.chunks import CHUNK_BYTES, Chunker
from cclq.formats.chrome.decode import FallbackToIjson, ReadSequentially, decode_chunk
from cclq.formats.chrome.events import EMPTY_OBJECT
from cclq.formats.chrome.ijson_reader import (
    XPROF_END_MARKER,
    BatchSink,
    ReadResult,
    base_ns,
    count_down,
    file_metadata,
    finish_metadata,
    gc_paused,
    no_events_error,
)
from cclq.formats.chrome.parallel import read_with_threads
from cclq.formats.limits import DEFAULT_LIMITS, ReadLimits
from cclq.formats.source import Source

# Threads for a file of at least this much text: below it, the reading thread, the
# read-ahead thread and the Parquet encoder's already keep two cores busy, and threads
# only add chunks in flight (memory).
THREADS_MIN_BYTES = 64 << 20
# Rows handed to the sink at once for a file that big (each becomes one Parquet row group;
# smaller files keep batch_rows, for memory): the encoder's cost per column chunk (a zstd
# context each) made 32k-row groups of the 127 MB Kineto file 0.69 s to encode against
# 0.50 s as 128k-row groups. 64k is as fast as 128k (the 127 MB file 1.19-1.27 s either
# way, the 1 GB one 6.45 s against 6.78 s, -j2) and peaks 70 MB lower: 1 GB -j2 238 MB
# resident against 312 MB, the 127 MB file 204 MB against 273 MB.
BIG_FILE_BATCH_ROWS = 65_536


@gc_paused()
def read_chrome_json_fast(
    source: Source,
    detected: Detected,
    file_id: str,
    sink: BatchSink,
    batch_rows: int = 32768,
    limits: ReadLimits = DEFAULT_LIMITS,
    threads: int = 0,
    metadata: dict[str, Any] | None = None,
    use_compiled: bool = compiled.AVAILABLE,
) -> ReadResult:
    """Streams the events of ``source`` into ``sink``: the rows ``read_chrome_json`` writes.

    ``use_compiled``: chunks go to the C parser first (``compiled``), else straight to
    msgspec. ``threads`` > 0: a file of ``THREADS_MIN_BYTES`` or more has its chunks
    parsed by the C parser on that many threads while this one cuts them and writes (one
    big file on several cores; without the C parser, which alone runs without the GIL,
    it is read by this thread); the rows are the same. Raises ``FallbackToIjson`` when
    the file must be read by the reference reader instead, ``ReadSequentially`` when the
    threads cannot take it (batches already sent to ``sink`` are then to be discarded).
    ``metadata`` is ``file_metadata``'s answer when the caller has it already.
    """
    result = ReadResult(reader=READER_COMPILED)
    head_meta = dict(metadata) if metadata is not None else file_metadata(source.path, detected, limits)
    base = base_ns(head_meta)
    chunker = Chunker(source, detected, limits, base, use_compiled and compiled.AVAILABLE)
    big = source.text_size_guess >= THREADS_MIN_BYTES
    builder = Builder(
        file_id, base, result, sink, max(batch_rows, BIG_FILE_BATCH_ROWS) if big else batch_rows, limits, chunker.depth
    )
    try:
        if big and threads > 0 and chunker.use_compiled:
            read_with_threads(chunker, builder, threads)
        else:
            for chunk in chunker:
                builder.add(chunk)
        builder.finish()
    except RecursionError:  # nesting deeper than Python follows (within --max-depth)
        raise FallbackToIjson("nesting deeper than the fast reader follows") from None
    result.events_read = chunker.entries
    if detected.flavor == "xprof" and builder.last_empty == builder.last_index and result.events_read:
        count_down(result.drops, (EMPTY_OBJECT, ""))
        result.notes[XPROF_END_MARKER] += 1
    result.decompressed_bytes = source.stream.offset
    finish_metadata(result, head_meta, source.stream.tail())
    result.base_time_ns = base
    result.ts_min_ns = min(builder.ts_bounds) if builder.ts_bounds else None
    result.ts_max_ns = max(builder.ts_bounds) if builder.ts_bounds else None
    if result.events_read == 0:
        raise no_events_error(source.path, detected)
    return result


__all__ = ["FallbackToIjson", "ReadSequentially", "read_chrome_json_fast", "decode_chunk", "CHUNK_BYTES"]
