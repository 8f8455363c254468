"""Opening a trace file as a byte stream: gzip by content, byte counting, hashing.

Readers never see paths or compression. They get a ``Source`` whose ``stream``
yields decompressed bytes, while the raw side counts bytes read from disk (for the
progress bar's MB/s), hashes them (the content hash in the ``files`` table) and
keeps the last few MB of decompressed text (top-level keys that a profiler writes
*after* the event array, such as Kineto's ``distributedInfo``).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import zlib
from collections import deque
from collections.abc import Callable
from typing import BinaryIO

from cclq.errors import TraceFileError

GZIP_MAGIC = b"\x1f\x8b"
HEAD_BYTES = 1 << 20  # how much decompressed text the metadata sniffer looks at
TAIL_BYTES = 4 << 20  # how much decompressed text is kept for keys after the events

ProgressFn = Callable[[int], None]


def content_hash(path: str) -> str:
    """blake2b of the file's bytes, as stored in ``files.content_hash``."""
    h = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


class _RawCounter(io.RawIOBase):
    """Reads the file from disk, hashing and counting what passes through."""

    def __init__(self, f: BinaryIO, progress: ProgressFn | None) -> None:
        self._f = f
        self._progress = progress
        self.hash = hashlib.blake2b(digest_size=16)
        self.bytes_read = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[no-untyped-def]
        n = self._f.readinto(buffer)
        if n:
            self.hash.update(memoryview(buffer)[:n])
            self.bytes_read += n
            if self._progress is not None:
                self._progress(n)
        return n or 0


class _TailKeeper(io.RawIOBase):
    """Passes decompressed bytes to the parser and remembers the last few MB."""

    def __init__(self, inner: BinaryIO, keep: int = TAIL_BYTES) -> None:
        self._inner = inner
        self._keep = keep  # at least this many of the last bytes are kept
        self._tail: deque[bytes] = deque()
        self._tail_size = 0
        self.offset = 0  # decompressed bytes handed out so far
        self.last_chunk_start = 0
        self.last_chunk = b""

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        data = self._inner.read(size)
        if data:
            self.last_chunk_start = self.offset
            self.last_chunk = data
            self.offset += len(data)
            self._tail.append(data)
            self._tail_size += len(data)
            while self._tail_size - len(self._tail[0]) >= self._keep:
                self._tail_size -= len(self._tail.popleft())
        return data

    def readinto(self, buffer) -> int:  # type: ignore[no-untyped-def]
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def tail(self) -> bytes:
        return b"".join(self._tail)


class Source:
    """An open trace file. Use as a context manager; ``stream`` is decompressed."""

    def __init__(self, path: str, progress: ProgressFn | None = None) -> None:
        self.path = path
        try:
            self._file = open(path, "rb")
        except OSError as e:
            raise TraceFileError(path, f"cannot read: {e.strerror or e}") from e
        magic = self._file.read(2)
        self._file.seek(0)
        self.compressed = magic == GZIP_MAGIC
        self.raw = _RawCounter(self._file, progress)
        buffered = io.BufferedReader(self.raw, buffer_size=1 << 20)
        inner: BinaryIO = gzip.GzipFile(fileobj=buffered) if self.compressed else buffered  # type: ignore[assignment]
        self.stream = _TailKeeper(inner)

    def __enter__(self) -> Source:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._file.close()

    def finish_hash(self) -> str:
        """Reads whatever the parser left unread so the hash covers the whole file."""
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
                    return _read_gzip(path, gz, limit), True
            return f.read(limit), False
    except OSError as e:
        if isinstance(e, gzip.BadGzipFile):
            raise TraceFileError(path, f"corrupt gzip stream: {e}") from e
        raise TraceFileError(path, f"cannot read: {e.strerror or e}") from e


def read_tail(path: str, limit: int = TAIL_BYTES) -> bytes:
    """The last ``limit`` decompressed bytes of a file, gzipped or not.

    A gzip stream cannot be read from the end, so it is decompressed and thrown away up
    to its tail: zlib does ~600 MB/s, a few percent of a parse, and far cheaper than
    rewriting every timestamp once the parse reaches a ``baseTimeNanoseconds`` written
    after the events (Kineto's habit). A damaged stream gives what could be read; the
    parse itself reports the damage.
    """
    with open(path, "rb") as f:
        if f.read(2) != GZIP_MAGIC:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - limit))
            return f.read()
        f.seek(0)
        with gzip.GzipFile(fileobj=f) as gz:
            keeper = _TailKeeper(gz, keep=limit)  # type: ignore[arg-type]
            try:
                while keeper.read(1 << 20):
                    pass
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
