"""How ingest normalises events: time, B/E pairs, names, categories, args, ranks."""

from __future__ import annotations

import gzip
import json
from decimal import Decimal
from pathlib import Path

import pytest
from helpers.traces import write_trace
from helpers.warehouse import query, run_ingest

from cclq.formats.base import ReadOptions


def test_epoch_microseconds_with_three_decimals_survive_exactly(tmp_path, wh):
    # 1712195495519689.047 us has 19 significant digits: a float would lose the last ones.
    text = (
        '{"traceEvents": ['
        '{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, '
        '"ts": 1712195495519689.047, "dur": 4.928, "args": {"stream": 7}}]}'
    )
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "rank0.json").write_text(text)
    run_ingest([tmp_path / "w"], wh)
    assert query(wh, "SELECT ts_ns, dur_ns FROM events") == [(1712195495519689047, 4928)]


def test_uptime_microseconds_up_to_the_float_limit_survive_exactly(tmp_path, wh):
    """Timestamps below 2**43 us are parsed as floats; every 3-decimal value must still
    come back as its exact nanosecond integer. Checked against integer arithmetic on the
    text for values spread over the whole float range, both edges and every fraction."""
    import random

    rng = random.Random(7)
    texts = [
        f"{whole}.{frac:03d}"
        for whole, frac in [(2**43 - 1, 999), (2**43 - 1, 1), (2**42, 0), (2**42 + 1, 500), (3605057436108, 407)]
        + [(rng.randrange(2**40, 2**43), rng.randrange(1000)) for _ in range(3000)]
    ]
    body = ",".join(
        f'{{"ph": "X", "name": "e{i}", "pid": 1, "tid": 1, "ts": {t}, "dur": 0.001}}' for i, t in enumerate(texts)
    )
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "rank0.json").write_text('{"traceEvents": [' + body + "]}")
    run_ingest([tmp_path / "w"], wh)
    got = dict(query(wh, "SELECT name, ts_ns FROM events"))
    expected = {f"e{i}": int(t.replace(".", "")) for i, t in enumerate(texts)}
    assert got == expected
    assert query(wh, "SELECT DISTINCT dur_ns FROM events") == [(1,)]


@pytest.mark.parametrize("reader", ["fast", "ijson"])
def test_args_are_kept_as_written_in_every_timestamp_form(tmp_path, wh, reader):
    """``args`` is the source's args value, every key (the promoted ``stream`` too):
    integers beyond 64 bits, numbers with 19 digits, nested lists and escapes as written
    (the fast reader: the compact source text, with each number spelled as Python prints
    its parsed value, so ``1.500e3`` is ``1500``: docs/schema.md), or the same JSON value
    (the ijson reader), whatever form the file's timestamps take."""
    args = (
        '{"stream": 7, "huge": 1180591620717411303424, "ratio": 0.125, "sci": 1.500e3,'
        ' "long": 0.1000000000000000055511, "dims": [[8, 1024], []], "who": "r\\u00e9seau"}'
    )
    compact = (
        '{"stream":7,"huge":1180591620717411303424,"ratio":0.125,"sci":1500,'
        '"long":0.1000000000000000055511,"dims":[[8,1024],[]],"who":"r\\u00e9seau"}'
    )
    root = tmp_path / "w"
    root.mkdir()
    forms = ("12.345", "1712195495519689.047", "1008491.4650139")  # relative, epoch, a float's repr
    for rank, ts in enumerate(forms):
        (root / f"rank{rank}.json").write_text(
            f'{{"traceEvents": [{{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, '
            f'"ts": {ts}, "dur": 1, "args": {args}}}]}}'
        )
    run_ingest([root], wh, options=ReadOptions(reader=reader))
    rows = query(wh, "SELECT rank, ts_ns, stream, args FROM events ORDER BY rank")
    assert [(r, t, s) for r, t, s, _ in rows] == [(0, 12_345, 7), (1, 1712195495519689047, 7), (2, 1008491465, 7)]
    expected = {
        "stream": 7,
        "huge": 2**70,
        "ratio": Decimal("0.125"),
        "sci": Decimal("1500"),
        "long": Decimal("0.1000000000000000055511"),
        "dims": [[8, 1024], []],
        "who": "réseau",
    }
    assert [json.loads(a, parse_float=Decimal) for *_, a in rows] == [expected] * 3
    if reader == "fast":
        assert [a for *_, a in rows] == [compact] * 3


