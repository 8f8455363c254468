"""The daemon's preparation for CCL-Bench's loop (cclq/compat/warm.py): the first call
for a folder ingests its sibling folders too and computes the asked metric for all of
them, and every call still answers exactly as a call in its own process on a fresh
warehouse does (stdout, stderr, exit status), a broken sibling included. In-process:
the daemon's handler is called as the daemon calls it."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest
from helpers.several_runs import two_runs

from cclq.compat.main import run_here
from cclq.compat.warm import WarmCalls
from cclq.synth.kineto import generate_workload

METRICS = ("total_kernel_time", "avg_step_time", "communication_fraction", "collective_busbw")


def _call(run, argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = run(argv)
        except SystemExit as e:  # argparse; the daemon turns it into the exit status too
            rc = e.code if isinstance(e.code, int) else 2
    return rc, out.getvalue(), err.getvalue()


def _collection(root: Path) -> list[Path]:
    folders = []
    for i, (ranks, steps, layers) in enumerate([(2, 3, 2), (4, 2, 1), (2, 2, 3)]):
        generate_workload(root / f"work{i}", ranks=ranks, steps=steps, layers=layers, seed=i)
        folders.append(root / f"work{i}")
    broken = root / "work3_broken"
    generate_workload(broken, ranks=2, steps=2, layers=1, seed=9)
    (broken / "kineto_trace_1.json").write_text('{"traceEvents": [{"ph": "X", "name": ')  # cut off
    folders.append(broken)
    folders.append(two_runs(root / "work4_runs"))  # two runs: calls answer for one of them
    (root / "notes").mkdir()  # a folder without traces, which a call accepts all the same
    (root / "notes" / "README.txt").write_text("not a trace")
    folders.append(root / "notes")
    (root / "runs").mkdir()  # a collection of workloads, which a call refuses: no sibling
    generate_workload(root / "runs" / "inner", ranks=2, steps=2, layers=1, seed=5)
    generate_workload(root / "runs" / "inner2", ranks=2, steps=2, layers=1, seed=6)
    return folders


@pytest.mark.slow
def test_first_call_prepares_the_siblings_and_every_answer_is_the_cold_one(tmp_path):
    folders = _collection(tmp_path / "collection")
    warm_wh, cold = tmp_path / "warm_wh", tmp_path / "cold"
    warm = WarmCalls(run_here)
    first = ["--trace", str(folders[0]), "--metric", METRICS[0], "--warehouse", str(warm_wh)]
    first_answer = _call(warm, first)
    # one call ingested every sibling workload (not the one with a broken file, not the
    # collection `runs`) ...
    traces = warm.siblings[(str(warm_wh.resolve()), str((tmp_path / "collection").resolve()))]
    assert sorted(Path(f).name for f in traces) == ["notes", "work0", "work1", "work2", "work4_runs"]
    assert traces[str(folders[4].resolve())] == "work4_runs+a_hpc"  # the run a call answers for
    # ... and stored the metric's result for each of them
    assert len(list((warm_wh / "cache" / "metrics").glob(f"{METRICS[0]}.v*.parquet"))) == 5
    for folder in folders:
        for metric in METRICS:
            argv = ["--trace", str(folder), "--metric", metric]
            got = (
                first_answer
                if (folder, metric) == (folders[0], METRICS[0])
                else _call(warm, [*argv, "--warehouse", str(warm_wh)])
            )
            # the cold path: its own warehouse per folder, as a first call sees it
            want = _call(run_here, [*argv, "--warehouse", str(cold / f"{folder.name}-{metric}")])
            assert got[0] == want[0], (folder.name, metric, got, want)
            assert got[1] == want[1], (folder.name, metric)
            assert got[2].replace(str(warm_wh), "W") == want[2].replace(str(cold / f"{folder.name}-{metric}"), "W"), (
                folder.name,
                metric,
            )
    # the broken sibling's own calls report its file, as without a daemon
    rc, out, err = _call(warm, ["--trace", str(folders[3]), "--metric", METRICS[0], "--warehouse", str(warm_wh)])
    assert "kineto_trace_1.json" in err and out.strip().splitlines()[-1] != ""


def test_preparation_never_writes_into_the_answer(tmp_path):
    folders = _collection(tmp_path / "collection")
    warm = WarmCalls(run_here)
    # an unknown metric, a bad option: the preparation gives up quietly, the call reports it
    for argv in (
        ["--trace", str(folders[0]), "--metric", "no_such_metric"],
        ["--trace", str(folders[0]), "--metric", "total_kernel_time", "--n_chips", "many"],
    ):
        got = _call(warm, [*argv, "--warehouse", str(tmp_path / "wh")])
        want = _call(run_here, [*argv, "--warehouse", str(tmp_path / "cold")])
        assert got == want and got[0] != 0


def test_the_client_reads_the_warehouse_without_argparse_only_when_plain():
    from cclq.compat.main import warehouse_option

    assert warehouse_option(["--trace", "d", "--metric", "m"]) == (True, None)
    assert warehouse_option(["--metric=m", "--trace", "d", "--warehouse", "w"]) == (True, "w")
    assert warehouse_option(["--trace", "d", "--metric", "m", "--warehouse=a=b", "--n_chips", "8"]) == (True, "a=b")
    # argparse's own readings are left to argparse (in the call, which reports any error)
    for argv in (
        ["--trace", "d", "--metric", "m", "--ware", "w"],  # an abbreviation
        ["--trace", "d", "--metric", "m", "-h"],
        ["--trace", "d"],  # help; --metric missing
        ["--trace", "d", "--metric", "m", "--warehouse"],  # no value
        ["--trace", "d", "--metric", "m", "--n_chips", "-1"],  # a value like an option
        ["--trace", "d", "--trace", "e", "--metric", "m"],
        ["stray", "--trace", "d", "--metric", "m"],
    ):
        assert warehouse_option(argv) == (False, None), argv


def test_siblings_off_leaves_them_alone(tmp_path, monkeypatch):
    folders = _collection(tmp_path / "collection")
    monkeypatch.setenv("CCLQ_DAEMON_SIBLINGS", "0")
    warm = WarmCalls(run_here)
    rc, out, _ = _call(warm, ["--trace", str(folders[0]), "--metric", METRICS[0], "--warehouse", str(tmp_path / "wh")])
    assert rc == 0 and out.strip() and warm.siblings == {}
    assert len(list((tmp_path / "wh" / "cache" / "metrics").glob("*.parquet"))) == 1  # the call's own result
