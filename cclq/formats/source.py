"""Opening a trace file as a byte stream: gzip by content, byte counting, hashing.

Readers never see paths or compression. They get a ``Source`` whose ``stream`` yields
decompressed bytes, while the raw side counts bytes read from disk (for the progress
bar's MB/s), hashes them (the content hash in the ``files`` table) and keeps the last
few MB of decompressed text (top-level keys that a profiler writes *after* the event
array, such as Kineto's ``distributedInfo``).

Reading, hashing and inflating run on a thread, a block of ``BLOCK_BYTES`` ahead of the
parser: zlib and blake2b release the GIL, so on a machine with a second core they cost
the parser nothing. The inflater always works in the same fixed steps, whoever reads,
so the ``max_inflate_ratio`` bound is judged at the same points by every reader.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import queue
import threading
import zlib
from collections import deque
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, BinaryIO

from cclq.errors import TraceFileError
from cclq.formats.limits import DEFAULT_LIMITS, ReadLimits, inflates_too_much

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer  # a stub-only module: the buffer protocol readinto takes

GZIP_MAGIC = b"\x1f\x8b"
HEAD_BYTES = 1 << 20  # how much decompressed text the metadata sniffer looks at
TAIL_BYTES = 4 << 20  # how much decompressed text is kept for keys after the events
BLOCK_BYTES = 1 << 20  # the step of reading and inflating
READ_AHEAD_BLOCKS = 4  # blocks the thread may hold ready (memory: 4 MB)
# A file read on the parser's thread, without the read-ahead thread, when starting and
# joining a thread would cost more than it overlaps (~1 ms of CPU on DLRM's 0.9 MB files):
# an uncompressed file up to this size, and a compressed one up to COMPRESSED_INLINE_BYTES
# on disk (1-2 blocks: nothing to overlap).
READ_AHEAD_MIN_BYTES = 4 << 20
COMPRESSED_INLINE_BYTES = 2 * BLOCK_BYTES

ProgressFn = Callable[[int], None]
# Called with each block (and its offset) before a reader sees it; returns the offset
# of the first byte the reader must not get (a bound exceeded there), or None.
BlockCheck = Callable[[bytes, int], "tuple[int, BaseException] | None"]


def content_hash(path: str) -> str:
    """blake2b of the file's bytes, as stored in ``files.content_hash``."""
    h = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


class _RawCounter(io.RawIOBase):
    """Reads the file from disk, hashing and counting what passes through."""

    def __init__(self, f: io.BufferedReader, progress: ProgressFn | None) -> None:
        self._f = f
        self._progress = progress
        self.hash = hashlib.blake2b(digest_size=16)
        self.bytes_read = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: WriteableBuffer) -> int:
        n = self._f.readinto(buffer)
        if n:
            self.hash.update(memoryview(buffer)[:n])
            self.bytes_read += n
            if self._progress is not None:
                self._progress(n)
        return n or 0


class _TailKeeper:
    """Remembers at least the last ``keep`` bytes of what passed through."""

    def __init__(self, keep: int = TAIL_BYTES) -> None:
        self._keep = keep
        self._tail: deque[bytes] = deque()
        self._size = 0

    def add(self, data: bytes) -> None:
        self._tail.append(data)
        self._size += len(data)
        while self._size - len(self._tail[0]) >= self._keep:
            self._size -= len(self._tail.popleft())

    def tail(self) -> bytes:
        return b"".join(self._tail)


UTF8_BOM = b"\xef\xbb\xbf"


def blank_bom(block: bytes) -> bytes:
    """A first block with its UTF-8 byte order mark (Windows editors write one) as three
    spaces: JSON parsers refuse a BOM but skip whitespace, and every offset stays the
    file's own."""
    return b"   " + block[3:] if block.startswith(UTF8_BOM) else block


def _inflate_blocks(
    raw: _RawCounter, compressed: bool, path: str, limits: ReadLimits, keep_bom: bool = False
) -> Iterator[bytes]:
    """Decompressed blocks of ``BLOCK_BYTES`` (the last one shorter), the first with its
    BOM blanked unless ``keep_bom``. A gzip stream that expands beyond the limits raises
    ``LimitExceeded`` at the block that crosses them."""
    first = not keep_bom
    for block in _inflate(raw, compressed, path, limits):
        if first:
            block, first = blank_bom(block), False
        yield block


def _inflate(raw: _RawCounter, compressed: bool, path: str, limits: ReadLimits) -> Iterator[bytes]:
    buffered = io.BufferedReader(raw, buffer_size=BLOCK_BYTES)
    if not compressed:
        while block := buffered.read(BLOCK_BYTES):
            yield block
        return
    taken = _Taken(buffered)
    # typeshed wants a seek() for rewinding, which a read-once inflater never does
    gz = gzip.GzipFile(fileobj=taken)  # type: ignore[call-overload]
    produced = 0
    while block := gz.read(BLOCK_BYTES):
        produced += len(block)
        if produced > limits.inflate_floor_bytes and produced > limits.max_inflate_ratio * taken.count:
            raise inflates_too_much(path, produced, taken.count, limits)
        yield block


