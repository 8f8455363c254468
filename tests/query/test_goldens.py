"""Released numbers are frozen: every released metric version recomputed over the golden
workloads (the bundled one and a fixed synthetic set, ``tests/helpers/goldens.py``) gives
the rows of its golden (``tests/query/golden/<metric>/v<N>.csv``), floats within a relative
1e-9. sql/metrics/CHECKSUMS freezes a version's own SQL; this freezes what the views under
it make of it. The goldens are written by ``python -m tests.helpers.update_goldens``, never
by this test."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers import goldens
from helpers.goldens import UPDATE_COMMAND, Golden, differences, golden_path, released
from helpers.update_goldens import update

pytestmark = pytest.mark.slow  # (CONTRIBUTING.md: over ~2 s each)


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Golden]:
    """Every released version computed now: one warehouse, a batch per version number
    (about 20 s on the 2-core reference machine)."""
    return goldens.compute(tmp_path_factory.mktemp("goldens"))


def _recorded(spec) -> Golden:
    path = golden_path(spec)
    assert path.exists(), f"{spec.label} has no golden ({path}); write it with `{UPDATE_COMMAND}`"
    return Golden.parse(path.read_text())


def test_every_released_version_has_a_golden_with_a_value():
    """Each released version has a golden, and the golden workloads give it at least one
    value (a golden of reasons alone would freeze nothing)."""
    specs = released()
    assert len(specs) >= 100
    missing = [s.label for s in specs if not golden_path(s).exists()]
    assert not missing, f"no golden for {missing}; write them with `{UPDATE_COMMAND}`"
    valueless = [s.label for s in specs if not _recorded(s).has_value()]
    assert not valueless, f"goldens without a single value: {valueless}; add a workload that gives one"
    names = {s.name for s in specs}
    stray = sorted(p.parent.name for p in goldens.GOLDEN_DIR.glob("*/v*.csv") if p.parent.name not in names)
    assert not stray, f"goldens of no released metric: {stray}"


def test_released_numbers_have_not_moved(fresh: dict[str, Golden]):
    """A view edit that moves a released number fails here. If the move is meant, it is a
    new version of the metric (a new file), not an edit of a released one."""
    moved: list[str] = []
    for spec in released():
        label = f"{spec.name}/v{spec.version}"
        moved += differences(label, _recorded(spec), fresh[label])
    assert not moved, "released numbers moved:\n" + "\n".join(moved[:40])


def test_goldens_hold_numbers_worked_out_by_hand():
    """The goldens were checked before they were frozen: these values are worked out on
    paper from the placements in tests/helpers/goldens.py (not read off a run)."""

    def value(metric: str, version: int, trace: str) -> list[float | None]:
        from cclq.query.registry import resolve

        golden = _recorded(resolve(metric, version))
        at = golden.columns.index("value")
        return [row[at] for row in golden.rows[trace]]

    # Horovod: phase time (us) negotiation 31 + 16 + 51, queue 10 + 10, fusion copies
    # 2 x (10 + 5), communication 40 + 40 + 20, wait 10: 258 us; communication 100 of them
    assert value("horovod_phase_share", 1, "synth_horovod") == pytest.approx([100 / 258], rel=1e-12)
    # nsys: per step a 10 us GEMM and a 10 us all-reduce, two steps
    assert value("total_kernel_time", 1, "synth_nsys") == pytest.approx([40e-6], rel=1e-12)
    # ... the all-reduce's second half (5 of 10 us) runs under the GEMM
    assert value("communication_overlap_ratio", 2, "synth_nsys") == pytest.approx([0.5], rel=1e-12)
    # vLLM: the first prefill iteration lasts 50 us (+2 us on rank 1); the decode-only
    # iterations 12, 10, 11 us (+2 us each on rank 1)
    assert value("ttft", 2, "synth_vllm") == pytest.approx([50e-6, 52e-6], rel=1e-12)
    assert value("tpot", 2, "synth_vllm") == pytest.approx([11e-6, 13e-6], rel=1e-12)
    # the serving benchmark's medians, in seconds
    assert value("ttft", 2, "synth_serving") == pytest.approx([0.120], rel=1e-12)
    assert value("tpot", 2, "synth_serving") == pytest.approx([0.025], rel=1e-12)
    # three ProfilerSteps of 1 ms: the inner one is averaged
    assert value("avg_step_time", 3, "synth_collectives") == pytest.approx([1e-3, 1e-3], rel=1e-12)


def test_a_moved_number_is_found_and_a_rounding_is_not():
    golden = Golden(["trace", "rank", "value", "name"], {"t": [["t", 0, 0.1 + 0.2, "a"]], "u": []})
    same = Golden.parse(golden.text())
    assert same.rows == {"t": [["t", 0, 0.30000000000000004, "a"]], "u": []}
    assert differences("m/v1", golden, same) == []
    close = Golden(golden.columns, {"t": [["t", 0, 0.3 * (1 + 1e-12), "a"]], "u": []})
    assert differences("m/v1", golden, close) == []
    moved = Golden(golden.columns, {"t": [["t", 0, 0.3 * (1 + 1e-8), "a"]], "u": []})
    assert differences("m/v1", golden, moved) == [
        f"m/v1 t row 0 value: {0.3 * (1 + 1e-8)!r}, golden 0.30000000000000004"
    ]
    # NULL, an integer, a float and a text that reads as a number stay apart
    typed = Golden(["trace", "a", "b", "c", "d"], {"t": [["t", None, 1, 1.0, "1"]]})
    assert Golden.parse(typed.text()).rows == typed.rows
    assert differences("m/v1", typed, Golden(typed.columns, {"t": [["t", None, 1.0, 1.0, "1"]]}))
    assert differences("m/v1", golden, Golden(golden.columns, {"t": [], "u": []})) == ["m/v1 t: 0 rows, golden 1"]


def test_the_update_adds_what_is_missing_and_never_rewrites_a_recorded_row(
    fresh: dict[str, Golden], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    copy = tmp_path / "golden"
    shutil.copytree(goldens.GOLDEN_DIR, copy)
    monkeypatch.setattr(goldens, "GOLDEN_DIR", copy)
    (copy / "ttft" / "v1.csv").unlink()  # a new version
    path = copy / "tpot" / "v2.csv"  # a golden without one workload, and a recorded number edited
    old = Golden.parse(path.read_text())
    del old.rows["synth_serving"]
    at = old.columns.index("value")
    old.rows["synth_vllm"][0][at] = 1.0
    path.write_text(old.text())
    before = {p: p.read_bytes() for p in copy.glob("*/v*.csv")}
    assert sorted(update(set(), fresh)) == [f"added synth_serving to {path}", f"wrote {copy / 'ttft' / 'v1.csv'}"]
    now = Golden.parse(path.read_text())
    assert now.rows["synth_vllm"][0][at] == 1.0  # kept: only --rewrite replaces a recorded row
    assert now.rows["synth_serving"] == fresh["tpot/v2"].rows["synth_serving"]
    assert [p for p, b in before.items() if p != path and p.read_bytes() != b] == []
    update({"tpot/v2"}, fresh)
    assert Golden.parse(path.read_text()).rows == fresh["tpot/v2"].rows
