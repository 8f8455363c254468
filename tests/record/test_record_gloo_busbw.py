"""A recorded Gloo sweep gives bus bandwidth per message size (issue #25, item 6).

`cclq record` runs an all-gather sweep on Gloo (2 ranks, 2 message sizes, no GPU), `cclq
ingest` takes it, and `collective_busbw` must equal what this test works out from the raw
JSON of the trace files alone: on a rank without GPU communication kernels the backend's
`gloo:all_gather` records are the collectives, their `dur` the communication time, the
message nccl-tests' all-gather size (the gathered output: the record's input x the group
size) and the bus factor (n-1)/n (nccl-tests, doc/PERFORMANCE.md). Needs torch; skipped
without it."""

from __future__ import annotations

import csv
import io
import json
import statistics
from decimal import Decimal
from importlib.util import find_spec
from pathlib import Path

import pytest
from helpers.cli import run_cli

pytestmark = pytest.mark.slow  # (CONTRIBUTING.md: over ~2 s each)

SIZES = (4096, 1 << 20)  # bytes of the gathered tensor
ITERATIONS, WARMUPS, RANKS, ELEM = 3, 1, 2, 4  # float32


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> dict:
    if find_spec("torch") is None:
        pytest.skip("torch is not installed (pip install -e '.[record]')")
    root = tmp_path_factory.mktemp("gloo_sweep")
    cfg = root / "config.json"
    cfg.write_text(
        json.dumps(
            {
                "benchmark": {
                    "primitive": "all_gather",
                    "message_bytes": list(SIZES),
                    "dtype": "float32",
                    "num_iterations": ITERATIONS,
                    "num_warmups": WARMUPS,
                    "implementations": {"pytorch": [{"backend": "gloo"}]},
                }
            }
        )
    )
    out, wh = root / "out", root / "wh"
    rec = run_cli("record", str(cfg), "-o", str(out), "--nproc", str(RANKS), "-f", "csv")
    assert rec.returncode == 0, rec.stderr
    ingest = run_cli("ingest", str(out), "-w", str(wh), "-q")
    assert ingest.returncode == 0, ingest.stderr
    return {"out": out, "wh": wh}


def folder_of(size: int) -> str:
    return f"all_gather-pytorch-gloo-cpu-bytes{size}-float32-np{RANKS}"


def busbw_from_raw_json(folder: Path) -> tuple[list[int], list[float]]:
    """(message bytes, busbw GB/s) of every gloo:all_gather record of every rank file,
    read with the standard library: ts/dur as exact decimals of microseconds."""
    sizes, busbw = [], []
    for rank in range(RANKS):
        doc = json.loads((folder / f"kineto_trace_{rank}.json").read_text(), parse_float=Decimal)
        for event in doc["traceEvents"]:
            if event.get("ph") != "X" or event.get("name") != "gloo:all_gather":
                continue
            (dims,) = event["args"]["Input Dims"]  # this rank's shard
            assert event["args"]["Input type"] == ["float"]
            shard_elems = 1
            for d in dims:
                shard_elems *= d
            nbytes = shard_elems * ELEM * RANKS  # nccl-tests: all_gather counts the gathered output
            dur_ns = int(event["dur"] * 1000)  # Kineto: microseconds, ns precision
            sizes.append(nbytes)
            busbw.append(nbytes / dur_ns * ((RANKS - 1) / RANKS))  # bytes/ns = GB/s
    return sizes, busbw


def test_collective_busbw_per_message_size_is_bytes_over_gloo_duration(sweep):
    result = run_cli("metric", "collective_busbw", "--all", "-w", str(sweep["wh"]), "-f", "csv")
    assert result.returncode == 0, result.stderr
    rows = {r["trace"]: r for r in csv.DictReader(io.StringIO(result.stdout))}
    for size in SIZES:
        sizes, busbw = busbw_from_raw_json(sweep["out"] / folder_of(size))
        # the profiled iterations only, on each rank, each the size the config asked for
        assert sizes == [size] * (RANKS * ITERATIONS)
        row = rows[folder_of(size)]
        assert row["reason"] == "" and row["coll_type"] == "all_gather"
        assert (int(row["size_bucket"]), int(row["min_bytes"]), int(row["max_bytes"])) == (size, size, size)
        assert (int(row["collectives"]), int(row["ranks"])) == (RANKS * ITERATIONS, RANKS)
        assert float(row["value"]) == pytest.approx(statistics.median(busbw), rel=1e-12)
        assert float(row["mean_busbw_gbps"]) == pytest.approx(statistics.mean(busbw), rel=1e-12)


def test_the_collectives_say_they_come_from_the_cpu_backend(sweep):
    result = run_cli(
        "sql",
        "SELECT trace, source, coll_type, count(*) AS n, min(bytes) AS lo, max(bytes) AS hi, "
        "min(group_size) AS g FROM collectives GROUP BY ALL ORDER BY ALL",
        "-w",
        str(sweep["wh"]),
        "-f",
        "csv",
    )
    assert result.returncode == 0, result.stderr
    got = {(r["trace"], r["coll_type"]): r for r in csv.DictReader(io.StringIO(result.stdout))}
    for size in SIZES:
        gather = got[(folder_of(size), "all_gather")]
        assert (gather["source"], gather["n"], gather["lo"], gather["hi"], gather["g"]) == (
            "cpu_backend",
            str(RANKS * ITERATIONS),
            str(size),
            str(size),
            str(RANKS),
        )
    assert {r["source"] for r in got.values()} == {"cpu_backend"}  # no GPU here: nothing else
    # the other collective metrics answer too, from the same records
    for metric in ("collective_vol_allgather_gb", "straggler_rank", "collective_skew"):
        out = run_cli("metric", metric, "--all", "-w", str(sweep["wh"]), "-f", "csv")
        assert out.returncode == 0, out.stderr
        assert all(r["reason"] == "" for r in csv.DictReader(io.StringIO(out.stdout))), (metric, out.stdout)
    vol = run_cli("metric", "collective_vol_allgather_gb", "--all", "-w", str(sweep["wh"]), "-f", "csv")
    for r in csv.DictReader(io.StringIO(vol.stdout)):
        size = next(s for s in SIZES if r["trace"] == folder_of(s))
        assert float(r["value"]) == pytest.approx(ITERATIONS * size / 1e9)  # per rank, GB