class _Taken:
    """Counts the compressed bytes the inflater has taken (not what was read ahead)."""

    def __init__(self, f: BinaryIO) -> None:
        self._f = f
        self.count = 0

    def read(self, size: int = -1) -> bytes:
        data = self._f.read(size)
        self.count += len(data)
        return data


class _ReadAhead:
    """Runs a block iterator on a thread, at most ``READ_AHEAD_BLOCKS`` ahead; its error,
    if any, comes out in order, after the blocks before it."""

    _DONE = object()

    def __init__(self, blocks: Iterator[bytes], check: BlockCheck | None) -> None:
        self._blocks = blocks
        self._check = check
        self._queue: queue.Queue = queue.Queue(maxsize=READ_AHEAD_BLOCKS)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cclq-read-ahead", daemon=True)
        self._thread.start()

    def _put(self, item: object) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _run(self) -> None:
        offset = 0
        try:
            for block in self._blocks:
                verdict = self._check(block, offset) if self._check is not None else None
                if verdict is not None:  # deliver what comes before the violation, then fail
                    at, error = verdict
                    if at > offset and not self._put(block[: at - offset]):
                        return
                    self._put(error)
                    return
                offset += len(block)
                if not self._put(block):
                    return
        except BaseException as e:  # noqa: BLE001 - handed to the reading thread
            self._put(e)
            return
        self._put(self._DONE)

    def next(self) -> bytes | None:
        item = self._queue.get()
        if item is self._DONE:
            self._queue.put(self._DONE)  # later calls see the end again
            return None
        if isinstance(item, BaseException):
            self._queue.put(item)
            raise item
        return item

    def close(self) -> None:
        self._stop.set()
        try:
            while True:
                self._queue.get_nowait()
        except queue.Empty:
            pass
        self._thread.join(timeout=5)


class _Inline:
    """The same interface as ``_ReadAhead`` without a thread."""

    def __init__(self, blocks: Iterator[bytes], check: BlockCheck | None) -> None:
        self._blocks = blocks
        self._check = check
        self._offset = 0
        self._error: BaseException | None = None

    def next(self) -> bytes | None:
        if self._error is not None:
            raise self._error
        block = next(self._blocks, None)
        if block is None:
            return None
        if self._check is not None:
            verdict = self._check(block, self._offset)
            if verdict is not None:
                at, self._error = verdict
                if at > self._offset:
                    part = block[: at - self._offset]
                    self._offset = at
                    return part
                raise self._error
        self._offset += len(block)
        return block

    def close(self) -> None:
        pass


class DecodedStream(io.RawIOBase):
    """The decompressed text of a file, for ijson (``read``) or in blocks (``read_block``)."""

    def __init__(self, blocks: _ReadAhead | _Inline) -> None:
        self._blocks = blocks
        self._pending = b""  # the part of the current block not handed out yet
        self._tail = _TailKeeper()
        self.offset = 0  # decompressed bytes handed out so far
        self.last_chunk_start = 0
        self.last_chunk = b""

    def readable(self) -> bool:
        return True

    def _hand_out(self, data: bytes) -> bytes:
        self.last_chunk_start = self.offset
        self.last_chunk = data
        self.offset += len(data)
        self._tail.add(data)
        return data

    def read_block(self) -> bytes:
        """The next block as it comes (b"" at the end)."""
        if self._pending:
            data, self._pending = self._pending, b""
            return self._hand_out(data)
        block = self._blocks.next()
        return self._hand_out(block) if block else b""

    def read(self, size: int = -1) -> bytes:
        if not self._pending:
            block = self._blocks.next()
            if not block:
                return b""
            self._pending = block
        if size is None or size < 0 or size >= len(self._pending):
            data, self._pending = self._pending, b""
        else:
            data, self._pending = self._pending[:size], self._pending[size:]
        return self._hand_out(data)

    def readinto(self, buffer: WriteableBuffer) -> int:
        view = memoryview(buffer)
        data = self.read(len(view))
        view[: len(data)] = data
        return len(data)

    def tail(self) -> bytes:
        return self._tail.tail()

    def close(self) -> None:
        self._blocks.close()
        super().close()


