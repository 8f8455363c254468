"""A warehouse on object storage against a local one (``cclq bench --s3 URL --traces DIR``).

The S3 endpoint and credentials come from the environment as for every cclq command
(``AWS_ENDPOINT_URL``, profiles). Each case is a separate ``cclq`` process, best of the
repeats: ingest of ``DIR`` into a fresh local warehouse against ingest of the same files
from ``URL/traces`` into a fresh ``URL/wh-<n>`` (an empty read-through cache: every
object downloaded, every data file uploaded); then a metric over every trace
(``--no-cache``: computed each time) over the local warehouse, over the S3 one with an
empty read-through cache (cold: the catalog and the data files fetched) and again with
the copies in the cache (warm: only ``CURRENT`` read).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import uuid
from pathlib import Path

from cclq.bench.first_run import Timed, timed_child
from cclq.store.objects import CACHE_ENV, ObjectStore


def _best(runs: list[Timed]) -> Timed:
    return min(runs, key=lambda r: r.wall_s)


def run_remote_bench(
    url: str, traces: Path, metric: str = "communication_overlap_ratio", repeats: int = 2
) -> list[dict]:
    """Rows of (case, local_s, s3_s, ratio)."""
    store = ObjectStore(url)
    files = [p for p in sorted(traces.rglob("*")) if p.is_file()]
    store.upload([(p, f"traces/{p.relative_to(traces).as_posix()}") for p in files])
    size_mb = sum(p.stat().st_size for p in files) / 2**20
    cclq = [sys.executable, "-m", "cclq"]
    scratch = Path(tempfile.mkdtemp(prefix="cclq-bench-s3-"))
    try:
        env = {**os.environ, "CCLQ_CACHE_DIR": str(scratch / "user-cache")}
        local_runs, s3_runs = [], []
        for i in range(max(repeats, 1)):
            local_runs.append(
                timed_child([*cclq, "ingest", "-q", str(traces), "-w", str(scratch / f"wh-{i}")], env=env)
            )
            cache = scratch / f"ingest-cache-{i}"
            s3_runs.append(
                timed_child(
                    [*cclq, "ingest", "-q", f"{url}/traces", "-w", f"{url}/wh-{uuid.uuid4().hex[:8]}"],
                    env={**env, CACHE_ENV: str(cache)},
                )
            )
        rows = [_row(f"ingest {size_mb:.1f} MB ({len(files)} files)", _best(local_runs), _best(s3_runs))]
        wh_local, wh_s3 = str(scratch / "wh-0"), f"{url}/wh-bench"
        timed_child(
            [*cclq, "ingest", "-q", f"{url}/traces", "-w", wh_s3], env={**env, CACHE_ENV: str(scratch / "writer")}
        )
        query = ["metric", metric, "--all", "--no-cache", "--allow-partial", "-f", "csv"]
        timed_child([*cclq, *query, "-w", wh_local], env=env)  # not timed: compiles the views once
        local = _best([timed_child([*cclq, *query, "-w", wh_local], env=env) for _ in range(max(repeats, 1))])
        cold, warm = [], []
        for i in range(max(repeats, 1)):
            cache_env = {**env, CACHE_ENV: str(scratch / f"reader-{i}")}
            cold.append(timed_child([*cclq, *query, "-w", wh_s3], env=cache_env))
            warm.append(timed_child([*cclq, *query, "-w", wh_s3], env=cache_env))
        rows.append(_row(f"metric {metric} --all, cold (empty read-through cache)", local, _best(cold)))
        rows.append(_row(f"metric {metric} --all, warm (copies cached)", local, _best(warm)))
        return rows
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _row(case: str, local: Timed, remote: Timed) -> dict:
    return {
        "case": case,
        "local_s": round(local.wall_s, 2),
        "s3_s": round(remote.wall_s, 2),
        "ratio": round(remote.wall_s / local.wall_s, 2) if local.wall_s else None,
        "local_cpu_s": round(local.cpu_s, 2),
        "s3_cpu_s": round(remote.cpu_s, 2),
        "errors": "; ".join(e for e in (local.error, remote.error) if e),
    }