def test_base_time_is_added_whether_it_comes_before_or_after_the_events(tmp_path, wh):
    base = 1_700_000_000_000_000_000
    ev = '{"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 1, "ts": 12.345, "dur": 1.000}'
    root = tmp_path / "w"
    root.mkdir()
    (root / "rank0.json").write_text(f'{{"baseTimeNanoseconds": {base}, "traceEvents": [{ev}]}}')
    (root / "rank1.json").write_text(f'{{"traceEvents": [{ev}], "baseTimeNanoseconds": {base}}}')
    (root / "rank2.json.gz").write_bytes(
        gzip.compress(f'{{"traceEvents": [{ev}], "baseTimeNanoseconds": {base}}}'.encode())
    )
    run_ingest([root], wh)
    assert query(wh, "SELECT rank, ts_ns FROM events ORDER BY rank") == [(r, base + 12345) for r in range(3)]
    assert query(wh, "SELECT DISTINCT base_time_ns FROM files") == [(base,)]


def test_begin_end_pairs_become_one_slice_with_end_args_merged(tmp_path, wh):
    events = [
        {"ph": "B", "name": "ALLREDUCE", "pid": 3, "ts": 10},
        {"ph": "B", "name": "NCCL_ALLREDUCE", "pid": 3, "ts": 12},
        {"ph": "E", "pid": 3, "ts": 15},
        {"ph": "E", "pid": 3, "ts": 20, "args": {"dtype": "float32", "shape": "[4]"}},
        {"ph": "E", "pid": 9, "ts": 21},  # no open B on pid 9
        {"ph": "B", "name": "never closed", "pid": 4, "ts": 30},
    ]
    write_trace(tmp_path / "w" / "t.json", events)
    run_ingest([tmp_path / "w"], wh)
    rows = query(wh, "SELECT name, ph, ts_ns, dur_ns, dtype, args FROM slices ORDER BY ts_ns")
    assert rows == [
        ("ALLREDUCE", "B", 10_000, 10_000, "float32", '{"dtype":"float32","shape":"[4]"}'),
        ("NCCL_ALLREDUCE", "B", 12_000, 3_000, None, None),
        ("never closed", "B", 30_000, None, None, None),
    ]
    stats = query(wh, "SELECT stat, ph, dropped, count FROM ingest_stats ORDER BY stat")
    assert stats == [("B without E (kept, dur_ns NULL)", None, False, 1), ("E without B", "E", True, 1)]


def test_unusable_events_are_dropped_and_counted_by_reason(tmp_path, wh):
    events = [
        {"ph": "X", "name": "ok", "pid": 1, "tid": 1, "ts": 1, "dur": 1},
        {"ph": "X", "name": "no ts", "pid": 1, "tid": 1, "dur": 1},
        {"ph": "X", "name": "bad ts", "pid": 1, "tid": 1, "ts": "soon", "dur": 1},
        42,
        "text",
        {},
        {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "python"}},  # M needs no ts
    ]
    write_trace(tmp_path / "w" / "t.json", events)
    run_ingest([tmp_path / "w"], wh)
    assert query(wh, "SELECT count(*) FROM events") == [(2,)]
    stats = dict(((s, p), n) for s, p, n in query(wh, "SELECT stat, ph, count FROM ingest_stats WHERE dropped"))
    assert stats == {("no ts", "X"): 1, ("bad ts", "X"): 1, ("not an object", ""): 2, ("empty object", ""): 1}
    assert query(wh, "SELECT events_read, events_written, events_dropped, drop_reasons FROM files") == [
        (7, 2, 5, '{"bad ts": 1, "empty object": 1, "no ts": 1, "not an object": 2}')
    ]
    assert query(wh, "SELECT process_name FROM process_names") == [("python",)]


