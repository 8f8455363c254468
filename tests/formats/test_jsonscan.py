"""The structural scan (cclq/formats/chrome/jsonscan.py): its vectorised form against its
specification written as a byte loop, on any text cut into any blocks."""

from __future__ import annotations

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from cclq.formats.chrome.jsonscan import (  # noqa: E402
    DEPTH,
    EVENT,
    STRING,
    TOKEN_BYTES,
    StructureScanner,
    Violation,
    report_order,
)
from cclq.formats.limits import ReadLimits  # noqa: E402

# the bytes the scan cares about, and some it does not
ALPHABET = b'{}[]"\\\\ab1 ,:\n'


def reference_scan(
    data: bytes, limits: ReadLimits, event_depth: int, depth: int = 0
) -> tuple[Violation | None, list[int], int | None]:
    """The scanner's specification as a byte loop: (first violation, event ends, first
    close below the events' container). Slow; for tests."""
    found: list[Violation] = []
    in_str = False
    escape = False  # the previous byte was an unpaired backslash
    str_open = ev_open = run_start = -1
    ends: list[int] = []
    below: int | None = None
    for i, b in enumerate(data):
        c = chr(b)
        if b in TOKEN_BYTES:
            if run_start < 0:
                run_start = i
        elif run_start >= 0:
            if i - run_start > limits.max_string_bytes:
                found.append(Violation(STRING, run_start, run_start + limits.max_string_bytes))
            run_start = -1
        if escape:  # this byte is escaped: a quote here neither opens nor closes a string
            escape = False
            if c == '"':
                continue
        elif c == "\\":
            escape = True
            continue
        if in_str:
            if c == '"':
                in_str = False
                if i - str_open - 1 > limits.max_string_bytes:
                    found.append(Violation(STRING, str_open, str_open + 1 + limits.max_string_bytes))
            continue
        if c == '"':
            in_str, str_open = True, i
        elif c in "{[":
            depth += 1
            if depth > limits.max_depth:
                found.append(Violation(DEPTH, i, i))
            if depth == event_depth:
                ev_open = i
        elif c in "}]":
            depth -= 1
            if depth == event_depth - 1:
                if ev_open >= 0 and i - ev_open + 1 > limits.max_event_bytes:
                    found.append(Violation(EVENT, ev_open, ev_open + limits.max_event_bytes))
                ends.append(i)
                ev_open = -1
            if depth == event_depth - 2 and below is None:
                below = i
    n = len(data)
    if run_start >= 0 and n - run_start > limits.max_string_bytes:
        found.append(Violation(STRING, run_start, run_start + limits.max_string_bytes))
    if in_str and n - str_open - 1 > limits.max_string_bytes:
        found.append(Violation(STRING, str_open, str_open + 1 + limits.max_string_bytes))
    if ev_open >= 0 and n - ev_open > limits.max_event_bytes:
        found.append(Violation(EVENT, ev_open, ev_open + limits.max_event_bytes))
    first = min(found, key=report_order) if found else None
    return first, ends, below


def _scan(data: bytes, cuts: list[int], limits: ReadLimits, event_depth: int, depth: int):
    scanner = StructureScanner(limits, event_depth, depth=depth)
    ends: list[int] = []
    below = None
    prev = 0
    for cut in sorted(cuts) + [len(data)]:
        result = scanner.feed(data[prev:cut])
        prev = cut
        ends += result.event_ends
        below = below if below is not None else result.closed_below
    return scanner.violation, ends, below


@settings(max_examples=600, deadline=None)
@given(
    data=st.binary(max_size=120).map(lambda b: bytes(ALPHABET[x % len(ALPHABET)] for x in b)),
    cuts=st.lists(st.integers(0, 120), max_size=5),
    string=st.integers(1, 8),
    depth_limit=st.integers(1, 6),
    event=st.integers(1, 20),
    event_depth=st.integers(1, 3),
    depth=st.integers(0, 1),
)
def test_the_scan_is_its_specification_whatever_the_blocks(data, cuts, string, depth_limit, event, event_depth, depth):
    limits = ReadLimits(max_string_bytes=string, max_depth=depth_limit, max_event_bytes=event)
    cuts = [c for c in cuts if c <= len(data)]
    assert _scan(data, cuts, limits, event_depth, depth) == reference_scan(data, limits, event_depth, depth)


def test_escaped_quotes_and_backslash_runs_across_blocks():
    limits = ReadLimits(max_string_bytes=5)
    text = b'["ab\\\\", "x\\"yz\\"w", "\\\\\\""]'
    for cut in range(len(text) + 1):
        assert _scan(text, [cut], limits, 2, 0) == reference_scan(text, limits, 2, 0)
    violation, _, _ = reference_scan(text, limits, 2, 0)
    assert violation == Violation(STRING, 9, 15)  # "x\"yz\"w" is 8 bytes long


def test_the_first_violation_a_parser_would_meet_is_reported():
    limits = ReadLimits(max_string_bytes=4, max_event_bytes=10)
    text = b'[{"a": 1, "b": 2, "c": 3}, "long string"]'
    violation, ends, below = _scan(text, [7, 20], limits, 2, 0)
    assert violation == Violation(EVENT, 1, 11)  # the event passes 10 bytes before the string passes 4
    assert ends == [24] and below == len(text) - 1
