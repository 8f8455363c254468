"""msgspec decoding of a chunk of the event array (``[`` + whole events + ``]``), the
fast reader's second parser after the C one (``compiled``), and the exceptions with which
the fast reader gives a file up.

The chunk is made compact (``msgspec.json.format``: the whitespace outside strings
removed, every token as written), then msgspec decodes it into small structs with the
event's fields; ``ts``, ``dur`` and ``args`` are kept as their raw text (``msgspec.Raw``).
The struct types forbid unknown keys and bound the nesting: a chunk they accept is within
the ``ReadLimits`` by construction (``args``, which they do not see, by a bracket count
in ``columns``); any other goes through the structural scan (``jsonscan``). A decode
error at the appended ``]`` is a wrong cut (``WrongCut``), earlier one is text msgspec
refuses (``Undecodable``).
"""

from __future__ import annotations

import json
import re
from decimal import Decimal
from types import GenericAlias
from typing import Any, Union

import msgspec

from cclq.formats.chrome import compiled
from cclq.formats.chrome.jsonscan import StructureScanner
from cclq.formats.limits import ReadLimits

CERTIFIED_LEVELS = 6  # nesting the fast decoder checks by its types (deeper: the scan)


class FallbackToIjson(Exception):
    """The fast reader cannot take this file with certainty; read it with ijson."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class ReadSequentially(Exception):
    """The parallel read met what only a sequential read can take (B/E pairs across
    chunks, a cut that was not an event boundary); read the file again with one process."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


# ------------------------------------------------------------------ decode types
def _json_value(levels: int) -> Any:
    """The type of a JSON value with at most ``levels`` nested arrays or objects."""
    value: Any = Union[str, int, float, bool, None]  # noqa: UP007  msgspec reads this type built at run time: typing.Union of run-time values
    for _ in range(levels):
        value = Union[str, int, float, bool, None, list[value], dict[str, value]]  # noqa: UP007  as above
    return value


_NO_RAW = msgspec.Raw()  # a field that was not there
_FIELDS = ("ph", "cat", "name", "pid", "tid", "ts", "dur", "id", "bp", "s", "args")
_RAW_FIELDS = ("ts", "dur", "args")  # kept as their (compact) source text


def _event_struct(levels: int | None) -> type:
    """A struct for one event: its fields typed to at most ``levels`` nested levels, or any
    JSON with ``None`` (and then unknown keys allowed); ``ts``, ``dur`` and ``args`` as
    their raw text (``msgspec.Raw``): times are converted exactly in bulk, ``args`` is
    written as it is."""
    value = Any if levels is None else _json_value(levels)
    fields = [(name, msgspec.Raw, _NO_RAW) if name in _RAW_FIELDS else (name, value, None) for name in _FIELDS]
    return msgspec.defstruct(f"Event{levels}", fields, forbid_unknown_fields=levels is not None, gc=False)


def _entries_of(struct: type, levels: int | None) -> Any:
    """An entry of the event array: an event, or anything else (dropped, counted)."""
    # GenericAlias(list, (t,)) is list[t] for a t built at run time
    other_list = (
        list if levels is None else GenericAlias(list, (_json_value(max(levels - 1, 0)),)) if levels else list[None]
    )
    return Union[struct, other_list, str, int, float, bool, None]  # noqa: UP007  as in _json_value


_DECODERS: dict[int | None, msgspec.json.Decoder] = {}
_ALL_STRUCTS: set[type] = set()


def _decoder(levels: int | None) -> msgspec.json.Decoder:
    """The decoder for chunks: bounded ``levels`` (the fast lane) or any JSON (``None``,
    the slow lane); built once per kind (bounded types take milliseconds to build)."""
    if levels not in _DECODERS:
        struct = _event_struct(levels)
        _ALL_STRUCTS.add(struct)
        _DECODERS[levels] = msgspec.json.Decoder(GenericAlias(list, (_entries_of(struct, levels),)))
    return _DECODERS[levels]


GENERIC = msgspec.json.Decoder()
_FORMAT = msgspec.json.format

_BYTE_OFFSET = re.compile(r"\(byte (\d+)\)")


