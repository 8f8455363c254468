"""Hostile input at the reader level (issue 16), for both readers.

Each case once raised an exception that was not the per-file error and aborted the whole
run, or ran for minutes with memory growing. Now unusable times are dropped and counted,
values that do not fit their column stay in ``args`` with a note, and what would cost
time or memory out of proportion (a huge string, deep nesting, a gzip bomb) fails that
file alone, quickly, with a line naming the bound. The costly cases run as ``cclq``
processes under a memory cap (``RLIMIT_AS``), so the suite can never take the machine down.
"""

from __future__ import annotations

import gzip
import json
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

hypothesis = pytest.importorskip("hypothesis")
from helpers.cli import run_capped  # noqa: E402
from helpers.readers import assert_same, both  # noqa: E402
from helpers.traces import write_trace  # noqa: E402
from helpers.warehouse import metric_rows, query, run_ingest  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from cclq.formats.base import ReadOptions  # noqa: E402
from cclq.formats.chrome import events as ev  # noqa: E402
from cclq.formats.limits import MIB, ReadLimits  # noqa: E402

READERS = ["fast", "msgspec", "ijson"]  # fast: the compiled parser where it was built
GOOD = [{"ph": "X", "cat": "cpu_op", "name": "ok", "pid": 1, "tid": 1, "ts": 1, "dur": 2}]


def _folder_with(tmp_path: Path, name: str, hostile: Path | None = None) -> Path:
    root = tmp_path / name
    write_trace(root / "rank0.json", GOOD, distributedInfo={"rank": 0})
    return root


# ----------------------------------------------------- 1. unusable times and values
@pytest.mark.parametrize("reader", READERS)
def test_unusable_times_are_dropped_and_counted_not_fatal(tmp_path, wh, reader):
    events = [
        {"ph": "X", "cat": "kernel", "name": "nan ts", "pid": 0, "tid": 7, "ts": "NaN", "dur": 1},
        {"ph": "X", "cat": "kernel", "name": "inf dur", "pid": 0, "tid": 7, "ts": 1, "dur": "Infinity"},
        {"ph": "X", "cat": "kernel", "name": "ts beyond int64 ns", "pid": 0, "tid": 7, "ts": 1e18, "dur": 1},
        {"ph": "X", "cat": "kernel", "name": "ts 1e30", "pid": 0, "tid": 7, "ts": 1e30, "dur": 1},
        {"ph": "X", "cat": "kernel", "name": "dur 1e30", "pid": 0, "tid": 7, "ts": 1, "dur": 1e30},
        {"ph": "X", "cat": "kernel", "name": "negative dur", "pid": 0, "tid": 7, "ts": 5, "dur": -3},
        {"ph": "B", "name": "E before B", "pid": 0, "tid": 9, "ts": 10},
        {"ph": "E", "pid": 0, "tid": 9, "ts": 4},
        {"ph": "X", "cat": "kernel", "name": "good", "pid": 0, "tid": 7, "ts": 20, "dur": 2},
    ]
    root = tmp_path / "w"
    write_trace(root / "rank0.json", events)
    report = run_ingest([root], wh, options=ReadOptions(reader=reader))
    assert not report.failed
    assert query(wh, "SELECT name FROM events") == [("good",)]
    stats = {(s, p): n for s, p, n in query(wh, "SELECT stat, ph, count FROM ingest_stats WHERE dropped")}
    assert stats == {("bad ts", "X"): 3, ("bad dur", "X"): 2, ("negative dur", "X"): 1, ("negative dur", "B"): 1}


@pytest.mark.parametrize("reader", READERS)
def test_a_negative_dur_no_longer_makes_kernel_time_negative(tmp_path, wh, reader):
    events = [
        {
            "ph": "X",
            "cat": "kernel",
            "name": "k",
            "pid": 0,
            "tid": 7,
            "ts": 10,
            "dur": 5,
            "args": {"device": 0, "stream": 7},
        },
        {
            "ph": "X",
            "cat": "kernel",
            "name": "k",
            "pid": 0,
            "tid": 7,
            "ts": 20,
            "dur": -50,
            "args": {"device": 0, "stream": 7},
        },
    ]
    write_trace(tmp_path / "w" / "rank0.json", events)
    run_ingest([tmp_path / "w"], wh, options=ReadOptions(reader=reader))
    (row,) = metric_rows(wh, "total_kernel_time")
    assert row["value"] == pytest.approx(5e-6)  # 5 us: the negative kernel is not summed


