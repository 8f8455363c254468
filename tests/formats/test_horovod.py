"""Horovod timelines: read (also unterminated and truncated), phases, negotiations,
collectives and the Horovod metrics, on a timeline placed by hand (cclq.synth.horovod,
which writes what Horovod's TimelineWriter writes). Expected values are worked out in
the comments from the placements."""

from __future__ import annotations

import pytest
from helpers.warehouse import metric_rows, query, run_ingest

from cclq.formats.chrome.ijson_reader import HOROVOD_TRUNCATED, HOROVOD_UNTERMINATED
from cclq.synth.horovod import HorovodTimelineBuilder
from cclq.synth.workload import generate_workload

EPOCH_US = 1_700_000_000_000_000


def _timeline() -> HorovodTimelineBuilder:
    b = HorovodTimelineBuilder(start_epoch_us=EPOCH_US)
    fused = [
        ("QUEUE", 140, 150),
        ("MEMCPY_IN_FUSION_BUFFER", 150, 160),
        ("NCCL_ALLREDUCE", 160, 200),
        ("MEMCPY_OUT_FUSION_BUFFER", 200, 205),
    ]
    # weight and bias are fused into one all-reduce (identical activity spans)
    b.op("allreduce.layer1.weight", "ALLREDUCE", {0: 100, 1: 130}, fused, shape=[1000, 2048])  # rank 1 late 30 us
    b.op("allreduce.layer1.bias", "ALLREDUCE", {1: 105, 0: 120}, fused, shape=[1000])  # rank 0 late 15 us
    b.op(
        "broadcast.w",
        "BROADCAST",
        {0: 300, 1: 350},
        [("WAIT_FOR_DATA", 360, 370), ("NCCL_BCAST", 370, 390)],
        shape=[10],
    )  # rank 1 late 50 us
    b.cycle(90)
    b.cycle(290)
    return b


def test_phases_negotiations_and_collectives(tmp_path, wh):
    _timeline().write(tmp_path / "job" / "timeline.json")
    report = run_ingest([tmp_path / "job"], wh)
    assert [o.status for o in report.outcomes] == ["ingested"]
    assert query(wh, "SELECT format FROM files") == [("horovod",)]
    # ts is relative to the timeline's start, whose epoch time the first event gives
    assert query(wh, "SELECT min(ts_ns) FROM horovod_ops") == [(EPOCH_US * 1000 + 140_000,)]
    assert query(wh, "SELECT tensor, coll_type, bytes, dur_ns, workers FROM horovod_ops ORDER BY ts_ns, tensor") == [
        ("allreduce.layer1.bias", "all_reduce", 4_000, 65_000, 2),
        ("allreduce.layer1.weight", "all_reduce", 8_192_000, 65_000, 2),
        ("broadcast.w", "broadcast", 40, 30_000, 2),
    ]
    assert query(wh, "SELECT tensor, worker, late_ns FROM horovod_negotiations WHERE last ORDER BY tensor") == [
        ("allreduce.layer1.bias", 0, 15_000),
        ("allreduce.layer1.weight", 1, 30_000),
        ("broadcast.w", 1, 50_000),
    ]
    assert query(
        wh,
        "SELECT collective_name, coll_type, bytes, group_size, size_source FROM collectives ORDER BY collective_name",
    ) == [
        ("allreduce.layer1.bias", "all_reduce", 4_000, 2, "horovod output dtype x shape"),
        ("allreduce.layer1.weight", "all_reduce", 8_192_000, 2, "horovod output dtype x shape"),
        ("broadcast.w", "broadcast", 40, 2, "horovod output dtype x shape"),
    ]


