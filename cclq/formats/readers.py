"""Which reader takes a detected file: one entry per format family (``detect`` kind)."""

from __future__ import annotations

from cclq.errors import UnsupportedFormat
from cclq.formats.base import Reader
from cclq.formats.chrome import ChromeReader
from cclq.formats.detect import Detected

READERS: dict[str, Reader] = {
    "chrome_json": ChromeReader(),
}


def reader_for(detected: Detected) -> Reader:
    reader = READERS.get(detected.kind)
    if reader is None:
        raise UnsupportedFormat("?", f"no reader for {detected.kind}")
    return reader
