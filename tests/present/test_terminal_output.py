"""Text from traces, cards and file names on a terminal: never Rich markup, never a raw
control sequence. A kernel named ``[/x]`` aborted ``cclq diff``; ``[link=URL]`` became a
hyperlink; escape sequences in kernel names and card fields set the terminal's title
and cleared the screen in ``diff``, ``report``, ``sql`` and the ingest summary."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.cli import invoke
from helpers.warehouse import run_ingest

from cclq.store.warehouse import Warehouse
from cclq.synth.kineto import KinetoTraceBuilder

TITLE = "\x1b]0;pwned\x07"
CLEAR = "\x1b[2J"
NAMES = ["gemm[/x]", "[link=https://evil.example]click[/link]", f"k{TITLE}{CLEAR}", "csi\x9b2J", "rlo\u202eexe"]


@pytest.fixture(scope="module")
def wh_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("term")
    for run, dur in (("run_a", 100_000), ("run_b", 150_000)):
        b = KinetoTraceBuilder(rank=0, world_size=1)
        for i, name in enumerate(NAMES):
            b.kernel(name, ts=i * 1_000_000, dur=dur)
        folder = root / "in" / run
        b.write(folder / "rank0.json")
        (folder / "workload_card.yaml").write_text(
            f'description: "bold [bold]x[/bold] {TITLE!r}"\n'.replace("'", "")
            .replace("\\x1b", "\\e")
            .replace("\\x07", "\\a")
            + 'workload:\n  model: {phase: training, model_family: "fam\\e[2J"}\n'
        )
    assert not run_ingest([root / "in"], Warehouse(root / "wh")).failed
    return root / "wh"


def _assert_clean(text: str) -> None:
    for bad in ("\x1b", "\x07", "\x9b", "\u202e"):
        assert bad not in text, repr(text[:2000])


@pytest.mark.slow
def test_diff_prints_names_as_text(wh_root):
    done = invoke("diff", "run_a", "run_b", "--warehouse", str(wh_root))
    assert done.returncode == 0, done.stderr
    _assert_clean(done.stdout + done.stderr)
    assert "gemm[/x]" in done.stdout and "[link=https://evil.example]click[/link]" in done.stdout
    assert "k\\x1b]0;pwned\\x07\\x1b[2J" in done.stdout


@pytest.mark.slow
def test_report_prints_card_fields_as_text(wh_root):
    done = invoke("report", "run_a", "--warehouse", str(wh_root))
    assert done.returncode == 0, done.stderr
    _assert_clean(done.stdout + done.stderr)


def test_sql_table_prints_cells_as_text(wh_root):
    done = invoke("sql", "SELECT DISTINCT name FROM kernels ORDER BY name", "--warehouse", str(wh_root))
    assert done.returncode == 0, done.stderr
    _assert_clean(done.stdout)
    assert "[/x]" in done.stdout and "rlo\\u202eexe" in done.stdout


def test_the_ingest_summary_prints_file_names_as_text(tmp_path):
    folder = tmp_path / "in" / "w"
    folder.mkdir(parents=True)
    (folder / f"[red]{CLEAR}.json").write_text("not json at all")
    b = KinetoTraceBuilder(rank=0, world_size=1)
    b.kernel("gemm", ts=0, dur=5)
    b.write(folder / f"rank0{TITLE}.json")
    done = invoke("ingest", str(tmp_path / "in"), "-w", str(tmp_path / "wh"), "--jobs", "1")
    assert done.returncode == 1
    _assert_clean(done.stdout + done.stderr)
    assert "[red]" in done.stderr


def test_clean_escapes_every_control_character():
    from cclq.present.render import clean

    assert clean("a\nb\tc\x00\x1b\x7f\x85\u2066") == "a\\nb\\tc\\x00\\x1b\\x7f\\x85\\u2066"
    assert clean("plain [b]text[/b] é 中") == "plain [b]text[/b] é 中"
