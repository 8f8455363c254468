"""Files cclq writes beside a user's trace (HTA's counters and overlays) are passed over by
the next ingest of the folder, not refused as a second file for the rank (issue 41: a
notebook run twice on one folder failed with "rank 1 ... already taken")."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from helpers.traces import gpu_trace
from helpers.warehouse import query, run_ingest

from cclq.formats.detect import written_by_cclq
from cclq.present.chrome_trace import write_trace
from cclq.query.session import Session
from cclq.store.warehouse import Warehouse


def test_a_file_cclq_wrote_beside_a_trace_is_passed_over(tmp_path: Path, wh: Warehouse) -> None:
    folder = tmp_path / "run"
    gpu_trace(folder / "rank1.json", rank=1, world=2, kernels=3)
    report = run_ingest([folder], wh)
    assert not report.failed
    file_id = query(wh, "SELECT file_id FROM files")[0][0]
    session = Session(wh)
    try:
        out = write_trace(
            session,
            file_id,
            folder / "rank1_with_counters.json.gz",
            extra=[{"ph": "C", "name": "Queue Length", "pid": 0, "tid": 7, "ts": 1, "args": {"queue_length": 1}}],
            written_from="rank1.json",
        )
    finally:
        session.close()
    with gzip.open(out, "rt") as f:
        doc = json.load(f)
    assert next(iter(doc)) == "cclqWrittenFrom" and doc["cclqWrittenFrom"] == "rank1.json"
    assert doc["distributedInfo"]["rank"] == 1  # the rank it repeats: a second claim without the marker
    assert written_by_cclq(str(out)) == "rank1.json"
    assert written_by_cclq(str(folder / "rank1.json")) is None

    again = run_ingest([folder], wh)
    assert not again.failed, [o.message for o in again.failed]
    skipped = [o for o in again.outcomes if o.status == "skipped"]
    assert [Path(o.path).name for o in skipped] == ["rank1_with_counters.json.gz"]
    assert "written by cclq from rank1.json" in skipped[0].message
    assert query(wh, "SELECT count(*) FROM files") == [(1,)]


def test_a_file_without_the_marker_is_still_a_second_claim(tmp_path: Path, wh: Warehouse) -> None:
    """The marker, not the name, decides: a copy of the trace under a counters-like name
    is the user's and is refused as before."""
    folder = tmp_path / "run"
    gpu_trace(folder / "rank1.json", rank=1, world=2)
    gpu_trace(folder / "rank1_with_counters.json", rank=1, world=2, kernels=5)
    report = run_ingest([folder], wh)
    assert [Path(o.path).name for o in report.failed] == ["rank1_with_counters.json"]
    assert "already taken" in report.failed[0].message


def test_copied_away_from_its_source_it_is_a_trace(tmp_path: Path, wh: Warehouse) -> None:
    """Without the file it was written from beside it, the written file is read as a trace."""
    folder = tmp_path / "run"
    gpu_trace(folder / "rank1.json", rank=1, world=2, kernels=3)
    assert not run_ingest([folder], wh).failed
    file_id = query(wh, "SELECT file_id FROM files")[0][0]
    (tmp_path / "alone").mkdir()
    session = Session(wh)
    try:
        out = write_trace(
            session, file_id, tmp_path / "alone" / "rank1_with_counters.json.gz", written_from="rank1.json"
        )
    finally:
        session.close()
    other = Warehouse(tmp_path / "wh2")
    report = run_ingest([out.parent], other)
    assert not report.failed and [o.status for o in report.outcomes] == ["ingested"]
