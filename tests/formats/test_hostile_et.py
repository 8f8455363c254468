"""Hostile PyTorch execution traces: the bounds of the JSON readers hold for ETs too
(depth, string, node size), under a memory cap and a timeout."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.cli import run_capped
from helpers.warehouse import query, run_ingest

from cclq.formats.base import ReadOptions
from cclq.formats.limits import MIB, ReadLimits


def _node(i: int, **extra) -> dict:
    return {
        "id": i,
        "name": "aten::mm",
        "ctrl_deps": 1,
        "inputs": {"values": [], "shapes": [], "types": []},
        "outputs": {"values": [], "shapes": [], "types": []},
        "attrs": [{"name": "rf_id", "type": "uint64", "value": i}],
        **extra,
    }


def _et(path: Path, nodes_text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        '{"schema": "1.1.1-chakra.0.0.4", "pid": 1, "time": "t", "start_ts": 1, "nodes": ['
        + nodes_text
        + '], "finish_ts": 2}'
    )
    return path


def _ingest_capped(tmp_path: Path, *extra: str):
    return run_capped(
        "ingest", str(tmp_path / "in"), "-w", str(tmp_path / "wh"), "-q", "--jobs", "1", *extra, timeout=90
    )


def _error_line(done) -> str:
    (line,) = [ln for ln in done.stderr.splitlines() if ln.startswith("cclq: error:")]
    assert "Traceback" not in done.stderr and "a bug" not in done.stderr, done.stderr
    return line


@pytest.mark.slow
def test_an_et_nested_50000_deep_is_refused_quickly(tmp_path):
    """100 KB nested 50,000 deep peaked at 6.2 GB and was ingested."""
    deep = "[" * 50_000 + "]" * 50_000
    _et(tmp_path / "in" / "w" / "et_rank0.json", json.dumps(_node(2))[:-1] + ', "deep": ' + deep + "}")
    done, seconds = _ingest_capped(tmp_path)
    assert done.returncode == 1
    line = _error_line(done)
    assert "et_rank0.json" in line and line.endswith("(limit --max-depth)"), line
    assert seconds < 30


@pytest.mark.slow
def test_one_huge_et_node_is_refused_under_the_node_bound(tmp_path):
    """A 52 MB ET of one node peaked at 2.7 GB: a node is an event, bounded by --max-event-mb."""
    big = _node(2, extra_values=list(range(6_000_000)))
    _et(tmp_path / "in" / "w" / "et_rank0.json", json.dumps(big))
    assert (tmp_path / "in" / "w" / "et_rank0.json").stat().st_size > 40 * MIB
    done, seconds = _ingest_capped(tmp_path)
    assert done.returncode == 1
    line = _error_line(done)
    assert "an event larger than 24 MiB" in line and line.endswith("(limit --max-event-mb)"), line
    # the same option raises it for ETs too
    ok = run_ingest([tmp_path / "in"], _wh(tmp_path), options=ReadOptions(limits=ReadLimits(max_event_bytes=64 * MIB)))
    assert not ok.failed


def _wh(tmp_path: Path):
    from cclq.store.warehouse import Warehouse

    return Warehouse(tmp_path / "wh2")


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["et", "kineto-fast", "kineto-ijson"])
def test_an_over_long_integer_is_one_line_not_a_crash(tmp_path, kind):
    """An integer of 5,000 digits: ijson's C backend segfaulted converting it (the whole
    ingest died with the parser), or Python refused it as "a bug". Every JSON reader now
    stops before a parser sees it, with one line naming the file and the offset."""
    number = "7" * 5000
    if kind == "et":
        _et(tmp_path / "in" / "w" / "et_rank0.json", json.dumps(_node(2))[:-1] + ', "seq_id": ' + number + "}")
    else:
        (tmp_path / "in" / "w").mkdir(parents=True)
        (tmp_path / "in" / "w" / "rank0.json").write_text(
            '{"traceEvents": [{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 2, "args": {"v": '
            + number
            + "}}]}"
        )
    done, _ = _ingest_capped(tmp_path, "--reader", kind.rpartition("-")[2] if "-" in kind else "fast")
    assert done.returncode == 1, (done.returncode, done.stderr)
    line = _error_line(done)
    assert "an integer of more than 4300 digits at byte" in line, line


def test_a_good_et_still_reads(tmp_path, wh):
    _et(tmp_path / "in" / "w" / "et_rank0.json", ", ".join(json.dumps(_node(i)) for i in range(2, 6)))
    assert not run_ingest([tmp_path / "in"], wh).failed
    assert query(wh, "SELECT count(*), sum(rf_id) FROM et_nodes") == [(4, 2 + 3 + 4 + 5)]


@pytest.mark.parametrize("split", [1, 7, 4300, 4301, 9000])
def test_digit_runs_are_found_across_blocks(split):
    from cclq.formats.chrome.jsonscan import DigitRuns

    for text, expected in [
        (b'{"a": ' + b"1" * 4300 + b"}", None),
        (b'{"a": ' + b"1" * 4301 + b"}", 6 + 4300),
        (b"9" * 5000, 4300),
        (b"12 " * 3000 + b"5" * 4400, 9000 + 4300),
    ]:
        runs = DigitRuns()
        for at in range(0, len(text), split):
            runs.feed(text[at : at + split], at)
        assert runs.found == expected, (split, len(text))
