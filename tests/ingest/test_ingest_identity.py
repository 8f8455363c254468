"""Who a file is: its rank (from the trace, else its name) and its trace id (the folder,
or a loose file's name), and what happens when two places claim one trace id."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from helpers.cli import invoke
from helpers.traces import write_trace
from helpers.warehouse import query, run_ingest

from cclq.formats.base import rank_from_name
from cclq.synth.xla import TpuTraceSpec, write_tpu_trace

EVENTS = [{"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 1, "ts": 1, "dur": 2}]


@pytest.mark.parametrize(
    "name, rank",
    [
        ("rank3.json", 3),
        ("kineto_trace_2.json", 2),
        ("worker3_step_12.1694128201557.pt.trace.json", 3),
        # a long number is a timestamp, not a rank: the next rule (or none) decides
        ("trace_1694128201545.json", None),
        ("rank_2000000.json", None),
        ("step_1694128201545_rank_4.json", 4),
        # xprof, one file per host
        ("t1v-n-abc-w-0.trace.json.gz", 0),
        ("t1v-n-abc-w-1.trace.json.gz", 1),
        ("host12.trace.json", 12),
        ("host1.xplane.pb", 1),
        ("host_1694128201545.trace.json.gz", None),
        ("worker.trace.json.gz", None),
        ("34.83.195.179_6003.xplane.pb", None),  # <ip>_<port>: a port is no rank
    ],
)
def test_rank_from_file_name(name, rank):
    assert rank_from_name(name) == rank


def test_a_long_number_in_a_file_name_does_not_break_the_ingest(tmp_path, wh):
    root = tmp_path / "w"
    write_trace(root / "trace_1694128201545.json", EVENTS)  # was rank 1694128201545: not an int32
    write_trace(root / "zz_rank1.json", EVENTS)
    report = run_ingest([root], wh)
    assert [o.status for o in report.outcomes] == ["ingested", "ingested"]
    assert query(wh, "SELECT relpath, rank, rank_source FROM files ORDER BY rank") == [
        ("trace_1694128201545.json", 0, "default"),
        ("zz_rank1.json", 1, "file name"),
    ]


def test_xprof_hosts_take_their_rank_from_the_file_name(tmp_path, wh):
    root = tmp_path / "tpu_2hosts"
    for host in range(2):
        write_tpu_trace(root / f"t1v-n-abc-w-{host}.trace.json.gz", TpuTraceSpec())
    report = run_ingest([root], wh)
    assert [o.status for o in report.outcomes] == ["ingested", "ingested"], [o.message for o in report.outcomes]
    assert query(wh, "SELECT rank, rank_source, format FROM files ORDER BY rank") == [
        (0, "file name", "xprof"),
        (1, "file name", "xprof"),
    ]
    assert not [w for w in report.warnings if "using rank 0" in w]


def test_one_xprof_host_without_a_number_gets_rank_0_without_a_warning(tmp_path, wh):
    write_tpu_trace(tmp_path / "tpu" / "worker.trace.json.gz", TpuTraceSpec())
    report = run_ingest([tmp_path / "tpu"], wh)
    assert [o.status for o in report.outcomes] == ["ingested"]
    assert query(wh, "SELECT rank, rank_source FROM files") == [(0, "default")]
    assert report.warnings == []


# ---------------------------------------------------------------- trace id clashes
def _workload(folder: Path, ranks: int = 2) -> Path:
    for r in range(ranks):
        write_trace(folder / f"rank{r}.json", EVENTS * (r + 1), distributedInfo={"rank": r, "world_size": ranks})
    return folder


def _error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("cclq: error:")]


def test_a_folder_of_the_same_name_from_elsewhere_does_not_replace_a_trace(tmp_path):
    first = _workload(tmp_path / "a" / "x" / "w")
    second = _workload(tmp_path / "b" / "y" / "w", ranks=1)
    wh = str(tmp_path / "wh")
    assert invoke("ingest", str(first), "-w", wh, "-q").returncode == 0
    result = invoke("ingest", str(second), "-w", wh, "-q")
    assert result.returncode == 1
    assert _error_lines(result.stderr) == [
        f"cclq: error: {second}: trace id 'w' is already taken by files from {first}; "
        "rename the folder, or pass --force to replace it"
    ]
    paths = invoke("sql", "SELECT path FROM files ORDER BY path", "-w", wh, "-f", "csv").stdout.split()
    assert paths == ["path", str(first / "rank0.json"), str(first / "rank1.json")]
    # --force replaces the trace: the other folder's files go, this one's come in
    result = invoke("ingest", str(second), "-w", wh, "-q", "--force")
    assert result.returncode == 0, result.stderr
    paths = invoke("sql", "SELECT path, rank FROM files ORDER BY path", "-w", wh, "-f", "csv").stdout.split()
    assert paths == ["path,rank", f"{second / 'rank0.json'},0"]
    events = invoke("sql", "SELECT count(*) AS n FROM events", "-w", wh, "-f", "csv").stdout.split()
    assert events == ["n", "1"]


def test_loose_files_of_the_same_name_from_two_folders_do_not_replace_each_other(tmp_path, wh):
    one = write_trace(tmp_path / "d1" / "trace.json", EVENTS)
    two = write_trace(tmp_path / "d2" / "trace.json", EVENTS * 2)
    run_ingest([one], wh)
    report = run_ingest([two], wh)
    assert [(o.path, o.status) for o in report.outcomes] == [(str(two), "failed")]
    assert report.failed[0].message == (
        f"{two}: trace id 'trace' is already taken by files from {one}; rename the file, or pass --force to replace it"
    )
    assert query(wh, "SELECT path, events_written FROM files") == [(str(one), 1)]
    report = run_ingest([two], wh, force=True)
    assert sorted(o.status for o in report.outcomes) == ["ingested", "removed"]
    assert query(wh, "SELECT path, events_written FROM files") == [(str(two), 2)]


def test_a_folder_does_not_remove_a_loose_file_of_the_same_trace_id(tmp_path, wh):
    loose = tmp_path / "in" / "trace.json.gz"
    loose.parent.mkdir(parents=True)
    with gzip.open(loose, "wt") as f:
        json.dump({"traceEvents": EVENTS}, f)
    folder = _workload(tmp_path / "other" / "trace")
    run_ingest([loose], wh)
    report = run_ingest([folder], wh)
    assert [o.status for o in report.outcomes] == ["failed"]
    assert report.failed[0].message == (
        f"{folder}: trace id 'trace' is already taken by files from {loose}; "
        "rename the folder, or pass --force to replace it"
    )
    assert query(wh, "SELECT path FROM files") == [(str(loose),)]
    assert query(wh, "SELECT count(*) FROM events") == [(1,)]


def test_the_same_folder_ingested_again_is_no_clash(tmp_path, wh):
    folder = _workload(tmp_path / "in" / "w")
    run_ingest([folder], wh)
    (folder / "rank1.json").unlink()
    report = run_ingest([folder], wh)
    assert sorted(o.status for o in report.outcomes) == ["removed", "unchanged"]
    report = run_ingest([tmp_path / "in"], wh)  # through a folder of workloads: the same place
    assert [o.status for o in report.outcomes] == ["unchanged"]
