"""Compaction: fewer, larger data files, and not one query result changes."""

from __future__ import annotations

import math

import pytest
from helpers.cli import run_cli
from helpers.warehouse import query, run_ingest

import cclq.ingest.run
import cclq.store.compaction as compaction
from cclq.query.metrics import run_metrics
from cclq.query.registry import latest_specs
from cclq.query.session import connect
from cclq.store.warehouse import Warehouse
from cclq.synth.kineto import KinetoTraceBuilder, generate_workload


def _workloads(root) -> None:
    for name, ranks in (("a", 4), ("b", 2)):
        generate_workload(root / name, ranks=ranks, steps=3, layers=2, seed=len(name) + ranks)


def _same(a, b) -> bool:
    """Equal, floats to 1e-9 relative: a float sum's last bits follow the order DuckDB's
    threads add rows in, which the file layout changes (so does a second run)."""
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def _one_file_each(monkeypatch) -> None:
    """Ingest as it was before groups of small files: a data file per input file, and no
    compaction after it (undone by ``monkeypatch.undo()``)."""
    _ungrouped(monkeypatch)
    monkeypatch.setattr(compaction.plan, "__defaults__", (None, 10**6, compaction.SMALL_ROWS))


def _ungrouped(monkeypatch) -> None:
    """Every input file parsed alone into its own data files (no ``parse_group``)."""
    monkeypatch.setattr(cclq.ingest.run, "SMALL_FILE_BYTES", 0)


def _data_files(wh: Warehouse) -> int:
    return query(wh, "SELECT count(DISTINCT path) FROM parts WHERE table_name = 'events'")[0][0]


@pytest.mark.slow
def test_ingest_compacts_traces_of_many_small_files_and_no_metric_moves(tmp_path, monkeypatch):
    _workloads(tmp_path / "in")
    plain, compacted = Warehouse(tmp_path / "plain"), Warehouse(tmp_path / "compacted")
    grouped = Warehouse(tmp_path / "grouped")
    _one_file_each(monkeypatch)
    run_ingest([tmp_path / "in"], plain)
    monkeypatch.undo()
    _ungrouped(monkeypatch)
    report = run_ingest([tmp_path / "in"], compacted)
    monkeypatch.undo()
    # a's 4 rank files become one; b's 2 stay, under MIN_FILES (4)
    assert _data_files(plain) == 6 and _data_files(compacted) == 3
    assert [(c.trace, c.files_before, c.files_after) for c in report.compacted if c.table == "events"] == [("a", 4, 1)]
    # small files parsed in groups: one data file per trace from the start, nothing to compact
    report = run_ingest([tmp_path / "in"], grouped, jobs=2)
    assert _data_files(grouped) == 2 and report.compacted == []
    # every row, every column
    rows = "SELECT * FROM events ORDER BY trace, rank, file_id, event_idx"
    assert query(plain, rows) == query(compacted, rows) == query(grouped, rows)
    # every metric, every row and column (each warehouse's metrics in one batch, as a
    # report runs them: 84 metrics one by one took ~100 s of the slow tier)
    specs = latest_specs()
    runs = [run_metrics(connect(w), specs) for w in (plain, compacted, grouped)]
    for spec in specs:
        assert not [r[spec.name].error for r in runs if r[spec.name].error], spec.label
        before, after, third = (r[spec.name].table.to_pylist() for r in runs)
        assert _same(before, after) and _same(before, third), spec.label


def test_a_changed_file_of_a_compacted_trace_leaves_no_old_rows(tmp_path, wh):
    root = tmp_path / "w"
    for r in range(4):
        b = KinetoTraceBuilder(rank=r, world_size=4)
        b.kernel("gemm", 0, 1_000 * (r + 1))
        b.write(root / f"rank{r}.json")
    run_ingest([root], wh)
    assert _data_files(wh) == 1
    b = KinetoTraceBuilder(rank=2, world_size=4)
    for i in range(3):
        b.kernel("gemm", i * 10_000, 7_000)
    b.write(root / "rank2.json")
    (root / "rank3.json").unlink()
    report = run_ingest([root], wh)
    assert sorted(o.status for o in report.outcomes) == ["ingested", "removed", "unchanged", "unchanged"]
    assert query(wh, "SELECT rank, count(*), sum(dur_ns) FROM kernels GROUP BY rank ORDER BY rank") == [
        (0, 1, 1_000),
        (1, 1, 2_000),
        (2, 3, 21_000),
    ]
    # and the data files on disk are exactly the snapshot's
    on_disk = sorted(p.relative_to(wh.root).as_posix() for p in (wh.root / "events").rglob("*.parquet"))
    assert on_disk == [
        p for (p,) in query(wh, "SELECT DISTINCT path FROM parts WHERE table_name = 'events' ORDER BY path")
    ]


