"""Numbers for people: a metric value in the unit a reader would pick.

``cclq metric`` prints values as the SQL gives them (6 significant digits, the metric's
own unit), so they can be compared to the digit; a report is read by people, and
``0.00590621 ratio`` or ``6.4448e-05 GB`` makes them count zeros. ``for_people`` turns a
value and its unit into three significant digits with a scaled unit: a fraction as a
percentage (``0.59 %``), bytes and rates with SI prefixes (``64.4 kB``, ``1.2 GB/s``),
seconds as ms / µs / ns (``16 ms``), counts with thousands separators. The exact value
stays where a reader can get it (the page's tooltip, ``--format json``).
"""

from __future__ import annotations

import math

_SI = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""))
# unit -> (the value's scale in the base unit, the base unit) for SI-prefixed units
_SCALED = {
    "GB": (1e9, "B"),
    "GB/s": (1e9, "B/s"),
    "B/s": (1.0, "B/s"),
    "Bps": (1.0, "B/s"),
    "B": (1.0, "B"),
    "bytes": (1.0, "B"),
    "FLOP": (1.0, "FLOP"),
    "FLOP/s": (1.0, "FLOP/s"),
    "tokens/s": (1.0, "tokens/s"),
    "tokens": (1.0, "tokens"),
    "FLOP/token": (1.0, "FLOP/token"),
}
_SECONDS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}


def _digits(v: float) -> str:
    """Three significant digits, no exponent for everyday magnitudes, no trailing zeros."""
    if v == 0:
        return "0"
    if abs(v) >= 1000 or abs(v) < 0.001:
        return f"{v:.3g}"
    decimals = max(0, 2 - int(math.floor(math.log10(abs(v)))))
    text = f"{v:.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def _si(v: float, base: str) -> tuple[str, str]:
    for factor, prefix in _SI:
        if abs(v) >= factor * 0.9995:
            return _digits(v / factor), prefix + base
    return _digits(v), base


def for_people(value: float, unit: str) -> tuple[str, str]:
    """(number, unit) for a reader: ``for_people(0.00590621, "ratio") == ("0.59", "%")``."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return ("n/a" if value is None else str(value)), unit
    if unit == "ratio":
        if 0 <= abs(value) <= 1:
            return _digits(value * 100), "%"
        return _digits(value), "×"
    if unit == "percent":
        return _digits(value), "%"
    if unit in _SECONDS:
        s = value * _SECONDS[unit]
        if s == 0:
            return "0", "s"
        for factor, name in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns")):
            if abs(s) >= factor * 0.9995 or name == "ns":
                return _digits(s / factor), name
    if unit in _SCALED:
        scale, base = _SCALED[unit]
        return _si(value * scale, base)
    if unit == "count" or unit == "rank":
        return (f"{int(value):,}" if float(value).is_integer() else _digits(value)), unit
    return _digits(value), unit


def people_text(value: float, unit: str) -> str:
    """``for_people`` as one string: ``0.59 %``, ``64.4 kB``, ``16 ms``, ``rank 7`` for a rank."""
    number, shown = for_people(value, unit)
    return f"rank {number}" if unit == "rank" else f"{number} {shown}"