@pytest.mark.parametrize("reader", READERS)
def test_promoted_values_that_do_not_fit_stay_in_args_with_a_note(tmp_path, wh, reader):
    text = (
        '{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 1, '
        '"args": {"stream": 99999999999999999999, "device": 1e300, "grid": [1, 36893488147419103232, 1], '
        '"correlation": 5, "bytes": -18446744073709551616}}]}'
    )
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "rank0.json").write_text(text)
    report = run_ingest([tmp_path / "w"], wh, options=ReadOptions(reader=reader))
    assert not report.failed
    row = query(wh, "SELECT stream, device, grid, correlation, bytes, args FROM events")
    assert row[0][:5] == (None, None, None, 5, None)
    assert json.loads(row[0][5]) == {
        "stream": 99999999999999999999,
        "device": 1e300,
        "grid": [1, 36893488147419103232, 1],
        "correlation": 5,
        "bytes": -18446744073709551616,
    }
    notes = dict(query(wh, "SELECT stat, count FROM ingest_stats WHERE NOT dropped"))
    assert notes == {
        "stream: value out of range (NULL, kept in args)": 1,
        "device: value out of range (NULL, kept in args)": 1,
        "grid: value out of range (NULL, kept in args)": 1,
        "bytes: value out of range (NULL, kept in args)": 1,
    }


def test_both_readers_agree_on_every_hostile_value(tmp_path, chunked):
    text = (
        '{"traceEvents": [{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": "NaN", "dur": 1},'
        '{"ph": "X", "name": "b", "pid": [1, {"x": 2}], "tid": true, "ts": 1.00049999, "dur": "1e3",'
        ' "args": {"stream": 99999999999999999999, "device": 1e300, "flops": "1e999", "Seq": "0x10",'
        ' "grid": [1, 2.0, 3], "dtype": 1.50, "group_id": " 7"}},'
        '{"ph": "B", "name": "c", "pid": [1], "tid": {"a": 1}, "ts": 2}, {"ph": "E", "pid": [1], "tid": {"a": 1},'
        ' "ts": 3.5}]}'
    )
    (tmp_path / "t.json").write_text(text)
    fast, ref = both(tmp_path / "t.json", reader=chunked)
    assert fast.fallback is None
    assert_same(fast, ref)
    assert ref.table.num_rows == 2


@pytest.mark.parametrize("reader", READERS)
def test_args_nested_5000_levels_fail_the_file_alone_naming_the_bound(tmp_path, wh, reader):
    root = _folder_with(tmp_path, "w")
    deep = (
        '{"traceEvents": [{"ph": "X", "name": "deep", "pid": 1, "tid": 1, "ts": 1, "args": {"x": '
        + "[" * 5000
        + "]" * 5000
        + "}}]}"
    )
    (root / "rank1.json").write_text(deep)
    report = run_ingest([root], wh, options=ReadOptions(reader=reader))
    assert [o.status for o in report.outcomes] == ["ingested", "failed"]
    # object, array, event, args: 4 levels, so the 61st '[' is the 65th level
    at = deep.index("[[") + 60
    assert report.failed[0].message == (
        f"{root / 'rank1.json'}: JSON nested deeper than 64 levels at byte {at} (limit --max-depth)"
    )