def decode_chunk(
    data: bytes, offset: int, limits: ReadLimits, depth: int, levels: int, base: int = 0, use_compiled: bool = False
) -> tuple[list[Any] | compiled.Parsed, bool]:
    """(entries, whether the slow lane took it) of ``[`` + events + ``]`` starting at
    ``offset`` in the file's text. Raises ``WrongCut`` when the text is cut inside an
    event, ``Undecodable`` for what msgspec refuses, ``FallbackToIjson`` for a bound.

    With ``use_compiled`` the C parser reads the chunk first (``compiled.parse``: its rows
    as columns, ``base`` added to the times); a chunk it declines is decoded as below.

    The fast lane's types prove the nesting bound (see ``CERTIFIED_LEVELS``); a chunk no
    longer than the string and event bounds cannot hold a string or an event beyond
    them. Anything else is checked by the structural scan. (``args`` is raw text that the
    types do not see: the builder checks its nesting, see ``Builder._args_columns``.)

    The text is first made compact (``msgspec.json.format``, in C: whitespace outside
    strings removed, every token as written), so that each raw value is the compact
    source text the ``args`` column keeps.
    """
    if use_compiled:
        try:
            parsed = compiled.parse(
                data, limits.max_depth - depth, limits.max_string_bytes, limits.max_event_bytes, base
            )
        except compiled.CutInsideEvent:
            raise WrongCut from None
        if isinstance(parsed, compiled.Parsed):
            return parsed, False
    slow = False
    compact = data
    try:
        compact = _FORMAT(data, indent=-1)
        entries = _decoder(levels).decode(compact)
    except msgspec.ValidationError:
        # deep nesting, unknown keys, an entry that is not an object: decode every byte
        # into plain values first, which checks what msgspec only skips (an unknown key's
        # value is not checked for UTF-8, where ijson fails the file); then into structs
        slow = True
        try:
            GENERIC.decode(data)
            entries = _decoder(None).decode(compact)
        except msgspec.DecodeError as e:
            _classify(e, data, offset)
        except UnicodeDecodeError as e:
            raise Undecodable(f"invalid UTF-8 ({e.reason})") from None
        except RecursionError:
            raise FallbackToIjson("nesting deeper than the fast decoder follows") from None
    except msgspec.DecodeError as e:
        _classify(e, data, offset)
    except UnicodeDecodeError as e:  # text that is not UTF-8: ijson says where
        raise Undecodable(f"invalid UTF-8 ({e.reason})") from None
    except RecursionError:
        raise FallbackToIjson("nesting deeper than the fast decoder follows") from None
    if slow or len(data) - 2 > min(limits.max_string_bytes, limits.max_event_bytes):
        scanner = StructureScanner(limits, depth, offset=offset + 1, depth=depth - 1)
        scanner.feed(data[1:-1])
        if scanner.violation is not None:
            raise FallbackToIjson(f"a bound is exceeded ({scanner.violation.kind})")
    return entries, slow


def _classify(e: msgspec.DecodeError, data: bytes, offset: int) -> None:
    """A decode error at the appended ']' (or a truncation) is a wrong cut; earlier, a
    problem in the text itself."""
    msg = str(e)
    m = _BYTE_OFFSET.search(msg)
    if "truncated" in msg or (m is not None and int(m.group(1)) >= len(data) - 1):
        raise WrongCut
    raise Undecodable(f"msgspec cannot decode the text near byte {offset + (int(m.group(1)) if m else 0)}: {msg}")


class WrongCut(Exception):
    """A cut guess fell inside an event."""


class Undecodable(Exception):
    """msgspec refused the text before the end of a chunk: invalid JSON, or text after
    the event array; the structural scan decides which."""


def raw_value(raw: msgspec.Raw) -> Any:
    """The value ijson (``use_float=False``) gives for this JSON text; None if absent.

    A raw value's text was only skipped over by msgspec: decoding it here is also what
    checks that a string in it is valid UTF-8 (else the file goes to ijson, which fails it).
    """
    b = bytes(raw)
    if not b:
        return None
    try:
        value = GENERIC.decode(b)
    except (msgspec.DecodeError, UnicodeDecodeError) as e:
        raise FallbackToIjson(f"a ts or dur value that does not decode ({e})") from None
    if b[:1] in b"-0123456789":
        return Decimal(b.decode()) if (b"." in b or b"e" in b or b"E" in b) else int(b)
    return value


# ------------------------------------------------------------- args and promoted
def parsed_args(raw: msgspec.Raw) -> Any:
    """An args value from its raw text as the ijson reader has it (``Decimal`` for a
    fraction); ``None`` when absent. For B/E pairs, whose args are merged."""
    b = bytes(raw)
    if not b:
        return None
    try:
        return json.loads(b, parse_float=Decimal)
    except (ValueError, RecursionError) as e:  # UnicodeDecodeError is a ValueError
        raise FallbackToIjson(f"an args value that does not decode ({e})") from None


def raw_args(raw: msgspec.Raw) -> bytes | None:
    """An unmerged B's args as the text written (``EventBatch.add`` parses it for its
    promoted keys)."""
    return bytes(raw) or None


STRUCT_TYPES = _ALL_STRUCTS  # every event struct a decoder may produce
astuple = msgspec.structs.astuple  # an event's fields in _FIELDS order


def all_unset(obj: Any) -> bool:
    """Whether every field of a decoded event is absent or null (``{}`` looks so too)."""
    return all(v is None or (type(v) is msgspec.Raw and not len(v)) for v in msgspec.structs.astuple(obj))
