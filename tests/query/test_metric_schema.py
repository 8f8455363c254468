"""One schema per metric version, whatever the batch: a metric computed alone, and the
same metric in a batch where the catalog rules it out for every trace (its SQL never
runs), have the same column names and types. Before, a ruled-out metric had only the six
common columns (the horovod_* metrics: 6 columns in a batch, 12-15 alone)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cclq.ingest.run import ingest
from cclq.query.metrics import catalog_rows, run_metric, run_metrics
from cclq.query.registry import latest_specs
from cclq.query.session import connect
from cclq.store.warehouse import Warehouse
from cclq.synth.kineto import generate_workload

pytestmark = pytest.mark.slow  # (CONTRIBUTING.md: over ~2 s each)


@pytest.fixture(scope="module")
def wh(tmp_path_factory: pytest.TempPathFactory) -> Warehouse:
    root = tmp_path_factory.mktemp("schema")
    generate_workload(root / "traces" / "synth_2rank", ranks=2, steps=2, layers=2)
    wh = Warehouse(root / "wh")
    report = ingest([root / "traces"], wh, jobs=1)
    assert not report.failed
    return wh


def test_every_metric_has_one_schema_alone_and_in_a_batch(wh: Warehouse) -> None:
    specs = latest_specs()
    with connect(wh, cache=False) as session:
        batch = run_metrics(session, specs, plan_first=True, empty_columns=True)
    ruled_out = [name for name, run in batch.items() if run.table is None and run.not_applicable]
    assert {"horovod_straggler", "horovod_phase_share"} <= set(ruled_out)  # a Kineto trace: no Horovod
    checked = 0
    with connect(wh, cache=False) as session:  # each metric alone, as `cclq metric NAME` runs it
        for spec in specs:
            run = batch[spec.name]
            in_batch = run.table if run.table is not None else catalog_rows(run) if run.not_applicable else None
            assert in_batch is not None, f"{spec.name}: {run.error}"
            alone = run_metric(session, spec)
            assert in_batch.schema.names == alone.schema.names, spec.name
            assert [f.type for f in in_batch.schema] == [f.type for f in alone.schema], spec.name
            checked += 1
    assert checked == len(specs) > 50
    horovod = catalog_rows(batch["horovod_straggler"])
    assert horovod.num_columns > 6 and horovod.column("value").null_count == horovod.num_rows


def test_a_ruled_out_metric_keeps_the_catalogs_reason(wh: Warehouse, tmp_path: Path) -> None:
    with connect(wh, cache=False) as session:
        run = run_metrics(
            session, [s for s in latest_specs() if s.name == "horovod_straggler"], plan_first=True, empty_columns=True
        )["horovod_straggler"]
    table = catalog_rows(run)
    assert table.column("trace").to_pylist() == ["synth_2rank"]
    assert table.column("reason").to_pylist() == list(run.not_applicable.values())
    assert table.column("unit").to_pylist() == [run.spec.unit]


@pytest.fixture(scope="module")
def wh_two(tmp_path_factory: pytest.TempPathFactory) -> Warehouse:
    """Two traces of different shapes: two partitions on the cluster, combined."""
    root = tmp_path_factory.mktemp("schema_two")
    generate_workload(root / "traces" / "synth_2rank", ranks=2, steps=2, layers=2)
    generate_workload(root / "traces" / "synth_1rank", ranks=1, steps=3, layers=1)
    wh = Warehouse(root / "wh")
    report = ingest([root / "traces"], wh, jobs=1)
    assert not report.failed
    return wh


def test_every_metric_has_one_schema_under_dask(wh_two: Warehouse) -> None:
    """Every metric computed on a Dask cluster (a LocalCluster of two worker processes, by
    two trace partitions whose parts are combined) has the column names and types of the
    same batch computed here (which are a metric's alone: the test above)."""
    pytest.importorskip("distributed", reason="dask is not installed (the dask extra)")
    from cclq.query.dask import run_metrics_on_dask

    specs = latest_specs()
    with connect(wh_two, cache=False) as session:
        on_dask = run_metrics_on_dask(session, specs, None, "local:2", partitions=2)
        batch = run_metrics(session, specs)
    checked = 0
    for spec in specs:
        there, here = on_dask[spec.name], batch[spec.name]
        assert there.table is not None and here.table is not None, f"{spec.name}: {there.error} / {here.error}"
        assert there.table.schema.names == here.table.schema.names, spec.name
        assert [f.type for f in there.table.schema] == [f.type for f in here.table.schema], spec.name
        checked += 1
    assert checked == len(specs) > 50
