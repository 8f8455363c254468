"""An HTA user's script, unchanged, on cclq.TraceAnalysis: tests/api/hta_script.py calls every
public method of HTA 0.5.0's TraceAnalysis (defaults and common keyword arguments) and the
parts of ``ta.t`` scripts use, on each shared HTA trace, and every returned object is
compared with HTA's: type, index and column levels, dtypes, values to 1e-9 relative, the
figures drawn (titles, chart types) and the files written (their events).

HTA's side: HTA itself where ``hta`` is importable (run in this process on a copy of the
trace), else what it returned when tests/hta_golden/generate_api.py ran it
(tests/hta_golden/api/<trace>.json.gz; HTA is not installed in CI). Where HTA raises, cclq's
answer is not compared (docs/api.md says what cclq answers there and why); where cclq
answers differently on purpose, KNOWN says why.
"""

from __future__ import annotations

import gzip
import json
import logging
import warnings
from pathlib import Path

import hta_script
import pytest
from helpers.paths import SHARED_TRACES, require_shared

pd = pytest.importorskip("pandas")
pytest.importorskip("plotly")

import cclq  # noqa: E402

pytestmark = pytest.mark.slow  # (CONTRIBUTING.md: over ~2 s each)

GOLDEN = Path(__file__).resolve().parents[1] / "hta_golden" / "api"
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

# (trace, call) -> why cclq's answer is not HTA's there
KNOWN = {
    (
        "negative_queue_length",
        "get_frequent_cuda_kernel_sequences('aten::mm', output_dir, rank)",
    ): "HTA's call stack nests two rows wrongly and counts the pattern once where it occurs 4 times "
    "(tests/query/test_hta_analyses.py works it out)",
    (
        "negative_queue_length",
        "get_frequent_cuda_kernel_sequences('aten::mm') wrote",
    ): "the same: cclq marks the 4 occurrences of the pattern",
}


def _zero_length_rows_dropped(enc: dict) -> dict:
    """An encoded frame without its rows of dur 0."""
    if enc.get("type") != "DataFrame":
        return enc
    dur = enc["data"][enc["columns"]["values"].index("dur")]
    keep = [i for i, d in enumerate(dur) if d != 0]
    return {
        **enc,
        "index": {**enc["index"], "values": [enc["index"]["values"][i] for i in keep]},
        "data": [[column[i] for i in keep] for column in enc["data"]],
    }


# HTA run live under pandas 3: IntervalIndex.overlaps no longer counts a zero-length interval
# inside another as overlapping it, so HTA leaves zero-length kernels (memcpys of 0 µs) out of
# their annotation; cclq keeps HTA 0.5.0's (pandas 2) answer, which the recorded goldens hold.
PANDAS_3_CALLS = {"get_gpu_kernels_with_user_annotations(rank)": _zero_length_rows_dropped}


def _hta_live() -> tuple[object, object] | None:
    try:
        from hta.trace_analysis import TimeSeriesTypes, TraceAnalysis
    except ImportError:
        return None
    return TraceAnalysis, TimeSeriesTypes


def _encoded(results: dict) -> dict:
    encoded = {k: hta_script.encode(v) for k, v in results.items()}
    return {k: hta_script.canonical(k, v, encoded) for k, v in encoded.items()}


def _hta_side(folder: str, tmp_path: Path) -> dict:
    live = _hta_live()
    if live is None:
        with gzip.open(GOLDEN / f"{folder}.json.gz", "rt") as f:
            return json.load(f)
    scratch = tmp_path / "hta"
    scratch.mkdir()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logging.disable(logging.WARNING)
        try:
            return _encoded(hta_script.run_script(*live, SHARED_TRACES / f"hta_{folder}", scratch))
        finally:
            logging.disable(logging.NOTSET)


@pytest.mark.parametrize("folder", FOLDERS)
def test_an_hta_script_runs_unchanged_and_returns_what_hta_returns(
    folder: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_shared()
    want = _hta_side(folder, tmp_path)
    live_on_pandas_3 = _hta_live() is not None and int(pd.__version__.split(".")[0]) >= 3
    monkeypatch.setenv("CCLQ_WAREHOUSE", str(tmp_path / "wh"))  # the script itself is HTA's, unchanged
    scratch = tmp_path / "cclq"
    scratch.mkdir()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = _encoded(
            hta_script.run_script(cclq.TraceAnalysis, cclq.TimeSeriesTypes, SHARED_TRACES / f"hta_{folder}", scratch)
        )
    problems = []
    for call, expected in want.items():
        if call == "_versions" or (folder, call) in KNOWN:
            continue
        if call not in got:
            problems.append(f"{call}: not called on cclq (an earlier call failed?)")
            continue
        if isinstance(expected, dict) and expected.get("type") == "raised":
            continue  # HTA fails here; docs/api.md says what cclq answers
        mine = got[call]
        if live_on_pandas_3 and call in PANDAS_3_CALLS:
            mine, expected = PANDAS_3_CALLS[call](mine), PANDAS_3_CALLS[call](expected)
        problems += hta_script.compare_any(mine, expected, call)
    assert not problems, "\n".join(problems)


def test_the_known_differences_are_still_differences(tmp_path: Path) -> None:
    """KNOWN lists only calls where HTA's golden answer is still not cclq's (a fix on either
    side must remove the entry)."""
    for folder, call in KNOWN:
        with gzip.open(GOLDEN / f"{folder}.json.gz", "rt") as f:
            assert call in json.load(f), (folder, call)
