"""The compiled chunk parser (``eventparse``, C) on its own: each rule of ``events.py`` it
implements, checked against the ijson reference on traces where it declines nothing (so
that the C code, not the msgspec fallback, made the rows), each case it declines read the
same through msgspec, and arbitrary bytes never crashing it (CI runs this file, with the
property tests, against an AddressSanitizer/UBSan build)."""

from __future__ import annotations

import json
from decimal import ROUND_HALF_EVEN, Decimal

import pytest
from helpers.readers import assert_same, both

from cclq.formats.base import READER_COMPILED
from cclq.formats.chrome import compiled

pytestmark = pytest.mark.skipif(not compiled.AVAILABLE, reason="the compiled parser is not built")


def _read_compiled(tmp_path, events: list | str, name: str = "t.json", declines: bool = False, **top):
    path = tmp_path / name
    path.write_text(events if isinstance(events, str) else json.dumps({"traceEvents": events, **top}))
    compiled.chunk_counts.clear()
    fast, ref = both(path, reader=READER_COMPILED)
    assert fast.fallback is None
    if not declines:
        assert set(compiled.chunk_counts) == {"parsed"}, compiled.chunk_counts
    assert_same(fast, ref)
    return fast


def _ns(text: str) -> int:
    """A time in us as written, to exact ns rounded half to even (worked out with Decimal)."""
    return int((Decimal(text) * 1000).to_integral_value(rounding=ROUND_HALF_EVEN))


TIME_TEXTS = [
    "0",
    "-0",
    "1",
    "12.5",
    "1.0005",
    "1.0015",
    "1.0025",
    "-1.0005",
    "0.0005",
    "0.0015",
    "0.00049",
    "1e3",
    "1.5E+3",
    "2.5e-3",
    "3.5e-3",
    "1712195495519689.047",
    "1008491.4650139",
    "9223372036854775",
    "-9223372036854775.808",
    "0.000000001",
    "4.4999999999999999999",
]


def test_times_are_exact_in_every_form(tmp_path):
    durs = [t.lstrip("-") if len(t) < 12 else "0.5" for t in TIME_TEXTS]  # ends stay within int64
    rows = ", ".join(
        f'{{"ph": "X", "name": "t{i}", "pid": 1, "tid": 1, "ts": {t}, "dur": {d}}}'
        for i, (t, d) in enumerate(zip(TIME_TEXTS, durs))
    )
    fast = _read_compiled(tmp_path, '{"traceEvents": [' + rows + "]}")
    assert fast.table.column("ts_ns").to_pylist() == [_ns(t) for t in TIME_TEXTS]
    assert fast.table.column("dur_ns").to_pylist() == [_ns(d) for d in durs]


def test_unusable_times_are_dropped_by_reason(tmp_path):
    events = [
        {"ph": "X", "name": "no ts", "pid": 1, "tid": 1},
        {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "kept without ts"}},
        {"ph": "X", "name": "ts beyond int64 ns", "pid": 1, "tid": 1, "ts": 1e17},
        {"ph": "X", "name": "negative dur", "pid": 1, "tid": 1, "ts": 1, "dur": -1},
        {"ph": "X", "name": "dur beyond", "pid": 1, "tid": 1, "ts": 1, "dur": 1e30},
        {"ph": "X", "name": "end beyond", "pid": 1, "tid": 1, "ts": 9.2e15, "dur": 9.2e15},
        {"ph": "i", "name": "null ts", "pid": 1, "tid": 1, "ts": None},
        {},
        {"unknown": 1},
        5,
        "text",
        [1, [2]],
        None,
        {"ph": "X", "name": "kept", "pid": 1, "tid": 1, "ts": 2, "dur": 3},
    ]
    fast = _read_compiled(tmp_path, events)
    assert fast.table.column("name").to_pylist() == ["process_name", "kept"]
    assert dict(fast.result.drops) == {
        ("no ts", "X"): 1,
        ("bad ts", "X"): 1,
        ("negative dur", "X"): 1,
        ("bad dur", "X"): 2,
        ("no ts", "i"): 1,
        ("empty object", ""): 1,
        ("no ts", ""): 1,
        ("not an object", ""): 4,
    }