def test_horovod_metrics(tmp_path, wh):
    _timeline().write(tmp_path / "job" / "timeline.json")
    run_ingest([tmp_path / "job"], wh)
    # phase time (us): negotiation 31 + 16 + 51 = 98, queue 20, fusion copies 2 x 15 = 30,
    # communication 40 + 40 + 20 = 100, wait 10: 258 in all
    (row,) = metric_rows(wh, "horovod_phase_share")
    assert row["value"] == pytest.approx(100 / 258)
    assert (
        row["negotiation_share"],
        row["wait_share"],
        row["queue_share"],
        row["fusion_copy_share"],
        row["other_share"],
    ) == pytest.approx((98 / 258, 10 / 258, 20 / 258, 30 / 258, 0.0))
    # cycle 1 (90..290 us) runs weight and bias, cycle 2 (290..) the broadcast
    (row,) = metric_rows(wh, "horovod_fused_tensors_per_cycle")
    assert (row["value"], row["cycles"], row["max_tensors"]) == (1.5, 2, 2)
    rows = {r["tensor"]: r["value"] for r in metric_rows(wh, "horovod_tensor_comm_time")}
    assert rows == pytest.approx(
        {"allreduce.layer1.bias": 40e-6, "allreduce.layer1.weight": 40e-6, "broadcast.w": 20e-6}
    )
    # rank 1 was last in 2 of 3 negotiations, late by 30 and 50 us
    (row,) = metric_rows(wh, "horovod_straggler")
    assert (row["value"], row["negotiations"], row["times_last"]) == (1, 3, 2)
    assert (row["mean_late_s"], row["max_late_s"]) == pytest.approx((40e-6, 50e-6))


def test_horovod_views_are_planned_empty_only_where_no_file_is_horovods(tmp_path, wh):
    """A session knows its files' formats (snapshot_formats): without a Horovod timeline
    DuckDB plans horovod_ops as an empty result, reading no event; beside another trace
    a timeline's operations are all there (the three of ``_timeline``)."""
    generate_workload(tmp_path / "in" / "kineto_only", ranks=1, steps=2, layers=1, seed=3)
    run_ingest([tmp_path / "in" / "kineto_only"], wh)
    assert query(wh, "SELECT getvariable('snapshot_formats')") == [(["kineto"],)]
    ((_, plan),) = query(wh, "EXPLAIN SELECT * FROM horovod_ops")
    assert "EMPTY RESULT" in plan.replace("_", " ").upper() and "READ_PARQUET" not in plan  # 2.0's words, 1.5's
    assert query(wh, "SELECT count(*) FROM horovod_cycles") == [(0,)]
    _timeline().write(tmp_path / "in" / "job" / "timeline.json")
    run_ingest([tmp_path / "in" / "job"], wh)
    assert query(wh, "SELECT getvariable('snapshot_formats')") == [(["horovod", "kineto"],)]
    assert query(wh, "SELECT tensor FROM horovod_ops ORDER BY tensor") == [
        ("allreduce.layer1.bias",),
        ("allreduce.layer1.weight",),
        ("broadcast.w",),
    ]
    assert query(wh, "SELECT count(*) FROM horovod_cycles") == [(2,)]


def test_an_unterminated_timeline_keeps_every_event(tmp_path, wh):
    """Horovod <= 0.20.0 writes "[", then each event followed by ",\\n", and no "]"."""
    path = _timeline().write(tmp_path / "job" / "timeline.json", version="old")
    assert not path.read_text().rstrip().endswith("]")
    report = run_ingest([tmp_path / "job"], wh)
    assert [o.status for o in report.outcomes] == ["ingested"]
    events = len(_timeline().events("old"))
    assert query(wh, "SELECT events_read FROM files") == [(events,)]
    assert query(wh, "SELECT stat, dropped FROM ingest_stats") == [(HOROVOD_UNTERMINATED, False)]
    assert len(metric_rows(wh, "horovod_tensor_comm_time")) == 3
    # without the start-time metadata, times stay relative to the timeline's start
    assert query(wh, "SELECT min(ts_ns) FROM horovod_ops") == [(140_000,)]


def test_a_truncated_timeline_keeps_the_events_before_the_cut(tmp_path, wh):
    path = _timeline().write(tmp_path / "job" / "timeline.json", truncate_bytes=12)
    report = run_ingest([tmp_path / "job"], wh)
    assert [o.status for o in report.outcomes] == ["ingested"], [o.message for o in report.outcomes]
    events = len(_timeline().events("new"))
    assert query(wh, "SELECT events_read FROM files") == [(events - 1,)]
    notes = dict(query(wh, "SELECT stat, count FROM ingest_stats WHERE NOT dropped"))
    assert notes[HOROVOD_TRUNCATED] == 1
    assert path.stat().st_size > 0
