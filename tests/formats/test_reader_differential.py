"""The fast reader against the ijson reference: the same tables on every real and
generated trace, read directly and through ingest."""

from __future__ import annotations

import gzip
import json
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path

import pyarrow.compute as pc
import pytest
from helpers.paths import SHARED, require_shared
from helpers.readers import CHUNKED, Outcome, assert_same, both, read_with
from helpers.warehouse import query, query_table, run_ingest

import cclq.formats.chrome.chunks as chunks
from cclq.formats.base import READER_IJSON, ReadOptions
from cclq.formats.chrome import compiled
from cclq.formats.detect import detect
from cclq.store.warehouse import Warehouse
from cclq.synth.kineto import TIME_FORMS, KinetoTraceBuilder, generate_rank_trace
from cclq.synth.xla import TpuTraceSpec, write_tpu_trace


def _chrome_files(root: Path) -> list[Path]:
    out = []
    for p in sorted(root.rglob("*")):
        if p.is_file() and p.name.endswith((".json", ".json.gz")):
            try:
                if detect(str(p)).kind == "chrome_json":
                    out.append(p)
            except Exception:  # noqa: BLE001 - not a trace (execution traces, ...)
                continue
    return out


def _shared_files() -> list[Path]:
    files: list[Path] = []
    for sub in ("traces", "perf-traces"):
        if (SHARED / sub).is_dir():
            files += _chrome_files(SHARED / sub)
    return files


_reference: dict[Path, Outcome] = {}  # the last shared file's ijson outcome, for its second reader


@pytest.mark.slow
@pytest.mark.parametrize("chunked", list(CHUNKED), indirect=True)  # both readers of a file in a row
@pytest.mark.parametrize("path", _shared_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_shared_trace_reads_the_same_with_both_readers(path, chunked):
    require_shared()
    compiled.chunk_counts.clear()
    fast = read_with(path, chunked)
    if path not in _reference:  # ijson is most of the time: read once for both readers
        _reference.clear()
        _reference[path] = read_with(path, READER_IJSON)
    ref = _reference[path]
    if chunked == "fast":  # the C parser read every chunk of every real trace itself
        assert set(compiled.chunk_counts) == {"parsed"}, compiled.chunk_counts
    assert fast.fallback is None, f"the fast reader gave {path} up: {fast.fallback}"
    assert fast.result.reader == chunked and ref.result.reader == "ijson"
    assert_same(fast, ref)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["hta_nccl_data", "xprof_tf_bert_8gpu", "kineto_legacy_resnet50", "hta_ns_resolution"])
def test_helper_processes_read_a_file_the_same(name, monkeypatch, chunked):
    """``-j2`` on one file: chunks parsed on threads give the same rows (with msgspec,
    which holds the GIL, the file is read by one thread: the same rows too)."""
    root = require_shared()
    monkeypatch.setattr(chunks, "CHUNK_BYTES", 256 << 10)  # many chunks in flight
    (path,) = _chrome_files(root / name)
    fast, ref = both(path, threads=2, reader=chunked)
    assert fast.fallback is None
    assert not [k for k in fast.result.notes if k.startswith("read again")]
    assert_same(fast, ref)


def test_threads_pair_begin_end_across_chunks_without_a_second_read(tmp_path, monkeypatch, chunked):
    """The parser threads' chunks are taken back in order by the reading thread, which
    pairs B with E across chunks itself: no second read (forked helper processes, removed,
    saw one chunk each and handed such a file back to one process)."""
    monkeypatch.setattr(chunks, "CHUNK_BYTES", 64)
    events = [{"ph": "B", "name": f"b{i}", "pid": 1, "tid": 1, "ts": i} for i in range(20)] + [
        {"ph": "E", "pid": 1, "tid": 1, "ts": 100 + i} for i in range(20)
    ]
    (tmp_path / "be.json").write_text(json.dumps({"traceEvents": events}))
    fast, ref = both(tmp_path / "be.json", threads=2, reader=chunked)
    assert_same(fast, ref)
    assert not [k for k in fast.result.notes if k.startswith("read again")]


@pytest.mark.slow
def test_shared_traces_are_listed():
    require_shared()
    assert len(_shared_files()) >= 20


