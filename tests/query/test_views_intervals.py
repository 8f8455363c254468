"""The interval macros (sql/views/intervals.sql) against a brute-force set computation.

`intervals_overlay` runs ONE running sum over all timelines at once (it relies on every
timeline's +1/-1 summing to zero), so the cases mix several traces, ranks and keys whose
times interleave, plus touching, nested, duplicate and zero-length intervals.
"""

from __future__ import annotations

import random

import duckdb
import pytest

from cclq.query.sqlfiles import view_modules

Interval = tuple[str, int, int, int, int]  # trace, rank, key, ts_ns, end_ns


def _connection() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    (intervals,) = [m for m in view_modules() if m.name == "intervals"]
    con.execute(intervals.sql)
    return con


def _load(con: duckdb.DuckDBPyConnection, name: str, rows: list[Interval]) -> None:
    con.execute(
        f"CREATE OR REPLACE TABLE {name} (trace VARCHAR, rank INTEGER, key INTEGER, ts_ns BIGINT, end_ns BIGINT)"
    )
    if rows:
        con.executemany(f"INSERT INTO {name} VALUES (?, ?, ?, ?, ?)", rows)


def _covered(rows: list[Interval]) -> dict[tuple[str, int, int], set[int]]:
    """Every covered nanosecond of each timeline (times are small, so sets are fine)."""
    out: dict[tuple[str, int, int], set[int]] = {}
    for trace, rank, key, ts, end in rows:
        out.setdefault((trace, rank, key), set()).update(range(ts, end))
    return out


def _random_intervals(rng: random.Random, n: int) -> list[Interval]:
    rows = []
    for _ in range(n):
        ts = rng.randrange(0, 2000)
        rows.append(
            (rng.choice(["a", "b"]), rng.randrange(3), rng.randrange(2), ts, ts + rng.choice([0, 1, 5, 40, 300]))
        )
    return rows


@pytest.mark.parametrize("seed", range(6))
def test_union_intersect_subtract_match_brute_force(seed):
    rng = random.Random(seed)
    a, b = _random_intervals(rng, 400), _random_intervals(rng, 400)
    a += a[:10]  # exact duplicates
    con = _connection()
    _load(con, "a", a)
    _load(con, "b", b)
    cov_a, cov_b = _covered(a), _covered(b)
    keys = sorted(set(cov_a) | set(cov_b))

    def totals(sql: str) -> dict[tuple[str, int, int], int]:
        return {
            (t, r, k): n
            for t, r, k, n in con.execute(
                f"SELECT trace, rank, key, sum(end_ns - ts_ns) FROM {sql} GROUP BY ALL"
            ).fetchall()
        }

    want_union = {k: len(cov_a.get(k, ())) for k in keys if cov_a.get(k)}
    want_both = {k: len(cov_a.get(k, set()) & cov_b.get(k, set())) for k in keys}
    want_a_only = {k: len(cov_a.get(k, set()) - cov_b.get(k, set())) for k in keys}
    assert totals("intervals_union(a)") == want_union
    assert totals("intervals_intersect(a, b)") == {k: v for k, v in want_both.items() if v}
    assert totals("intervals_subtract(a, b)") == {k: v for k, v in want_a_only.items() if v}
    # merged intervals never overlap or touch within a timeline
    rows = con.execute("SELECT trace, rank, key, ts_ns, end_ns FROM intervals_union(a) ORDER BY ALL").fetchall()
    for prev, cur in zip(rows, rows[1:]):
        if prev[:3] == cur[:3]:
            assert cur[3] > prev[4]


def test_union_by_hand():
    con = _connection()
    _load(
        con, "a", [("t", 0, 0, 0, 10), ("t", 0, 0, 5, 15), ("t", 0, 0, 15, 16), ("t", 0, 0, 20, 30), ("t", 1, 0, 3, 4)]
    )
    assert con.execute("SELECT * FROM intervals_union(a) ORDER BY ALL").fetchall() == [
        ("t", 0, 0, 0, 16),
        ("t", 0, 0, 20, 30),
        ("t", 1, 0, 3, 4),
    ]
