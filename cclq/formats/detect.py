"""Which format a file holds, decided by its content (never by its extension alone).

``detect`` reads at most the first MB (decompressed) and returns a ``Detected``.
Formats that cclq recognises but cannot ingest yet raise ``UnsupportedFormat``;
damaged or foreign files raise ``TraceFileError`` with a one-line reason.
"""

from __future__ import annotations

import os
import re

from cclq.errors import TraceFileError, UnsupportedFormat
from cclq.formats import xplane
from cclq.formats.base import Detected
from cclq.formats.nsys import detect_sqlite
from cclq.formats.results import DDLB_COLUMNS, LOG_MARKERS
from cclq.formats.source import read_head

SQLITE_MAGIC = b"SQLite format 3\x00"

# Files in a workload folder that are never traces: walking a folder passes them by.
# Everything else is a candidate and ``detect`` decides by content.
IGNORED_SUFFIXES = (
    # cards, notes, scripts, configs
    ".yaml",
    ".yml",
    ".md",
    ".rst",
    ".py",
    ".sh",
    ".toml",
    ".cfg",
    ".ini",
    ".html",
    ".htm",
    ".ipynb",
    ".lock",
    # documents
    ".pdf",
    ".doc",
    ".docx",
    ".ppt",
    ".pptx",
    ".xls",
    ".xlsx",
    ".odt",
    ".ods",
    ".odp",
    ".rtf",
    ".tex",
    # images and videos
    ".png",
    ".jpg",
    ".jpeg",
    ".gif",
    ".bmp",
    ".svg",
    ".webp",
    ".tif",
    ".tiff",
    ".ico",
    ".eps",
    ".mp4",
    # archives (a trace is gzip at most: ``*.json.gz``)
    ".zip",
    ".tar",
    ".tgz",
    ".tar.gz",
    ".tar.bz2",
    ".tar.xz",
    ".tar.zst",
    ".7z",
    ".rar",
    # tables and tensors
    ".parquet",
    ".arrow",
    ".feather",
    ".npy",
    ".npz",
    ".h5",
    ".hdf5",
    ".pkl",
    ".pickle",
    ".pth",
    ".ckpt",
    ".safetensors",
)
# Files that may hold benchmark results (cclq/formats/results.py decides by content) and
# never traces: read inside a workload, but they do not make a folder a workload, and
# one that is not a results file is skipped, not failed.
RESULT_SUFFIXES = (".csv", ".tsv", ".log", ".txt", ".out", ".jsonl")
# Nsight Systems reports, recognised by name: skipped as not supported yet, rather than
# failed as "not a recognised trace format".
NSYS_REPORT_SUFFIXES = (".nsys-rep", ".qdrep")


_HOROVOD = re.compile(rb'"name"\s*:\s*"(?:NEGOTIATE_[A-Z_]+|CYCLE_START)"|"start_time_since_epoch_in_micros"')


def is_candidate(path: str) -> bool:
    """Whether a file found while walking a folder should be looked at at all."""
    name = os.path.basename(path)
    if name.startswith(".") or name == "workload_card.yaml":
        return False
    return not name.lower().endswith(IGNORED_SUFFIXES)


# The first top-level key of every trace cclq writes beside a user's (HTA's
# generate_trace_with_counters, overlays): its value names the file it was written from.
# A folder walk passes such a file over, so that a notebook run again on the same folder
# does not find two files for one rank (HTA reads the folder again and answers).
WRITTEN_FROM_KEY = "cclqWrittenFrom"
_WRITTEN_FROM = re.compile(rb'^\s*\{\s*"cclqWrittenFrom"\s*:\s*("(?:[^"\\]|\\.)*")')


def written_by_cclq(path: str) -> str | None:
    """The file a trace cclq wrote was written from (its ``cclqWrittenFrom`` key, the
    first of the file), or None for any other file or one that cannot be read."""
    if not path.lower().endswith((".json", ".json.gz")):
        return None
    try:
        head, _ = read_head(path, 4096)
    except (OSError, TraceFileError):
        return None
    m = _WRITTEN_FROM.match(head)
    if m is None:
        return None
    import json  # only for the rare file that carries the key

    return str(json.loads(m.group(1)))


def may_be_trace(path: str) -> bool:
    """A candidate that could be a trace, not only a results file (makes a workload)."""
    return is_candidate(path) and not path.lower().endswith(RESULT_SUFFIXES)


def is_sqlite(path: str) -> bool:
    """Whether a file starts as a SQLite database does (cheap: 16 bytes, no decompression)."""
    try:
        with open(path, "rb") as f:
            return f.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC
    except OSError:
        return False


def is_trace_event_json(path: str) -> bool:
    """Whether a file looks like Chrome trace-event JSON (an object with ``traceEvents``, or
    a bare array) from its first 64 KB: a quick look for planning, ``detect`` decides."""
    try:
        head, _ = read_head(path, 64 << 10)
    except TraceFileError:
        return False
    text = head.lstrip().removeprefix(b"\xef\xbb\xbf").lstrip()
    return text[:1] == b"[" or (text[:1] == b"{" and b'"traceEvents"' in head)


_RESULTS_JSON = re.compile(rb'^\s*\{\s*"(?:avg_latency|date|backend|ttfts|latencies)"')
_SERVING = re.compile(rb'"(?:avg_latency|mean_ttft_ms|median_ttft_ms|mean_tpot_ms|median_tpot_ms)"\s*:')