class Source:
    """An open trace file. Use as a context manager; ``stream`` is decompressed.

    ``check(compressed)`` makes the function that sees every block before a reader does
    (the structural bounds check); ``read_ahead`` runs reading, hashing, inflating and
    the check on a thread (not for an uncompressed file under ``READ_AHEAD_MIN_BYTES``).
    """

    def __init__(
        self,
        path: str,
        progress: ProgressFn | None = None,
        limits: ReadLimits = DEFAULT_LIMITS,
        check: Callable[[bool], BlockCheck] | None = None,
        read_ahead: bool = True,
        keep_bom: bool = False,
    ) -> None:
        self.path = path
        self.limits = limits
        try:
            self._file = open(path, "rb")
        except OSError as e:
            raise TraceFileError(path, f"cannot read: {e.strerror or e}") from e
        magic = self._file.read(2)
        self.compressed = magic == GZIP_MAGIC
        self.size = os.fstat(self._file.fileno()).st_size  # on disk
        # the text's size: a gzip member ends with it (mod 2**32, of the last member alone:
        # a guess for choosing how to read, never for a bound)
        self.text_size_guess = self.size
        if self.compressed and self.size >= 18:
            self._file.seek(-4, os.SEEK_END)
            self.text_size_guess = int.from_bytes(self._file.read(4), "little")
        self._file.seek(0)
        self.raw = _RawCounter(self._file, progress)
        blocks = _inflate_blocks(self.raw, self.compressed, path, limits, keep_bom)
        block_check = check(self.compressed) if check is not None else None
        if read_ahead:
            limit = COMPRESSED_INLINE_BYTES if self.compressed else READ_AHEAD_MIN_BYTES
            read_ahead = self.size > limit
        self.stream = DecodedStream((_ReadAhead if read_ahead else _Inline)(blocks, block_check))

    def __enter__(self) -> Source:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.stream.close()
        self._file.close()

    def finish_hash(self) -> str:
        """Reads whatever the parser left unread so the hash covers the whole file."""
        self.stream.close()  # the read-ahead thread stops touching the file
        while self.raw.read(1 << 20):
            pass
        return self.raw.hash.hexdigest()


def read_head(path: str, limit: int = HEAD_BYTES) -> tuple[bytes, bool]:
    """The first ``limit`` decompressed bytes and whether the file is gzipped.

    Raises ``TraceFileError`` for unreadable files and corrupt gzip streams.
    """
    try:
        with open(path, "rb") as f:
            magic = f.read(2)
            f.seek(0)
            if magic == GZIP_MAGIC:
                with gzip.GzipFile(fileobj=f) as gz:
                    return blank_bom(_read_gzip(path, gz, limit)), True
            return blank_bom(f.read(limit)), False
    except OSError as e:
        if isinstance(e, gzip.BadGzipFile):
            raise TraceFileError(path, f"corrupt gzip stream: {e}") from e
        raise TraceFileError(path, f"cannot read: {e.strerror or e}") from e


def is_gzip(path: str) -> bool:
    """Whether the file starts as a gzip stream (False for one that cannot be read)."""
    try:
        with open(path, "rb") as f:
            return f.read(2) == GZIP_MAGIC
    except OSError:
        return False


def read_tail(path: str, limit: int = TAIL_BYTES, limits: ReadLimits = DEFAULT_LIMITS) -> bytes:
    """The last ``limit`` decompressed bytes of a file, gzipped or not.

    A gzip stream cannot be read from the end, so it is decompressed and thrown away up
    to its tail: zlib does ~600 MB/s, a few percent of a parse, and far cheaper than
    rewriting every timestamp once the parse reaches a ``baseTimeNanoseconds`` written
    after the events (Kineto's habit). A damaged stream gives what could be read; the
    parse itself reports the damage. A stream that inflates beyond ``limits`` raises
    ``LimitExceeded``, as reading it would.
    """
    with open(path, "rb") as f:
        if f.read(2) != GZIP_MAGIC:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - limit))
            return f.read()
        f.seek(0)
        keeper = _TailKeeper(keep=limit)
        produced = 0
        with gzip.GzipFile(fileobj=f) as gz:
            try:
                while block := gz.read(BLOCK_BYTES):
                    keeper.add(block)
                    produced += len(block)
                    if produced > limits.inflate_floor_bytes and produced > limits.max_inflate_ratio * f.tell():
                        raise inflates_too_much(path, produced, f.tell(), limits)
            except gzip_errors():
                pass
        return keeper.tail()[-limit:]


def _read_gzip(path: str, gz: gzip.GzipFile, limit: int) -> bytes:
    try:
        return gz.read(limit)
    except (EOFError, zlib.error, gzip.BadGzipFile) as e:
        raise TraceFileError(path, f"corrupt gzip stream: {e}") from e


def gzip_errors() -> tuple[type[BaseException], ...]:
    """Exceptions that mean the compressed stream itself is damaged."""
    return (EOFError, zlib.error, gzip.BadGzipFile)
