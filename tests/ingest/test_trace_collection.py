"""The sample workloads that ship in trace_collection/ ingest, and match the generator."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

from helpers.paths import REPO
from helpers.warehouse import query, run_ingest

from cclq.synth.kineto import generate_workload

SAMPLE = REPO / "trace_collection" / "synthetic_mlp_dp4"


def test_sample_workload_is_what_the_generator_makes(tmp_path: Path):
    fresh = generate_workload(tmp_path / "synthetic_mlp_dp4", ranks=4, steps=4, layers=4, seed=0, gz=True)

    def content(p: Path) -> bytes:  # traceName records where the file was written
        return re.sub(rb'"traceName": "[^"]*"', b"", gzip.decompress(p.read_bytes()))

    for path in fresh:
        assert content(SAMPLE / path.name) == content(path), path.name


def test_trace_collection_ingests(wh):
    report = run_ingest([REPO / "trace_collection"], wh)
    assert not report.failed
    assert query(wh, "SELECT trace, world_size, ranks_seen, phase, total_count FROM traces") == [
        ("synthetic_mlp_dp4", 4, 4, "training", 4)
    ]
    # 4 ProfilerStep annotations on every rank's CPU timeline
    rows = query(
        wh,
        "SELECT rank, count(*) FROM events WHERE cat = 'user_annotation' "
        "AND name LIKE 'ProfilerStep#%' GROUP BY rank ORDER BY rank",
    )
    assert rows == [(r, 4) for r in range(4)]