def test_a_reader_keeps_its_files_while_a_compaction_commits(tmp_path, wh, monkeypatch):
    _one_file_each(monkeypatch)
    _workloads(tmp_path / "in")
    run_ingest([tmp_path / "in"], wh)
    monkeypatch.undo()
    reader = connect(wh)
    before = reader.execute("SELECT trace, count(*), sum(dur_ns) FROM events GROUP BY trace ORDER BY trace").fetchall()
    result = run_cli("compact", "-w", str(wh.root), "-f", "csv")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == "trace,table,files_before,files_after,rows"
    assert _data_files(wh) == 2
    # the old snapshot's files are still there for the open connection
    assert (
        reader.execute("SELECT trace, count(*), sum(dur_ns) FROM events GROUP BY trace ORDER BY trace").fetchall()
        == before
    )
    assert query(wh, "SELECT trace, count(*), sum(dur_ns) FROM events GROUP BY trace ORDER BY trace") == before
    nothing = run_cli("compact", "-w", str(wh.root))
    assert nothing.returncode == 0 and "nothing to compact" in nothing.stderr


@pytest.mark.parametrize("target_rows", [100, 1_000, 10**9])
def test_large_traces_compact_into_several_files(tmp_path, wh, monkeypatch, target_rows):
    _one_file_each(monkeypatch)
    _workloads(tmp_path / "in")
    run_ingest([tmp_path / "in"], wh)
    monkeypatch.undo()
    per_file = query(wh, "SELECT DISTINCT rows FROM parts WHERE trace = 'a' AND table_name = 'events'")
    assert len(per_file) == 1  # the generator's 4 ranks are the same size: n rows each
    n = per_file[0][0]
    # whole input files per compacted file: as many as fit in target_rows, at least one
    expected = math.ceil(4 / max(1, target_rows // n))
    done = compaction.compact(wh, traces=["a"], target_rows=target_rows)
    files = query(wh, "SELECT count(DISTINCT path) FROM parts WHERE trace = 'a' AND table_name = 'events'")[0][0]
    assert files == expected
    assert query(wh, "SELECT count(*) FROM events WHERE trace = 'a'") == [(4 * n,)]
    assert [(c.trace, c.files_after) for c in done if c.table == "events"] == [("a", expected)]


def test_compaction_in_two_processes_writes_what_one_process_writes(tmp_path, monkeypatch):
    _workloads(tmp_path / "in")
    one, two = Warehouse(tmp_path / "one"), Warehouse(tmp_path / "two")
    _one_file_each(monkeypatch)  # ingest leaves them
    run_ingest([tmp_path / "in"], one)
    run_ingest([tmp_path / "in"], two)
    monkeypatch.undo()
    serial = compaction.compact(one, jobs=1)
    parallel = compaction.compact(two, jobs=2)
    assert [(c.trace, c.files_before, c.files_after, c.rows) for c in serial] == [
        (c.trace, c.files_before, c.files_after, c.rows) for c in parallel
    ]
    assert {c.trace for c in parallel} == {"a", "b"}  # two groups: the pool's path
    assert _data_files(one) == _data_files(two) == 2
    rows = "SELECT * EXCLUDE (file_id) FROM events ORDER BY trace, rank, event_idx"
    assert query(one, rows) == query(two, rows)
    assert query(two, "SELECT count(*) FROM events") == [(sum(c.rows for c in parallel if c.table == "events"),)]


def test_a_compacted_file_is_written_in_full_row_groups_one_group_at_a_time(tmp_path, wh, monkeypatch):
    import pyarrow.parquet as pq

    _workloads(tmp_path / "in")
    _one_file_each(monkeypatch)
    run_ingest([tmp_path / "in"], wh)
    monkeypatch.undo()
    monkeypatch.setattr(compaction, "ROW_GROUP_ROWS", 100)  # streamed in batches of 25 rows
    (done,) = [c for c in compaction.compact(wh, traces=["a"], jobs=1) if c.table == "events"]
    (path,) = [p for (p,) in query(wh, "SELECT DISTINCT path FROM parts WHERE trace = 'a' AND table_name = 'events'")]
    meta = pq.ParquetFile(wh.root / path).metadata
    sizes = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
    assert sum(sizes) == done.rows > 200
    assert all(n == 100 for n in sizes[:-1]) and 0 < sizes[-1] <= 100
