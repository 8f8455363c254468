"""Every event of every real trace in ../shared/traces is accounted for.

The expected numbers come from the plain ``json`` module (with exact decimals),
independently of cclq's streaming reader.
"""

from __future__ import annotations

import gzip
import json
from collections import Counter
from decimal import Decimal
from pathlib import Path

import pytest
from helpers.paths import require_shared
from helpers.warehouse import query, run_ingest

from cclq.formats.chrome.ijson_reader import XPROF_END_MARKER
from cclq.ingest.report import IngestReport
from cclq.store.warehouse import Warehouse

pytestmark = pytest.mark.slow  # (CONTRIBUTING.md: over ~2 s each)


def _load_exact(path: Path):
    opener = gzip.open if path.read_bytes()[:2] == b"\x1f\x8b" else open
    with opener(path, "rt") as f:
        return json.load(f, parse_float=Decimal)


def _chrome_files(traces: Path) -> list[tuple[str, Path, object]]:
    """(trace id, path, parsed document) for every Chrome/Kineto JSON trace."""
    found = []
    for folder in sorted(p for p in traces.iterdir() if p.is_dir()):
        for path in sorted(folder.rglob("*")):
            if not path.is_file() or not (path.name.endswith(".json") or path.name.endswith(".json.gz")):
                continue
            doc = _load_exact(path)
            if isinstance(doc, list) or (isinstance(doc, dict) and "traceEvents" in doc):
                found.append((folder.name, path, doc))
    return found


@pytest.fixture(scope="module")
def shared_ingest(tmp_path_factory) -> tuple[Warehouse, IngestReport]:
    """The shared traces ingested once for the module, and what the ingest reported."""
    traces = require_shared()
    wh = Warehouse(tmp_path_factory.mktemp("shared") / "wh")
    report = run_ingest([traces], wh, jobs=2)
    assert not report.failed, [o.message for o in report.failed]
    return wh, report


@pytest.fixture(scope="module")
def shared_warehouse(shared_ingest) -> tuple[Warehouse, list]:
    return shared_ingest[0], _chrome_files(require_shared())


def test_every_chrome_json_workload_is_ingested(shared_warehouse):
    wh, files = shared_warehouse
    ingested = {
        (t, p) for t, p in query(wh, "SELECT trace, path FROM files WHERE format NOT IN ('nsys', 'pytorch_et')")
    }
    assert ingested == {(t, str(p.resolve())) for t, p, _ in files}
    assert len(files) >= 20


def test_events_by_phase_equal_rows_kept_plus_drops(shared_warehouse):
    wh, files = shared_warehouse
    for _trace, path, doc in files:
        events = doc if isinstance(doc, list) else doc["traceEvents"]
        raw = Counter()
        for ev in events:
            if not isinstance(ev, dict):
                raw["<not an object>"] += 1
            elif not ev:
                raw["<empty>"] += 1
            else:
                raw[ev.get("ph")] += 1
        (file_id,) = query(wh, "SELECT file_id FROM files WHERE path = ?", [str(path.resolve())])[0]
        kept = Counter(dict(query(wh, "SELECT ph, count(*) FROM events WHERE file_id = ? GROUP BY ph", [file_id])))
        closed_b = query(
            wh, "SELECT count(*) FROM events WHERE file_id = ? AND ph = 'B' AND dur_ns IS NOT NULL", [file_id]
        )[0][0]
        dropped = Counter()
        # dropped events, and the {} that ends every xprof array (a note, not a drop)
        for stat, ph, n in query(
            wh,
            "SELECT stat, ph, count FROM ingest_stats WHERE file_id = ? AND (dropped OR stat = ?)",
            [file_id, XPROF_END_MARKER],
        ):
            key = {"not an object": "<not an object>", "empty object": "<empty>", XPROF_END_MARKER: "<empty>"}.get(
                stat, ph
            )
            dropped[key] += n
        accounted = Counter()
        for ph, n in kept.items():
            accounted[ph] += n
        accounted["E"] += closed_b
        accounted.update(dropped)
        assert +accounted == +raw, f"{path}: read {dict(raw)}, accounted {dict(accounted)}"
        assert query(wh, "SELECT events_read FROM files WHERE file_id = ?", [file_id])[0][0] == len(events)