def _small_chunks(monkeypatch, size: int) -> None:
    """Cuts chunks of ``size`` bytes, so that events meet every kind of chunk boundary."""
    monkeypatch.setattr(chunks, "CHUNK_BYTES", size)


@pytest.mark.parametrize("chunk", [97, 4096, 4 << 20])
@pytest.mark.parametrize("gz", [False, True])
def test_generated_kineto_rank_reads_the_same(tmp_path, monkeypatch, chunk, gz, chunked):
    _small_chunks(monkeypatch, chunk)
    path = tmp_path / ("rank3.json.gz" if gz else "rank3.json")
    generate_rank_trace(path, rank=3, world_size=4, steps=3, layers=3, gz=gz)
    fast, ref = both(path, reader=chunked)
    assert fast.fallback is None
    assert ref.table.num_rows > 300
    assert_same(fast, ref)


def test_generated_epoch_timestamps_read_the_same(tmp_path, monkeypatch, chunked):
    """Epoch microseconds (no baseTimeNanoseconds): ts beyond what a float carries."""
    _small_chunks(monkeypatch, 2048)
    path = tmp_path / "rank0.json"
    generate_rank_trace(
        path, rank=0, world_size=1, steps=1, layers=2, base_time_ns=None, start_ns=1_712_195_495_519_689_047
    )
    fast, ref = both(path, reader=chunked)
    assert fast.fallback is None
    assert_same(fast, ref)
    ts = ref.table.column("ts_ns").to_pylist()
    assert min(t for t in ts if t) > 1_712_195_000_000_000_000


@pytest.mark.parametrize("form", sorted(TIME_FORMS))
def test_generated_timestamp_forms_read_the_same(tmp_path, monkeypatch, form, chunked):
    """Every timestamp form the generator writes (relative with a base, epoch, a float's
    repr with sub-ns digits): the same table from both readers, none handed to ijson,
    and the fast reader's ts_ns exactly the text's value rounded half to even."""
    _small_chunks(monkeypatch, 4096)
    path = tmp_path / "rank0.json"
    generate_rank_trace(path, rank=0, world_size=1, steps=2, layers=2, time_form=form)
    fast, ref = both(path, reader=chunked)
    assert fast.fallback is None
    assert_same(fast, ref)
    base = fast.result.base_time_ns
    texts = [
        json.loads(line.rstrip(",\n"), parse_float=Decimal)["ts"]
        for line in path.read_text().splitlines()
        if line.startswith('{"ph": "X"')
    ][:50]
    expected = [int((Decimal(t) * 1000).to_integral_value(rounding=ROUND_HALF_EVEN)) + base for t in texts]
    got = fast.table.filter(pc.equal(fast.table.column("ph"), "X")).column("ts_ns").to_pylist()[:50]
    assert got == expected


def test_generated_tpu_trace_reads_the_same(tmp_path, monkeypatch, chunked):
    _small_chunks(monkeypatch, 512)
    path = write_tpu_trace(tmp_path / "host0.trace.json.gz", TpuTraceSpec(devices=4, steps=3))
    fast, ref = both(path, reader=chunked)
    assert fast.fallback is None
    assert_same(fast, ref)
    assert ref.result.notes["xprof end marker {}"] == 1


def test_hand_built_trace_with_every_kind_of_event_reads_the_same(tmp_path, monkeypatch, chunked):
    _small_chunks(monkeypatch, 300)
    b = KinetoTraceBuilder(rank=1, world_size=2)
    b.cpu_op("aten::mm", ts=1_000, dur=5_000, args={"Input Dims": [[8, 8], [8, 8]]})
    b.kernel("gemm", ts=2_000, dur=1_000)
    b.memcpy(3_500, 500, nbytes=4096)
    b.nccl_kernel("allreduce", ts=4_000, dur=2_000)
    b.instant("marker", ts=4_500)
    b.counter("mem", ts=4_600, values={"allocated": 10})
    b.begin("outer", ts=5_000)
    b.begin("inner", ts=5_100)
    b.end(5_200)
    b.end(6_000, args={"dtype": "float32"})
    b.begin("never closed", ts=7_000)
    path = b.write(tmp_path / "t.json")
    fast, ref = both(path, reader=chunked)
    assert fast.fallback is None
    assert_same(fast, ref)
    assert ref.result.notes["B without E (kept, dur_ns NULL)"] == 1


