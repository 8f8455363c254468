"""``*.xplane.pb`` files (the XSpace protobuf of the JAX/TensorFlow profiler), and the
trace-viewer JSON export's silent 1,000,000-event cap.

cclq reads TPU/XLA profiles as xprof's trace-viewer JSON (``<host>.trace.json.gz``).
The profiler writes that JSON next to the ``xplane.pb``, but the export keeps only the
1,000,000 earliest events and drops the rest without a word (``MaybeDropEventsFor
TraceViewer``; shared/reference/trace-formats.md §5). So:

* an ``xplane.pb`` with a trace JSON next to it (same folder) is skipped: the JSON is
  ingested instead (``check_xplane`` says so);
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
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from cclq.errors import TraceFileError, UnsupportedFormat

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


def sibling_trace_json(xplane: str) -> Path | None:
    """The trace JSON next to an xplane.pb: ``<host>.trace.json[.gz]`` first, else any one."""
    p = Path(xplane)
    host = p.name[: -len(XPLANE_SUFFIX)]
    for suffix in TRACE_JSON_SUFFIXES:
        same_host = p.with_name(host + suffix)
        if same_host.is_file():
            return same_host
    others = sorted(q for q in p.parent.iterdir() if q.is_file() and q.name.endswith(TRACE_JSON_SUFFIXES))
    return others[0] if others else None


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
        raise UnsupportedFormat(
            path, f"xplane.pb without a trace JSON next to it: converting it needs xprof ({INSTALL_HINT})"
        )


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
            env=env, cwd=folder, stdin=subprocess.DEVNULL, capture_output=True, text=True,
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
