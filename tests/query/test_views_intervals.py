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


def test_union_keeps_a_null_in_the_timeline_as_a_timeline_of_its_own():
    """The windows run over a number per (trace, rank, key) (timeline_numbers), joined
    back with IS NOT DISTINCT FROM: a NULL key or trace is one timeline, as a window
    partition makes it, not a row that joins nothing."""
    con = _connection()
    _load(con, "a", [("t", 0, None, 0, 10), ("t", 0, None, 5, 12), ("t", 0, 1, 0, 3), (None, 0, 1, 4, 6)])
    got = set(con.execute("SELECT * FROM intervals_union(a)").fetchall())
    assert got == {("t", 0, None, 0, 12), ("t", 0, 1, 0, 3), (None, 0, 1, 4, 6)}


# intervals_in_windows: (trace, rank, item_id, ts_ns, end_ns) items and (trace, rank, step,
# window_start, window_end) windows -> one row per overlapping pair (issue 42)
Item = tuple[str, int, int, int | None, int | None]
Window = tuple[str, int, int, int | None, int | None]


def _pairs_by_hand(items: list[Item], windows: list[Window]) -> list[tuple]:
    """The plain join, in Python: ts < window_end AND end > window_start, NULLs never match."""
    return sorted(
        (trace, rank, i, ts, end, step, ws, we)
        for trace, rank, i, ts, end in items
        for wt, wr, step, ws, we in windows
        if (wt, wr) == (trace, rank) and None not in (ts, end, ws, we) and ts < we and end > ws
    )


def _pairs_in_sql(items: list[Item], windows: list[Window], profile: str | None = None) -> list[tuple]:
    from cclq.query.engine import CONNECTION_SETTINGS

    con = _connection()
    for setting in CONNECTION_SETTINGS:
        con.execute(setting)
    con.execute("CREATE TABLE items (trace VARCHAR, rank INTEGER, item_id INTEGER, ts_ns BIGINT, end_ns BIGINT)")
    con.execute("CREATE TABLE wins (trace VARCHAR, rank INTEGER, step INTEGER, window_start BIGINT, window_end BIGINT)")
    if items:
        con.executemany("INSERT INTO items VALUES (?, ?, ?, ?, ?)", items)
    if windows:
        con.executemany("INSERT INTO wins VALUES (?, ?, ?, ?, ?)", windows)
    if profile:
        con.execute("PRAGMA enable_profiling = 'json'")
        con.execute(f"PRAGMA profiling_output = '{profile}'")
    rows = con.execute(
        "SELECT trace, rank, item_id, ts_ns, end_ns, step, window_start, window_end "
        "FROM intervals_in_windows(items, wins)"
    ).fetchall()
    return sorted(rows)


def _random_windows(rng: random.Random, trace: str, rank: int, kind: str) -> list[Window]:
    out: list[Window] = []
    t = rng.randint(0, 5)
    for step in range(rng.randint(1, 12)):
        length = rng.choice([0, 1, 3, 7, 12])  # empty windows too
        if kind == "staggered":  # overlapping, ends in start order
            out.append((trace, rank, step, t, t + length + 5))
            t += rng.randint(0, 4)  # equal starts too
        elif kind == "nested":  # a window inside another: the plain join's branch
            out.append((trace, rank, step, t, t + length))
            if step == 1:
                out.append((trace, rank, 100, t - 1, t + length + 30))
            t += length + rng.randint(0, 3)
        else:  # sequential, touching or with gaps
            out.append((trace, rank, step, t, t + length))
            t += length + rng.randint(0, 3)
    return out


@pytest.mark.parametrize("seed", range(30))
def test_intervals_in_windows_pairs_every_item_with_the_windows_it_overlaps(seed):
    rng = random.Random(seed)
    items: list[Item] = []
    windows: list[Window] = []
    n = 0
    for trace in ("a", "b"):
        for rank in (0, 1, 2):
            if rank != 2:  # rank 2: items and no window
                windows += _random_windows(rng, trace, rank, rng.choice(["sequential", "staggered", "nested"]))
            for _ in range(rng.randint(0, 40)):
                ts = rng.randint(-5, 90)
                items.append((trace, rank, n, ts, ts + rng.choice([0, 1, 2, 5, 20, 60])))
                n += 1
    items += [("a", 0, n, None, 5), ("a", 0, n + 1, 3, None)]
    windows += [("a", 1, 999, None, 50), ("b", 0, 998, 10, None)]
    assert _pairs_in_sql(items, windows) == _pairs_by_hand(items, windows)


def test_intervals_in_windows_does_not_pair_every_item_with_every_window(tmp_path):
    """One rank, 4,000 items and 1,000 sequential windows: a join on (trace, rank) with
    the times as residuals (what compute_comm_overlap and scale_up_bw_utility wrote)
    compares all 4 M pairs, though it gives only the 5 k that match; here that join is
    left to ranks whose windows nest, and gets no row."""
    from helpers.plans import operators

    windows = [("t", 0, s, s * 100, s * 100 + 90) for s in range(1000)]
    items = [("t", 0, i, i * 25, i * 25 + 30) for i in range(4000)]
    profile = tmp_path / "profile.json"
    rows = _pairs_in_sql(items, windows, str(profile))
    assert rows == _pairs_by_hand(items, windows)
    import json

    ops = operators(json.loads(profile.read_text()))
    assert any(op["name"] == "ASOF_JOIN" and op["intermediate_rows"] > 0 for op in ops)
    residual = [
        op
        for op in ops
        if "JOIN" in op["name"]
        and op["name"] != "ASOF_JOIN"
        and any(c in json.dumps(op.get("extra_info", {})) for c in ("ts_ns < window_end", "window_end > ts_ns"))
    ]
    assert residual  # the plain join is in the plan (for nesting windows) ...
    assert sum(op["intermediate_rows"] for op in residual) == 0  # ... and meets none of these