def test_odd_but_valid_entries_read_the_same(tmp_path, monkeypatch, chunked):
    """Entries that are not events, {} and all-null objects, string and missing times,
    unknown keys, promoted values of every type, B/E pairs across chunks."""
    _small_chunks(monkeypatch, 64)
    events = [
        {"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 2, "args": {"stream": "7", "bytes": 5.5}},
        42,
        "text",
        None,
        [1, [2]],
        {},
        {"ph": None, "ts": None},
        {"ph": "X", "name": "unknown keys", "pid": 1, "tid": 1, "ts": 3, "tts": 4, "cname": "good"},
        {"ph": "X", "name": "string ts", "pid": 1, "tid": 1, "ts": "12.5", "dur": "1"},
        {"ph": "B", "name": "b", "pid": 2, "tid": 2, "ts": 10.25},
        {"ph": "X", "name": "between", "pid": "Spans", "tid": "main", "ts": 11, "dur": 0},
        {"ph": "E", "pid": 2, "tid": 2, "ts": 12.5, "args": {"correlation": 9}},
        {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "python"}},
        {
            "ph": "X",
            "name": "flops",
            "pid": 1,
            "tid": 1,
            "ts": 13,
            "dur": 1,
            "args": {
                "flops": "1.5e9",
                "group_id": "0x1F",
                "grid": [1, 2, 3],
                "block": [1, "2"],
                "device_duration_ps": "123",
                "Input Dims": [[1], []],
            },
        },
        {"ph": "i", "s": "g", "name": 'unicode \u00e9\u4e2d\U0001f600 "quoted" \\ back', "pid": 1, "ts": 14},
        {"ph": "s", "id": 9, "pid": 1, "tid": 1, "ts": 15, "cat": "ac2g", "name": "ac2g", "bp": "e"},
    ]
    for layout in ("compact", "lines", "indent"):
        path = tmp_path / f"{layout}.json"
        if layout == "compact":
            path.write_text(json.dumps({"traceEvents": events}, separators=(",", ":")))
        elif layout == "lines":
            path.write_text('{"traceEvents": [\n' + ",\n".join(json.dumps(e) for e in events) + "\n]}\n")
        else:
            path.write_text(
                json.dumps({"schemaVersion": 1, "traceEvents": events, "distributedInfo": {"rank": 0}}, indent=2)
            )
        fast, ref = both(path, reader=chunked)
        assert fast.fallback is None, layout
        assert_same(fast, ref)


_ONE_VALUE_PER_KEY = [
    # (event text, the args text every reader must write, device, name, ts_ns): worked out by hand
    (
        '{"ph":"X","name":"a","pid":1,"tid":1,"ts":1,"dur":1,"args":{"device":1,"device":2}}',
        '{"device":2}',
        2,
        "a",
        1000,
    ),
    (
        '{"ph":"X","name":"a","name":"b","pid":1,"tid":1,"ts":1,"dur":1,"ts":5,"args":{"x":1,"stream":3,"x":"y"}}',
        '{"x":"y","stream":3}',
        None,
        "b",
        5000,
    ),
    (
        '{"ph":"X","name":"c","pid":1,"tid":1,"ts":2,"dur":1,"args":{"n":{"q":1,"q":[2,1e3]},"Device":4,"device":5}}',
        '{"n":{"q":[2,1E+3]},"Device":4,"device":5}',
        5,
        "c",
        2000,
    ),
    ('{"ph":"X","name":"d","pid":1,"tid":1,"ts":3,"dur":1,"args":{"a\\u0062":1,"ab":2}}', '{"ab":2}', None, "d", 3000),
    ('{"ph":"B","name":"open","pid":3,"tid":3,"ts":4,"args":{"k":1,"k":1e20}}', '{"k":1E+20}', None, "open", 4000),
]
_NUMBERS = [
    # numbers as the reference parse writes them: Decimal's str, int's str
    (
        '{"ph":"X","name":"n","pid":1,"tid":1,"ts":1,"dur":1,"args":{"a":1e20,"b":-0,"c":0.0000001,"d":[1E5,{"e":-0.0}],'
        '"f":100e-2,"g":0.000001,"h":123.4500,"i":0e5,"device":-0}}',
        '{"a":1E+20,"b":0,"c":1E-7,"d":[1E+5,{"e":-0.0}],"f":1.00,"g":0.000001,"h":123.4500,"i":0E+5,"device":0}',
    ),
    ('{"ph":"X","name":"m","pid":1,"tid":1,"ts":2,"dur":1,"args":[-0,5e-7,{"x":2E2}]}', '[0,5E-7,{"x":2E+2}]'),
    ('{"ph":"X","name":"s","pid":1,"tid":1,"ts":3,"dur":1,"args":-1.5e-10}', "-1.5E-10"),
]