@pytest.mark.parametrize("reader", READERS)
def test_nesting_within_a_raised_depth_bound_is_read(tmp_path, wh, reader):
    deep = (
        '{"traceEvents": [{"ph": "X", "name": "deep", "pid": 1, "tid": 1, "ts": 1, "args": {"x": '
        + "[" * 150
        + "]" * 150
        + "}}]}"
    )
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "rank0.json").write_text(deep)
    report = run_ingest([tmp_path / "w"], wh, options=ReadOptions(reader=reader, limits=ReadLimits(max_depth=200)))
    assert not report.failed
    (args,) = query(wh, "SELECT args FROM events")[0]
    assert args == '{"x":' + "[" * 150 + "]" * 150 + "}"


# ---------------------------------------------------------- 2. costly input, capped
def _huge_string_file(path: Path, mb: int) -> None:
    with open(path, "wb") as f:
        f.write(b'{"traceEvents": [{"ph": "X", "name": "')
        chunk = b"a" * MIB
        for _ in range(mb):
            f.write(chunk)
        f.write(b'", "pid": 1, "tid": 1, "ts": 1}]}')


@pytest.mark.slow
@pytest.mark.parametrize("reader", READERS)
def test_a_100_mb_string_fails_in_seconds_not_minutes(tmp_path, reader):
    root = _folder_with(tmp_path, "w")
    _huge_string_file(root / "rank1.json", 100)
    done, seconds = run_capped(
        "ingest", str(root), "--warehouse", str(tmp_path / "wh"), "-j1", "--quiet", "--reader", reader
    )
    assert done.returncode == 1, done.stderr
    at = len(b'{"traceEvents": [{"ph": "X", "name": "') - 1  # the string's opening quote
    assert done.stderr.strip() == (
        f"cclq: error: {root / 'rank1.json'}: a JSON string or number longer than "
        f"16 MiB at byte {at} (limit --max-string-mb)"
    )
    assert seconds < 60  # ijson alone: 32 s for the parse of such a string, on a quiet machine
    rows = subprocess.run(
        [
            sys.executable,
            "-c",
            "from cclq.cli.app import main; main()",
            "sql",
            "SELECT count(*) FROM events",
            "-w",
            str(tmp_path / "wh"),
            "-f",
            "csv",
        ],
        capture_output=True,
        text=True,
    )
    assert rows.stdout.split() == ["count_star()", "1"]  # the good file went in


@pytest.mark.parametrize("reader", READERS)
def test_a_raised_string_bound_lets_a_long_string_through(tmp_path, wh, reader):
    _huge_string_file(tmp_path / "rank0.json", 3)
    failed = run_ingest(
        [tmp_path / "rank0.json"], wh, options=ReadOptions(reader=reader, limits=ReadLimits(max_string_bytes=2 * MIB))
    )
    assert "longer than 2 MiB" in failed.failed[0].message
    ok = run_ingest(
        [tmp_path / "rank0.json"], wh, options=ReadOptions(reader=reader, limits=ReadLimits(max_string_bytes=4 * MIB))
    )
    assert not ok.failed
    assert query(wh, "SELECT length(name) FROM events") == [(3 * MIB,)]


