"""Which reader takes a detected file: one entry per format family (``detect`` kind)."""

from __future__ import annotations

from collections.abc import Callable

from cclq.formats.base import Detected, Reader, ReadOptions
from cclq.formats.chrome.reader import ChromeReader
from cclq.formats.et import EtReader
from cclq.formats.nsys import NsysReader
from cclq.formats.results import ResultsReader

FORMAT_READERS: dict[str, Reader] = {
    "chrome_json": ChromeReader(),
    "nsys_sqlite": NsysReader(),
    "pytorch_et": EtReader(),
    "results": ResultsReader(),
}


def reader_for(detected: Detected, options: ReadOptions | None = None) -> Reader:
    """The reader of a detected kind (``detect`` only returns kinds listed here);
    ``options`` choose the JSON reader and the bounds (``cclq.formats.limits``) every reader keeps."""
    if options is None:
        return FORMAT_READERS[detected.kind]
    make: dict[str, Callable[[ReadOptions], Reader]] = {
        "chrome_json": ChromeReader,
        "nsys_sqlite": NsysReader,
        "pytorch_et": EtReader,
        "results": ResultsReader,
    }
    return make[detected.kind](options)