def test_timestamps_are_exact_nanoseconds(shared_warehouse):
    wh, files = shared_warehouse
    checked = 0
    for _trace, path, doc in files:
        events = doc if isinstance(doc, list) else doc["traceEvents"]
        base = doc.get("baseTimeNanoseconds", 0) if isinstance(doc, dict) else 0
        (file_id,) = query(wh, "SELECT file_id FROM files WHERE path = ?", [str(path.resolve())])[0]
        sample = [i for i, ev in enumerate(events) if isinstance(ev, dict) and ev.get("ph") == "X"][::97][:40]
        got = dict(
            (idx, (ts, dur))
            for idx, ts, dur in query(
                wh,
                "SELECT event_idx, ts_ns, dur_ns FROM events WHERE file_id = ? AND list_contains(?, event_idx)",
                [file_id, sample],
            )
        )
        for i in sample:
            ev = events[i]
            want_ts = base + int(Decimal(ev["ts"]) * 1000)
            want_dur = int(Decimal(ev["dur"]) * 1000) if "dur" in ev else None
            assert got[i] == (want_ts, want_dur), f"{path} event {i}: {ev['ts']} {ev.get('dur')}"
            checked += 1
    assert checked > 300


def test_ns_resolution_trace_keeps_the_last_digit(shared_warehouse):
    wh, _ = shared_warehouse
    # first event of hta_ns_resolution: "ts": 1712195495519689.047, "dur": 63.813 (read with zcat)
    rows = query(wh, "SELECT ts_ns, dur_ns FROM events WHERE trace = 'hta_ns_resolution' AND event_idx = 0")
    assert rows == [(1712195495519689047, 63813)]


def test_dlrm_ranks_come_from_distributed_info(shared_warehouse):
    wh, files = shared_warehouse
    expected = {str(p.resolve()): doc["distributedInfo"]["rank"] for t, p, doc in files if t == "dlrm_param_8xV100"}
    got = {
        path: (rank, source)
        for path, rank, source in query(
            wh, "SELECT path, rank, rank_source FROM files WHERE trace = 'dlrm_param_8xV100' AND format = 'kineto'"
        )
    }
    assert sorted(expected.values()) == list(range(8))
    assert got == {p: (r, "distributedInfo") for p, r in expected.items()}
    assert query(wh, "SELECT world_size, ranks_seen FROM traces WHERE trace = 'dlrm_param_8xV100'") == [(8, 8)]


def test_every_input_of_the_shared_traces_is_taken(shared_ingest):
    """Every format in ../shared/traces is read: Kineto/Chrome and xprof JSON, Nsight
    Systems exports, execution traces. Only an xplane.pb whose JSON sits beside it is
    skipped (the JSON is read instead)."""
    wh, report = shared_ingest
    skipped = [(Path(o.path).name, o.message) for o in report.outcomes if o.status == "skipped"]
    assert [name for name, _ in skipped] == ["34.83.195.179_6003.xplane.pb"], skipped
    formats = {f for (f,) in query(wh, "SELECT DISTINCT format FROM files")}
    assert formats == {"kineto", "xprof", "nsys", "pytorch_et"}


def test_xprof_end_marker_is_a_note_not_a_drop(shared_warehouse):
    wh, files = shared_warehouse
    ends_with_empty = {
        str(p.resolve()) for t, p, doc in files if isinstance(doc, dict) and doc["traceEvents"][-1] == {}
    }
    xprof = [path for (path,) in query(wh, "SELECT path FROM files WHERE format = 'xprof'")]
    assert len(xprof) >= 2 and set(xprof) <= ends_with_empty  # xla_jax_cpu_4dev, xprof_tf_bert_8gpu
    for path in xprof:
        rows = query(
            wh,
            "SELECT s.stat, s.dropped, s.count FROM ingest_stats s JOIN files f USING (file_id) "
            "WHERE f.path = ? AND s.stat IN ('empty object', ?)",
            [path, XPROF_END_MARKER],
        )
        assert rows == [(XPROF_END_MARKER, False, 1)], path


def test_metadata_events_do_not_stretch_the_time_span(shared_warehouse):
    wh, _ = shared_warehouse
    # hta_mtia_single_rank writes its M events at ts 0 on an uptime clock: counting them
    # made the span 41 days. Its X events run for about 13.6 s.
    (span,) = query(wh, "SELECT span_s FROM traces WHERE trace = 'hta_mtia_single_rank'")[0]
    assert 13.0 < span < 14.5, span