def test_the_base_time_is_added_and_checked(tmp_path):
    events = [
        {"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1.5, "dur": 1},
        {"ph": "X", "name": "beyond with the base", "pid": 1, "tid": 1, "ts": 9.2e15},
    ]
    fast = _read_compiled(tmp_path, events, baseTimeNanoseconds=1_700_000_000_000_000_000)
    assert fast.table.column("ts_ns").to_pylist() == [1_700_000_000_000_001_500]
    assert dict(fast.result.drops) == {("bad ts", "X"): 1}


def test_text_fields_as_id_text_writes_them(tmp_path):
    events = [
        {
            "ph": "X",
            "name": 'esc \u00e9 \U0001f600 "q" \\ / \b\f\n\r\t',
            "cat": "Kernel",
            "pid": -0,
            "tid": 12345678901234567890123,
            "ts": 1,
            "id": True,
            "bp": "e",
            "s": "g",
        },
        {"ph": "i", "name": None, "cat": "Operator", "pid": "Spans", "tid": False, "ts": 2, "id": "0x1f"},
        {"ph": "X", "cat": "kernel", "pid": 1, "tid": 1, "ts": 3},
    ]
    text = json.dumps({"traceEvents": events}, ensure_ascii=True)  # surrogate pairs as \\u escapes
    fast = _read_compiled(tmp_path, text)
    t = fast.table
    assert t.column("name").to_pylist() == ['esc \u00e9 \U0001f600 "q" \\ / \b\f\n\r\t', None, None]
    assert t.column("cat").to_pylist() == ["kernel", "cpu_op", "kernel"]
    assert t.column("cat_raw").to_pylist() == ["Kernel", "Operator", None]
    assert t.column("pid").to_pylist() == ["0", "Spans", "1"]
    assert t.column("tid").to_pylist() == ["12345678901234567890123", "false", "1"]
    assert t.column("flow_id").to_pylist() == ["true", "0x1f", None]


def test_args_are_kept_as_written_without_whitespace(tmp_path):
    """Strings as written; numbers as Python prints the parsed value (-0 is 0, 1.50E+3 stays)."""
    text = (
        '{"traceEvents": [\n  {"ph": "X", "ts": 1, "args": {\n    "a b": "x  y",\n    "n": 1.50E+3,\n'
        '    "l": [ 1 , -0 ],\n    "e": "\\u00e9\\"" } },\n  {"ph": "X", "ts": 2, "args": null},\n'
        '  {"ph": "X", "ts": 3, "args": [ 1, "2" ]},\n  {"ph": "X", "ts": 4, "args": "text"},\n'
        '  {"ph": "X", "ts": 5}\n]}'
    )
    fast = _read_compiled(tmp_path, text)
    assert fast.table.column("args").to_pylist() == [
        '{"a b":"x  y","n":1.50E+3,"l":[1,0],"e":"\\u00e9\\""}',
        None,
        '[1,"2"]',
        '"text"',
        None,
    ]


def test_promoted_values_convert_as_events_py_says(tmp_path):
    args = [
        {
            "stream": 7,
            "device": 5.0,
            "bytes": "123",
            "correlation": "+5",
            "Seq": "0x10",
            "Group size": "N/A",
            "External id": 1e3,
            "Ev Idx": 2.5,
            "Sequence number": "",
            "Python id": True,
        },
        {"stream": 99999999999999999999, "device": 1e300, "bytes": "-99999999999999999999", "Seq": -9.3e18},
        {
            "memory bandwidth (GB/s)": 12,
            "blocks per SM": "0.5",
            "warps per SM": "1.5e2",
            "flops": "nan?",
            "est. achieved occupancy %": "HUGE",
            "model_flops": None,
        },
        {
            "dtype": 5,
            "Collective name": True,
            "Process Group Name": None,
            "pg_desc_unused": 1,
            "Process Group Description": {"a": 1},
            "hlo_op": "fusion.1",
        },
        {"grid": [1, 2, 3], "block": [1, 2.0, 3]},
        {"grid": [], "block": [99999999999999999999]},
        {"grid": [1, [2]], "block": "[1, 2]"},
    ]
    events = [
        {"ph": "X", "name": f"e{i}", "pid": 1, "tid": 1, "ts": i, "dur": 1, "args": a} for i, a in enumerate(args)
    ]
    fast = _read_compiled(tmp_path, json.dumps({"traceEvents": events}).replace('"HUGE"', "1e999"))
    t = fast.table.to_pydict()
    assert t["stream"][:2] == [7, None] and t["device"][:2] == [5, None]
    assert t["bytes"][:2] == [123, None] and t["correlation"][0] == 5 and t["seq"][:2] == [None, None]
    assert t["group_size"][0] is None and t["external_id"][0] == 1000 and t["ev_idx"][0] is None
    assert t["sequence_number"][0] is None and t["python_id"][0] is None
    assert t["memory_bw_gbps"][2] == 12.0 and t["blocks_per_sm"][2] == 0.5 and t["warps_per_sm"][2] == 150.0
    assert t["flops"][2] is None and t["occupancy_pct"][2] is None and t["model_flops"][2] is None
    assert t["dtype"][3] == "5" and t["collective_name"][3] == "true" and t["pg_name"][3] is None
    assert t["pg_desc"][3] is None and t["hlo_op"][3] == "fusion.1"
    assert t["grid"][4:7] == [[1, 2, 3], [], None] and t["block"][4:7] == [None, None, None]
    notes = {k: v for k, v in fast.result.notes.items() if "out of range" in k}
    assert notes == {
        "stream: value out of range (NULL, kept in args)": 1,
        "device: value out of range (NULL, kept in args)": 1,
        "bytes: value out of range (NULL, kept in args)": 1,
        "seq: value out of range (NULL, kept in args)": 1,
        "block: value out of range (NULL, kept in args)": 1,
    }


def test_out_of_range_counts_only_rows_that_stay(tmp_path):
    events = [
        {"ph": "X", "name": "dropped", "pid": 1, "tid": 1, "dur": 1, "args": {"stream": 1e30}},
        {"ph": "X", "name": "kept", "pid": 1, "tid": 1, "ts": 1, "args": {"device": 1e30}},
    ]
    fast = _read_compiled(tmp_path, events)
    assert {k for k in fast.result.notes if "out of range" in k} == {"device: value out of range (NULL, kept in args)"}


@pytest.mark.parametrize(
    "event, reason",
    [
        ({"ph": "B", "name": "b", "pid": 1, "tid": 1, "ts": 1}, "B/E events"),
        ({"ph": "X", "pid": 1, "tid": 1, "ts": "12.5"}, "a ts or dur that is not a number"),
        ({"ph": "X", "pid": 1.5, "tid": 1, "ts": 1}, "a float, array or object in a text field"),
        (
            {"ph": "X", "pid": 1, "tid": 1, "ts": 1, "args": {"stream": " 7"}},
            "a promoted integer written as text that is not plain digits",
        ),
        (
            {"ph": "X", "pid": 1, "tid": 1, "ts": 1, "args": {"flops": "inf"}},
            "a promoted float written as text that is not a plain number",
        ),
        (
            {"ph": "X", "pid": 1, "tid": 1, "ts": 1, "args": {"dtype": 1.5}},
            "a promoted text value written as a float or an array",
        ),
        (
            {"ph": "X", "pid": 1, "tid": 1, "ts": 1, "args": {"External id": 1, "external id": 2}},
            "an args key for a promoted column given twice",
        ),
        (
            {"ph": "X", "pid": 1, "tid": 1, "ts": 1.0000000000000000000000000005},
            "a ts with more digits than Decimal keeps",
        ),
        ({"ph": "X", "pid": 1, "tid": 1, "ts": 1, "name": "\u0000"}, "a \\u0000 escape"),
    ],
)
def test_what_it_declines_is_read_by_msgspec_the_same(tmp_path, event, reason):
    good = {"ph": "X", "name": "good", "pid": 1, "tid": 1, "ts": 5, "dur": 1}
    text = json.dumps({"traceEvents": [good, event, good]})
    if "0000000000000000000000005" in reason or "more digits" in reason:
        text = text.replace("1.0", "1.0000000000000000000000000005", 1)
    _read_compiled(tmp_path, text, declines=True)
    assert compiled.chunk_counts["declined: " + reason] >= 1, compiled.chunk_counts


def test_a_lone_surrogate_or_invalid_utf8_is_left_to_the_reference(tmp_path):
    for name, raw in (
        ("lone.json", b'{"traceEvents": [{"ph": "X", "ts": 1, "name": "\\ud800x"}]}'),
        ("utf8.json", b'{"traceEvents": [{"ph": "X", "ts": 1, "name": "\xff"}]}'),
    ):
        (tmp_path / name).write_bytes(raw)
        compiled.chunk_counts.clear()
        fast, ref = both(tmp_path / name, reader=READER_COMPILED)
        assert_same(fast, ref)
        assert any(k.startswith("declined") for k in compiled.chunk_counts)


def test_a_cut_inside_a_string_is_found_and_moved(tmp_path, monkeypatch):
    """The chunker guesses cuts at '},{'; one inside a string is a wrong cut the parser
    reports, and the next guess is taken."""
    import cclq.formats.chrome.chunks as chunks

    monkeypatch.setattr(chunks, "CHUNK_BYTES", 40)
    events = [{"ph": "X", "name": "a},{b" * 5, "pid": 1, "tid": 1, "ts": i, "dur": 1} for i in range(30)]
    fast = _read_compiled(tmp_path, events)
    assert fast.table.num_rows == 30


def test_the_configuration_is_written_once():
    """Parser threads read the configuration without a lock: a second configure() is
    refused, and the parser reads on with the first."""
    if not compiled.AVAILABLE:
        pytest.skip("the compiled parser is not built (no C compiler at install)")
    with pytest.raises(RuntimeError, match="called once"):
        compiled.eventparse.configure([], 0, [])
    parsed = compiled.parse(b'[{"ph":"X","ts":1,"args":{"stream":7}}]', 60, 1 << 20, 1 << 20, 0)
    assert isinstance(parsed, compiled.Parsed)
    assert parsed.batch("f", 0).column("stream").to_pylist() == [7]


@pytest.mark.parametrize(
    "text",
    [
        b"",
        b"[",
        b"]",
        b"[]",
        b"[{",
        b'[{"ts":1}',
        b'[{"ts":1}]]',
        b'[{"ts":-}]',
        b'[{"ts":1e}]',
        b'[{"a":"\\u12"}]',
        b'[{"a":"\\ud800\\u"}]',
        b'[{"a":tru}]',
        b'[{"a" 1}]',
        b'[{"a":1,}]',
        b"[1,]",
        b'[{"args":{"grid":[1,' + b"[" * 80,
        b'[{"ts":' + b"9" * 500 + b"}]",
        b'[{"a":"\xf0\x9f"}]',
        b'[{"a":"\xed\xa0\x80"}]',
        b'[{"a":"\xc0\xaf"}]',
    ],
)
def test_broken_chunks_are_refused_without_harm(text):
    """Straight to the parser, as a fuzzer would: a status, never a crash or a row."""
    try:
        answer = compiled.parse(text, 61, 16 << 20, 24 << 20, 0)
    except compiled.CutInsideEvent:
        return
    if isinstance(answer, compiled.Parsed):
        assert text == b"[]"
        assert answer.rows == 0


hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

EVENT_BYTES = st.sampled_from(
    [
        b'{"ph":"X","ts":1,"dur":2,"name":"k","args":{"stream":7,"grid":[1,2,3]}}',
        b"{}",
        b'"s"',
        b"[1,[2]]",
        b'{"ts":1.5e3}',
        b'{"args":{"External id":"12"}}',
    ]
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.one_of(EVENT_BYTES, st.binary(max_size=40)), max_size=8),
    st.integers(0, 64),
    st.integers(1, 200),
    st.integers(1, 300),
    st.integers(-(2**63), 2**63 - 1),
)
def test_any_bytes_give_a_status(parts, levels, max_string, max_event, base):
    """Arbitrary bytes around valid events, with any bounds and base: the parser answers."""
    text = b"[" + b",".join(parts) + b"]"
    try:
        answer = compiled.parse(text, levels, max_string, max_event, base)
    except compiled.CutInsideEvent:
        return
    if isinstance(answer, compiled.Parsed):
        batch = answer.batch("f", 0)
        batch.validate(full=True)
        assert batch.num_rows == answer.rows <= answer.entries


def test_a_small_file_is_read_without_threads(tmp_path, monkeypatch):
    """Parser threads only for a file of THREADS_MIN_BYTES of text or more: below, the
    reading, read-ahead and encoding threads keep the cores busy and more only cost memory."""
    import cclq.formats.chrome.fast_reader as chrome_fast
    from cclq.formats.base import ReadOptions
    from cclq.formats.chrome.reader import read_trace_file
    from cclq.formats.detect import detect

    def no_threads(*args, **kw):  # noqa: ANN002, ANN003, ANN202
        raise AssertionError("threads used for a small file")

    monkeypatch.setattr(chrome_fast, "read_with_threads", no_threads)
    path = tmp_path / "small.json"
    path.write_text(json.dumps({"traceEvents": [{"ph": "X", "name": "k", "pid": 1, "tid": 1, "ts": 1, "dur": 1}]}))
    batches: list = []
    result, _ = read_trace_file(
        str(path), detect(str(path)), "f", batches.append, ReadOptions(reader=READER_COMPILED, threads=2)
    )
    assert result.rows_written == 1
