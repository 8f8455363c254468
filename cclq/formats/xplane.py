"""``*.xplane.pb`` files (the XSpace protobuf of the JAX/TensorFlow profiler), and the
trace-viewer JSON export's silent 1,000,000-event cap.

cclq reads TPU/XLA profiles as xprof's trace-viewer JSON (``<host>.trace.json.gz``).
The profiler writes that JSON next to the ``xplane.pb``, but the export keeps only the
1,000,000 earliest events and drops the rest without a word (``MaybeDropEventsFor
TraceViewer``; shared/reference/trace-formats.md §5). So:

* an ``xplane.pb`` with its trace JSON export next to it (same folder:
  ``<host>.trace.json[.gz]``, or the one trace-viewer JSON beside the one xplane.pb,
  whatever its name; ``sibling_trace_json``) is passed over: the JSON is ingested
  instead (``check_xplane`` says so);
* an ``xplane.pb`` alone is converted with xprof (the optional extra ``cclq[xprof]``),
  in a subprocess, on a copy in a temporary folder (the converter writes cache files
  next to its input), with ``TF_PROFILER_TRACE_VIEWER_MAX_EVENTS`` raised so that
  nothing is dropped; the JSON it writes is then ingested like any other;
* without xprof installed such a file is skipped, with a message saying how to enable
  the conversion. xprof is never imported into the cclq process: it is heavy and
  optional, and a native crash in it must not take the ingest down;
* a trace JSON from xprof that holds ``TRACE_VIEWER_MAX_EVENTS`` events or more was
  probably cut short: ingest warns (``truncation_warning``).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from cclq.errors import TraceFileError, UnsupportedFormat
from cclq.formats.source import read_head

XPLANE_SUFFIX = ".xplane.pb"
# The trace-viewer export's default cap (GetTraceViewerMaxEvents). The cap counts timed
# events only (with the cap set to 10, xprof wrote 10 X events plus the M events), while
# ingest compares every event read, so a file a few hundred events under the cap warns
# too. Tests patch this module constant.
TRACE_VIEWER_MAX_EVENTS = 1_000_000
# What the conversion sets TF_PROFILER_TRACE_VIEWER_MAX_EVENTS to: no cap in practice.
CONVERT_MAX_EVENTS = 10**15
INSTALL_HINT = "pip install 'cclq[xprof]'"
TRACE_JSON_SUFFIXES = (".trace.json", ".trace.json.gz")

# Runs in the subprocess: argv = [xplane copy, output JSON path].
_CONVERT_SCRIPT = """
import sys
from xprof.convert import raw_to_tool_data
data, _ = raw_to_tool_data.xspace_to_tool_data([sys.argv[1]], "trace_viewer", {"use_saved_result": False})
if not data:
    sys.exit("xprof produced no trace_viewer data")
if isinstance(data, str):
    data = data.encode("utf-8")
with open(sys.argv[2], "wb") as f:
    f.write(data)