def test_legacy_categories_string_pids_and_unconvertible_numbers(tmp_path, wh):
    events = [
        {
            "ph": "X",
            "cat": "Kernel",
            "name": "k",
            "pid": 0,
            "tid": 7,
            "ts": 1,
            "dur": 2,
            "args": {"stream": 7, "warps per SM": "inf", "blocks per SM": 0.5, "queued": 0},
        },
        {
            "ph": "X",
            "cat": "gpu_memcpy",
            "name": "Memcpy HtoD",
            "pid": 0,
            "tid": 7,
            "ts": 5,
            "dur": 0,
            "args": {"bytes": 64, "memory bandwidth (GB/s)": "N/A"},
        },
        {
            "ph": "X",
            "cat": "gpu_memset",
            "name": "Memset",
            "pid": 0,
            "tid": 7,
            "ts": 6,
            "dur": 0,
            "args": {"bytes": 5.5, "stream": "7"},
        },
        {
            "ph": "X",
            "cat": "Trace",
            "name": "PyTorch Profiler (0)",
            "pid": "Spans",
            "tid": "PyTorch Profiler",
            "ts": 0,
            "dur": 10,
        },
    ]
    write_trace(tmp_path / "w" / "t.json", events)
    run_ingest([tmp_path / "w"], wh)
    k = query(wh, "SELECT cat, cat_raw, warps_per_sm, blocks_per_sm, args FROM events WHERE name = 'k'")
    assert k == [("kernel", "Kernel", None, 0.5, '{"stream":7,"warps per SM":"inf","blocks per SM":0.5,"queued":0}')]
    m = query(wh, "SELECT bytes, memory_bw_gbps, args FROM events WHERE cat = 'gpu_memcpy'")
    assert m == [(64, None, '{"bytes":64,"memory bandwidth (GB/s)":"N/A"}')]
    # a number that does not fit its column is NULL there (args has every value); "7" converts
    m = query(wh, "SELECT bytes, stream, args FROM events WHERE cat = 'gpu_memset'")
    assert m == [(None, 7, '{"bytes":5.5,"stream":"7"}')]
    assert query(wh, "SELECT pid, tid FROM events WHERE cat = 'Trace'") == [("Spans", "PyTorch Profiler")]


def test_collective_args_are_promoted_to_typed_columns(tmp_path, wh):
    args = {
        "Collective name": "allreduce",
        "In msg nelems": 1024,
        "Out msg nelems": 1024,
        "Group size": 8,
        "dtype": "BFloat16",
        "Process Group Name": "0",
        "Process Group Description": "default_pg",
        "Process Group Ranks": "[0, 1, 2, 3, 4, 5, 6, 7]",
        "Seq": 17,
        "stream": 20,
        "correlation": 5,
        "grid": [8, 1, 1],
        "block": [512, 1, 1],
    }
    write_trace(
        tmp_path / "w" / "t.json",
        [
            {
                "ph": "X",
                "cat": "kernel",
                "name": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL",
                "pid": 0,
                "tid": 20,
                "ts": 100,
                "dur": 50,
                "args": args,
            }
        ],
    )
    run_ingest([tmp_path / "w"], wh)
    row = query(
        wh,
        "SELECT collective_name, in_msg_nelems, out_msg_nelems, group_size, dtype, pg_name, pg_desc, "
        "pg_ranks, seq, stream, correlation, grid, block, args FROM kernels",
    )
    assert row == [
        (
            "allreduce",
            1024,
            1024,
            8,
            "BFloat16",
            "0",
            "default_pg",
            "[0, 1, 2, 3, 4, 5, 6, 7]",
            17,
            20,
            5,
            [8, 1, 1],
            [512, 1, 1],
            json.dumps(args, separators=(",", ":")),
        )
    ]


def test_bare_array_form_flows_instants_and_counters(tmp_path, wh):
    events = [
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 1, "dur": 3},
        {"ph": "s", "id": 9, "pid": 1, "tid": 1, "ts": 1, "cat": "ac2g", "name": "ac2g"},
        {"ph": "f", "id": 9, "pid": 0, "tid": 7, "ts": 5, "cat": "ac2g", "name": "ac2g", "bp": "e"},
        {"ph": "i", "s": "g", "name": "Record Window End", "pid": "", "tid": "", "ts": 9},
        {"ph": "C", "name": "mem", "pid": 1, "ts": 2, "args": {"allocated": 10}},
    ]
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "timeline.json").write_text(json.dumps(events))
    run_ingest([tmp_path / "w"], wh)
    rows = query(wh, "SELECT ph, flow_id, bp, scope, dur_ns, args FROM events ORDER BY event_idx")
    assert rows == [
        ("X", None, None, None, 3000, None),
        ("s", "9", None, None, None, None),
        ("f", "9", "e", None, None, None),
        ("i", None, None, "g", None, None),
        ("C", None, None, None, None, '{"allocated":10}'),
    ]