def test_a_key_given_twice_reads_the_same_from_every_reader(tmp_path, chunked):
    """One value per key (issue 39): the last wins, in every column, and the args text
    keeps one key each, so DuckDB's json_extract reads the value the promoted column has
    (before, the fast readers kept both keys: json_extract read the first)."""
    import duckdb

    path = tmp_path / "dup.json"
    path.write_text('{"traceEvents": [' + ",\n".join(e for e, *_ in _ONE_VALUE_PER_KEY) + "]}")
    compiled.chunk_counts.clear()
    fast, ref = both(path, reader=chunked)
    assert fast.fallback is None
    assert_same(fast, ref)
    if chunked == "fast":  # the C parser leaves a key given twice to msgspec
        assert compiled.chunk_counts["declined: an object with a key given twice"] >= 1
    for out in (fast, ref):
        t = out.table  # file order (the B never closed is written last, where it is)
        assert t.column("args").to_pylist() == [a for _, a, *_ in _ONE_VALUE_PER_KEY]
        assert t.column("device").to_pylist() == [d for _, _, d, *_ in _ONE_VALUE_PER_KEY]
        assert t.column("name").to_pylist() == [n for *_, n, _ in _ONE_VALUE_PER_KEY]
        assert t.column("ts_ns").to_pylist() == [ts for *_, ts in _ONE_VALUE_PER_KEY]
        rows = duckdb.sql("SELECT device, CAST(json_extract(args, '$.device') AS BIGINT) FROM t").fetchall()
        assert all(a == b for a, b in rows)


def test_numbers_in_args_are_spelled_the_same_by_every_reader(tmp_path, chunked):
    """A number in args is written as the reference parse prints its value (events.
    number_text), by the C parser itself (it reads the chunk: no key is given twice),
    by msgspec and by ijson."""
    path = tmp_path / "numbers.json"
    path.write_text('{"traceEvents": [' + ",\n".join(e for e, _ in _NUMBERS) + "]}")
    compiled.chunk_counts.clear()
    fast, ref = both(path, reader=chunked)
    assert fast.fallback is None
    assert_same(fast, ref)
    if chunked == "fast":
        assert set(compiled.chunk_counts) == {"parsed"}, compiled.chunk_counts
    for out in (fast, ref):
        assert out.table.column("args").to_pylist() == [a for _, a in _NUMBERS]
        assert out.table.column("device").to_pylist() == [0, None, None]


def test_bare_array_and_keys_after_the_events_read_the_same(tmp_path, monkeypatch, chunked):
    _small_chunks(monkeypatch, 128)
    events = [{"ph": "X", "name": f"e{i}", "pid": 1, "tid": 1, "ts": i, "dur": 1} for i in range(50)]
    (tmp_path / "bare.json").write_text(json.dumps(events))
    (tmp_path / "after.json.gz").write_bytes(
        gzip.compress(
            json.dumps(
                {
                    "traceEvents": events,
                    "deviceProperties": [{"id": 0}, {"id": 1}],
                    "distributedInfo": {"rank": 3, "pg_config": [{"ranks": [0, 1]}]},
                    "baseTimeNanoseconds": 5,
                }
            ).encode()
        )
    )
    for name in ("bare.json", "after.json.gz"):
        fast, ref = both(tmp_path / name, reader=chunked)
        assert fast.fallback is None, name
        assert_same(fast, ref)


