"""The command line contract: help everywhere, clean stdout, one-line errors, exit codes."""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.cli import invoke, run_cli
from helpers.traces import write_trace
from typer.models import CommandInfo

import cclq.cli.app  # noqa: F401  (registers the commands)
from cclq.cli import lazy

COMMANDS = ["ingest", "traces", "sql", "shell"]


@pytest.fixture(scope="module")
def small_wh(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("cli")
    for r in range(2):
        write_trace(
            root / "work" / f"rank{r}.json",
            [
                {
                    "ph": "X",
                    "cat": "kernel",
                    "name": "gemm",
                    "pid": 0,
                    "tid": 7,
                    "ts": 10 * r,
                    "dur": 5,
                    "args": {"stream": 7, "device": 0},
                }
            ],
            distributedInfo={"rank": r, "world_size": 2},
        )
    result = invoke("ingest", str(root / "work"), "-w", str(root / "wh"), "-q")
    assert result.returncode == 0, result.stderr
    return root / "wh"


@pytest.mark.slow
def test_every_command_has_help():
    registered = sorted(name for name, entry in lazy.registered().items() if isinstance(entry, CommandInfo))
    assert set(COMMANDS) <= set(registered)
    for name in registered:
        result = invoke(name, "--help")
        assert result.returncode == 0, result.stderr
        assert "Usage:" in result.stdout and re.search(r"Examples?:", result.stdout), name


def test_sql_csv_is_exactly_header_and_rows(small_wh):
    result = invoke("sql", "SELECT rank, name, dur_ns FROM kernels ORDER BY rank", "-w", str(small_wh), "-f", "csv")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "rank,name,dur_ns\n0,gemm,5000\n1,gemm,5000\n"


def test_sql_json_is_a_list_of_objects(small_wh):
    result = invoke("sql", "SELECT rank, ts_ns FROM kernels ORDER BY rank", "-w", str(small_wh), "-f", "json")
    assert json.loads(result.stdout) == [{"rank": 0, "ts_ns": 0}, {"rank": 1, "ts_ns": 10000}]


def test_warehouse_comes_from_the_environment(small_wh):
    result = invoke("traces", "-f", "csv", env={"CCLQ_WAREHOUSE": str(small_wh)})
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert [(r["trace"], r["world_size"], r["ranks_seen"]) for r in rows] == [("work", "2", "2")]


def test_traces_table_is_the_default(small_wh):
    result = invoke("traces", "-w", str(small_wh))
    assert result.returncode == 0
    assert "work" in result.stdout and "world_size" in result.stdout


def test_table_shows_text_as_it_is_not_as_rich_markup(small_wh):
    text = "[bold]x[/bold] [enforce fail at alloc_cpu.cpp:127] y"
    result = invoke("sql", f"SELECT '{text}' AS s", "-w", str(small_wh))
    assert result.returncode == 0, result.stderr
    assert text in result.stdout


def test_missing_warehouse_is_a_usage_error(tmp_path):
    result = invoke("traces", "-w", str(tmp_path / "nowhere"))
    assert result.returncode == 2
    assert result.stderr.splitlines()[0] == f"cclq: error: no warehouse at {tmp_path / 'nowhere'}"
    assert "Traceback" not in result.stderr


def test_bad_sql_is_one_error_and_exit_3(small_wh):
    result = invoke("sql", "SELECT nope FROM kernels", "-w", str(small_wh))
    assert result.returncode == 3
    assert result.stderr.startswith('cclq: error: Binder Error: Referenced column "nope" not found')
    assert result.stderr.count("cclq: error:") == 1
    assert "Traceback" not in result.stderr and result.stdout == ""


def test_bad_sql_keeps_duckdbs_hints(small_wh):
    """DuckDB's whole message: its suggestion, the columns it could have meant, and the
    query line with a caret under the place (issue 35: only the first line was shown)."""
    table = invoke("sql", "SELECT * FROM kernel", "-w", str(small_wh))
    assert table.returncode == 3 and table.stderr.count("cclq: error:") == 1
    assert 'Did you mean "kernels"?' in table.stderr
    column = invoke("sql", "SELECT rnk FROM kernels", "-w", str(small_wh))
    lines = column.stderr.splitlines()
    assert column.returncode == 3 and lines[0].startswith('cclq: error: Binder Error: Referenced column "rnk"')
    assert any(line.startswith("Candidate bindings: ") and '"rank"' in line for line in lines)
    where = lines.index("LINE 1: SELECT rnk FROM kernels")
    assert lines[where + 1].index("^") == len("LINE 1: SELECT ")  # under "rnk"


def test_debug_shows_the_traceback(small_wh):
    result = run_cli("--debug", "sql", "SELECT nope FROM kernels", "-w", str(small_wh))
    assert "Traceback" in result.stderr


def test_debug_works_anywhere_on_the_command_line(small_wh):
    result = run_cli("sql", "SELECT nope FROM kernels", "--debug", "-w", str(small_wh))
    assert "Traceback" in result.stderr and "No such option" not in result.stderr


def test_jobs_must_be_at_least_one(tmp_path):
    write_trace(tmp_path / "w" / "rank0.json", [{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1}])
    result = invoke("ingest", str(tmp_path / "w"), "-w", str(tmp_path / "wh"), "--jobs", "0")
    assert result.returncode == 2
    assert "Invalid value for '--jobs'" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "wh").exists()


