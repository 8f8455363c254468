"""``latest_enclosing`` (the ATen op that wraps each kernel launch) against a brute force
of HTA's own rule: of the ops with ``start <= ts`` and ``end >= ts + dur``, the one with
the latest start, the first in frame order among those starting together; none: -1."""

from __future__ import annotations

import random

import pytest


def _brute(starts: list[int], ends: list[int], q_start: int, q_end: int) -> int:
    best = -1
    for i, (s, e) in enumerate(zip(starts, ends)):
        if s <= q_start and e >= q_end and (best < 0 or s > starts[best]):
            best = i
    return best


@pytest.mark.parametrize("seed", range(40))
def test_random_intervals_match_the_brute_force(seed: int) -> None:
    np = pytest.importorskip("numpy")
    from cclq.api.hta_kernels import latest_enclosing

    rng = random.Random(seed)
    n = rng.choice([0, 1, 2, 7, 64, 300])
    span = rng.choice([10, 50, 1000])  # small spans: many equal starts and ends
    starts = [rng.randrange(span) for _ in range(n)]
    ends = [s + rng.randrange(span // 2 + 1) for s in starts]
    queries = [rng.randrange(span) for _ in range(200)]
    q_ends = [q + rng.randrange(span // 4 + 1) for q in queries]
    got = latest_enclosing(np.array(starts, np.int64), np.array(ends, np.int64), np.array(queries), np.array(q_ends))
    assert got.tolist() == [_brute(starts, ends, q, e) for q, e in zip(queries, q_ends)]


def test_a_hand_made_case() -> None:
    np = pytest.importorskip("numpy")
    from cclq.api.hta_kernels import latest_enclosing

    # op 0 [0, 100] wraps everything; ops 1 and 2 both start at 10 (1 ends at 20, 2 at 50);
    # op 3 [30, 40] is inside op 2
    starts, ends = np.array([0, 10, 10, 30]), np.array([100, 20, 50, 40])
    queries = np.array([5, 12, 12, 31, 31, 41, 150])
    q_ends = np.array([6, 15, 30, 35, 45, 49, 151])
    # 5-6: only op 0; 12-15: ops 1 and 2 start at 10, op 1 first in frame order; 12-30:
    # op 2 (op 1 ends too soon); 31-35: op 3; 31-45: op 2; 41-49: op 2; 150: none
    assert latest_enclosing(starts, ends, queries, q_ends).tolist() == [0, 1, 2, 3, 2, 2, -1]
