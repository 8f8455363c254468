"""Report numbers for people (cclq.present.units): the unit a reader would pick, three
significant digits; the expected strings are worked out by hand from the values."""

from __future__ import annotations

import pytest

from cclq.present.units import for_people, people_text


@pytest.mark.parametrize(
    ("value", "unit", "text"),
    [
        (0.00590621, "ratio", "0.591 %"),  # 0.590621 %, three digits
        (0.813564, "ratio", "81.4 %"),
        (1.0, "ratio", "100 %"),
        (4.66161, "ratio", "4.66 ×"),  # not a fraction (max / mean): a factor
        (6.4448e-05, "GB", "64.4 kB"),  # 64,448 bytes
        (153.2, "GB/s", "153 GB/s"),
        (0.0021, "GB/s", "2.1 MB/s"),
        (0.0160078, "s", "16 ms"),
        (0.00225, "s", "2.25 ms"),
        (2.5e-06, "s", "2.5 µs"),
        (123456.0, "us", "123 ms"),  # 0.123456 s
        (12.0, "s", "12 s"),
        (0.0, "s", "0 s"),
        (3.2e12, "FLOP/s", "3.2 TFLOP/s"),
        (12.3456, "percent", "12.3 %"),
        (2244.0, "count", "2,244 count"),
        (7.0, "rank", "rank 7"),
        (1e-12, "s/byte", "1e-12 s/byte"),  # a unit it does not know: three digits, the unit as is
    ],
)
def test_people_text(value: float, unit: str, text: str):
    assert people_text(value, unit) == text


def test_for_people_splits_number_and_unit():
    assert for_people(0.00590621, "ratio") == ("0.591", "%")
    assert for_people(6.4448e-05, "GB") == ("64.4", "kB")
    assert for_people(float("nan"), "s") == ("nan", "s")
