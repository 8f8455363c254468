"""What `cclq ingest` says: a card's problems once (not on every re-ingest of a folder
whose card did not change), and on Ctrl-C what was committed (a real SIGINT to the
process, the way a terminal sends it)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.cli import invoke, run_cli
from helpers.traces import gpu_trace

from cclq.synth.kineto import generate_workload

BAD_CARD = "model_family: x\nphase: nonsense\n"  # no version, an unknown phase: problems, kept


def _card_warnings(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.startswith("cclq: warning:") and "card problem" in ln]


@pytest.mark.slow
def test_a_card_warning_is_said_once_not_on_every_reingest(tmp_path: Path):
    folder = tmp_path / "in" / "w1"
    folder.mkdir(parents=True)
    gpu_trace(folder / "kineto_trace_0.json")
    (folder / "workload_card.yaml").write_text(BAD_CARD)
    wh = str(tmp_path / "wh")
    first = invoke("ingest", str(tmp_path / "in"), "-w", wh, "-q")
    assert first.returncode == 0, first.stderr
    assert len(_card_warnings(first.stderr)) == 1
    again = invoke("ingest", str(tmp_path / "in"), "-w", wh, "-q")
    assert again.returncode == 0 and _card_warnings(again.stderr) == [], again.stderr
    # a new trace file in the folder, the card unchanged: still not repeated
    gpu_trace(folder / "kineto_trace_1.json", rank=1, world=2)
    more = invoke("ingest", str(tmp_path / "in"), "-w", wh, "-q")
    assert more.returncode == 0 and _card_warnings(more.stderr) == [], more.stderr
    # the card changed (still with problems): said again; --force says it again too
    (folder / "workload_card.yaml").write_text(BAD_CARD + "batch_size: 8\n")
    changed = invoke("ingest", str(tmp_path / "in"), "-w", wh, "-q")
    assert len(_card_warnings(changed.stderr)) == 1, changed.stderr
    forced = invoke("ingest", str(tmp_path / "in"), "-w", wh, "-q", "--force")
    assert len(_card_warnings(forced.stderr)) == 1, forced.stderr


@pytest.mark.slow
def test_ctrl_c_says_what_was_committed(tmp_path: Path):
    # files big enough that the parse of the other ranks is still going when the first is
    # done, and above the size that ingest parses as one group (a group commits whole)
    from cclq.ingest.parse import SMALL_FILE_BYTES

    generate_workload(
        tmp_path / "in" / "w8", ranks=8, steps=2, layers=1, seed=5, target_bytes_per_rank=SMALL_FILE_BYTES + 1_000_000
    )
    # The ingest runs at the lowest priority (nice 19): on a loaded machine (load ~10 on 2
    # cores) this test's process, woken by the first progress line, once got the CPU only
    # after the ingest had committed all 8 files, so the SIGINT came too late. Below every
    # other process the ingest hardly moves while this one waits to run.
    proc = subprocess.Popen(
        [
            "nice",
            "-n",
            "19",
            sys.executable,
            "-c",
            "from cclq.cli.app import main; main()",
            "ingest",
            str(tmp_path / "in"),
            "-w",
            str(tmp_path / "wh"),
            "--jobs",
            "1",
        ],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env=os.environ.copy(),
    )
    assert proc.stderr is not None
    lines = []
    deadline = time.monotonic() + 120
    for line in proc.stderr:  # piped: one progress line per file
        lines.append(line.rstrip("\n"))
        if line.startswith("ingest 1/8 "):
            proc.send_signal(signal.SIGINT)
            break
        assert time.monotonic() < deadline, lines
    rest = proc.stderr.read()
    code = proc.wait(timeout=120)
    lines += rest.splitlines()
    final = [ln for ln in lines if ln.startswith("cclq: interrupted")]
    assert code == 130, lines
    assert len(final) == 1, lines
    committed = int(final[0].split("interrupted: ", 1)[1].split(" file(s) committed")[0])
    assert 1 <= committed < 8, final
    assert f"{8 - committed} not ingested" in final[0] and "partial: w8" in final[0]
    assert "run the same `cclq ingest` again to finish" in final[0]
    # and it is so: the warehouse holds exactly the committed ranks
    listed = run_cli("traces", "-w", str(tmp_path / "wh"), "-f", "csv")
    assert f",{committed}," in listed.stdout.splitlines()[1] or f"partial: {committed} of 8" in listed.stdout


@pytest.mark.slow
def test_ctrl_c_in_any_command_says_it_was_interrupted(tmp_path: Path):
    """typer ends a command interrupted by Ctrl-C with a silent exit 130; cclq says so."""
    code = (
        "import cclq.present.board.build as b\n"
        "def interrupted(*a, **k):\n"
        "    raise KeyboardInterrupt\n"
        "b.build_board = interrupted\n"
        "from cclq.cli.app import main\n"
        "main()\n"
    )
    gpu_trace(tmp_path / "in" / "w1" / "kineto_trace_0.json")
    assert run_cli("ingest", str(tmp_path / "in"), "-w", str(tmp_path / "wh"), "-q").returncode == 0
    done = subprocess.run(
        [sys.executable, "-c", code, "board", str(tmp_path / "site"), "-w", str(tmp_path / "wh")],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 130
    assert done.stderr.strip().splitlines()[-1] == "cclq: interrupted", done.stderr