def _gzip_stream(path: Path, head: bytes, fill: bytes, mb: int, tail: bytes) -> None:
    """A gzip file of ``head`` + ``mb`` MiB of ``fill`` + ``tail``, written without holding it.

    The MiB of ``fill`` is deflated once and its bytes written ``mb`` times: after a full
    flush the compressor starts afresh, so each copy is what deflating that MiB again
    would give (zlib level 9 over a GiB took 6 s a file, a third of each bomb test)."""
    comp = zlib.compressobj(9, zlib.DEFLATED, -15)  # raw deflate: the gzip frame is ours
    block = fill * (MIB // len(fill))
    crc = zlib.crc32(head)
    with open(path, "wb") as f:
        f.write(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff")  # gzip, deflate, no name, mtime 0
        f.write(comp.compress(head) + comp.flush(zlib.Z_FULL_FLUSH))
        deflated = comp.compress(block) + comp.flush(zlib.Z_FULL_FLUSH)
        for _ in range(mb):
            f.write(deflated)
            crc = zlib.crc32(block, crc)
        f.write(comp.compress(tail) + comp.flush())
        f.write(struct.pack("<II", zlib.crc32(tail, crc), (len(head) + mb * len(block) + len(tail)) & 0xFFFFFFFF))


def test_the_bomb_writer_writes_the_gzip_of_what_it_says(tmp_path):
    path = tmp_path / "b.json.gz"
    _gzip_stream(path, b"[", b"ab", 3, b"]")
    assert gzip.decompress(path.read_bytes()) == b"[" + b"ab" * (3 * MIB // 2) + b"]"


@pytest.mark.slow
@pytest.mark.parametrize("reader", READERS)
def test_a_gzip_bomb_of_one_string_fails_on_the_inflate_ratio(tmp_path, reader):
    """The reported case: 1 MB of .json.gz that expands to one string of a gigabyte. Its
    tail is read first (for a baseTimeNanoseconds after the events), and that stops at
    the inflate bound, 64 MiB in."""
    root = _folder_with(tmp_path, "w")
    bomb = root / "rank1.json.gz"
    _gzip_stream(bomb, b'{"traceEvents": [{"ph": "X", "name": "', b"a", 1024, b'", "ts": 1}]}')
    assert bomb.stat().st_size < 2 * MIB
    done, seconds = run_capped(
        "ingest", str(root), "--warehouse", str(tmp_path / "wh"), "-j1", "--quiet", "--reader", reader
    )
    assert done.returncode == 1, done.stderr
    assert done.stderr.startswith(f"cclq: error: {bomb}: gzip stream expands more than 200 times (")
    assert seconds < 60


@pytest.mark.slow
@pytest.mark.parametrize("reader", READERS)
def test_a_gzip_bomb_fails_on_the_string_bound_while_streaming(tmp_path, reader):
    """With the base time in the head there is no tail read: the stream stops the string
    at the string bound, long before the inflate bound."""
    root = _folder_with(tmp_path, "w")
    bomb = root / "rank1.json.gz"
    head = b'{"baseTimeNanoseconds": 5, "traceEvents": [{"ph": "X", "name": "'
    _gzip_stream(bomb, head, b"a", 1024, b'", "ts": 1}]}')
    done, seconds = run_capped(
        "ingest", str(root), "--warehouse", str(tmp_path / "wh"), "-j1", "--quiet", "--reader", reader
    )
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip() == (
        f"cclq: error: {bomb}: a JSON string or number longer than 16 MiB at "
        f"decompressed byte {len(head) - 1} (limit --max-string-mb)"
    )
    assert seconds < 60


@pytest.mark.slow
@pytest.mark.parametrize("reader", READERS)
def test_a_gzip_bomb_fails_on_the_inflate_ratio_while_streaming(tmp_path, reader):
    """Content no other bound stops (whitespace): the expansion itself does."""
    root = _folder_with(tmp_path, "w")
    bomb = root / "rank1.json.gz"
    _gzip_stream(bomb, b'{"baseTimeNanoseconds": 5, "traceEvents": [', b" ", 1024, b"]}")
    done, seconds = run_capped(
        "ingest", str(root), "--warehouse", str(tmp_path / "wh"), "-j1", "--quiet", "--reader", reader
    )
    assert done.returncode == 1, done.stderr
    assert done.stderr.startswith(f"cclq: error: {bomb}: gzip stream expands more than 200 times (")
    assert "limit --max-inflate-ratio" in done.stderr
    assert seconds < 60


@pytest.mark.slow
@pytest.mark.parametrize("reader", READERS)
def test_nesting_100000_levels_deep_fails_fast_in_flat_memory(tmp_path, reader):
    root = _folder_with(tmp_path, "w")
    (root / "rank1.json").write_text('{"traceEvents": [{"args": ' + "[" * 100_000 + "]" * 100_000 + "}]}")
    done, seconds = run_capped(
        "ingest", str(root), "--warehouse", str(tmp_path / "wh"), "-j1", "--quiet", "--reader", reader
    )
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip() == (
        f"cclq: error: {root / 'rank1.json'}: JSON nested deeper than 64 levels at byte 87 (limit --max-depth)"
    )
    assert seconds < 30


@pytest.mark.parametrize("reader", READERS)
def test_one_event_larger_than_the_event_bound_fails(tmp_path, wh, reader):
    big = {"ph": "X", "name": "big", "pid": 1, "tid": 1, "ts": 1, "args": {"v": ["x" * 1000] * 3000}}
    write_trace(tmp_path / "w" / "rank0.json", GOOD + [big])
    report = run_ingest(
        [tmp_path / "w"], wh, options=ReadOptions(reader=reader, limits=ReadLimits(max_event_bytes=2 * MIB))
    )
    (failed,) = report.failed
    assert "an event larger than 2 MiB starting at byte" in failed.message
    assert failed.message.endswith("(limit --max-event-mb)")


def test_the_default_bounds_read_every_shared_trace():
    """No real trace comes near a bound: the largest event is 7 KB, the longest string
    5 KB, the deepest nesting 8 levels, the highest gzip ratio 29x."""
    from cclq.formats.limits import DEFAULT_LIMITS

    assert DEFAULT_LIMITS.max_event_bytes >= 8000 * 1000
    assert DEFAULT_LIMITS.max_string_bytes >= 5000 * 1000
    assert DEFAULT_LIMITS.max_depth >= 8 * 4
    assert DEFAULT_LIMITS.max_inflate_ratio >= 29 * 4


@pytest.mark.slow
def test_cli_flags_set_the_bounds(tmp_path):
    _huge_string_file(tmp_path / "t.json", 2)
    args = ["ingest", str(tmp_path / "t.json"), "--warehouse", str(tmp_path / "wh"), "--quiet"]
    done, _ = run_capped(*args, "--max-string-mb", "1")
    assert done.returncode == 1 and "longer than 1 MiB" in done.stderr
    done, _ = run_capped(*args, "--max-string-mb", "3")
    assert done.returncode == 0, done.stderr
    done, _ = run_capped(*args, "--reader", "simdjson")
    assert done.returncode == 2 and "--reader must be one of fast, msgspec, ijson" in done.stderr


# ------------------------------------------------------------- the converters, fuzzed
json_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**80), max_value=2**80),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=8),
        st.decimals(allow_nan=True, allow_infinity=True),
    ),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=3), inner, max_size=3)),
    max_leaves=6,
)


