"""Arrow columns from the decoded fields of a chunk, by the rules of ``events``: exact
times from the raw ``ts``/``dur`` texts in bulk, the ``args`` column as every reader
writes it, and the promoted columns, group by group of events with the same keys.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from itertools import chain
from typing import Any

import msgspec
import pyarrow as pa
import pyarrow.compute as pc

from cclq.formats.chrome.decode import GENERIC, FallbackToIjson, raw_value
from cclq.formats.chrome.events import NUMBER_TO_SPELL, canonical_args_text, time_ns, time_ns_from_text

_ARANGE: list[pa.Array] = [pa.array([], pa.int64())]


def positions(first: int, n: int) -> pa.Array:
    """first, first + 1, ..., first + n - 1 as int64, from a cached range."""
    if len(_ARANGE[0]) < n:
        _ARANGE[0] = pa.array(range(max(n, 2 * len(_ARANGE[0]))), pa.int64())
    return pc.add(_ARANGE[0].slice(0, n), pa.scalar(first, pa.int64()))


Times = tuple[pa.Array, list[int], list[int]]  # (exact ns, rows without a value, rows unusable)


def text_array_of_raws(raws: Sequence[msgspec.Raw]) -> tuple[pa.Array, pa.Array]:
    """(utf8 array, lengths) of raw texts, in C: one join, no object per value. Raises
    ``FallbackToIjson`` for text that is not UTF-8 (msgspec skips raw values unchecked)."""
    lengths = pa.array(list(map(len, raws)), pa.int32())
    offsets = pa.concat_arrays([_ZERO32, pc.cumulative_sum(lengths)])
    binary = pa.Array.from_buffers(pa.binary(), len(raws), [None, offsets.buffers()[1], pa.py_buffer(b"".join(raws))])
    try:
        return binary.cast(pa.string()), lengths
    except pa.ArrowInvalid:
        raise FallbackToIjson("a raw value that is not valid UTF-8") from None


_ZERO32 = pa.array([0], pa.int32())
_DEC3 = pa.decimal128(19, 3)  # 16 integer digits: int64 ns holds at most 9.2e15 us
_DEC18 = pa.decimal128(38, 18)  # any decimals a float's repr has, 20 integer digits
_DEC3_38 = pa.decimal128(38, 3)
_NS_38 = pa.decimal128(38, 0)
_D1000 = pa.scalar(Decimal(1000), pa.decimal128(4, 0))


def _ns_from_decimal_text(text: pa.Array) -> pa.Array:
    """Exact ns of number texts (us) in C; raises ``ArrowInvalid`` where one is not a
    plain number, has more than 18 decimals, or leaves int64 ns.

    At most 3 decimals (every profiler's form): ``decimal128(19, 3)`` times 1000. More
    (a float's repr, ``1008491.4650139``): ``decimal128(38, 18)`` rounded half to even
    to 3 decimals, whose unscaled integer is the ns. (The second is 3x slower, so it is
    only tried when the first fails.)"""
    try:
        return pc.cast(pc.multiply(pc.cast(text, _DEC3), _D1000), pa.int64())
    except pa.ArrowInvalid:
        pass
    thousandths = pc.cast(pc.round(pc.cast(text, _DEC18), ndigits=3, round_mode="half_to_even"), _DEC3_38)
    return pc.cast(pa.Array.from_buffers(_NS_38, len(thousandths), thousandths.buffers()), pa.int64())


NULL_TEXT = pa.scalar(None, pa.string())


def times_from_text(raws: Sequence[msgspec.Raw], levels: int) -> Times:
    """Exact ns from the raw JSON text of each ts or dur value (empty: absent), as
    ``events.time_ns`` defines them: in C for every plain number with at most 18 decimals
    (integer or fraction, relative or epoch: ``_ns_from_decimal_text``). Only a chunk
    with another value (a numeric string, ``"NaN"``, 19 decimals, beyond int64 ns) has
    its odd rows converted one by one.

    A value msgspec kept as text was not checked for nesting: one with more than
    ``levels`` brackets (in or out of its strings: a bound never exceeded when it holds)
    goes to ijson, which decides."""
    text, lengths = text_array_of_raws(raws)
    absent = pc.equal(lengths, pa.scalar(0, pa.int32()))
    any_absent = pc.any(absent).as_py()
    try:
        present = pc.if_else(absent, NULL_TEXT, text) if any_absent else text
        ns = _ns_from_decimal_text(present)
        return ns, pc.indices_nonzero(absent).to_pylist() if any_absent else [], []
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    ns, simple = time_ns_from_text(text)
    others = pc.indices_nonzero(pc.invert(simple)).to_pylist()
    missing: list[int] = []
    bad: list[int] = []
    fix_rows: list[int] = []
    fix_values: list[int] = []
    for i in others:
        raw = raws[i]
        b = bytes(raw)
        if b.count(b"[") + b.count(b"{") > levels:
            raise FallbackToIjson("a ts or dur value nested deeper than the fast reader checks")
        value = raw_value(raw)
        if value is None:
            missing.append(i)
            continue
        v = time_ns(value)
        if v is None:
            bad.append(i)
        else:
            fix_rows.append(i)
            fix_values.append(v)
    if fix_rows:
        fixes = pc.scatter(pa.array(fix_values, pa.int64()), pa.array(fix_rows, pa.int64()), max_index=len(raws) - 1)
        ns = pc.coalesce(ns, fixes)
    return ns, missing, bad


EMPTY_OBJECT_TEXT = pa.scalar("{}", pa.string())
_EMPTY_TEXT = pa.scalar("", pa.string())
NULL_JSON = pa.scalar("null", pa.string())
_COMMA = pa.scalar(",", pa.string())


_INT_TEXT = r"^-?[0-9]{1,18}$"
_FLOAT_TEXT = r"^-?[0-9]{1,300}(\.[0-9]{1,300})?([eE][-+]?[0-9]{1,3})?$"


def fast_promote(kind: str, values: list[Any]) -> pa.Array | None:
    """The column for a group's values when every one converts and fits, computed in C;
    None when some value needs ``promote_value``.

    Text in a number column (every xprof argument is text) is parsed by pyarrow when it
    is a plain decimal number, a form both parsers read alike; anything else sends the
    group to ``promote_value``.
    """
    types = set(map(type, values))
    try:
        if kind == "int":
            if types == {int}:
                return pa.array(values, pa.int64())
            if types == {str}:
                text = pa.array(values, pa.string())
                if not pc.all(pc.match_substring_regex(text, _INT_TEXT)).as_py():
                    return None  # "0x0", " 5", "5.0": promote_value decides
                return pc.cast(text, pa.int64())
            return None
        if kind == "float":
            if types <= {float, int}:
                floats = pa.array(values, pa.float64())
            elif types == {str}:
                text = pa.array(values, pa.string())
                if not pc.all(pc.match_substring_regex(text, _FLOAT_TEXT)).as_py():
                    return None
                floats = pc.cast(text, pa.float64())
            else:
                return None
            return floats if pc.all(pc.is_finite(floats)).as_py() else None  # 1e999 is NULL
        if kind == "str":
            return pa.array(values, pa.string()) if types == {str} else None
        if types == {list} and set(map(type, chain.from_iterable(values))) <= {int}:
            return pa.array(values, pa.list_(pa.int64()))
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        return None
    return None


def decode_args(objects: pa.Array) -> list[Any]:
    """The args texts (``{}`` for absent) decoded as values, in one msgspec call for the
    chunk (an object with a key twice keeps the last value, as every reader does)."""
    m = len(objects)
    joined = pc.binary_join_element_wise(objects, _EMPTY_TEXT, _COMMA)
    size = pc.sum(pc.binary_length(joined)).as_py() if m else 0
    body = memoryview(joined.buffers()[2])[: max(size - 1, 0)] if m else b""
    try:
        return GENERIC.decode(b"".join((b"[", body, b"]")))
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError) as e:
        raise FallbackToIjson(f"an args value that does not decode ({e})") from None


_KEY_END = '":'  # in compact text, each key ends so (and a string value may hold it)


def canonical_args(args_col: pa.Array, objects: pa.Array, args: list[Any]) -> pa.Array:
    """The args column as every reader writes it (``events.canonical_args_text``): a
    number spelled as the reference parse prints it, an object with a key twice as its
    parsed value. Only rows that may need it are looked at exactly, found in C: a
    number ``NUMBER_TO_SPELL`` matches, or more key ends (``":``) than the decoded
    object has keys (a key given twice, a nested object, a string holding ``":``)."""
    if not len(args):
        return args_col
    keys = list(map(len, args)) if set(map(type, args)) == {dict} else [len(a) if type(a) is dict else 0 for a in args]
    suspect = pc.or_(
        pc.match_substring_regex(objects, NUMBER_TO_SPELL),
        pc.not_equal(pc.count_substring(objects, _KEY_END), pa.array(keys, pa.int32())),
    )
    if not pc.any(suspect).as_py():
        return args_col
    texts = args_col.to_pylist()
    changed = False
    for i in pc.indices_nonzero(suspect).to_pylist():
        text = texts[i]
        if text is None:
            continue
        try:
            spelled = canonical_args_text(text)
        except (ValueError, RecursionError) as e:
            raise FallbackToIjson(f"an args value that does not decode ({e})") from None
        if spelled != text:
            texts[i], changed = spelled, True
    return pa.array(texts, pa.string()) if changed else args_col


def group_by_keys(args: list[Any]) -> dict[tuple[str, ...], list[int]]:
    """Rows of the non-empty args objects by key tuple, in order of first appearance.

    When every entry is an object (the rule: ``{}`` stands for absent args), the tuples
    are made and numbered by C calls (``map``; a key tuple's number is the row where it
    first occurs) and grouped by Arrow: no Python code runs per event."""
    m = len(args)
    groups: dict[tuple[str, ...], list[int]] = {}
    if m and set(map(type, args)) == {dict}:
        keys = list(map(tuple, args))
        first: dict[tuple[str, ...], int] = {}
        codes = pa.array(list(map(first.setdefault, keys, range(m))), pa.int64())
        grouped = (
            pa.table({"code": codes, "row": positions(0, m)})
            .group_by("code", use_threads=False)
            .aggregate([("row", "list")])
        )
        for code, idxs in zip(grouped.column("code").to_pylist(), grouped.column("row_list").to_pylist()):
            if keys[code]:
                groups[keys[code]] = idxs
        return groups
    get = groups.get
    for i in range(m):
        a = args[i]
        if type(a) is dict and a:
            k = tuple(a)
            g = get(k)
            if g is None:
                groups[k] = [i]
            else:
                g.append(i)
    return groups