def test_files_the_fast_reader_gives_up_are_read_by_ijson_and_say_so(tmp_path, chunked):
    events = [{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1}]
    # a second traceEvents array after the first: ijson reads both, the fast reader gives it up
    (tmp_path / "two.json").write_text(
        json.dumps({"traceEvents": events})[:-1] + ', "traceEvents": ' + json.dumps(events * 2) + "}"
    )
    fast, ref = both(tmp_path / "two.json", reader=chunked)
    assert fast.fallback == "a second traceEvents array"
    assert_same(fast, ref)
    assert ref.result.events_read == 3
    assert any(k.startswith("read with ijson") for k in fast.result.notes)


def test_invalid_json_fails_with_the_same_message_from_both_readers(tmp_path, chunked):
    (tmp_path / "bad.json").write_text('{"traceEvents": [{"ph": "X", "ts": 1}, {"ph": "X", "ts": @}]}')
    fast, ref = both(tmp_path / "bad.json", reader=chunked)
    assert ref.error and "invalid JSON at byte" in ref.error
    assert fast.error == ref.error


@pytest.fixture(scope="module")
def ijson_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Warehouse:
    """The shared traces ingested by the ijson reference, once for both chunked readers."""
    wh = Warehouse(tmp_path_factory.mktemp("ijson") / "wh")
    run_ingest([require_shared()], wh, jobs=2, options=ReadOptions(reader="ijson"))
    return wh


@pytest.mark.slow
def test_ingest_of_the_shared_traces_gives_the_same_warehouse_with_both_readers(tmp_path, chunked, ijson_warehouse):
    """Every table a user queries: events, files (but for which reader and when), stats."""
    root = require_shared()
    fast_wh, ref_wh = Warehouse(tmp_path / "fast"), ijson_warehouse
    run_ingest([root], fast_wh, jobs=2, options=ReadOptions(reader=chunked))
    events = "SELECT * EXCLUDE (file_id) FROM events ORDER BY trace, rank, event_idx"
    fast_events, ref_events = query_table(fast_wh, events), query_table(ref_wh, events)
    assert fast_events.num_rows == ref_events.num_rows > 0
    assert fast_events.equals(ref_events), next(
        (name, i)
        for name in ref_events.column_names
        for i, (x, y) in enumerate(zip(fast_events[name].to_pylist(), ref_events[name].to_pylist(), strict=True))
        if x != y
    )
    files = "SELECT * EXCLUDE (parser, ingested_at, ingest_seconds, mtime_ns) FROM files ORDER BY path"
    assert query(fast_wh, files) == query(ref_wh, files)
    stats = "SELECT * FROM ingest_stats ORDER BY ALL"
    assert query(fast_wh, stats) == query(ref_wh, stats)
    json_parsers = "SELECT DISTINCT parser FROM files WHERE parser LIKE 'chrome_json/%'"  # nsys, ET: their own
    assert {p.split("-")[0] for (p,) in query(fast_wh, json_parsers)} == {"chrome_json/fast"}
    assert {p for (p,) in query(ref_wh, json_parsers)} == {"chrome_json/ijson-yajl2_c"}


def test_read_with_reports_errors_as_lines(tmp_path):
    (tmp_path / "empty.json").write_text("")
    out = read_with(tmp_path / "empty.json", "fast")
    assert out.error == f"{tmp_path / 'empty.json'}: empty file"


def test_keys_before_the_events_are_held_to_ijson_s_strictness(tmp_path, chunked):
    """The head is found with the stdlib's decoder, which reads NaN; ijson does not, and
    neither does the fast reader then. Invalid UTF-8 there: one line, the right byte."""
    (tmp_path / "nan.json").write_bytes(b'{"x": NaN, "traceEvents": [{"ph": "X", "ts": 1}]}')
    (tmp_path / "utf.json").write_bytes(b'{"k\xff": 1, "traceEvents": [{"ph": "X", "ts": 1}]}')
    for name, message in (
        ("nan.json", "invalid JSON at byte 6: lexical error: invalid char in json text."),
        ("utf.json", "invalid JSON at byte 3: lexical error: invalid bytes in UTF8 string."),
    ):
        fast, ref = both(tmp_path / name, reader=chunked)
        assert ref.error == f"{tmp_path / name}: {message}"
        assert_same(fast, ref)
