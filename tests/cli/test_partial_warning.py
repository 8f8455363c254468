"""The partial-trace warning (a trace holding fewer ranks than a whole run): said once where
it helps, when `cclq ingest` (or a call that ingests) writes the trace, and by `cclq traces`;
every command that says it takes --allow-partial; and an xprof profile, one file per host
holding all of that host's devices, is partial only against hosts, never devices."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest
from helpers.cli import invoke
from helpers.paths import SHARED_TRACES

from cclq.compat.main import run_here
from cclq.query.partial import expected_ranks, partial_traces
from cclq.store.warehouse import Warehouse
from cclq.synth.kineto import generate_workload
from cclq.synth.xla import TpuTraceSpec, write_tpu_trace


def rank_sample(root: Path, name: str, keep: int) -> Path:
    """The first ``keep`` rank files of a 4-rank run."""
    generate_workload(root / "full" / name, ranks=4, steps=1, layers=1, seed=7)
    folder = root / "in" / name
    folder.mkdir(parents=True)
    for f in sorted((root / "full" / name).iterdir()):
        if not f.name.startswith("kineto_trace_") or int(f.name.split("_")[2].split(".")[0]) < keep:
            f.rename(folder / f.name)
    return folder


def partial_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "partial" in line]


@pytest.mark.slow
def test_said_by_ingest_once_and_by_traces_and_silenced_by_the_flag(tmp_path):
    rank_sample(tmp_path, "a", 1)
    rank_sample(tmp_path, "b", 4)
    wh = str(tmp_path / "wh")
    r = invoke("ingest", str(tmp_path / "in"), "-w", wh, "-q")
    assert r.returncode == 0, r.stderr
    assert partial_lines(r.stderr) == [
        "cclq: warning: trace 'a' is partial (1 of 4 ranks): its values cover those "
        "ranks only (re-run `cclq ingest` if it was interrupted; --allow-partial to "
        "accept)"
    ]
    # the next ingest writes nothing: nothing said again
    r = invoke("ingest", str(tmp_path / "in"), "-w", wh, "-q")
    assert r.returncode == 0 and partial_lines(r.stderr) == []
    # `cclq traces` flags it in its table and names it on stderr
    r = invoke("traces", "-w", wh, "-f", "csv")
    flags = {row["trace"]: row["flag"] for row in csv.DictReader(io.StringIO(r.stdout))}
    assert flags == {"a": "partial: 1 of 4 ranks", "b": ""}
    assert len(partial_lines(r.stderr)) == 1 and "'a'" in r.stderr
    # the board and the report do not say it on every run
    for args in (["board", str(tmp_path / "site"), "-q"], ["report", "a"]):
        r = invoke(*args, "-w", wh)
        assert r.returncode == 0 and partial_lines(r.stderr) == [], (args, r.stderr)
    # every command that says it takes the flag that silences it
    rank_sample(tmp_path / "more", "c", 2)
    for args in (["ingest", str(tmp_path / "more" / "in"), "-q"], ["traces"], ["metric", "total_kernel_time", "--all"]):
        r = invoke(*args, "-w", wh, "--allow-partial")
        assert r.returncode == 0, (args, r.stderr)
        assert partial_lines(r.stderr) == [], args


def test_python_m_cclq_main_says_it_only_when_it_writes_the_trace(tmp_path, capsys):
    folder = rank_sample(tmp_path, "a", 2)
    wh = str(tmp_path / "wh")
    argv = ["--trace", str(folder), "--metric", "total_kernel_time", "--warehouse", wh]
    assert run_here(argv) == 0
    assert len(partial_lines(capsys.readouterr().err)) == 1
    for _ in range(2):
        assert run_here(argv) == 0
        assert partial_lines(capsys.readouterr().err) == []


def host_profile(folder: Path, card: str) -> Path:
    write_tpu_trace(folder / "host0.trace.json.gz", TpuTraceSpec())
    (folder / "workload_card.yaml").write_text(card)
    return folder


@pytest.mark.parametrize(
    ("xpu", "partial"),
    [
        ("{type: CPU, total_count: 4}", None),  # one host profile of its 4 devices: whole
        ("{type: TPU, total_count: 4, count_per_node: 4}", None),  # one host of 4: whole
        ("{type: TPU, total_count: 8, count_per_node: 4}", "1 of 2 ranks"),  # one host of two
    ],
)
def test_an_xprof_host_profile_is_partial_against_hosts_not_devices(tmp_path, xpu, partial):
    host_profile(tmp_path / "in" / "tpu", f"workload:\n  hardware:\n    xpu_spec: {xpu}\n")
    wh = tmp_path / "wh"
    r = invoke("ingest", str(tmp_path / "in"), "-w", str(wh), "-q")
    assert r.returncode == 0, r.stderr
    assert partial_traces(Warehouse(wh)) == ({"tpu": partial} if partial else {})
    r = invoke("traces", "-w", str(wh), "-f", "csv")
    (row,) = csv.DictReader(io.StringIO(r.stdout))
    assert row["flag"] == (f"partial: {partial}" if partial else "")


def test_expected_ranks_rule():
    assert expected_ranks(8, {"kineto"}, 16, 8) == 8  # the profiler's world size first
    assert expected_ranks(None, {"kineto"}, 16, 8) == 16  # a rank per device
    assert expected_ranks(None, {"nsys"}, 4, None) == 4
    assert expected_ranks(None, {"xprof"}, 4, None) is None  # hosts unknown
    assert expected_ranks(None, {"xprof"}, 10, 4) == 3
    assert expected_ranks(None, {"kineto"}, None, None) is None and expected_ranks(None, {"kineto"}, 0, 8) is None


@pytest.mark.slow
def test_the_shared_one_host_jax_profile_is_whole(tmp_path):
    folder = SHARED_TRACES / "xla_jax_cpu_4dev"
    if not folder.is_dir():
        pytest.skip(f"{folder} is not here (../shared/traces)")
    wh = tmp_path / "wh"
    r = invoke("ingest", str(folder), "-w", str(wh), "-q")
    assert r.returncode == 0 and partial_lines(r.stderr) == [], r.stderr
    assert partial_traces(Warehouse(wh)) == {}