def test_rank_from_distributed_info_anywhere_else_file_name_else_zero(tmp_path, wh):
    ev = [{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1}]
    root = tmp_path / "w"
    write_trace(root / "a.json", ev, distributedInfo={"rank": 5, "world_size": 8})
    (root / "b.json").write_text(json.dumps({"traceEvents": ev, "distributedInfo": {"rank": 6, "world_size": 8}}))
    write_trace(root / "worker3_step_12.1694128201557.pt.trace.json", ev)
    write_trace(root / "kineto_trace_2.json", ev)
    with gzip.open(root / "sampled_rank-1.json.gz", "wt") as f:
        json.dump({"traceEvents": ev}, f)
    report = run_ingest([root], wh)
    assert not report.failed
    rows = query(wh, "SELECT relpath, rank, rank_source FROM files ORDER BY rank")
    assert rows == [
        ("sampled_rank-1.json.gz", 1, "file name"),
        ("kineto_trace_2.json", 2, "file name"),
        ("worker3_step_12.1694128201557.pt.trace.json", 3, "file name"),
        ("a.json", 5, "distributedInfo"),
        ("b.json", 6, "distributedInfo"),
    ]
    assert query(wh, "SELECT world_size, ranks_seen FROM traces") == [(8, 5)]


def test_missing_ranks_are_guessed_after_the_stated_ones_and_said(tmp_path, wh):
    """A file that states no rank (content or name) gets the lowest rank of its trace that
    no file states, after every file that states one; a guess beside other guesses warns."""
    ev = [{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1}]
    write_trace(tmp_path / "w" / "trace.json", ev)
    report = run_ingest([tmp_path / "w"], wh)
    assert query(wh, "SELECT rank, rank_source FROM files") == [(0, "default")]
    assert not report.warnings  # a one-file workload: rank 0 is the obvious choice
    write_trace(tmp_path / "w" / "zzz.json", ev)  # a second file without a rank
    write_trace(tmp_path / "w" / "aaa.json", ev, distributedInfo={"rank": 1})  # states rank 1
    report = run_ingest([tmp_path / "w"], wh)
    assert sorted((Path(o.path).name, o.status, o.rank) for o in report.outcomes) == [
        ("aaa.json", "ingested", 1),
        ("trace.json", "unchanged", 0),
        ("zzz.json", "ingested", 2),
    ]
    assert query(wh, "SELECT relpath, rank FROM files ORDER BY rank") == [
        ("trace.json", 0),
        ("aaa.json", 1),
        ("zzz.json", 2),
    ]
    assert query(
        wh, "SELECT DISTINCT rank FROM events WHERE file_id = (SELECT file_id FROM files WHERE relpath = 'zzz.json')"
    ) == [(2,)]  # its rows carry the guessed rank
    assert [w.rsplit("/", 1)[-1] for w in report.warnings] == [
        "zzz.json: no rank in the file and none in its name; guessed rank 2"
    ]


def test_workload_card_is_flattened_into_traces(tmp_path, wh):
    root = tmp_path / "llama_tp4"
    write_trace(root / "rank0.json", [{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1}])
    (root / "workload_card.yaml").write_text(
        "workload:\n  model:\n    phase: training\n    model_family: llama-3.1-8b\n"
        "  hardware:\n    xpu_spec:\n      type: GPU\n      total_count: 4\n"
        "    network_topo:\n      bandwidth_gbps: [200, 2000]\n"
        "Model-executor:\n  model_plan_parallelization:\n    tp: 4\n"
    )
    run_ingest([tmp_path], wh)
    rows = query(
        wh,
        "SELECT trace, world_size, phase, model_family, total_count, tp, bandwidth_scaleup_gbps, "
        "card_json IS NOT NULL FROM traces",
    )
    assert rows == [("llama_tp4", 4, "training", "llama-3.1-8b", 4, 4, 2000.0, True)]


