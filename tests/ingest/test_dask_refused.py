"""A `--dask` ingest refused because a worker cannot see the warehouse commits nothing
(issue 39: it left a snapshot holding the workload's card row and no file of it).
Skipped without the ``dask`` extra."""

from __future__ import annotations

from pathlib import Path

import pytest

from cclq.errors import UsageError
from cclq.ingest.run import ingest
from cclq.store.warehouse import Warehouse
from cclq.synth.kineto import generate_workload

pytestmark = pytest.mark.slow  # (CONTRIBUTING.md: over ~2 s each)


def test_an_ingest_refused_by_its_workers_commits_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    pytest.importorskip("distributed")
    import cclq.ingest.dask as dist

    generate_workload(tmp_path / "in" / "a", ranks=2, steps=2, layers=1, seed=1)  # with a workload card
    wh = Warehouse(tmp_path / "wh")
    assert not ingest([tmp_path / "in" / "a"], wh, jobs=1).failed  # a warehouse with something in it
    generate_workload(tmp_path / "in" / "b", ranks=2, steps=2, layers=1, seed=2)
    with wh.open_snapshot() as snap:
        before = (snap.id, {name: table.to_pylist() for name, table in snap.tables.items()})
    # what the workers see of the probe file is not what this process sees: as when the
    # warehouse is not on storage they share
    monkeypatch.setattr(dist, "_file_signature", lambda path: "what this process sees")
    with pytest.raises(UsageError, match="does not see the warehouse"):
        ingest([tmp_path / "in" / "b"], wh, jobs=1, dask="local:1")
    with wh.open_snapshot() as snap:
        after = (snap.id, {name: table.to_pylist() for name, table in snap.tables.items()})
    assert after == before  # no new snapshot: no card row of `b`, nothing else
    assert not any(wh.tmp_dir.iterdir())
