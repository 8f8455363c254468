"""``cclq.TraceAnalysis`` against HTA 0.5.0's own outputs (../shared/golden/hta), table for
table: the columns HTA returns, in its order, and every value of its CSVs."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest
from conftest import GOLDEN, SHARED_TRACES, require_shared

import cclq

FOLDERS = ["alexnet", "amd_mi250", "df_index_resolver", "mtia_single_rank", "nccl_data",
           "negative_queue_length", "ns_resolution", "trace_filter_2rank"]


def _golden(folder: str, name: str) -> tuple[list[str], list[dict[str, str]]]:
    with open(GOLDEN / folder / f"{name}.csv", newline="") as f:
        reader = csv.DictReader(f)
        rows = list(reader)
        return list(reader.fieldnames or []), rows


def _same(actual: object, expected: str) -> bool:
    if expected == "":
        return actual is None or (isinstance(actual, float) and math.isnan(actual))
    if isinstance(actual, str):
        return actual == expected
    return actual is not None and math.isclose(float(actual), float(expected), rel_tol=1e-9, abs_tol=1e-9)


def _assert_table(frame: object, folder: str, name: str, key: list[str]) -> None:
    columns, rows = _golden(folder, name)
    assert frame.columns == columns, name
    got = sorted(frame.iter_rows(named=True), key=lambda r: [str(r[k]) for k in key])
    want = sorted(rows, key=lambda r: [r[k] for k in key])
    assert len(got) == len(want), (name, got, want)
    for g, w in zip(got, want):
        bad = {c: (g[c], w[c]) for c in columns if not _same(g[c], w[c])}
        assert not bad, (name, bad)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> cclq.Workspace:
    require_shared()
    return cclq.open(tmp_path_factory.mktemp("ta") / "wh")


@pytest.mark.parametrize("folder", FOLDERS)
def test_trace_analysis_returns_htas_tables(folder: str, workspace: cclq.Workspace) -> None:
    ta = cclq.TraceAnalysis(SHARED_TRACES / f"hta_{folder}", warehouse=workspace)
    _assert_table(ta.get_temporal_breakdown(), folder, "temporal_breakdown", ["rank"])
    _assert_table(ta.get_comm_comp_overlap(), folder, "comm_comp_overlap", ["rank"])
    _assert_table(ta.get_gpu_kernel_type_breakdown(), folder, "kernel_type_breakdown", ["kernel_type"])
    # the golden files asked HTA for every rank (its default is rank 0 alone)
    ranks = ta.get_temporal_breakdown()["rank"].to_list()
    _assert_table(ta.get_idle_time_breakdown(ranks=ranks), folder, "idle_time_breakdown",
                  ["rank", "stream", "idle_category"])


def test_an_analysis_htas_users_know_but_cclq_lacks_is_absent_not_faked(tmp_path: Path) -> None:
    assert not hasattr(cclq.TraceAnalysis, "get_frequent_cuda_kernel_sequences_approximation")
    with pytest.raises(AttributeError):
        cclq.nothing_here  # noqa: B018
