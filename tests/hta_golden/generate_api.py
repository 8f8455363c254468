"""Writes what HTA 0.5.0 returns to tests/api/hta_script.py's script, per shared trace, into
tests/hta_golden/api/<name>.json.gz, for tests/api/test_hta_script.py where HTA is not
installed (CI). Imports nothing of cclq.

    python -m venv /tmp/htaenv
    /tmp/htaenv/bin/pip install HolisticTraceAnalysis==0.5.0 pandas==2.2.3 numpy==1.26.4
    /tmp/htaenv/bin/python tests/hta_golden/generate_api.py ../shared/traces tests/hta_golden/api

Each file holds {call: encoded result} (hta_script.encode, the counter series in their
canonical form, frames of more than hta_script.DIGEST_ROWS rows as digests) and, under
"_versions", the versions it was written with. The traces are copied to a temporary
folder for the run (HTA writes its counter traces beside them) and never into the
repository. pandas 2.2.3 / numpy 1.26.4: HTA 0.5.0's call graph and critical path fail
under pandas 3 (see generate.py).
"""

from __future__ import annotations

import contextlib
import gzip
import importlib.metadata
import io
import json
import logging
import sys
import tempfile
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "api"))

import hta_script  # noqa: E402
from hta.trace_analysis import TimeSeriesTypes, TraceAnalysis  # noqa: E402

FOLDERS = [
    "alexnet",
    "amd_mi250",
    "df_index_resolver",
    "mtia_single_rank",
    "nccl_data",
    "negative_queue_length",
    "ns_resolution",
    "trace_filter_2rank",
]


def main(traces: Path, out: Path) -> None:
    warnings.simplefilter("ignore")
    logging.disable(logging.WARNING)
    out.mkdir(parents=True, exist_ok=True)
    versions = {p: importlib.metadata.version(p) for p in ("HolisticTraceAnalysis", "pandas", "numpy")}
    for name in sys.argv[3:] or FOLDERS:
        with tempfile.TemporaryDirectory() as tmp, contextlib.redirect_stdout(io.StringIO()):
            results = hta_script.run_script(TraceAnalysis, TimeSeriesTypes, traces / f"hta_{name}", Path(tmp))
        encoded = {k: hta_script.encode(v) for k, v in results.items()}
        encoded = {k: hta_script.digest(hta_script.canonical(k, v, encoded)) for k, v in encoded.items()}
        encoded["_versions"] = versions
        with gzip.open(out / f"{name}.json.gz", "wt") as f:
            json.dump(encoded, f, sort_keys=False, separators=(",", ":"))
        print(name, sum(1 for v in results.values() if isinstance(v, hta_script.Raised)), "calls raised")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