def test_force_says_it_replaces_a_trace_from_another_place():
    help_text = " ".join(invoke("ingest", "--help").stdout.split())
    assert "--force" in help_text and "replace a trace of the same id" in help_text


def test_missing_input_path_is_a_usage_error(tmp_path):
    result = invoke("ingest", str(tmp_path / "absent"), "-w", str(tmp_path / "wh"))
    assert result.returncode == 2
    assert result.stderr.strip() == f"cclq: error: {tmp_path / 'absent'}: no such file or directory"


def test_parquet_output_needs_a_file(small_wh, tmp_path):
    assert invoke("sql", "SELECT 1", "-w", str(small_wh), "-f", "parquet").returncode == 2
    out = tmp_path / "x.parquet"
    assert invoke("sql", "SELECT 42 AS v", "-w", str(small_wh), "-f", "parquet", "-o", str(out)).returncode == 0
    import pyarrow.parquet as pq

    assert pq.read_table(out).to_pylist() == [{"v": 42}]


@pytest.mark.slow
@pytest.mark.skipif(
    shutil.which("duckdb") is None and not (Path(sys.executable).parent / "duckdb").exists(),
    reason="duckdb CLI not installed",
)  # where `cclq shell` looks for it
def test_shell_has_the_views_defined(small_wh):
    result = run_cli("shell", "-w", str(small_wh), "-csv", "-c", "SELECT count(*) AS n FROM kernels")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["n", "2"]
    # it says which CLI it opens (on stderr), and how it gets the views when the CLI is of
    # another release than the library
    import duckdb

    exe = shutil.which("duckdb") or str(Path(sys.executable).parent / "duckdb")
    cli = subprocess.run([exe, "-version"], capture_output=True, text=True).stdout.split()[0].lstrip("v")
    (line,) = [ln for ln in result.stderr.splitlines() if ln.startswith("cclq shell:")]
    assert line.startswith(f"cclq shell: DuckDB CLI {cli} (")
    # the same file, however each process spells its path (`..`, links: a venv made
    # through /x/../y, a python started as .venv/bin/../bin/python)
    named = line[len(f"cclq shell: DuckDB CLI {cli} (") :].split(")", 1)[0]
    assert Path(named).resolve() == Path(exe).resolve(), (named, exe)
    assert ("the views are created as the shell starts" in line) == (cli != duckdb.__version__)


@pytest.mark.slow
def test_the_views_created_in_the_script_are_the_compiled_ones(small_wh):
    """What `cclq shell` runs with a CLI of another DuckDB release: the same views, created
    after the base relations instead of attached compiled."""
    import duckdb

    from cclq.query.engine import setup_script
    from cclq.store.warehouse import Warehouse

    with Warehouse(small_wh).open_snapshot() as snapshot:
        counts = []
        for compiled in (True, False):
            con = duckdb.connect()
            try:
                con.execute(setup_script(snapshot, comments=True, compiled=compiled))
                counts.append(con.execute("SELECT count(*), sum(dur_ns) FROM kernels").fetchall())
                views = con.execute("SELECT count(*) FROM duckdb_views() WHERE NOT internal").fetchone()
            finally:
                con.close()
        assert counts[0] == counts[1] and counts[0][0][0] == 2
        assert views is not None and views[0] > 50


def test_a_command_does_not_load_pandas_where_it_is_installed(tmp_path):
    """pyarrow imports pandas at its first conversion of a Python value, to check for pandas
    objects (165-220 ms, ~40 MB): a cclq command blocks that one check (cclq.runtime), and a
    conversion to pandas still works in the same process."""
    import importlib.util

    import pytest

    if importlib.util.find_spec("pandas") is None:
        pytest.skip("pandas is not installed: nothing to keep out")
    code = (
        "import sys; sys.argv = ['cclq', '--version']\n"
        "from cclq.cli.app import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "import pyarrow as pa\n"
        "pa.array([1, 2]); pa.scalar(3)\n"
        "loaded = 'pandas' in sys.modules\n"
        "frame = pa.table({'a': [1, 2]}).to_pandas()\n"
        "print(loaded, type(frame).__name__, 'pandas' in sys.modules)\n"
    )
    import subprocess

    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "False DataFrame True"