"""


def is_xplane(path: str) -> bool:
    return path.endswith(XPLANE_SUFFIX)


def xprof_available() -> bool:
    """Whether the ``xprof`` package can be imported (looked up, not imported)."""
    return importlib.util.find_spec("xprof") is not None


def is_xprof_json(path: Path) -> bool:
    """A trace-viewer JSON export, whatever its name (``*.json``, ``*.json.gz``), by the
    first 64 KB: trace events with xprof's planes (``/device:`` or ``/host:``) or its
    ``displayTimeUnit: "ns"``."""
    if not path.is_file() or not path.name.endswith((".json", ".json.gz")):
        return False
    try:
        head, _ = read_head(str(path), 64 << 10)
    except TraceFileError:
        return False
    if b'"traceEvents"' not in head:
        return False
    return b"/device:" in head or b"/host:" in head or re.search(rb'"displayTimeUnit"\s*:\s*"ns"', head) is not None


def sibling_trace_json(xplane: str) -> Path | None:
    """The trace-viewer JSON exported from an xplane.pb, in its folder: ``<host>.trace.json[.gz]``
    (the profiler's own name for it); else, when the folder holds this one xplane.pb and
    one trace-viewer JSON of another name (an export saved or decompressed under another
    stem: ``worker.trace.json.gz``, ``trace.json``, ``host0.json``), that JSON. Beside
    several xplane.pb files, a JSON of another stem may be another host's: then None, and
    this xplane.pb is converted (or said to need xprof), never passed over for it."""
    p = Path(xplane)
    host = p.name[: -len(XPLANE_SUFFIX)]
    for suffix in TRACE_JSON_SUFFIXES:
        same_host = p.with_name(host + suffix)
        if same_host.is_file():
            return same_host
    try:
        entries = sorted(q for q in p.parent.iterdir() if q.is_file())
    except OSError:
        return None
    if sum(q.name.endswith(XPLANE_SUFFIX) for q in entries) != 1:
        return None
    exports = [q for q in entries if is_xprof_json(q)]
    return exports[0] if len(exports) == 1 else None


def sibling_xplanes(trace_json: str) -> list[Path]:
    p = Path(trace_json)
    return sorted(q for q in p.parent.iterdir() if q.is_file() and q.name.endswith(XPLANE_SUFFIX))


def check_xplane(path: str) -> None:
    """Raises ``UnsupportedFormat`` (the file is skipped, not failed) unless ``path`` is an
    xplane.pb that ingest should convert: no trace JSON next to it, and xprof installed."""
    json_file = sibling_trace_json(path)
    if json_file is not None:
        raise UnsupportedFormat(
            path, f"xplane.pb skipped: the trace JSON next to it ({json_file.name}) is ingested instead"
        )
    if not xprof_available():
        others = [q.name for q in sorted(Path(path).parent.iterdir()) if is_xprof_json(q)]
        where = (
            (f"its trace JSON export is not next to it ({', '.join(others)} beside it belong to other xplane.pb files)")
            if others
            else "without a trace JSON next to it"
        )
        raise UnsupportedFormat(path, f"xplane.pb {where}: converting it needs xprof ({INSTALL_HINT})")


def convert(path: str, work_dir: str) -> str:
    """Converts an xplane.pb to trace-viewer JSON with xprof; returns the JSON's path.

    Everything is written inside a new temporary folder under ``work_dir``; pass the
    returned path to ``cleanup`` when done. Raises ``TraceFileError`` when xprof fails.
    """
    folder = tempfile.mkdtemp(prefix="xplane-", dir=work_dir)
    try:
        copy = Path(folder) / Path(path).name
        shutil.copyfile(path, copy)
        out = Path(folder) / "trace_viewer.json"
        env = {**os.environ, "TF_PROFILER_TRACE_VIEWER_MAX_EVENTS": str(CONVERT_MAX_EVENTS)}
        proc = subprocess.run(
            [sys.executable, "-c", _CONVERT_SCRIPT, str(copy), str(out)],
            env=env,
            cwd=folder,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0 or not out.is_file():
            lines = [line for line in (proc.stderr or "").splitlines() if line.strip()]
            why = lines[-1].strip() if lines else f"exit status {proc.returncode}"
            raise TraceFileError(path, f"xprof could not convert this xplane.pb: {why}")
        return str(out)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise


def cleanup(converted_json: str) -> None:
    """Removes the temporary folder ``convert`` made."""
    shutil.rmtree(Path(converted_json).parent, ignore_errors=True)


def truncation_warning(path: str, events: int) -> str:
    """The ingest warning for an xprof JSON at or over the trace-viewer cap."""
    message = (
        f"{path}: {events:,} events, at or over the {TRACE_VIEWER_MAX_EVENTS:,}-event cap of xprof's "
        "trace-viewer export, which drops later events silently: this profile is probably cut short"
    )
    xplanes = sibling_xplanes(path)
    if xplanes:
        message += (
            f"; {xplanes[0].name} next to it holds all events: remove the JSON and ingest again "
            f"with xprof installed ({INSTALL_HINT}) to convert it"
        )
    else:
        message += f"; re-export it from the profile's xplane.pb ({INSTALL_HINT} lets cclq convert one)"
    return message
