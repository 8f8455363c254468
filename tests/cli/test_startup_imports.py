"""What a command's process imports before it does any work (issue 42's start-up).

``cclq --help`` and a cached ``cclq metric`` were 0.5-0.9 s because pyarrow (and numpy),
then pyarrow.compute, loaded before any command ran. These tests read ``sys.modules`` in a
fresh interpreter: deterministic guards, not timings (``cclq bench --startup`` times it).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HEAVY = ("pyarrow", "polars", "duckdb", "numpy", "pandas")


def _loaded_after(code: str, cwd: Path, watch: tuple[str, ...]) -> list[str]:
    """Runs ``code`` in a new interpreter; the modules of ``watch`` it left loaded."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps([m for m in {list(watch)!r} if m in sys.modules]))\n"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=cwd, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def _run_main(argv: list[str]) -> str:
    return (
        f"import sys; sys.argv = {['cclq', *argv]!r}\n"
        "from cclq.cli.app import main\n"
        "try:\n    main()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
    )


def test_importing_the_command_line_loads_no_data_library(tmp_path):
    assert _loaded_after("import cclq.cli.app", tmp_path, HEAVY) == []


def test_help_loads_no_data_library(tmp_path):
    assert _loaded_after(_run_main(["--help"]), tmp_path, HEAVY) == []


def test_pandas_check_is_made_when_pyarrow_loads_later(tmp_path):
    """pyarrow's first conversion imports pandas to look for pandas objects (cclq.runtime);
    with pyarrow no longer loaded up front, the blocked check must follow its import. A
    stand-in ``pandas`` on the path records whether anything imported it."""
    fake = tmp_path / "site" / "pandas"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text(
        "import builtins\nbuiltins.CCLQ_TEST_PANDAS = True\nraise ImportError('stand-in pandas')\n"
    )
    code = (
        f"import sys; sys.path.insert(0, {str(fake.parent)!r})\n"
        "import builtins, cclq.cli.app, pyarrow as pa\n"
        "pa.scalar(3); pa.array([1, 2])\n"
        "print(json.dumps(getattr(builtins, 'CCLQ_TEST_PANDAS', False)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", "import json\n" + code], capture_output=True, text=True, cwd=tmp_path, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "false"


def test_cached_metric_loads_only_what_printing_it_needs(tmp_path):
    """A cache hit reads the snapshot's kept facts and the result's rows as JSON
    (``cclq.store.summary_cache``, ``cclq.query.cache.read_rows``): no pyarrow (0.2 s
    with numpy), DuckDB, polars or pandas, in every text format, and it prints what the
    computed run printed."""
    wh = str(tmp_path / "wh")
    metric = ["metric", "total_kernel_time", "--all", "-w", wh]
    printed = []
    for argv in (["ingest", str(REPO / "trace_collection"), "-q", "-w", wh], [*metric, "-f", "csv"]):
        done = subprocess.run(
            [sys.executable, "-m", "cclq", *argv], capture_output=True, text=True, cwd=tmp_path, timeout=300
        )
        assert done.returncode == 0, done.stderr
        printed.append(done.stdout)
    for fmt in ("csv", "json", "table"):
        probe = (
            _run_main([*metric, "-f", fmt])
            + f"print(__import__('json').dumps([m for m in {HEAVY!r} if m in sys.modules]))\n"
        )
        done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=tmp_path, timeout=120)
        assert done.returncode == 0, done.stderr
        *output, loaded = done.stdout.splitlines()
        assert json.loads(loaded) == [], fmt
        text = "\n".join(output)
        if fmt == "csv":
            assert text + "\n" == printed[1]
        elif fmt == "json":
            assert len(json.loads(text)) == printed[1].count("\n") - 1  # a row for each CSV line but the header
        else:
            assert "total_kernel_time" in text
