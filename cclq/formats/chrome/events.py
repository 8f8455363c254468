"""How the values of a Chrome trace event become columns: the rules both readers share.

The reference reader (``ijson_reader``) and the fast reader (``fast_reader``: the C
parser, msgspec) meet the same JSON values in different clothes: ijson gives ``Decimal`` for a
number with a fraction or an exponent, msgspec gives ``float``. Every rule here treats
the two alike, so that both readers write the same table:

* ``ts``/``dur`` are exact: the decimal text of the number (or of a numeric string)
  times 1000, rounded half to even to an integer number of nanoseconds that must fit in
  int64. No float ever carries them. Anything else (``"NaN"``, ``"Infinity"``, ``1e30``,
  ``true``, a list) is unusable, and the event is dropped and counted.
* Any other number is an IEEE double wherever its value is used (a promoted float or
  int column, the text of a pid).
* ``args`` is the args value as written: the fast reader keeps the compact source text,
  the ijson reader writes the same JSON value from its parse (``encode_exact``: every
  number exact, ``Decimal`` as its own text). Every reader writes a number as the
  reference parse prints it (``number_text``: ``1e20`` is ``1E+20``, ``-0`` is ``0``),
  and an object with a key given twice as its parsed value, one key each, the last
  value winning (``canonical_args_text``), as Python's JSON parsers and DuckDB's
  ``json_extract`` then agree. Where they still differ is how a string is escaped
  (``"\u00e9"`` as written, or ``"é"`` from the parse): the same JSON value, and no
  metric reads the text, only values extracted from it. Promoted arguments
  (``schema.PROMOTED_ARGS``) are also copied into their typed column when they convert;
  a value that does not convert (``"inf"``, ``"N/A"``, 5.5 for an integer column) or does
  not fit (an integer beyond int64) is NULL there, and the second is counted in
  ``ingest_stats`` (``RANGE_NOTE``).

The functions that work on one value are the specification; the array functions are
the same rules in pyarrow's C code for the values they can take exactly, and hand the
others to the one-value functions.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterator, Sequence
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from cclq.schema import LEGACY_CATEGORIES, PROMOTED_ARGS, promoted_columns

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

# Drop reasons shared by both readers (``ReadResult.drops`` keys are (reason, ph)).
NO_TS, BAD_TS, BAD_DUR, NEGATIVE_DUR = "no ts", "bad ts", "bad dur", "negative dur"
NOT_AN_OBJECT, EMPTY_OBJECT, E_WITHOUT_B = "not an object", "empty object", "E without B"


def range_note(column: str) -> str:
    """The ``ingest_stats`` note for promoted values that do not fit their column."""
    return f"{column}: value out of range (NULL, kept in args)"


# ------------------------------------------------------------------ JSON encoding
def as_double(d: Decimal) -> float:
    """The double a Decimal stands for (a signalling NaN, which ``float`` refuses, is NaN)."""
    return math.nan if d.is_snan() else float(d)


def json_default(o: Any) -> Any:
    """orjson/json ``default``: a ``Decimal`` is encoded as the double it stands for."""
    return as_double(o) if isinstance(o, Decimal) else str(o)


# One C encoder built once: json.dumps builds a new one per call, which costs more
# than encoding a small args dict.
_c_encoder = c_make_encoder(None, json_default, encode_basestring, None, ":", ",", False, False, True)
_orjson_dumps = orjson.dumps


def encode_json(obj: Any) -> str:
    """Compact JSON text of an args value: orjson, else the stdlib's C encoder.

    orjson is 4-5x faster; it refuses integers beyond 64 bits and nesting deeper than
    255, which the stdlib encodes (up to Python's recursion limit).
    """
    try:
        return _orjson_dumps(obj, default=json_default).decode()
    except TypeError:
        return "".join(_c_encoder(obj, 0))


def _fragment(o: Any) -> Any:
    """orjson ``default`` for ``encode_exact``: a ``Decimal`` as its own number text."""
    if isinstance(o, Decimal):
        if not o.is_finite():  # not from JSON text; as the double it stands for
            return as_double(o)
        return orjson.Fragment(str(o))
    return str(o)


def encode_exact(obj: Any) -> str:
    """Compact JSON text of a parsed value with every number as exact as it was read: a
    ``Decimal`` is written as its own text (``1.500E+3``), never through a double, so the
    text is the same JSON value as the source's (the ``args`` column's contract).

    orjson, or for what it refuses (integers beyond 64 bits, nesting deeper than 255, lone
    surrogates) a plain recursive encoder.
    """
    try:
        return _orjson_dumps(obj, default=_fragment).decode()
    except TypeError:
        return "".join(_exact_parts(obj))


def _exact_parts(obj: Any) -> Iterator[str]:
    t = type(obj)
    if t is dict:
        yield "{"
        for i, (k, v) in enumerate(obj.items()):
            if i:
                yield ","
            yield encode_basestring(k)
            yield ":"
            yield from _exact_parts(v)
        yield "}"
    elif t is list:
        yield "["
        for i, v in enumerate(obj):
            if i:
                yield ","
            yield from _exact_parts(v)
        yield "]"
    elif t is Decimal and obj.is_finite():
        yield str(obj)
    else:
        yield "".join(_c_encoder(obj, 0))


# ---------------------------------------------------- one text for one args value
# A JSON string (skipped as it is) or a JSON number token.
_STRING_OR_NUMBER = re.compile(r'"(?:[^"\\]|\\.)*"|-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?')
# Text that may hold a number ``number_text`` spells otherwise (RE2, for pyarrow; a match
# inside a string only costs the exact look): an exponent, a fraction of six leading
# zeros or more (Decimal writes 1E-7), a -0.
NUMBER_TO_SPELL = r"[0-9][eE]|(^|[:,\[])-?0\.000000|(^|[:,\[])-0($|[,}\]])"


def number_text(token: str) -> str:
    """A JSON number token as the reference reader writes its value: an integer as
    ``int`` prints it (``-0`` is ``0``; JSON has no other spelling of an integer), a
    fraction or exponent as ``Decimal``'s ``str`` (``1e20`` -> ``1E+20``, ``0.0000001``
    -> ``1E-7``, ``1.50`` stays). The C parser writes the same (eventparse, ``append_number``)."""
    if "." in token or "e" in token or "E" in token:
        return str(Decimal(token))
    return "0" if token == "-0" else token


def _spell(m: re.Match[str]) -> str:
    token = m.group()
    return token if token[0] == '"' else number_text(token)


class _Pairs:
    """``object_pairs_hook`` that notes whether an object had a key twice."""

    __slots__ = ("duplicate",)

    def __init__(self) -> None:
        self.duplicate = False

    def __call__(self, pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        d = dict(pairs)
        if len(d) != len(pairs):
            self.duplicate = True
        return d


def canonical_args_text(text: str) -> str:
    """The ``args`` text every reader writes for this compact source text: with a key
    given twice anywhere, the parsed value encoded (``encode_exact``: one key each, the
    last value, in the place of the first, as ``json.loads`` and ijson build it); else
    the text with its numbers spelled by ``number_text``. Raises ``ValueError`` for
    text that is not JSON."""
    pairs = _Pairs()
    value = json.loads(text, parse_float=Decimal, object_pairs_hook=pairs)
    if pairs.duplicate:
        return encode_exact(value)
    return _STRING_OR_NUMBER.sub(_spell, text)


# ------------------------------------------------------------------------- time
def time_ns(value: Any) -> int | None:
    """Microseconds as written (int, Decimal, float, or a numeric string) to exact int64 ns.

    ``None`` when the value is not a finite number, or does not fit in int64 ns.
    """
    t = type(value)
    if t is int:
        ns = value * 1000
    elif t is Decimal or t is str:
        try:
            d = Decimal(value)
        except (InvalidOperation, ValueError):
            return None
        if not d.is_finite():
            return None
        # scaleb is exact (it moves the exponent); the rounding is to an integer
        ns = int(d.scaleb(3).to_integral_value(rounding=ROUND_HALF_EVEN))
    elif t is float:  # not produced by either reader; the value as its shortest decimal
        if not math.isfinite(value):
            return None
        return time_ns(Decimal(repr(value)))
    else:
        return None
    return ns if INT64_MIN <= ns <= INT64_MAX else None


_FACTORS = pa.array([1000, 100, 10, 1], pa.int64())  # 10**(3 - decimals)
_SIMPLE_NUMBER = r"^-?[0-9]{1,15}(\.[0-9]{1,3})?$"  # fits int64 ns after scaling: no check needed
_DOT = "."
_MINUS_ONE = pa.scalar(-1, pa.int64())
_ZERO64 = pa.scalar(0, pa.int64())
_ONE64 = pa.scalar(1, pa.int64())


def time_ns_from_text(text: pa.Array) -> tuple[pa.Array, pa.Array]:
    """(ns, simple): exact ns of number texts like ``-12.345`` (at most 3 decimals, 15
    integer digits), NULL where ``simple`` is false; those rows need ``time_ns``."""
    simple = pc.fill_null(pc.match_substring_regex(text, _SIMPLE_NUMBER), False)
    if not pc.all(simple).as_py():
        text = pc.if_else(simple, text, pa.scalar("0", pa.string()))
    digits = pc.cast(pc.replace_substring(text, _DOT, ""), pa.int64())
    dot = pc.cast(pc.find_substring(text, _DOT), pa.int64())
    decimals = pc.if_else(
        pc.equal(dot, _MINUS_ONE),
        _ZERO64,
        pc.subtract(pc.subtract(pc.cast(pc.utf8_length(text), pa.int64()), dot), _ONE64),
    )
    ns = pc.multiply(digits, pc.take(_FACTORS, decimals))
    return pc.if_else(simple, ns, pa.scalar(None, pa.int64())), simple


def time_ns_array(values: Sequence[Any]) -> tuple[pa.Array, list[int]]:
    """(ns, rows whose value is present but unusable) for ts or dur values as the
    reference reader has them (int, Decimal, str, None, ...)."""
    try:  # the common case, in C: ints, and Decimals with at most 3 decimals
        arr = pa.array(values, pa.decimal128(38, 3))
        ns = pc.cast(pc.multiply(arr, pa.scalar(Decimal(1000), pa.decimal128(4, 0))), pa.int64())
        return ns, []
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError, ValueError):
        pass
    out: list[int | None] = []
    bad: list[int] = []
    for i, v in enumerate(values):
        if v is None:
            out.append(None)
            continue
        ns = time_ns(v)
        if ns is None:
            bad.append(i)
        out.append(ns)
    return pa.array(out, pa.int64()), bad


def slice_key(pid: Any, tid: Any) -> tuple[Any, Any]:
    """The (pid, tid) a B waits on for its E: the values themselves, or the JSON text of
    a list or object (unhashable; a hostile file may use one)."""
    return (
        pid if type(pid) not in (list, dict) else encode_json(pid),
        tid if type(tid) not in (list, dict) else encode_json(tid),
    )


# --------------------------------------------------------------- text columns
def id_text(v: Any) -> str | None:
    """Text of a pid, tid, name, id, ...: strings as they are, integers in decimal,
    other numbers as the double they stand for, anything else as JSON."""
    t = type(v)
    if t is str:
        return v
    if v is None:
        return None
    if t is int:
        return str(v)
    if t is float:
        return repr(v)
    if t is Decimal:
        return repr(as_double(v))
    if t is bool:
        return "true" if v else "false"
    return encode_json(v)


def text_array(values: Sequence[Any]) -> pa.Array:
    """``id_text`` over a column; strings and ints (pids, tids, flow ids) in C."""
    if not values or type(values[0]) is not int:
        try:
            return pa.array(values, pa.string())
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            pass
    types = set(map(type, values))
    if types <= {int, type(None)}:
        try:
            return pc.cast(pa.array(values, pa.int64()), pa.string())
        except (pa.ArrowInvalid, OverflowError):
            pass
    if types <= {int, str, type(None)}:
        # mostly ints with a few strings (Kineto's "Spans" pid): cast the ints in C
        try:
            as_text = pc.cast(pa.array([v if type(v) is int else None for v in values], pa.int64()), pa.string())
            others = pa.array([v if type(v) is str else None for v in values], pa.string())
            return pc.coalesce(as_text, others)
        except (pa.ArrowInvalid, OverflowError):
            pass
    return pa.array([id_text(v) for v in values], pa.string())


_LEGACY_KEYS = pa.array(list(LEGACY_CATEGORIES), pa.string())
_NULL_TEXT = pa.scalar(None, pa.string())


def map_categories(raw: pa.Array) -> tuple[pa.Array, pa.Array]:
    """(cat, cat_raw): legacy names replaced, originals kept where replaced."""
    cat = raw
    is_legacy = pc.is_in(raw, value_set=_LEGACY_KEYS)
    if not pc.any(is_legacy).as_py():
        return raw, pa.nulls(len(raw), pa.string())
    for old, new in LEGACY_CATEGORIES.items():
        cat = pc.if_else(pc.equal(raw, pa.scalar(old)), pa.scalar(new), cat)
    return cat, pc.if_else(is_legacy, raw, _NULL_TEXT)


# ------------------------------------------------------------- promoted arguments
PROMOTED_COLUMNS = promoted_columns()  # [(column, kind)] in schema order
PROMOTE = {key: spec.column for key, spec in PROMOTED_ARGS.items()}  # raw key -> column
COLUMN_KIND = dict(PROMOTED_COLUMNS)
KIND_TYPE = {"int": pa.int64(), "float": pa.float64(), "str": pa.string(), "int_list": pa.list_(pa.int64())}


def _conv_int(v: Any) -> int | None:
    t = type(v)
    if t is Decimal:
        v, t = as_double(v), float
    if t is int:
        return v
    if t is float:
        return int(v) if math.isfinite(v) and v == int(v) else None
    if t is str:
        try:
            d = Decimal(v)
        except (InvalidOperation, ValueError):
            return None
        return int(d) if d.is_finite() and d == int(d) else None
    return None


def _conv_float(v: Any) -> float | None:
    t = type(v)
    try:
        if t is Decimal:
            f = as_double(v)
        elif t is int or t is float:
            f = float(v)
        elif t is str:
            f = float(v)
        else:
            return None
    except (ValueError, OverflowError):
        return None
    return f if math.isfinite(f) else None


def _conv_str(v: Any) -> str | None:
    if type(v) is str:
        return v
    return encode_json(v)


def _conv_int_list(v: Any) -> list[int] | None:
    if type(v) is list and all(type(x) is int for x in v):
        return v
    return None


_CONVERTERS: dict[str, Callable[[Any], Any]] = {
    "int": _conv_int,
    "float": _conv_float,
    "str": _conv_str,
    "int_list": _conv_int_list,
}


def _fits(kind: str, value: Any) -> bool:
    if kind == "int":
        return INT64_MIN <= value <= INT64_MAX
    if kind == "int_list":
        return all(INT64_MIN <= x <= INT64_MAX for x in value)
    return True


def promote_value(kind: str, v: Any) -> tuple[Any, bool, bool]:
    """(column value or None, whether the key leaves ``args``, whether it was out of range).

    ``None`` and objects stay in ``args`` untouched; everything else is converted, and
    leaves ``args`` only if the conversion worked and the result fits the column.
    """
    if v is None or type(v) is dict:
        return None, False, False
    converted = _CONVERTERS[kind](v)
    if converted is None:
        return None, False, False
    if not _fits(kind, converted):
        return None, False, True
    return converted, True, False


# Events of one kind carry the same argument keys in the same order (every Kineto kernel
# has the same dozen), so which of them are promoted is worked out once per key tuple.
# Bounded, for files whose counters invent a key per event.
ArgPlan = tuple[tuple[str, str, str], ...]  # (raw key, column, kind)
_ARG_PLANS: dict[tuple[str, ...], ArgPlan] = {}
_ARG_PLANS_MAX = 4096


def arg_plan(keys: tuple[str, ...]) -> ArgPlan:
    plan = _ARG_PLANS.get(keys)
    if plan is None:
        plan = tuple((key, PROMOTE[key], COLUMN_KIND[PROMOTE[key]]) for key in keys if key in PROMOTE)
        if len(_ARG_PLANS) < _ARG_PLANS_MAX:
            _ARG_PLANS[keys] = plan
    return plan


def split_args(args: Any, promoted: dict[str, Any], out_of_range: dict[str, int]) -> str | None:
    """Files one event's promoted arguments into ``promoted`` (column -> value) and
    returns the ``args`` column's text: the whole value, every key kept (``None`` for
    JSON ``null``).

    ``args`` is a parsed value (the ijson reader's: ``Decimal`` for fractions), encoded
    exactly (``encode_exact``); or ``bytes``, the compact source text the fast reader
    kept, which is the column as ``canonical_args_text`` spells it and is parsed here
    only for its promoted keys.
    """
    if type(args) is bytes:
        text = canonical_args_text(args.decode())
        args = json.loads(text, parse_float=Decimal)
        if args is None:
            return None
    else:
        if args is None:
            return None
        text = encode_exact(args)
    if type(args) is dict:
        promote_args(args, promoted, out_of_range)
    return text


def promote_args(args: dict[str, Any], promoted: dict[str, Any], out_of_range: dict[str, int]) -> None:
    """The promoted keys of one args object into ``promoted``; values that do not fit
    their column are counted in ``out_of_range`` (they stay in ``args`` as everything does)."""
    for key, column, kind in arg_plan(tuple(args)):
        v = args[key]
        t = type(v)
        if (t is str and kind == "str") or (t is int and kind == "int" and INT64_MIN <= v <= INT64_MAX):
            promoted[column] = v  # the common case, without a call: it converts as it is
            continue
        value, _, too_big = promote_value(kind, v)
        if value is not None:
            promoted[column] = value
        elif too_big:
            out_of_range[column] = out_of_range.get(column, 0) + 1