def test_cards_follow_the_folders(tmp_path, wh):
    """One card row per trace in the catalog snapshot; a changed card replaces its row,
    a deleted card removes it, and a card of a trace not ingested this time stays."""

    def workload(name: str, count: int | None) -> None:
        write_trace(
            tmp_path / "in" / name / "rank0.json", [{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1}]
        )
        card = tmp_path / "in" / name / "workload_card.yaml"
        if count is None:
            card.unlink(missing_ok=True)
        else:
            card.write_text(f"workload:\n  hardware:\n    xpu_spec:\n      total_count: {count}\n")

    workload("a", 2)
    workload("b", 4)
    workload("c", 16)
    run_ingest([tmp_path / "in"], wh)
    assert query(wh, "SELECT trace, total_count FROM cards ORDER BY trace") == [("a", 2), ("b", 4), ("c", 16)]

    workload("a", 8)
    workload("b", None)
    run_ingest([tmp_path / "in" / "a"], wh)
    run_ingest([tmp_path / "in" / "b"], wh)
    assert query(wh, "SELECT trace, total_count FROM cards ORDER BY trace") == [("a", 8), ("c", 16)]


def test_loose_file_gets_a_stable_trace_id(tmp_path, wh):
    p = write_trace(
        tmp_path / "my run.pt.trace.json", [{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1}]
    )
    run_ingest([p], wh)
    run_ingest([p], wh)
    assert query(wh, "SELECT trace, count(*) FROM files GROUP BY trace") == [("my_run", 1)]


def test_every_view_is_defined_on_an_empty_warehouse(tmp_path, wh):
    wh.create()
    for view in (
        "events",
        "files",
        "ingest_stats",
        "cards",
        "traces",
        "slices",
        "kernels",
        "gpu_ops",
        "process_names",
        "thread_names",
    ):
        assert query(wh, f"SELECT count(*) FROM {view}") == [(0,)], view


def test_metadata_events_are_not_part_of_the_time_span(tmp_path, wh):
    # Kineto writes its M events at ts 0; the timed events here run from 1 s to 3.0005 s
    events = [
        {"ph": "M", "name": "process_name", "pid": 1, "ts": 0, "args": {"name": "python"}},
        {"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1_000_000, "dur": 10},
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "ts": 0, "args": {"name": "main"}},
        {"ph": "X", "cat": "cpu_op", "name": "b", "pid": 1, "tid": 1, "ts": 3_000_000, "dur": 500},
    ]
    write_trace(tmp_path / "w" / "rank0.json", events)
    run_ingest([tmp_path / "w"], wh)
    assert query(wh, "SELECT ts_min_ns, ts_max_ns FROM files") == [(1_000_000_000, 3_000_500_000)]
    assert query(wh, "SELECT span_s FROM traces") == [(2.0005,)]
    assert query(wh, "SELECT count(*) FROM events WHERE ph = 'M'") == [(2,)]  # still kept


def test_the_empty_event_that_ends_an_xprof_file_is_a_note_not_a_drop(tmp_path, wh):
    from cclq.synth.xla import TpuTraceSpec, generate_tpu_trace, write_tpu_trace

    events = generate_tpu_trace(TpuTraceSpec())["traceEvents"]
    assert events[-1] == {}
    write_tpu_trace(tmp_path / "tpu" / "host0.trace.json.gz", TpuTraceSpec())
    # the same {} anywhere else, or at the end of a Kineto file, is still dropped
    write_trace(tmp_path / "kineto" / "rank0.json", [{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1}, {}])
    run_ingest([tmp_path / "tpu", tmp_path / "kineto"], wh)
    assert query(wh, "SELECT trace, stat, dropped, count FROM ingest_stats ORDER BY trace") == [
        ("kineto", "empty object", True, 1),
        ("tpu", "xprof end marker {}", False, 1),
    ]
    # every event read is accounted for: written + dropped + the end marker
    assert query(
        wh, "SELECT events_read, events_written, events_dropped, drop_reasons FROM files WHERE trace = 'tpu'"
    ) == [(len(events), len(events) - 1, 0, None)]
