"""One big file on several cores: chunks parsed by the C parser on threads.

The reading thread cuts chunks at guessed event boundaries (``Chunker.speculative``) and
hands them to a pool of threads; the C parser runs without the GIL, so they parse at once,
and their answers are taken back in order and built here (B/E pairs across chunks are
closed as in a sequential read). A guess that was wrong, or text that does not decode,
sends the file back to one sequential read (``ReadSequentially``).

(Forked helper processes did this for the msgspec path until 0.2: measured on a 31 MB
Kineto file, they read it in 5.0-5.8 s against 7.6-10.6 s in one process, where the C
parser on two threads takes 1.2 s and alone 1.5 s: they paid only on a machine without
a C compiler, for one file of 64 MB or more. They were removed with their shared-memory
transfer; see ``fast_reader``.)
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from cclq.formats.chrome import compiled
from cclq.formats.chrome.builder import Builder
from cclq.formats.chrome.chunks import Chunker
from cclq.formats.chrome.decode import ReadSequentially, Undecodable, WrongCut, decode_chunk


def _parse_in_thread(data: bytes, offset: int, chunker: Chunker) -> list[Any] | compiled.Parsed:
    """One speculatively cut chunk, on a thread: the C parser runs without the GIL (a
    chunk it declines is decoded by msgspec, with it). A wrong cut or undecodable text
    sends the file back to one sequential read, as with helper processes."""
    try:
        entries, _ = decode_chunk(
            data, offset, chunker.limits, chunker.depth, chunker.levels, chunker.base_ns, chunker.use_compiled
        )
    except (WrongCut, Undecodable) as e:
        raise ReadSequentially(str(e) or type(e).__name__) from None
    return entries


def read_with_threads(chunker: Chunker, builder: Builder, threads: int) -> None:
    """Chunks parsed by the C parser on ``threads`` threads while this one cuts the next
    and emits the last, in order (so that B/E pairs across chunks are closed here, as in
    a sequential read). One process: no fork, no copy of the batches between processes;
    the Parquet encoder's thread runs beside them."""
    from concurrent.futures import ThreadPoolExecutor

    in_flight: deque[tuple[bytes, Future[Any]]] = deque()

    def collect() -> None:
        data, future = in_flight.popleft()
        builder.add(chunker._emit(future.result(), data))

    with ThreadPoolExecutor(threads, thread_name_prefix="cclq-parse") as pool:
        _in_order(
            chunker,
            builder,
            lambda data, offset: pool.submit(_parse_in_thread, data, offset, chunker),
            collect,
            in_flight,
            threads,
        )


def _in_order(
    chunker: Chunker,
    builder: Builder,
    submit: Callable[[bytes, int], Future[Any]],
    collect: Callable[[], None],
    in_flight: deque[tuple[bytes, Future[Any]]],
    width: int,
) -> None:
    """The chunks ``chunker.speculative`` cuts handed to ``submit`` (at most ``2 * width``
    in flight; ``collect`` takes the oldest back, in order), then the rest of the array,
    read here: what threads and helper processes share."""
    try:
        for item in chunker.speculative():
            if isinstance(item, int):
                while in_flight:
                    collect()
                for chunk in chunker.read_rest(item):
                    builder.add(chunk)
                return
            data, offset = item
            in_flight.append((data, submit(data, offset)))
            while len(in_flight) > 2 * width:
                collect()
    finally:
        for _, future in in_flight:
            future.cancel()