def _maybe_results_json(head: bytes) -> bool:
    """A JSON object that may be a benchmark's results: not a trace (no traceEvents in
    its first 64 KB, which a trace has) and naming a serving or latency metric."""
    start = head[: 64 << 10]
    if b'"traceEvents"' in start or start.lstrip()[:1] != b"{":
        return False
    return _RESULTS_JSON.search(start[:4096]) is not None or _SERVING.search(head) is not None


def _detect_results(path: str, head: bytes) -> Detected | None:
    """Benchmark result files, by what their first lines say."""
    text = head.lstrip(b"\xef\xbb\xbf")
    first_line = text.split(b"\n", 1)[0].decode("utf-8", errors="replace")
    if DDLB_COLUMNS <= {c.strip() for c in first_line.split(",")}:
        return Detected("results", "ddlb_csv", False, head)
    if LOG_MARKERS.search(text):
        return Detected("results", "ddl_benchmarks_log", False, head)
    if _SERVING.search(text) and b'"traceEvents"' not in text:
        stripped = text.lstrip()
        lines = [ln for ln in stripped.split(b"\n") if ln.strip()]
        if path.lower().endswith(".jsonl") or (
            len(lines) > 1 and lines[0].rstrip().endswith(b"}") and lines[1].lstrip().startswith(b"{")
        ):
            return Detected("results", "sglang_bench_jsonl", False, head)
        if stripped[:1] == b"{":
            return Detected("results", "vllm_bench_json", False, head)
    return None


def _kind_of(head: bytes) -> str:
    """What an unrecognised file looks like, in words that quote none of its content."""
    sample = head[:4096]
    if b"\x00" in sample:
        return "binary data"
    try:
        sample.decode("utf-8")
    except UnicodeDecodeError as e:
        if e.start < len(sample) - 4:  # not only a character cut at the sample's end
            return "binary data"
    return "text"


def _top_key(head: bytes, key: str) -> bool:
    # ``in`` first: bytes search runs at memory speed, a regex scan of a 1 MB head that
    # does not hold the key took ~0.3 ms (a third of detecting a small Kineto file)
    quoted = b'"' + key.encode() + b'"'
    return quoted in head and re.search(re.escape(quoted) + rb"\s*:", head) is not None


def detect(path: str) -> Detected:
    if os.path.isdir(path):
        raise TraceFileError(path, "is a directory")
    if path.lower().endswith(NSYS_REPORT_SUFFIXES):
        raise UnsupportedFormat(
            path,
            "Nsight Systems report (binary): export it to SQLite first, "
            "`nsys export --type sqlite --output <name>.sqlite <report>`, and ingest that",
        )
    head, compressed = read_head(path)
    if not head:
        raise TraceFileError(path, "empty file")
    if path.lower().endswith(RESULT_SUFFIXES) or _maybe_results_json(head):
        results = _detect_results(path, head)
        if results is not None:
            return results
        if path.lower().endswith(RESULT_SUFFIXES):
            raise UnsupportedFormat(
                path,
                "not a trace, nor a results file cclq knows (DDLB CSV, ddl-benchmarks log, "
                "vLLM / SGLang benchmark JSON)",
            )
    if head.startswith(SQLITE_MAGIC):
        if compressed:
            raise TraceFileError(path, "a gzipped SQLite database: decompress it (gunzip) to ingest it")
        return detect_sqlite(path)
    if xplane.is_xplane(path):
        xplane.check_xplane(path)  # skipped (UnsupportedFormat) unless it is to be converted
        return Detected("xplane", "xprof", False, head)
    # only the first byte after blanks matters: strip a short prefix, not a 1 MB copy
    text = head[:4096].lstrip() or head.lstrip()
    if text.startswith(b"\xef\xbb\xbf"):
        text = text[3:].lstrip()
    if text[:1] not in (b"{", b"["):
        # Never the bytes themselves: the file may be anything a link leads to (/etc/shadow)
        raise TraceFileError(
            path, f"not a recognised trace format ({_kind_of(head)}; not JSON, SQLite, xplane.pb or a results file)"
        )
    if text[:1] == b"[":
        # Horovod's timeline (HOROVOD_TIMELINE): a bare array of negotiation and
        # operation phases, from rank 0 for the whole job (cclq/formats/chrome/ijson_reader.py)
        if _HOROVOD.search(head):
            return Detected("chrome_json", "horovod", True, head)
        return Detected("chrome_json", "chrome", True, head)
    # Object form. Tell the JSON dialects apart by their top-level keys.
    # Each test that fails scans the whole head, so the ones that usually succeed early
    # go first (a trace names traceEvents near its start; Kineto its schemaVersion).
    if not _top_key(head, "traceEvents") and _top_key(head, "nodes") and _top_key(head, "schema"):
        return Detected("pytorch_et", "pytorch_et", False, head)
    if _top_key(head, "schemaVersion") or _top_key(head, "deviceProperties") or _top_key(head, "distributedInfo"):
        return Detected("chrome_json", "kineto", False, head)
    flavor = "chrome"
    if (
        (b'"displayTimeUnit"' in head and re.search(rb'"displayTimeUnit"\s*:\s*"ns"', head))
        or b"/device:" in head
        or b"/host:" in head
    ):
        flavor = "xprof"
    return Detected("chrome_json", flavor, False, head)
