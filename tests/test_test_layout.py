"""How the suite itself is laid out, read from its own files with ``ast``.

- No test module imports another test module, nor ``conftest``: code two tests share is in
  the ``tests/helpers`` package, fixtures reach tests by name. (So a test module can be
  moved, renamed or deleted without breaking another one.)
- pytest's ``pythonpath`` lists ``tests`` alone (for ``helpers``), no folder of tests.
- Collecting the suite imports neither torch nor dask: tests that need them get them from
  a fixture (``tests/record/conftest.py``, ``tests/ingest/conftest.py``) and skip without.
- Every marker used is declared, and ``pytest`` alone leaves the slow ones out.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
# modules whose import at collection costs seconds, and the cclq modules that import them
HEAVY = ("torch", "dask", "distributed", "cclq.record.primitives", "helpers.dask_faults")


def suite_files() -> list[Path]:
    return sorted(p for p in TESTS.rglob("*.py") if "fuzz" not in p.parts and "hta_golden" not in p.parts)


def imported_names(node: ast.AST) -> list[str]:
    """The modules an import statement names (``from a import b``: ``a`` and ``a.b``)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
        return [node.module] + [f"{node.module}.{a.name}" for a in node.names]
    return []


def test_no_test_module_imports_another_or_conftest():
    test_modules = {p.stem for p in suite_files() if p.stem.startswith("test_")}
    found = []
    for path in suite_files():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            for top in {name.split(".")[0] for name in imported_names(node)}:
                if top == "conftest" or top in test_modules:
                    found.append(f"{path.relative_to(REPO)}:{node.lineno} imports {top}")
    assert not found, "move what they share into tests/helpers/:\n" + "\n".join(sorted(set(found)))
    print(f"{len(suite_files())} files read, {len(test_modules)} test modules")


def test_helpers_are_a_package_and_the_only_entry_of_pythonpath(pytestconfig):
    assert (TESTS / "helpers" / "__init__.py").is_file()
    assert [Path(p) for p in pytestconfig.getini("pythonpath")] == [TESTS]
    assert not [p for p in (TESTS / "helpers").glob("test_*.py")], "tests/helpers holds no tests"


def module_level_imports(tree: ast.Module) -> list[tuple[int, str]]:
    """Imports that run when the module is imported: its top-level statements, also inside
    ``if``/``try``/``with`` blocks, and ``pytest.importorskip("x")`` calls there."""
    found: list[tuple[int, str]] = []

    def visit(statements: list[ast.stmt]) -> None:
        for st in statements:
            if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            found.extend((st.lineno, n) for n in imported_names(st))
            simple = isinstance(st, (ast.Expr, ast.Assign, ast.AnnAssign))  # compound ones: visited below
            for call in (n for n in ast.walk(st) if simple and isinstance(n, ast.Call)):
                f = call.func
                if (
                    isinstance(f, ast.Attribute)
                    and f.attr == "importorskip"
                    and call.args
                    and isinstance(call.args[0], ast.Constant)
                ):
                    found.append((st.lineno, str(call.args[0].value)))
            for block in ("body", "orelse", "finalbody", "handlers"):
                inner = getattr(st, block, None)
                if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                    visit(inner)
                elif isinstance(inner, list):
                    for h in inner:
                        if isinstance(h, ast.ExceptHandler):
                            visit(h.body)

    visit(tree.body)
    return found


def test_collection_imports_neither_torch_nor_dask_by_the_files():
    """Read statically: no test module nor conftest imports torch or dask at its top level
    (the slow test below checks the same by collecting the suite)."""
    found = []
    for path in suite_files():
        if "helpers" in path.relative_to(TESTS).parts:
            continue  # a helper module may; what imports it at top level is checked here
        for line, name in module_level_imports(ast.parse(path.read_text(), str(path))):
            if any(name == h or name.startswith(h + ".") for h in HEAVY):
                found.append(f"{path.relative_to(REPO)}:{line} imports {name} at collection")
    assert not found, "\n".join(found)


def test_module_level_imports_are_found():
    """The reader above sees an import inside ``with`` and an importorskip at top level,
    and none inside a function."""
    tree = ast.parse(
        "import os\nwith x:\n    import torch\nd = pytest.importorskip('distributed')\ndef f():\n    import dask\n"
    )
    assert [n for _, n in module_level_imports(tree)] == ["os", "torch", "distributed"]


@pytest.mark.slow
def test_collecting_the_suite_imports_neither_torch_nor_dask():
    code = (
        "import sys, pytest\n"
        "rc = pytest.main(['--collect-only', '-q', '-m', '', '-p', 'no:cacheprovider', sys.argv[1]])\n"
        "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'dask', 'distributed'})\n"
        "print('HEAVY', heavy)\n"
        "sys.exit(rc)\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(TESTS)], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "HEAVY []" in done.stdout, done.stdout[-2000:]


def test_markers_are_declared_and_slow_is_left_out_by_default(pytestconfig):
    addopts = pytestconfig.getini("addopts")
    assert "--strict-markers" in addopts and "not slow" in addopts
    assert any(m.startswith("slow:") for m in pytestconfig.getini("markers"))