@settings(max_examples=400, deadline=None)
@given(values=st.lists(json_values, max_size=12))
def test_the_converters_never_raise_and_agree_with_their_column_forms(values):
    for v in values:
        ns = ev.time_ns(v)
        assert ns is None or ev.INT64_MIN <= ns <= ev.INT64_MAX
        for kind in ("int", "float", "str", "int_list"):
            value, leaves, too_big = ev.promote_value(kind, v)
            assert not (leaves and value is None) and not (leaves and too_big)
        ev.id_text(v)
    assert ev.text_array(values).to_pylist() == [ev.id_text(v) for v in values]
    arr, bad = ev.time_ns_array(values)
    expected = [ev.time_ns(v) for v in values]
    assert arr.to_pylist() == expected
    assert bad == [i for i, v in enumerate(values) if v is not None and expected[i] is None]
    promoted: dict = {}
    ev.split_args({"stream": values[0] if values else 1, "x": values}, promoted, {})


@settings(max_examples=300, deadline=None)
@given(whole=st.integers(-(10**16), 10**16), decimals=st.text("0123456789", max_size=6))
def test_time_text_forms_agree(whole, decimals):
    """The C path for number texts gives what the one-value rule gives."""
    import pyarrow as pa

    text = f"{whole}.{decimals}" if decimals else str(whole)
    ns, simple = ev.time_ns_from_text(pa.array([text]))
    if simple[0].as_py():
        assert ns[0].as_py() == ev.time_ns(text)


def test_gzip_helpers_make_real_gzip(tmp_path):
    _gzip_stream(tmp_path / "x.gz", b"[", b"1,", 1, b"1]")
    assert gzip.decompress((tmp_path / "x.gz").read_bytes()).startswith(b"[1,1,")
