"""HTA's critical path graph (`hta_critical_path_edges`) stays linear in a rank's rows when
the rows come from a table, as in a board's batch (the shared `hta_events`) and in
`cclq.TraceAnalysis` (the pinned one). Each lookup of a row of the rank is one row-valued
key, `(rk, event_idx) = (...)`: written as two equalities, DuckDB derived `rk = rk` between
the lookups of a kernel's two ends and joined those first, every node of the rank with
every other (MTIA's trace: 45k x 45k rows, a board spilling 77 GB until the disk was full;
issue 41)."""

from __future__ import annotations

import pytest
from helpers.plans import profiled
from helpers.warehouse import run_ingest

from cclq.query.session import connect
from cclq.store.warehouse import Warehouse
from cclq.synth.kineto import generate_workload


# (ranks, steps, layers): the first two gave the quadratic plan before (1.7M rows joined
# for 1,041 HTA rows), the third did not
@pytest.mark.parametrize(("ranks", "steps", "layers"), [(1, 1, 40), (1, 3, 40), (2, 1, 100)])
def test_the_graph_of_a_step_joins_no_row_of_a_rank_with_every_other(tmp_path, ranks, steps, layers):
    generate_workload(tmp_path / "in" / "ddp", ranks=ranks, steps=steps, layers=layers)
    wh = Warehouse(tmp_path / "wh")
    run_ingest([tmp_path / "in"], wh)
    session = connect(wh)
    # what a batch does with a view several metrics read: its rows in a table, shadowed
    session.execute("CREATE TABLE memory.main.hta_rows AS SELECT * FROM hta_events")
    session.execute("CREATE TEMP VIEW hta_events AS SELECT * FROM memory.main.hta_rows")
    events = session.execute("SELECT count(*) FROM hta_events").fetchone()[0]
    rows, ops = profiled(
        session,
        "SELECT rank, count(*), count(DISTINCT dst_node) FROM hta_critical_path_edges GROUP BY rank ORDER BY rank",
        tmp_path / "profile.json",
    )
    assert [r[0] for r in rows] == list(range(ranks)) and all(edges > 100 for _, edges, _ in rows)
    joins = [op for op in ops if "JOIN" in op["name"]]
    assert joins
    # each join gives at most a row per row of the ranks (a edge, a node, a queue point)
    assert max(op["intermediate_rows"] for op in joins) <= 2 * events
